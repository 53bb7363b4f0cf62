"""Answers longer than the preregistered ``max_answer_chars``: a served rung whose server ignores the generation
bound.  Every such unit is recorded with an excerpt (its first 1,024 characters), the whole answer's length and
sha256, and the code ``answer_too_long`` (an errored unit, counted in clause d); the units whose answers fit are
kept whole and read as usual; the stdlib rescorer agrees with every field.

The server is the models tests' loopback stand-in: ``/pad<N>/v1`` puts N characters before the decision line of
every other prompt.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

import pytest

from benchmarks.core.answers import EXCERPT_CHARS
from benchmarks.ladder.records import UNITS_FILE, find_probes
from benchmarks.ladder.spec import PREREG
from models.tests.test_http import ScriptedServer, running

from .test_protocol_runs import report_of, rescore, run_ladder

# Before any pytester snapshot: the run below is in process (see benchmarks.core.selfcheck.run_in_process).
RUN_LIBRARIES_FIRST = ("benchmarks.ladder.scenarios", "benchmarks.ladder.worker")

LIMIT = PREREG.values.probe.max_answer_chars
PADDING = LIMIT + 1000  # a padded answer is over the limit by about a thousand characters


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with running(ScriptedServer()) as srv:
        yield srv


def test_an_answer_over_the_limit_is_kept_cut_with_its_hash_and_coded(pytester: pytest.Pytester, tmp_path: Path,
                                                                       server: ScriptedServer) -> None:
    results = tmp_path / "results"
    result = run_ladder(pytester, results, "--model", f"openai:served-model@{server.url}/pad{PADDING}/v1",
                        "--ladder-units-per-tier", "2", "--ladder-max-tokens", "16", in_process=True)
    protocol = report_of(results)["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()

    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    whole = "x" * PADDING + "\nDECISION: APPROVE"
    cut = [u for u in units if u["error_code"] == "answer_too_long"]
    kept = [u for u in units if u["error_code"] is None]
    assert cut and kept and len(cut) + len(kept) == len(units) == 10
    for unit in cut:
        assert unit["response_text"] == whole[:EXCERPT_CHARS] and unit["response_chars"] == len(whole)
        assert unit["response_sha256"] == hashlib.sha256(whole.encode()).hexdigest()
        assert unit["outcome"] == "errored" and unit["decision"] is None and unit["finish_reason"] == "error"
    for unit in kept:
        assert unit["response_text"] == "DECISION: APPROVE" and unit["decision"] == "approve"
        assert unit["response_chars"] == len("DECISION: APPROVE")
        assert unit["response_sha256"] == hashlib.sha256(b"DECISION: APPROVE").hexdigest()
    # a cut answer costs the ledger no more than a short one: a few kilobytes a line
    assert (folder / UNITS_FILE).stat().st_size < len(units) * (EXCERPT_CHARS + 4096)

    summary = json.loads((folder.parent / "summary.json").read_text())
    assert summary["metrics"]["errored_share"] == len(cut) / len(units)
    again = rescore(folder)
    assert again["disagreements"] == [] and again["metrics"]["errored_share"] == len(cut) / len(units)
