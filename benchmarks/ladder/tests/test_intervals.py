"""Every share a probe reports in ``summary.json`` and ``analysis.json`` carries its 95% Wilson interval and n."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.selfcheck import proportion_fields
from benchmarks.ladder.records import UNITS_FILE, find_probes
from benchmarks.ladder.spec import PREREG, TIERS

from .test_protocol_runs import COMPLETENESS, report_of, rescore, run_dir_of, run_ladder

SCORED = set(PREREG.values.shares.scored_outcomes)


def expected_sizes(units: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """The denominator of every share, counted from the ledger: (summary paths, analysis.json paths)."""
    scored = [u for u in units if u["outcome"] in SCORED]
    gate = {"metrics.overall_error": len(scored), "metrics.errored_share": len(units),
            "metrics.tier45_error": sum(u["tier"] in PREREG.values.shares.tier45 for u in scored),
            **{f"metrics.tier{t}.error": sum(u["tier"] == t for u in scored) for t in TIERS}}
    approvable = sum(u["ground_truth"] == "approve" for u in scored)
    analysis = {**gate,
                "analysis.refusal_share_of_errors": sum(u["outcome"] != "correct" for u in scored),
                "analysis.error_on_approvable": approvable,
                "analysis.error_on_rejectable": sum(u["ground_truth"] == "reject" for u in scored),
                **({"analysis.approvable_accuracy": approvable} if approvable else {})}
    for t in TIERS:
        cell = sum(u["tier"] == t for u in scored)
        analysis[f"analysis.tiers.{t}.approve_rate"] = analysis[f"analysis.tiers.{t}.generated_approvable_share"] = cell
    return gate, analysis


def check(document: dict[str, Any], sizes: dict[str, int], skip: tuple[str, ...] = ()) -> int:
    fields = proportion_fields(document, skip)
    assert sorted(path for path, _, _ in fields) == sorted(sizes)
    for path, value, interval in fields:
        assert interval is not None, f"{path} has no interval"
        assert interval["n"] == sizes[path], path
        assert interval["method"] == "wilson" and interval["confidence"] == 0.95, path
        if interval["n"] == 0:
            assert value is None and interval["value"] is interval["low"] is interval["high"] is None, path
            continue
        assert interval["value"] == pytest.approx(interval["k"] / interval["n"]), path
        if path != "analysis.approvable_accuracy":  # may be the rule-of-three bound; its interval is of k of n
            assert value == pytest.approx(interval["value"]), path
        assert 0.0 <= interval["low"] <= interval["value"] <= interval["high"] <= 1.0, path
        assert interval["low"] < interval["high"], path
    return sum(interval["n"] > 0 for _, _, interval in fields)


@pytest.mark.parametrize("model", ["scripted-ladder-flaky", "scripted-ladder-down"])
def test_every_share_has_its_interval(pytester: pytest.Pytester, tmp_path: Path, model: str) -> None:
    """Walks both files.  Not shares of their own: the gate row (it repeats metrics whose intervals
    ``intervals`` holds), per-check accuracy (derived, acc^(1/k)) and the design approvable share (a
    property of the generator, not a measurement)."""
    results = tmp_path / "results"
    run_ladder(pytester, results, "--model", model)
    run_dir = run_dir_of(results)
    report = report_of(results)
    assert {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]
            if t["nodeid"].split("::")[-1] in COMPLETENESS} == dict.fromkeys(COMPLETENESS, "passed")
    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    gate, analysis = expected_sizes(units)
    summary = json.loads((run_dir / "summary.json").read_text())
    defined = check(summary, gate, skip=("gate_row",))
    stats_file = json.loads((run_dir / "analysis.json").read_text())
    design = tuple(f"analysis.tiers.{t}.design_approvable_share" for t in TIERS)  # the generator's, not measured
    check(stats_file, analysis, skip=("gate", "analysis.per_check_accuracy", *design))
    if model == "scripted-ladder-flaky":
        assert defined == len(gate)  # every share defined, each with a proper interval
        tier = summary["intervals"]["tier1.error"]
        assert tier["k"] == sum(u["tier"] == 1 and u["outcome"] in ("wrong", "unparsed") for u in units)
    else:
        assert defined == 1  # every unit errored: only the errored share has a denominator
        assert summary["intervals"]["errored_share"]["k"] == len(units) == 150
    # the stdlib rescorer recomputes the gate's intervals from the ledger alone
    rescored = rescore(folder)["intervals"]
    assert sorted(rescored) == sorted(summary["intervals"])
    for name, interval in summary["intervals"].items():
        for key in ("k", "n", "value", "low", "high"):
            assert rescored[name][key] == pytest.approx(interval[key], abs=1e-12), (name, key)

