"""A served rung on a pool of two endpoints: every unit is recorded once with the endpoint that answered, each
server answers exactly the units naming it, and the records are those of the same rung on one endpoint but
for the fields that name where and how fast (rung, model revision, run identity, endpoint, latency)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from benchmarks.ladder.records import UNITS_FILE, find_probes
from models.tests.test_http import ScriptedServer, running

from .test_protocol_runs import report_of, rescore, run_ladder

# Before any pytester snapshot: the runs below are in process (see benchmarks.core.selfcheck.run_in_process).
RUN_LIBRARIES_FIRST = ("benchmarks.ladder.scenarios", "benchmarks.ladder.worker")

WHERE = ("rung", "model_revision", "endpoint", "latency_s", "identity")  # the last names model and revision


@pytest.fixture
def two() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with running(ScriptedServer()) as first, running(ScriptedServer()) as second:
        yield first, second


def probe_units(pytester: pytest.Pytester, results: Path, model: str, *more: str) -> list[dict]:
    result = run_ladder(pytester, results, "--model", model, "--ladder-units-per-tier", "3", "--ladder-max-tokens",
                        "16", "--ladder-batch-size", "8", *more, in_process=True)
    protocol = report_of(results)["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    assert protocol["provenance"]["extra"]["in_flight"] == (int(more[-1]) if more else 4)
    [folder] = find_probes(results)
    assert rescore(folder)["disagreements"] == []
    return [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]


def test_a_pool_of_two_endpoints_records_what_one_endpoint_does(pytester: pytest.Pytester, tmp_path: Path,
                                                                  two) -> None:
    urls = [f"{server.url}/pad40/v1" for server in two]
    pooled = probe_units(pytester, tmp_path / "pool", "openai:served-model@" + ",".join(urls), "--ladder-in-flight", "2")
    assert len(pooled) == len({u["unit_id"] for u in pooled}) == 15
    assert {u["endpoint"] for u in pooled} == set(urls)
    for url, server in zip(urls, two):
        assert len(server.requests) == sum(u["endpoint"] == url for u in pooled)  # one request per unit
        assert server.max_in_flight["pad40"] <= 2  # --ladder-in-flight, per endpoint
    alone = probe_units(pytester, tmp_path / "alone", f"openai:served-model@{urls[0]}")
    assert {u["endpoint"] for u in alone} == {urls[0]}

    def answers(units: list[dict]) -> dict[str, dict]:
        return {u["unit_id"]: {k: v for k, v in u.items() if k not in WHERE} for u in units}

    pooled_answers, alone_answers = answers(pooled), answers(alone)
    differing = {unit: sorted(k for k in fields if fields[k] != alone_answers[unit].get(k))
                 for unit, fields in pooled_answers.items() if fields != alone_answers.get(unit)}
    assert not differing and pooled_answers.keys() == alone_answers.keys(), differing
    assert {u["outcome"] for u in pooled} >= {"correct", "wrong"}  # a real mix of decisions, not all alike
