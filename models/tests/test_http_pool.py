"""A pool of served endpoints (``openai:MODEL@URL1,URL2``): each prompt goes to the endpoint a stable hash of it
picks, with per-endpoint concurrency; a connection error fails over to the next endpoint within the deadline;
every response names the endpoint that gave it; a pool whose endpoints do not serve the same model is refused.

The endpoints are the scripted loopback servers of :mod:`models.tests.test_http`.
"""

from __future__ import annotations

import socket
from typing import Iterator

import pytest

from models import ModelError, OpenAIChatModel

from .test_http import ScriptedServer, running


@pytest.fixture
def two() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with running(ScriptedServer()) as first, running(ScriptedServer()) as second:
        yield first, second


def chats(n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"unit {i}: is this approvable?"}] for i in range(n)]


def dead_url() -> str:
    """The URL of a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/ok/v1"


def test_each_prompt_goes_to_the_endpoint_its_hash_picks_and_the_answers_do_not_depend_on_it(two) -> None:
    first, second = two
    urls = [f"{first.url}/ok/v1", f"{second.url}/ok/v1"]
    pool = OpenAIChatModel(urls, "served-model", connect_retries=0)
    single = OpenAIChatModel(urls[0], "served-model", connect_retries=0)
    prompts = chats(16)
    answers = pool.generate(prompts)
    assert all(r.ok for r in answers)
    assert [r.endpoint for r in answers] == [urls[pool.endpoint_of(c)] for c in prompts]
    assert {r.endpoint for r in answers} == set(urls)  # 16 prompts by their hashes: both endpoints have some
    got = {url: sorted(q["body"]["messages"][0]["content"] for q in server.requests)
           for url, server in zip(urls, two)}
    assert got == {url: sorted(c[0]["content"] for c, r in zip(prompts, answers) if r.endpoint == url) for url in urls}
    assert [r.endpoint for r in pool.generate(prompts)] == [r.endpoint for r in answers]  # the same every time
    assert [r.text for r in answers] == [r.text for r in single.generate(prompts)]
    assert {r.endpoint for r in single.generate(prompts[:3])} == {urls[0]}


def test_a_dead_endpoint_fails_over_to_the_next_within_the_deadline(two) -> None:
    live = f"{two[0].url}/ok/v1"
    pool = OpenAIChatModel([dead_url(), live], "served-model", connect_retries=0, timeout=30)
    prompts = chats(12)
    chosen = [pool.endpoint_of(c) for c in prompts]
    assert 0 in chosen and 1 in chosen  # some prompts were meant for the dead one
    answers = pool.generate(prompts)
    assert all(r.ok for r in answers) and {r.endpoint for r in answers} == {live}
    assert len(two[0].requests) == len(prompts)  # each answered once, none twice


def test_with_every_endpoint_dead_the_unit_is_a_coded_connection_error() -> None:
    urls = [dead_url(), dead_url()]
    pool = OpenAIChatModel(urls, "served-model", connect_retries=0, timeout=30)
    [answer] = pool.generate(chats(1))
    assert answer.error == "connection_error" and answer.endpoint in urls
    assert answer.endpoint == urls[(pool.endpoint_of(chats(1)[0]) + 1) % 2]  # the last one tried


def test_each_endpoint_has_its_own_concurrency(two) -> None:
    urls = [f"{two[0].url}/ok/v1", f"{two[1].url}/ok/v1"]
    pool = OpenAIChatModel(urls, "served-model", max_concurrency=2, connect_retries=0)
    answers = pool.generate(chats(24))
    assert all(r.ok for r in answers)
    assert all(server.max_in_flight["ok"] <= 2 for server in two)


def test_a_pool_is_described_once_with_a_revision_of_all_its_endpoints(two) -> None:
    urls = [f"{two[0].url}/ok/v1", f"{two[1].url}/ok/v1"]
    described = OpenAIChatModel(urls, "served-model").describe()
    assert described.device == ",".join(urls) and described.revision.startswith("sha256:")
    assert described.extra["models_listing"] == "listed by all 2 endpoints"
    assert described.revision not in {OpenAIChatModel(u, "served-model").describe().revision for u in urls}
    assert OpenAIChatModel(urls[::-1], "served-model").describe().revision != described.revision  # order is the pool's


@pytest.mark.parametrize(("second", "message"), [
    ("garbage", "does not list the model 'served-model' (unavailable (HTTP 404)"),
    ("other", "disagree on the model 'served-model': /models key 'owned_by' is 'test'"),
])
def test_a_pool_whose_endpoints_do_not_serve_the_same_model_is_refused(two, second: str, message: str) -> None:
    urls = [f"{two[0].url}/ok/v1", f"{two[1].url}/{second}/v1"]
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        OpenAIChatModel(urls, "served-model").describe()
    assert not any(q["path"].endswith("/chat/completions") for server in two for q in server.requests)


@pytest.mark.parametrize(("spec", "message"), [
    ("openai:m@http://127.0.0.1:1/v1,http://127.0.0.1:1/v1", "names the endpoint 'http://127.0.0.1:1/v1' twice"),
    ("openai:m@http://127.0.0.1:1/v1,ftp://127.0.0.1:2/v1", "must be an http(s) URL"),
    ("openai:m@http://127.0.0.1:1/v1,", "must be an http(s) URL"),
    ("openai:m@" + ",".join(f"http://127.0.0.1:{p}/v1" for p in range(1, 66)), "1 to 64 endpoints, got 65"),
])
def test_a_malformed_pool_is_refused_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        OpenAIChatModel.from_spec(spec)
    assert "\n" not in str(caught.value)


def test_a_spec_names_its_pool_in_order() -> None:
    model = OpenAIChatModel.from_spec("openai:m@http://127.0.0.1:1/v1/,http://127.0.0.1:2/v1")
    assert model.base_urls == ("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1")
    assert model.base_url == "http://127.0.0.1:1/v1,http://127.0.0.1:2/v1"
