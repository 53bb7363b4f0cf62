"""A served rung: a ladder probe and a reduced campaign against a loopback stand-in of an OpenAI-compatible
server, which answers both seats, fails some rulings and garbles others; every coded outcome is recorded and the
rescorer agrees."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from benchmarks.core.selfcheck import read_report, run_protocol, run_rescorer
from benchmarks.ladder.campaign.spec import FOLDER, PREREG
from benchmarks.ladder.campaign.units import campaign_units
from benchmarks.ladder.prompts import ANSWER_LINE
from benchmarks.ladder.spec import HERE as LADDER
from benchmarks.ladder.spec import PREREG as LADDER_PREREG
from fixtures.ladder import STATES, generate_episodes

RUN_LIBRARIES_FIRST = ("benchmarks.ladder.campaign.scripted",)
AGENT = "\n\nThe agent's answer, in full:"


def _digit(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) % 100


class StandIn(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: the worker seat answers right on 85 of 100 cases (by a hash of the case), the
    supervisor seat blocks what should be rejected, and of its requests 10 in 100 get HTTP 500 and 10 in 100 prose."""

    truths: dict[str, str] = {}
    requests: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        content = body["messages"][-1]["content"]
        if AGENT in content:
            case = content.split(AGENT)[0]
            digit = _digit(content)
            if digit < 10:
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"{}")
                return
            if digit < 20:
                text = "I would rather not say."
            else:
                text = "RULING: " + ("ALLOW" if self.truths[case] == "approve" else "BLOCK")
        else:
            case = content.split("\n\n" + ANSWER_LINE)[0]
            truth = self.truths[case]
            right = _digit(case) < 85
            text = "DECISION: " + ((truth if right else ("reject" if truth == "approve" else "approve")).upper())
        payload = {"id": "x", "object": "chat.completion", "model": body.get("model", "m"),
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop"}]}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stand_in() -> Iterator[str]:
    probe = LADDER_PREREG.values.probe
    state = STATES[PREREG.values.launch.state]
    episodes = [e for tier in (1, 2, 3, 4, 5) for e in generate_episodes(state, tier, probe.seed, probe.units_per_tier)]
    episodes += [u.episode for u in campaign_units()]
    StandIn.truths = {e.case_text.rstrip(): e.ground_truth for e in episodes}
    StandIn.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_served_rung_is_probed_and_campaigned_with_every_outcome_coded(pytester: pytest.Pytester, tmp_path: Path,
                                                                         stand_in: str) -> None:
    model = f"openai:stand-in@{stand_in}"
    run_protocol(pytester, LADDER, tmp_path / "probe", "--model", model, "--run-id", "probe", in_process=True)
    probe = tmp_path / "probe" / "ladder" / "probe"
    assert json.loads((probe / "summary.json").read_text())["classifications"]["gate"] == "IN_BAND"
    sent_before = len(StandIn.requests)
    results = tmp_path / "campaign"
    result = run_protocol(pytester, FOLDER, results, "--model", model, f"--campaign-probe={probe}",
                          "--campaign-episodes-per-cell", "10", in_process=True)
    report, run_dir = read_report(results, "campaign")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete", result.stdout.str()[-2000:]
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 180
    outcomes = {r["outcome"] for r in records}
    assert {"completed", "errored", "supervisor_unparsed"} <= outcomes, outcomes
    consulted = [r for r in records if r["consulted"]]
    # one request per worker answer and one per ruling asked for: nothing retried, nothing dropped
    assert len(StandIn.requests) - sent_before == len(records) + len(consulted)
    for r in records:
        if r["outcome"] == "errored":
            assert r["supervisor_error_code"] and not r["executed"] and r["cost"] == 0.0
        if r["outcome"] == "supervisor_unparsed":
            assert r["blocked"] and r["supervisor_decision"] is None
    out = run_rescorer(FOLDER / "rescore.py", run_dir)
    assert out["disagreements"] == [] and out["classifications"] == summary["classifications"]
    protocol = report["benchmark"]["protocols"]["campaign"]
    assert protocol["provenance"]["model"]["backend"] == "openai-http"
