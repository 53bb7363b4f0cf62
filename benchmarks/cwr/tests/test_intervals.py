"""Every share a CWR run reports in ``summary.json`` carries its cluster-aware 95% interval, k and n."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import pytest

from benchmarks.core import stats
from benchmarks.core.selfcheck import proportion_fields
from benchmarks.cwr.protocol import CONDITIONS, PREREG, SYNTHESIS_CONDITIONS
from fixtures.cwr import E_CONTEXTS

from .test_protocol_runs import COMPLETENESS, rescore, run_cwr


def base_of(record: dict[str, Any]) -> str:
    """Pair worlds ("pair:<pair id>:<side>") belong to their base pair (pair id before "~r"); a shipped world is its own."""
    ref = record["world_ref"]
    return ref.split(":")[1].split("~r")[0] if ref.startswith("pair:") else ref


def counted(rows: list[dict[str, Any]], success: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    clusters: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        clusters[base_of(row)][0] += bool(success(row))
        clusters[base_of(row)][1] += 1
    return {"k": sum(success(r) for r in rows), "n": len(rows), "clusters": len(clusters),
            "cells": sorted(tuple(c) for c in clusters.values())}


def expected_counts(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Counts behind every share: rates over the answered units (a generation error is its own outcome),
    the errored share over all units."""
    answered = [r for r in records if r["generation_error"] is None]
    out = {"metrics.errored_share": counted(records, lambda r: r["generation_error"] is not None)}
    for condition in CONDITIONS:
        rows = [r for r in answered if r["condition"] == condition]
        name = "validity" if condition in SYNTHESIS_CONDITIONS else "accuracy"
        out[f"metrics.{condition}.parse_coverage"] = counted(rows, lambda r: r["parse_status"] == "ok")
        out[f"metrics.{condition}.{name}"] = counted(rows, lambda r: r["correct"])
    for kind in ("verdict", "effect"):
        out[f"metrics.P.{kind}.accuracy"] = counted(
            [r for r in answered if r["condition"] == "P" and r["kind"] == kind], lambda r: r["correct"])
    for context in E_CONTEXTS:
        rows = [r for r in answered if r["condition"] == "E" and r["context"] == context]
        out[f"metrics.E_{context}.accuracy"] = out[f"execution_by_context.E_{context}.accuracy"] = counted(
            rows, lambda r: r["correct"])
    # the mastery table: per family with F/C units, its answered P units on the targets of the scored base pairs
    bases = {r["pair_id"].split("~r")[0] for r in records if r["condition"] in SYNTHESIS_CONDITIONS}
    families = sorted({r["family"] for r in records if r["condition"] in SYNTHESIS_CONDITIONS})
    probes = {f: [r for r in answered if r["condition"] == "P" and r["family"] == f
                  and r["world_ref"].startswith("pair:") and base_of(r) in bases] for f in families}
    for family in families:
        out[f"mastery.{family}.accuracy"] = counted(probes[family], lambda r: r["correct"])
    least = min(families, key=lambda f: sum(r["correct"] for r in probes[f]) / len(probes[f]))
    out["metrics.mastery.min_family_accuracy"] = counted(probes[least], lambda r: r["correct"])
    return out


