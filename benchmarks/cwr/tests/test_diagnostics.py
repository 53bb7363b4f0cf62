"""The seed's diagnostics: motif avoidance (a scripted motif-blind solver raises the reassessment flag on the
witness-only pairs and nowhere else), the withheld motif in each target's labels, the E_F - E_C interval and the
per-family and per-tier groups."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import worlds
from benchmarks.cwr.diagnostics import difference_of_shares
from benchmarks.cwr.pairs import MOTIF_REQUIRED, side_motif
from benchmarks.cwr.protocol import run_pairs
from benchmarks.core.stats import proportion

from .test_protocol_runs import outcomes, pattern_for, run_cwr

RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)


def test_the_motif_in_target_labels_is_what_the_enumerated_solutions_realize() -> None:
    """On every showcase target (replicas included) each bounded solution realizes the motif, written in the
    target's labels, exactly when the pair is motif-required; a witness-only target has a solution without it."""
    for pair in run_pairs():
        for condition in ("F", "C"):
            side = pair.side(condition)
            motif = side_motif(pair, condition)
            holding = [motif in worlds.production_edges(side.target, s)
                       for s in worlds.bounded_solutions(side.target).solutions]
            assert holding and all(holding) == (pair.novelty == MOTIF_REQUIRED), (pair.pair_id, condition)
            assert any(holding), (pair.pair_id, condition)  # the motif is a real edge of some solution


def test_a_motif_blind_solver_raises_the_reassessment_flag(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result, report, run_dir = run_cwr(pytester, tmp_path, "--model", "scripted-cwr-motif-blind", in_process=True)
    rules, _ = outcomes(report)
    assert rules == pattern_for("WITNESS_ONLY_PAIRS_IN_CLAIM"), result.stdout.str()
    summary = json.loads((run_dir / "summary.json").read_text())
    avoidance = summary["diagnostics"]["motif_avoidance"]
    witness_only = sorted(p for p, row in summary["pairs"].items() if row["novelty"] != MOTIF_REQUIRED)
    assert witness_only and avoidance["pairs_to_reassess"] == witness_only
    records = {r["item_id"]: r for r in map(json.loads, (run_dir / "records.jsonl").read_text().splitlines())}
    valid = sorted(i for i, r in records.items() if r["condition"] in ("F", "C") and r["correct"])
    # it solves exactly the witness-only targets, each without the motif, and every one is flagged
    assert valid == sorted(u["unit"] for u in avoidance["units"])
    assert {records[i]["pair_id"] for i in valid} == set(witness_only)
    assert avoidance["F"] == avoidance["C"] == len(witness_only)
    html = (run_dir / "report.html").read_text()
    assert "Fixtures to reassess" in html and all(p in html for p in witness_only)


def test_the_difference_of_two_shares_never_has_zero_width() -> None:
    for a, b in ((proportion(10, 10), proportion(10, 10)), (proportion(0, 6), proportion(0, 9)),
                 (proportion(3, 10, clusters=[(1, 5), (2, 5)]), proportion(7, 10, clusters=[(3, 5), (4, 5)]))):
        got = difference_of_shares(a, b)
        assert got["estimate"] == pytest.approx(a["value"] - b["value"])
        assert -1.0 <= got["lower"] < got["estimate"] + 1e-12 and got["estimate"] - 1e-12 < got["upper"] <= 1.0
        assert got["upper"] - got["lower"] > 0.1
    same = difference_of_shares(proportion(5, 10), proportion(5, 10))
    assert same["lower"] == pytest.approx(-same["upper"])  # symmetric around 0 for equal shares
    half = math.hypot(0.5 - proportion(5, 10)["low"], proportion(5, 10)["high"] - 0.5)
    assert same["upper"] == pytest.approx(half)
    assert difference_of_shares({"value": None}, proportion(1, 2))["estimate"] is None
