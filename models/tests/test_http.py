"""The OpenAI-compatible HTTP backend: coded errors against a scripted local server, then a real `transformers serve`."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import re
import socket
import threading
import time
from typing import Any

import pytest

from models import (
    CapabilityError,
    GenerationSettings,
    ModelError,
    _http_transport,
    bundled_folder,
    load_model,
    serve_locally,
)
from models._http import OpenAIChatModel

KEY_ENV = "PREREGBENCH_TEST_API_KEY"
KEY = "sk-test-4f1e9c2a-never-show-me"
SHA256_REVISION = re.compile(r"^sha256:[0-9a-f]{64}$")


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# -- a scripted OpenAI-compatible server ------------------------------------------------------------


class ScriptedServer(http.server.ThreadingHTTPServer):
    """Answers by the first path segment: ``/<behaviour>/v1/...``; records every request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ScriptedHandler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}  # per behaviour
        self.max_in_flight: dict[str, int] = {}
        self.release = threading.Event()  # set at teardown: slow handlers stop waiting
        self.turns = threading.Condition(self.lock)  # the "waves" behaviour: who answers next
        self.waiting: set[int] = set()  # prompt indices of "waves" requests not yet answered
        self.arrived = 0  # "waves" requests received so far
        self.expected = 0  # "waves" requests the test will send

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout test) leaves a broken pipe; that is expected


class ScriptedHandler(http.server.BaseHTTPRequestHandler):
    server: ScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def leave(self) -> None:
        """This request stops counting as in flight: before its response is written, so a client that
        starts its next request on reading the response never meets the previous one still counted."""
        if getattr(self, "counted", None):
            with self.server.lock:
                self.server.in_flight[self.counted] -= 1
            self.counted = None

    def send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.leave()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        behaviour, _, rest = self.path.strip("/").partition("/")
        if (behaviour == "ok" or behaviour.startswith("pad")) and rest == "v1/models":
            entry = {"id": "served-model", "object": "model", "owned_by": "test", "created": time.time_ns()}
            self.send(200, json.dumps({"object": "list", "data": [entry]}).encode())
        elif behaviour == "other" and rest == "v1/models":  # the same name, served by someone else
            entry = {"id": "served-model", "object": "model", "owned_by": "another-team"}
            self.send(200, json.dumps({"object": "list", "data": [entry]}).encode())
        else:
            self.send(404, b'{"detail": "not found"}')

    def do_POST(self) -> None:
        behaviour, _, rest = self.path.strip("/").partition("/")
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.loads(raw)
        server = self.server
        with server.lock:
            server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            server.in_flight[behaviour] = server.in_flight.get(behaviour, 0) + 1
            server.max_in_flight[behaviour] = max(server.max_in_flight.get(behaviour, 0), server.in_flight[behaviour])
        self.counted = behaviour
        try:
            self.answer(behaviour, rest, body)
        finally:
            self.leave()

    def answer(self, behaviour: str, rest: str, body: dict[str, Any]) -> None:
        if rest != "v1/chat/completions":
            self.send(404, b'{"detail": "not found"}')
            return
        content = body["messages"][-1]["content"]
        completion = {
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": f"echo: {content}"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        }
        if behaviour == "status500":
            # Echoes the credentials it got, so the test can check that error details are scrubbed.
            self.send(500, f"internal error while handling {self.headers.get('Authorization')}".encode(), "text/plain")
        elif behaviour == "garbage":
            self.send(200, b"garbage", "text/plain")
        elif behaviour == "nochoices":
            self.send(200, b'{"object": "chat.completion", "id": "x"}')
        elif behaviour == "emptychoices":
            self.send(200, b'{"object": "chat.completion", "choices": []}')
        elif behaviour == "nullcontent":
            completion["choices"][0]["message"]["content"] = None
            self.send(200, json.dumps(completion).encode())
        elif behaviour == "slow":
            self.server.release.wait(5.0)
            self.send(200, json.dumps(completion).encode())
        elif behaviour == "length":
            completion["choices"][0]["finish_reason"] = "length"
            del completion["usage"]
            self.send(200, json.dumps(completion).encode())
        elif behaviour == "waves":
            self.wait_for_turn(int(content.split()[-1]))
            self.send(200, json.dumps(completion).encode())
        elif behaviour == "ok":
            self.send(200, json.dumps(completion).encode())
        elif behaviour.startswith("pad"):
            # "/pad<N>/v1": a decision line after N characters of reasoning, for every other prompt (by the
            # parity of its content's sha256), and the bare decision line for the rest
            padded = hashlib.sha256(content.encode()).digest()[0] % 2 == 0
            text = ("x" * int(behaviour[3:]) + "\n" if padded else "") + "DECISION: APPROVE"
            completion["choices"][0]["message"]["content"] = text
            self.send(200, json.dumps(completion).encode())
        else:
            self.send(404, b'{"detail": "no such behaviour"}')


    def wait_for_turn(self, index: int) -> None:
        """Hold the request until four are held (or every expected one has arrived), then answer the held ones
        highest prompt index first: completion order then differs from prompt order, driven by arrivals alone."""
        server = self.server
        with server.turns:
            server.arrived += 1
            server.waiting.add(index)
            server.turns.notify_all()
            server.turns.wait_for(lambda: server.release.is_set() or (
                (len(server.waiting) >= 4 or server.arrived == server.expected) and index == max(server.waiting)),
                timeout=60)
            server.waiting.discard(index)
            server.turns.notify_all()


@contextlib.contextmanager
def running(srv: ScriptedServer):
    """``srv`` serving on its loopback port from a thread, shut down and closed on leaving."""
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        thread.join(5)
        srv.server_close()


@pytest.fixture(scope="module")
def server():
    with running(ScriptedServer()) as srv:
        yield srv


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch):
    """A model factory with the API key in the environment."""
    monkeypatch.setenv(KEY_ENV, KEY)

    def make(base_url: str, **options: Any) -> OpenAIChatModel:
        return OpenAIChatModel(base_url, "served-model", api_key_env=KEY_ENV, **options)

    return make