def test_every_share_has_its_clustered_interval(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``scripted-cwr-most-c`` fails the C side of every replica of two base pairs: C validity is 18 of 24 units but
    6 of 8 independent bases, and its interval is exactly the Wilson interval of 6 of 8."""
    _, report, run_dir = run_cwr(pytester, tmp_path, "--model", "scripted-cwr-most-c")
    assert {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]
            if t["nodeid"].split("::")[-1] in COMPLETENESS} == dict.fromkeys(COMPLETENESS, "passed")
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    expected = expected_counts(records)
    # the baseline-competence gate's shares: greedy solves clustered by base pair, random samples by target
    greedy: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    random_cells = []
    for pair, row in summary["baselines"]["pairs"].items():
        for side in row["sides"]:
            greedy[pair.split("~r")[0]][0] += side["greedy_status"] == "VALID"
            greedy[pair.split("~r")[0]][1] += 1
            random_cells.append((side["random_valid"], side["random_samples"]))
    for path, cells in (("metrics.baselines.greedy_solved_share", [tuple(c) for c in greedy.values()]),
                        ("metrics.baselines.random_valid_rate", random_cells)):
        expected[path] = {"k": sum(k for k, _ in cells), "n": sum(n for _, n in cells), "clusters": len(cells),
                          "cells": sorted(cells)}
    samples = PREREG.values.baselines.random_samples
    baseline_paths = {f"baselines.pairs.{pair}.sides.{i}.random_valid_rate"
                      for pair, row in summary["baselines"]["pairs"].items() for i in range(len(row["sides"]))}
    fields = proportion_fields(summary, skip=("diagnostics",))
    assert sorted(path for path, _, _ in fields) == sorted(set(expected) | baseline_paths)
    # the diagnostics' shares (validity per family and per tier) each carry their clustered interval
    diagnostic = proportion_fields({"diagnostics": summary["diagnostics"]})
    assert {path.split(".")[1] for path, _, _ in diagnostic} == {"by_family", "by_tier", "by_replica", "budget_regrade"}
    for path, value, interval in diagnostic:
        assert interval is not None and value == interval["value"] == interval["k"] / interval["n"], path
        assert interval["method"] == "wilson-rao-scott" and interval["low"] < interval["high"], path
    for path, value, interval in fields:
        assert interval is not None, f"{path} has no interval"
        assert interval["confidence"] == 0.95 and 0.0 <= interval["low"] <= value <= interval["high"] <= 1.0, path
        assert value == interval["value"] == interval["k"] / interval["n"], path
        plain = stats.wilson_interval(interval["k"], interval["n"])
        if path in baseline_paths:  # independent random samples: plain Wilson
            assert (interval["method"], interval["n"]) == ("wilson", samples), path
            assert (interval["low"], interval["high"]) == (plain.low, plain.high), path
            continue
        want = expected[path]
        assert (interval["k"], interval["n"], interval["clusters"]) == (want["k"], want["n"], want["clusters"]), path
        assert interval["method"] == "wilson-rao-scott", path
        assert interval["design_effect"] == pytest.approx(stats.proportion_design_effect(want["cells"])), path
        assert interval["effective_n"] == pytest.approx(interval["n"] / interval["design_effect"]), path
        # never narrower than if the units were independent
        assert interval["high"] - interval["low"] >= plain.high - plain.low - 1e-12, path
    c = summary["intervals"]["C.validity"]
    assert (c["k"], c["n"], c["clusters"], c["design_effect"]) == (18, 24, 8, pytest.approx(3.0))
    base = stats.wilson_interval(6, 8)
    assert (c["low"], c["high"]) == (pytest.approx(base.low, abs=1e-12), pytest.approx(base.high, abs=1e-12))
    f = summary["intervals"]["F.validity"]  # all 24 valid: no variance, each base counts once
    assert (f["k"], f["n"], f["effective_n"]) == (24, 24, 8.0)
    assert f["low"] == pytest.approx(stats.wilson_interval(8, 8).low)
    # the stdlib rescorer recomputes the interval of every accuracy and validity and of the errored share from the
    # records alone
    rescored = rescore(run_dir)["intervals"]
    assert sorted(rescored) == sorted(n for n in summary["intervals"]
                                      if n.endswith(("accuracy", "validity", "errored_share", "greedy_solved_share",
                                                     "random_valid_rate"))
                                      and n not in ("P.verdict.accuracy", "P.effect.accuracy"))
    for name, interval in rescored.items():
        for key in ("k", "n", "value", "low", "high", "design_effect"):
            assert interval[key] == pytest.approx(summary["intervals"][name][key], abs=1e-12), (name, key)

