"""Provider and harness errors are their own outcome: out of every rate's denominator, counted by the errored-units
rule, and prose around an F/C artifact is not graded (a full run through pytester on ``scripted-cwr-flaky``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cwr.protocol import GATE, PREREG

from .test_protocol_runs import COMPLETENESS, outcomes, pattern_for, rescore, run_cwr

RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)


def test_a_run_with_errors_over_the_limit_is_not_read(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _, report, run_dir = run_cwr(pytester, tmp_path, "--model", "scripted-cwr-flaky", in_process=True)
    rules, completeness = outcomes(report)
    assert rules == pattern_for("ERRORED_UNITS_OVER_LIMIT") and completeness == dict.fromkeys(COMPLETENESS, "passed")
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["generation_error"] is not None]
    kinds = {r["generation_error"] for r in failed}
    assert kinds == {"timeout", "http_error"} and len(failed) / len(records) > PREREG.values.thresholds["errored_max"]
    summary = json.loads((run_dir / "summary.json").read_text())
    metrics = summary["metrics"]
    assert summary["classifications"] == {"cwr": "ERRORED_UNITS_OVER_LIMIT"} and GATE.labels[0] == "ERRORED_UNITS_OVER_LIMIT"
    assert metrics["units.errored"] == len(failed) and metrics["errored_share"] == len(failed) / len(records)
    for condition in ("P", "R", "E", "F", "C"):
        rows = [r for r in records if r["condition"] == condition]
        lost = sum(r["generation_error"] is not None for r in rows)
        rate = metrics[f"{condition}.{'validity' if condition in ('F', 'C') else 'accuracy'}"]
        # every answered unit is right: an errored unit does not pull a rate down
        assert (metrics[f"{condition}.units"], metrics[f"{condition}.errored"], rate) == (len(rows), lost, 1.0)
    # every F/C answer carries prose around its fenced artifact, and every answered one is VALID
    synthesis = [r for r in records if r["condition"] in ("F", "C") and r["generation_error"] is None]
    assert synthesis and all(r["generation"].startswith("Here is a plan") and r["parse_status"] == "ok"
                             and r["check_status"] == "VALID" for r in synthesis)
    # a pair with an errored side leaves the F - C table
    errored_pairs = {r["pair_id"] for r in failed if r["pair_id"] is not None}
    assert errored_pairs and metrics["pairs.unpaired"] == len(errored_pairs)
    assert metrics["pairs.n"] + metrics["pairs.unpaired"] == metrics["F.units"]
    rescored = rescore(run_dir)
    assert rescored["disagreements"] == [] and rescored["classification"] == "ERRORED_UNITS_OVER_LIMIT"
    assert rescored["metrics"]["errored_share"] == metrics["errored_share"]
    assert rescored["metrics"]["F.validity"] == rescored["metrics"]["C.validity"] == 1.0