def assert_no_key(model: OpenAIChatModel, responses: list) -> None:
    assert KEY not in repr(model)
    assert KEY not in json.dumps(model.describe().as_dict(), default=str)
    for response in responses:
        assert KEY not in (response.error_detail or "")
        assert KEY not in response.text


# -- coded errors -----------------------------------------------------------------------------------


def test_well_formed_answer(server: ScriptedServer, keyed) -> None:
    model = keyed(f"{server.url}/ok/v1")
    settings = GenerationSettings(max_new_tokens=5, stop=("\n\n", "END"))
    [response] = model.generate([chat("hello")], settings)
    assert response.ok and response.index == 0
    assert response.text == "echo: hello"
    assert response.finish_reason == "stop"
    assert response.prompt_tokens == 11
    assert response.token_ids == ()
    sent = [r for r in server.requests if r["path"] == "/ok/v1/chat/completions"][-1]
    assert sent["headers"]["Authorization"] == f"Bearer {KEY}"
    assert sent["body"] == {"model": "served-model", "messages": chat("hello"), "max_tokens": 5,
                            "temperature": 0, "stream": False, "stop": ["\n\n", "END"]}
    assert_no_key(model, [response])


def test_finish_reason_length_and_missing_usage(server: ScriptedServer) -> None:
    model = OpenAIChatModel(f"{server.url}/length/v1", "served-model")
    [response] = model.generate([chat("hi")], GenerationSettings(max_new_tokens=3))
    assert response.ok and response.finish_reason == "length" and response.prompt_tokens is None
    sent = server.requests[-1]
    assert "Authorization" not in sent["headers"] and "stop" not in sent["body"]


@pytest.mark.parametrize(("behaviour", "code", "detail"), [
    ("emptychoices", "empty_response", "no choices"),
    ("garbage", "malformed_response", "garbage"),
    ("nochoices", "malformed_response", "'choices'"),
    ("nullcontent", "empty_response", "no content"),
    ("status500", "http_error", "HTTP 500"),
])
def test_coded_errors(server: ScriptedServer, keyed, behaviour: str, code: str, detail: str) -> None:
    model = keyed(f"{server.url}/{behaviour}/v1")
    responses = model.generate([chat("a"), chat("b")], GenerationSettings(max_new_tokens=4))
    assert [r.index for r in responses] == [0, 1]
    for response in responses:
        assert not response.ok
        assert response.error == code and response.finish_reason == "error" and response.text == ""
        assert detail in response.error_detail
    if behaviour == "status500":
        assert "Bearer ***" in responses[0].error_detail  # the server echoed the key; the detail is scrubbed
    assert_no_key(model, responses)


def test_timeout_is_not_retried(server: ScriptedServer, keyed) -> None:
    model = keyed(f"{server.url}/slow/v1", timeout=0.5)
    before = len(server.requests)
    start = time.monotonic()
    [response] = model.generate([chat("wait")])
    elapsed = time.monotonic() - start
    assert response.error == "timeout" and response.finish_reason == "error"
    assert "0.5 s" in response.error_detail
    assert 0.45 < elapsed < 2.0
    assert len(server.requests) == before + 1  # sent once, not retried
    assert_no_key(model, [response])


