"""A served rung behind an API key: ``--api-key-env`` names the variable, the key reaches the server on
every request, and no file of the run and no line of the session holds it, even when the server echoes
it back in its ``/models`` entry and in the generated text.

The server is a small OpenAI-compatible stand-in on 127.0.0.1 (stdlib only), started and stopped by the
fixture; it answers every chat request with a decision line.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from benchmarks.core.modelrun import api_key_problem
from benchmarks.ladder.records import UNITS_FILE, find_probes

from .test_protocol_runs import report_of, run_ladder, usage_line

KEY = "sk-preregbench-" + "7f3a" * 8
VARIABLE = "PREREGBENCH_TEST_SERVED_KEY"


class _EchoingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.authorizations: list[str] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _EchoingServer

    def log_message(self, *args) -> None:  # keep the session's output clean
        pass

    def _send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        header = self.headers.get("Authorization", "")
        # a careless server that lists the caller's credentials with the model
        self._send({"object": "list", "data": [{"id": "keyed-rung", "object": "model", "owned_by": header,
                                                  "permission": [{"token": header.removeprefix("Bearer ")}]}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        header = self.headers.get("Authorization", "")
        with self.server.lock:
            self.server.authorizations.append(header)
        text = f"Your key {header.removeprefix('Bearer ')} checks out.\nDECISION: APPROVE"
        self._send({"id": "x", "object": "chat.completion", "model": "keyed-rung",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})


@pytest.fixture()
def keyed_server() -> Iterator[_EchoingServer]:
    server = _EchoingServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _files_holding(folder: Path, needle: bytes) -> list[str]:
    return [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*")) if p.is_file() and needle in p.read_bytes()]


def test_the_key_reaches_the_server_and_nothing_recorded_holds_it(pytester: pytest.Pytester, tmp_path: Path,
                                                                  keyed_server: _EchoingServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, KEY)
    results = tmp_path / "results"
    base_url = f"http://127.0.0.1:{keyed_server.server_address[1]}/v1"
    result = run_ladder(pytester, results, "--model", f"openai:keyed-rung@{base_url}", "--api-key-env", VARIABLE,
                        "--ladder-units-per-tier", "1", "--ladder-max-tokens", "16", "--ladder-timeout", "30")
    protocol = report_of(results)["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    assert keyed_server.authorizations == [f"Bearer {KEY}"] * 5
    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    assert [u["decision"] for u in units] == ["approve"] * 5
    assert all("checks out" in u["response_text"] for u in units)
    assert _files_holding(results, KEY.encode()) == []
    assert _files_holding(results, KEY[-12:].encode()) == []
    assert KEY not in result.stdout.str() + result.stderr.str()


def test_a_missing_or_misapplied_key_variable_is_one_usage_line(pytester: pytest.Pytester, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    results = tmp_path / "results"
    served = "openai:keyed-rung@http://127.0.0.1:9/v1"
    line = usage_line(run_ladder(pytester, results, "--model", served, "--api-key-env", VARIABLE))
    assert f"the environment variable {VARIABLE} is not set or empty" in line
    line = usage_line(run_ladder(pytester, results, "--model", served, "--api-key-env", "no such name"))
    assert "is not an environment variable name" in line
    monkeypatch.setenv(VARIABLE, KEY)
    line = usage_line(run_ladder(pytester, results, "--api-key-env", VARIABLE))
    assert "applies to served models (openai:MODEL@BASE_URL) only" in line
    assert not results.exists() or not any(results.rglob("*.jsonl"))


def test_api_key_problem_never_prints_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, KEY)
    assert api_key_problem(None, "hub") is None
    assert api_key_problem(VARIABLE, "openai-http") is None
    for name, kind in ((VARIABLE, "bundled"), ("1BAD", "openai-http"), ("A=B", "openai-http")):
        problem = api_key_problem(name, kind)
        assert problem and KEY not in problem and "\n" not in problem
    monkeypatch.setenv(VARIABLE, "")
    assert "not set or empty" in api_key_problem(VARIABLE, "openai-http")
