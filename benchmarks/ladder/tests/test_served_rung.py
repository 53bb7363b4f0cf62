"""A real served rung: `transformers serve` on 127.0.0.1 with the bundled SmolLM2, probed over the
OpenAI-compatible backend with a few units per tier; then the same server with a deadline it cannot meet,
so that timeouts are coded units in the ledger, clause d counts them, and the run is complete."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks.ladder.records import UNITS_FILE, find_probes
from models import bundled_folder, serve_locally

from .test_protocol_runs import clause_test, outcomes, report_of, rescore, run_ladder

UNITS_PER_TIER = 1
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def served_smollm(tmp_path_factory: pytest.TempPathFactory):
    """`transformers serve` pinned to the bundled SmolLM2 folder on a free loopback port: (base_url, model name)."""
    with serve_locally(bundled_folder("smollm2-135m-instruct")[0], tmp_path_factory.mktemp("transformers-serve"),
                       stop_timeout=3) as served:
        yield served


@pytest.mark.slow
def test_served_smollm2_rung(pytester: pytest.Pytester, tmp_path: Path, served_smollm) -> None:
    base_url, name = served_smollm
    results = tmp_path / "results"
    start = time.perf_counter()
    result = run_ladder(pytester, results, "--model", f"openai:{name}@{base_url}",
                        "--ladder-units-per-tier", str(UNITS_PER_TIER), "--ladder-max-tokens", str(MAX_TOKENS),
                        "--ladder-timeout", "120")
    wall = time.perf_counter() - start
    report = report_of(results)
    protocol = report["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    tests = outcomes(report)
    assert tests["test_failure_signature"] == tests["test_approve_rate_by_tier"] == "passed"
    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    assert len(units) == 5 * UNITS_PER_TIER
    assert all(u["rung"] == f"openai:{name}@{base_url}" and u["model_revision"].startswith("sha256:") for u in units)
    assert all(u["error_code"] is None for u in units), [u["error_code"] for u in units]
    assert all(u["response_text"] for u in units)
    rescored = rescore(folder)["probes"][0]
    gate = protocol["classifications"]["gate"]["outcome"]["label"]
    assert rescored["gate"] == gate and rescored["mismatched_units"] == []
    metadata = json.loads((folder / "metadata.json").read_text())
    assert f"{UNITS_PER_TIER} units per tier instead of 30" in metadata["deviations"]
    assert metadata["max_tokens"] == MAX_TOKENS and metadata["timeout_s"] == 120
    counts = {o: sum(u["outcome"] == o for u in units) for o in ("correct", "wrong", "unparsed")}
    print(f"served SmolLM2 rung: {len(units)} units in {wall:.1f} s, outcomes {counts}, gate {gate}")


@pytest.mark.slow
def test_served_rung_timeouts_are_coded(pytester: pytest.Pytester, tmp_path: Path, served_smollm) -> None:
    base_url, name = served_smollm
    results = tmp_path / "results"
    result = run_ladder(pytester, results, "--model", f"openai:{name}@{base_url}", "--ladder-units-per-tier", "1",
                        "--ladder-max-tokens", str(MAX_TOKENS), "--ladder-timeout", "0.05")
    protocol = report_of(results)["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    assert len(units) == 5 and {u["outcome"] for u in units} == {"timeout"}
    assert {u["error_code"] for u in units} == {"timeout"} and {u["decision"] for u in units} == {None}
    assert protocol["classifications"]["gate"]["outcome"]["label"] == "ERRORED_UNITS_OVER_LIMIT"
    tests = outcomes(report_of(results))
    assert [tests[clause_test(c)] for c in "abcd"] == ["skipped", "skipped", "failed", "failed"]  # a, b undefined
    assert rescore(folder)["probes"][0]["gate"] == "ERRORED_UNITS_OVER_LIMIT"