def test_refused_connection_is_retried_then_coded(monkeypatch: pytest.MonkeyPatch, keyed) -> None:
    sleeps: list[float] = []
    connects = []
    real_connect = _http_transport.socket.create_connection

    def counting_connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        connects.append(address[1])
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(_http_transport.time, "sleep", sleeps.append)
    monkeypatch.setattr(_http_transport.socket, "create_connection", counting_connect)
    with socket.socket() as unused:  # bound but not listening: connections to it are refused
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        model = keyed(f"http://127.0.0.1:{port}/v1", connect_retries=2, retry_backoff=0.05)
        [response] = model.generate([chat("anyone?")])
    assert response.error == "connection_error" and response.finish_reason == "error"
    assert "after 3 attempt(s)" in response.error_detail and "ConnectionRefusedError" in response.error_detail
    assert connects == [port] * 3
    assert sleeps == [0.05, 0.1]
    assert model.describe().extra["models_listing"] == "unavailable (connection_error)"
    assert_no_key(model, [response])


def test_concurrency_keeps_prompt_order(server: ScriptedServer) -> None:
    """Four requests at once, never more, answered out of order (the server holds each until four are waiting,
    then answers the highest prompt index first); the responses still come back in prompt order."""
    server.expected = 8
    model = OpenAIChatModel(f"{server.url}/waves/v1", "served-model", max_concurrency=4)
    responses = model.generate([chat(f"prompt {i}") for i in range(8)])
    assert [r.index for r in responses] == list(range(8))
    assert [r.text for r in responses] == [f"echo: prompt {i}" for i in range(8)]
    assert server.max_in_flight["waves"] == 4  # a client one at a time would reach 1 (and wait out the hold)
    assert server.arrived == 8 and server.waiting == set()


# -- misuse, settings, description ------------------------------------------------------------------


def test_misuse_raises(server: ScriptedServer) -> None:
    model = OpenAIChatModel(f"{server.url}/ok/v1", "served-model")
    before = len(server.requests)
    with pytest.raises(ModelError, match="served models take chats"):
        model.generate(["<|im_start|>user\nhi<|im_end|>"])
    with pytest.raises(ModelError, match="non-empty list of messages"):
        model.generate([{"role": "user", "content": "a chat, not a list of chats"}])
    with pytest.raises(ModelError, match="'role' and 'content'"):
        model.generate([[{"role": "user"}]])
    with pytest.raises(CapabilityError, match="cannot score choices"):
        model.score([chat("A or B?")], ["A", "B"])
    with pytest.raises(CapabilityError, match="send_penalties=True"):
        model.generate([chat("hi")], GenerationSettings(repetition_penalty=1.3))
    assert len(server.requests) == before  # nothing was sent


def test_penalties_sent_only_when_enabled_and_non_default(server: ScriptedServer) -> None:
    model = OpenAIChatModel(f"{server.url}/ok/v1", "served-model", send_penalties=True)
    model.generate([chat("a")], GenerationSettings(max_new_tokens=2))
    assert "repetition_penalty" not in server.requests[-1]["body"]
    model.generate([chat("a")], GenerationSettings(max_new_tokens=2, repetition_penalty=1.2, no_repeat_ngram_size=3))
    body = server.requests[-1]["body"]
    assert body["repetition_penalty"] == 1.2 and body["no_repeat_ngram_size"] == 3


def test_zero_tokens_and_default_settings(server: ScriptedServer) -> None:
    model = OpenAIChatModel(f"{server.url}/ok/v1", "served-model", max_tokens_default=33)
    before = len(server.requests)
    responses = model.generate([chat("a"), chat("b")], GenerationSettings(max_new_tokens=0))
    assert [(r.index, r.finish_reason, r.text, r.ok) for r in responses] == [(0, "none", "", True), (1, "none", "", True)]
    assert len(server.requests) == before
    assert model.default_settings() == GenerationSettings(max_new_tokens=33)
    [response] = model.score_and_generate([chat("c")], None, None)
    assert response.ok and server.requests[-1]["body"]["max_tokens"] == 33


def test_render_chat_is_canonical_json(server: ScriptedServer) -> None:
    model = OpenAIChatModel(f"{server.url}/ok/v1", "served-model")
    messages = [{"content": "Be brief.", "role": "system"}, {"role": "user", "content": "Grüße"}]
    rendered = model.render_chat(messages)
    assert rendered == '[{"content":"Be brief.","role":"system"},{"content":"Grüße","role":"user"}]'
    assert json.loads(rendered) == messages
    with pytest.raises(ModelError, match="served models take chats"):
        model.render_chat("plain text")


