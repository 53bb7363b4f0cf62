"""CWR on a served model: a reduced run end to end against a loopback stand-in of an OpenAI-compatible server.

A served model takes chats and applies its own template, so CWR sends each unit's chat (not text rendered by
another template) and records what it sent: the canonical JSON of the messages.  The stand-in answers every
chat by echoing it; the answers are wrong or unparsed, and the run is complete all the same (every unit
recorded once, the rescorer agreeing).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

import pytest

from benchmarks.cwr.protocol import CONDITIONS
from models.tests.test_http import ScriptedServer, running

from .test_protocol_runs import COMPLETENESS, outcomes, rescore, run_cwr

# Before any pytester snapshot: the run below is in process (see benchmarks.core.selfcheck.run_in_process).
RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)

UNITS = 2
MAX_NEW_TOKENS = 8


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """The models tests' scripted server on a free loopback port; ``/ok/v1`` echoes each chat's last message."""
    with running(ScriptedServer()) as srv:
        yield srv


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_reduced_run_on_a_served_model_sends_chats_and_records_every_unit(pytester: pytest.Pytester, tmp_path: Path,
                                                                          server: ScriptedServer) -> None:
    model = f"openai:served-model@{server.url}/ok/v1"
    result, report, run_dir = run_cwr(pytester, tmp_path, "--model", model, f"--cwr-units-per-condition={UNITS}",
                                      f"--cwr-max-new-tokens={MAX_NEW_TOKENS}", in_process=True)
    _, completeness = outcomes(report)
    assert completeness == dict.fromkeys(COMPLETENESS, "passed"), result.stdout.str()
    protocol = report["benchmark"]["protocols"]["cwr"]
    assert protocol["status"] == "complete" and protocol["provenance"]["model"]["backend"] == "openai-http"

    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert sorted(r["condition"] for r in records) == sorted(c for c in CONDITIONS for _ in range(UNITS))
    assert len({r["item_id"] for r in records}) == len(records) == UNITS * len(CONDITIONS)

    sent = [request["body"] for request in server.requests]
    assert len(sent) == len(records)  # one request per unit, none retried or repeated
    for body in sent:
        messages = body["messages"]
        assert isinstance(messages, list) and [m["role"] for m in messages] == ["user"], messages
        assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages)
        assert 1 <= body["max_tokens"] <= MAX_NEW_TOKENS
    # each record holds what was sent for it: the canonical JSON of the messages, and its sha256
    assert sorted(r["prompt"] for r in records) == sorted(canonical(body["messages"]) for body in sent)
    assert all(r["prompt_sha256"] == hashlib.sha256(r["prompt"].encode()).hexdigest() for r in records)
    assert all(r["generation"].startswith("echo: ") and r["generation_error"] is None for r in records)
    assert all(r["prompt_tokens"] == 11 for r in records)  # the server's usage, as reported

    rescored = rescore(run_dir)  # its P/R/E check of the inputs shown reads the messages' contents
    assert rescored["mismatched_units"] == [] and rescored["disagreements"] == []
    assert rescored["classification"] == protocol["classifications"]["cwr"]["outcome"]["label"]
