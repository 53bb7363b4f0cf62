"""The HTTP backend against a hostile loopback server: every fault is a coded outcome within the deadline.

Each case asserts the code and that the call returned before ``timeout + MARGIN``
seconds; cases that end by the deadline also assert that it was not cut short.
The key scrubbing cases use a server that echoes the Authorization header back
in every place it can: a ``/models`` entry, an error body straddling the
excerpt's cut, generated text, a redirect target, a status line.
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models import ERROR_CODES, GenerationSettings, ModelError, Response, load_model
from models._http import DEFAULT_MAX_RESPONSE_BYTES, OpenAIChatModel
from models._http_failure import _Failure
from models._http_schema import _parse_completion

from .hostile_server import Backlog, HostileServer, completion

KEY_ENV = "PREREGBENCH_HOSTILE_API_KEY"
KEY = "sk-hostile-7d3b91e0c4a2f5"
OTHER_KEY = "sk-another-key-0000000001"
MARGIN = 1.0  # seconds allowed beyond a deadline on a loaded machine
QUICK = 5.0  # the deadline of cases that should answer at once
SETTINGS = GenerationSettings(max_new_tokens=8)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def server():
    srv = HostileServer(interval=0.1).start()
    yield srv
    stuck = srv.close()
    assert not stuck, f"server threads still running after close: {stuck}"
    assert not srv.problems, srv.problems


@pytest.fixture
def make(monkeypatch: pytest.MonkeyPatch):
    """A keyed model factory: ``make(base_url, **options)``."""
    monkeypatch.setenv(KEY_ENV, KEY)

    def build(base_url: str, **options: Any) -> OpenAIChatModel:
        return OpenAIChatModel(base_url, "served-model", api_key_env=KEY_ENV, **options)

    return build


def timed(model: OpenAIChatModel, prompts: int = 1) -> tuple[list[Response], float]:
    start = time.monotonic()
    responses = model.generate([chat(f"prompt {i}") for i in range(prompts)], SETTINGS)
    return responses, time.monotonic() - start


def assert_clean(model: OpenAIChatModel, responses: list[Response], key: str = KEY) -> None:
    """No form of the key in anything the backend returned or stores."""
    stored = json.dumps([model.describe().as_dict(), repr(model)] +
                        [[r.text, r.error_detail] for r in responses], default=str)
    for form in (key, quote(key, safe=""), key[:8]):  # not even a prefix that a cut left behind
        assert form not in stored


# -- every fault is coded, within the deadline ------------------------------------------------------


CODED = [
    ("status500", "http_error", "HTTP 500"),
    ("status429", "http_error", "HTTP 429"),
    ("garbage", "malformed_response", "not JSON"),
    ("badutf8", "malformed_response", "not valid UTF-8 (byte 41: b'\\xc3')"),
    ("encodedsurrogate", "malformed_response", "not valid UTF-8"),
    ("nochoices", "malformed_response", "no 'choices' list"),
    ("empty", "malformed_response", "body is empty"),
    ("nested", "malformed_response", "nested too deeply"),
    ("reset", "connection_error", "ConnectionResetError"),
    ("resetbody", "connection_error", "ConnectionResetError"),
    ("hangup", "connection_error", "RemoteDisconnected"),
    ("nothttp", "malformed_response", "not valid HTTP"),
    ("manyheaders", "malformed_response", "not valid HTTP"),
    ("truncated", "malformed_response", "truncated: Content-Length"),
    ("truncchunked", "malformed_response", "chunked body is truncated"),
    ("badlength", "malformed_response", "not one decimal number"),
    ("twolengths", "malformed_response", "not one decimal number"),
    ("hugelength", "response_too_large", "declares Content-Length 52428800"),
    ("hugestream", "response_too_large", "exceeds the limit of 4194304 bytes"),
    ("hugechunked", "response_too_large", "exceeds the limit of 4194304 bytes"),
]


@pytest.mark.parametrize(("behaviour", "code", "detail"), CODED, ids=[case[0] for case in CODED])
def test_fault_is_coded_at_once(server: HostileServer, make, behaviour: str, code: str, detail: str) -> None:
    model = make(server.base(behaviour), timeout=QUICK)
    [response], elapsed = timed(model)
    assert (response.error, response.finish_reason, response.text) == (code, "error", ""), response.error_detail
    assert detail in response.error_detail
    assert code in ERROR_CODES
    assert elapsed < QUICK + MARGIN
    assert len(server.seen(behaviour)) >= 1  # the request did reach the server
    assert_clean(model, [response])


@pytest.mark.parametrize("status", ["301", "302", "307", "308"])
def test_redirect_is_coded_and_not_followed(server: HostileServer, make, status: str) -> None:
    model = make(server.base(f"redirect/{status}"), timeout=QUICK)
    [response], elapsed = timed(model)
    assert response.error == "http_error" and f"HTTP {status}" in response.error_detail
    assert "/target/v1/chat/completions' not followed" in response.error_detail
    assert elapsed < QUICK + MARGIN
    assert server.seen("target") == []  # nothing went to where the redirect pointed


def test_well_formed_answers_still_pass(server: HostileServer, make) -> None:
    """The fault handling leaves good answers alone: plain, chunked, and a lone surrogate escaped in valid JSON."""
    [plain], _ = timed(make(server.base("ok"), timeout=QUICK))
    assert plain.ok and plain.text == "echo: prompt 0" and plain.prompt_tokens == 7
    [chunked], _ = timed(make(server.base("chunked"), timeout=QUICK))
    assert chunked.ok and chunked.text == "in two chunks"
    [lone], _ = timed(make(server.base("escapedsurrogate"), timeout=QUICK))
    assert lone.ok and lone.text == "lone \ud800 surrogate"  # valid JSON; storing it is the ledger's part
    sent = server.seen("ok")[-1]
    assert sent.headers["Host"] == server.url.removeprefix("http://") and sent.headers["Connection"] == "close"
    assert json.loads(sent.body)["messages"] == chat("prompt 0")


def test_prompt_with_a_lone_surrogate_is_sent_as_valid_json(server: HostileServer, make) -> None:
    model = make(server.base("ok"), timeout=QUICK)
    [response] = model.generate([chat("half a pair: \ud800")], SETTINGS)
    assert response.ok and response.text == "echo: half a pair: \ud800"
    sent = server.seen("ok")[-1].body
    assert "\\ud800" in sent.decode("utf-8")  # strict UTF-8 on the wire, the surrogate as a JSON escape


# -- one deadline over the whole exchange -----------------------------------------------------------


def test_trickled_body_cannot_stretch_the_deadline() -> None:
    """One byte every 0.25 s against a 3 s timeout: coded timeout at 3 s, not a success 15 s later."""
    srv = HostileServer(interval=0.25).start()
    try:
        model = OpenAIChatModel(srv.base("tricklebody"), "served-model", timeout=3.0)
        [response], elapsed = timed(model)
        trickled = srv.sent.get("tricklebody", 0)
    finally:
        assert not srv.close()
    assert response.error == "timeout" and "within 3 s (reading the body)" in response.error_detail
    assert 3.0 - 0.05 <= elapsed < 3.0 + MARGIN
    assert 0 < trickled < 3.0 / 0.25 + 4  # bytes kept arriving; the deadline, not a silence, ended it


@pytest.mark.parametrize(("behaviour", "phase"), [
    ("slowheaders", "waiting for the status line and headers"),
    ("tricklehead", "waiting for the status line and headers"),
    ("keepopen", "reading the body"),
])
def test_slow_server_times_out_at_the_deadline(server: HostileServer, make, behaviour: str, phase: str) -> None:
    model = make(server.base(behaviour), timeout=1.0)
    [response], elapsed = timed(model)
    assert response.error == "timeout" and f"within 1 s ({phase})" in response.error_detail
    assert 1.0 - 0.05 <= elapsed < 1.0 + MARGIN
    assert len(server.seen(behaviour)) >= 1


def test_concurrent_trickles_each_keep_their_deadline(server: HostileServer, make) -> None:
    """Four trickled prompts four at a time end together at about one deadline, not four."""
    before = server.sent.get("tricklebody", 0)
    model = make(server.base("tricklebody"), timeout=1.0, max_concurrency=4)
    responses, elapsed = timed(model, prompts=4)
    assert [r.error for r in responses] == ["timeout"] * 4 and [r.index for r in responses] == [0, 1, 2, 3]
    assert 1.0 - 0.05 <= elapsed < 1.0 + MARGIN
    assert server.sent.get("tricklebody", 0) > before


def test_server_that_never_reads_times_out_while_sending(make) -> None:
    """A request larger than the loopback buffers towards a listener that never reads: the send is bounded too."""
    backlog = Backlog()
    try:
        model = make(backlog.url, timeout=1.0)
        start = time.monotonic()
        [response] = model.generate([chat("x" * (16 * 1024 * 1024))], SETTINGS)
        elapsed = time.monotonic() - start
    finally:
        backlog.close()
    assert response.error == "timeout" and "(sending the request)" in response.error_detail
    assert 1.0 - 0.05 <= elapsed < 1.0 + MARGIN


def test_connect_that_never_completes_times_out(make) -> None:
    """A full accept queue: the connection never completes (Linux), and the answer never comes elsewhere."""
    backlog = Backlog()
    try:
        backlog.fill()
        model = make(backlog.url, timeout=1.0, connect_retries=3)
        [response], elapsed = timed(model)
    finally:
        backlog.close()
    assert response.error == "timeout"
    if sys.platform == "linux":
        assert "(connecting)" in response.error_detail  # a timeout is not retried like a refusal
    assert 1.0 - 0.05 <= elapsed < 1.0 + MARGIN


def test_retries_never_run_past_the_deadline(make) -> None:
    """Refused connections are retried only while the next backoff still fits in the deadline."""
    import socket

    with socket.socket() as unused:  # bound, not listening: refused
        unused.bind(("127.0.0.1", 0))
        model = make(f"http://127.0.0.1:{unused.getsockname()[1]}/v1", timeout=1.0, connect_retries=20,
                     retry_backoff=0.25)
        [response], elapsed = timed(model)
    assert response.error == "connection_error" and "ConnectionRefusedError" in response.error_detail
    assert "attempt(s) (no time left for another within timeout)" in response.error_detail
    assert elapsed < 1.0 + MARGIN / 4  # 0.25 + 0.5 s slept; the next 1 s would have passed the deadline


# -- size limit ---------------------------------------------------------------------------------------


def test_endless_body_is_refused_without_reading_it_whole(server: HostileServer, make) -> None:
    """Memory stays near the limit while the server would send 64 MiB."""
    limit = 1024 * 1024
    model = make(server.base("hugestream"), timeout=QUICK, max_response_bytes=limit)
    tracemalloc.start()
    try:
        [response], elapsed = timed(model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.error == "response_too_large" and f"limit of {limit} bytes" in response.error_detail
    assert peak < 2 * limit, f"peak traced memory {peak} bytes for a {limit}-byte limit"
    assert elapsed < QUICK + MARGIN


def test_limit_is_an_option_with_a_documented_default(server: HostileServer, make) -> None:
    assert DEFAULT_MAX_RESPONSE_BYTES == 4 * 1024 * 1024 == make(server.base("ok")).max_response_bytes
    body = len(json.dumps(completion("echo: prompt 0")))
    [fits], _ = timed(make(server.base("ok"), max_response_bytes=body))
    [over], _ = timed(make(server.base("ok"), max_response_bytes=body - 1))
    assert fits.ok and over.error == "response_too_large" and "nothing of it was read" in over.error_detail
    model = load_model(f"openai:served-model@{server.base('ok')}", max_response_bytes=1234)
    assert model.max_response_bytes == 1234
    for bad in (0, -1, 1.5, True, "4MB"):
        with pytest.raises(ModelError, match="max_response_bytes must be an integer >= 1"):
            OpenAIChatModel(server.base("ok"), "served-model", max_response_bytes=bad)


# -- secrets ------------------------------------------------------------------------------------------


def test_key_echoed_in_models_entry_is_scrubbed(server: HostileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    descriptions = []
    for key in (KEY, OTHER_KEY):
        monkeypatch.setenv(KEY_ENV, key)
        model = OpenAIChatModel(server.base("echomodels"), "served-model", api_key_env=KEY_ENV)
        description = model.describe()
        assert_clean(model, [], key)
        descriptions.append(description)
    entry = descriptions[0].extra["models_entry"]
    assert entry["seen_headers"] == {"Authorization": "Bearer ***"} and entry["note"] == "called with ***"
    assert entry["***"] == "a key named after the secret" and entry["url"].endswith("token=***")
    assert descriptions[0].extra["models_listing"] == "listed"
    # The revision hashes the scrubbed entry: it names the endpoint, not the key it was asked with.
    assert descriptions[0].revision == descriptions[1].revision


def test_key_straddling_the_excerpt_cut_is_scrubbed_before_it(server: HostileServer, make) -> None:
    model = make(server.base("echoerror"), timeout=QUICK)
    [response], elapsed = timed(model)
    assert response.error == "http_error" and "HTTP 500" in response.error_detail and elapsed < QUICK + MARGIN
    assert "e" * 290 + "***" in response.error_detail  # the cut fell inside the key: scrubbed first, then cut
    assert_clean(model, [response])
    [malformed], _ = timed(make(server.base("echomalformed"), timeout=QUICK))
    assert malformed.error == "malformed_response" and "x" * 295 + "***" in malformed.error_detail
    assert_clean(model, [malformed])


@pytest.mark.parametrize(("behaviour", "code", "shown"), [
    ("echopercent", "http_error", "token=***"),
    ("echoredirect", "http_error", "?key=***' not followed"),
    ("echoreason", "http_error", "HTTP 403 Forbidden for ***"),
    ("echostatusline", "malformed_response", "NOT-HTTP ***"),
])
def test_key_echoed_in_an_error_is_scrubbed(server: HostileServer, make, behaviour: str, code: str,
                                            shown: str) -> None:
    model = make(server.base(behaviour), timeout=QUICK)
    [response], elapsed = timed(model)
    assert response.error == code and shown in response.error_detail
    assert elapsed < QUICK + MARGIN
    assert_clean(model, [response])


def test_key_echoed_in_generated_text_is_scrubbed(server: HostileServer, make) -> None:
    model = make(server.base("echotext"), timeout=QUICK)
    [response], elapsed = timed(model)
    assert response.ok and response.text == "Sure! Your key is ***, keep it safe." and elapsed < QUICK + MARGIN
    assert server.seen("echotext")[-1].headers["Authorization"] == f"Bearer {KEY}"  # the key was really sent
    assert_clean(model, [response])


def test_load_model_passes_the_key_variable(server: HostileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    model = load_model(f"openai:served-model@{server.base('echotext')}", api_key_env=KEY_ENV, device=None)
    assert isinstance(model, OpenAIChatModel) and model.api_key_env == KEY_ENV
    [response], _ = timed(model)
    assert server.seen("echotext")[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert response.text == "Sure! Your key is ***, keep it safe."
    assert_clean(model, [response])


@pytest.mark.parametrize(("value", "message"), [
    ("sk-1234", "has 7 characters; it needs at least 8"),
    ("sk-with space-123", "spaces, control or non-Latin-1"),
    ("sk-line\nbreak-123", "spaces, control or non-Latin-1"),
    ("sk-\u20ac-euro-123", "spaces, control or non-Latin-1"),
])
def test_unusable_keys_are_refused(monkeypatch: pytest.MonkeyPatch, value: str, message: str) -> None:
    monkeypatch.setenv(KEY_ENV, value)
    with pytest.raises(ModelError, match=message) as caught:
        OpenAIChatModel("http://127.0.0.1:1/v1", "m", api_key_env=KEY_ENV)
    assert value not in str(caught.value)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "3"])
def test_timeout_must_be_finite_and_positive(timeout: Any) -> None:
    with pytest.raises(ModelError, match="timeout must be a finite number of seconds > 0"):
        OpenAIChatModel("http://127.0.0.1:1/v1", "m", timeout=timeout)


# -- the completion parser never raises on any body --------------------------------------------------


def _excerpt(raw: bytes) -> str:
    return raw[:100].decode("utf-8", "replace")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["choices", "message", "content", "usage", "prompt_tokens", "finish_reason", "x"]),
        inner, max_size=4),
    max_leaves=20,
)


@given(body=st.binary(max_size=300) | _JSON.map(lambda value: json.dumps(value).encode()))
def test_any_body_is_an_answer_or_a_coded_failure(body: bytes) -> None:
    try:
        response = _parse_completion(0, body, _excerpt)
    except _Failure as failure:
        assert failure.code in ("malformed_response", "empty_response")
    else:
        assert isinstance(response.text, str) and response.finish_reason in ("stop", "length")
        assert response.prompt_tokens is None or response.prompt_tokens >= 0