def test_describe_endpoint_revision(server: ScriptedServer, keyed) -> None:
    first = keyed(f"{server.url}/ok/v1").describe()
    again = keyed(f"{server.url}/ok/v1/").describe()  # the listing's volatile "created" changed in between
    assert first.backend == "openai-http" and first.id == "served-model" and first.device == f"{server.url}/ok/v1"
    assert SHA256_REVISION.match(first.revision) and first.revision == again.revision
    entry = {"id": "served-model", "object": "model", "owned_by": "test"}
    assert first.extra["models_entry"] == entry and first.extra["models_listing"] == "listed"
    basis = {"base_url": f"{server.url}/ok/v1", "model": "served-model", "models_entry": entry}
    expected = hashlib.sha256(json.dumps(basis, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert first.revision == f"sha256:{expected}"
    unlisted = OpenAIChatModel(f"{server.url}/garbage/v1", "served-model").describe()
    assert unlisted.extra["models_listing"] == "unavailable (HTTP 404)" and unlisted.revision != first.revision
    other = OpenAIChatModel(f"{server.url}/ok/v1", "other-model").describe()
    assert other.extra["models_listing"] == "model not listed" and other.revision != first.revision


def test_explicit_revision(server: ScriptedServer) -> None:
    pinned = "sha256:" + "ab" * 32
    model = OpenAIChatModel(f"{server.url}/ok/v1", "served-model", revision=pinned)
    assert model.describe().revision == pinned and model.describe().extra["revision_basis"] == "given"
    with pytest.raises(ModelError, match="immutable"):
        OpenAIChatModel(f"{server.url}/ok/v1", "served-model", revision="main")


def test_from_spec_and_registry(server: ScriptedServer, keyed) -> None:
    model = OpenAIChatModel.from_spec(f"openai:served-model@{server.url}/ok/v1", timeout=5, device=None)
    assert (model.model, model.base_url, model.timeout) == ("served-model", f"{server.url}/ok/v1", 5.0)
    loaded = load_model(f"openai:org/served-model@{server.url}/ok/v1", api_key_env=KEY_ENV, max_concurrency=2)
    assert isinstance(loaded, OpenAIChatModel) and loaded.model == "org/served-model" and loaded.max_concurrency == 2
    assert_no_key(loaded, [])
    for bad in ["openai:served-model", "openai:@http://x/v1", "openai:m@ftp://x/v1", "served-model@http://x/v1"]:
        with pytest.raises(ModelError, match="expected openai:MODEL@BASE_URL"):
            OpenAIChatModel.from_spec(bad)
    with pytest.raises(ModelError, match="do not apply"):
        OpenAIChatModel.from_spec(f"openai:m@{server.url}/v1", dtype="float16")
    with pytest.raises(ModelError, match="must not carry credentials"):
        OpenAIChatModel("http://user:pw@127.0.0.1:1/v1", "m")


def test_missing_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ModelError, match=KEY_ENV):
        OpenAIChatModel("http://127.0.0.1:1/v1", "m", api_key_env=KEY_ENV)


# -- a real server: `transformers serve` with the bundled SmolLM2 -----------------------------------


@pytest.fixture(scope="module")
def served_smollm(tmp_path_factory: pytest.TempPathFactory):
    """`transformers serve` pinned to the bundled SmolLM2 folder on a free loopback port: (base_url, model name)."""
    with serve_locally(bundled_folder("smollm2-135m-instruct")[0], tmp_path_factory.mktemp("transformers-serve")) as served:
        yield served


@pytest.mark.slow
def test_real_server_greedy_chat(served_smollm: tuple[str, str]) -> None:
    base_url, name = served_smollm
    model = OpenAIChatModel(base_url, name, timeout=120)
    settings = GenerationSettings(max_new_tokens=8)
    prompt = chat("What is the capital of France?")
    first = model.generate([prompt], settings)
    second = model.generate([prompt, prompt], settings)
    for response in first + second:
        assert response.ok, response.error_detail
        assert response.text.strip() and response.finish_reason in {"stop", "length"}
        assert response.prompt_tokens and response.prompt_tokens > 0
    assert first[0].text == second[0].text == second[1].text  # greedy: the same answer every time
    description = model.describe()
    assert SHA256_REVISION.match(description.revision)
    assert description.extra["models_listing"] == "listed" and description.extra["models_entry"]["id"] == name
    assert OpenAIChatModel(base_url, name).describe().revision == description.revision


@pytest.mark.slow
def test_real_server_wrong_model_name_is_http_error(served_smollm: tuple[str, str]) -> None:
    base_url, _ = served_smollm
    [response] = OpenAIChatModel(base_url, "not-the-served-model").generate([chat("hi")], GenerationSettings(max_new_tokens=2))
    assert response.error == "http_error" and "HTTP 400" in response.error_detail
