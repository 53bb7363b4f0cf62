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


# ----------------------------------------------------------------- renaming (by replica) and budget regrade


def _answer(pair_id: str, condition: str, family: str, artifact: str | None, correct: bool):
    from benchmarks.cwr.spec import CwrRecord

    return CwrRecord(
        item_id=f"{condition}:{pair_id}", condition=condition, kind="synthesis", pair_id=pair_id,
        world_ref=f"pair:{pair_id}:{condition}", family=family, prompt="", prompt_sha256="", prompt_tokens=None,
        max_new_tokens=1, generation=artifact or "", generation_chars=0, generation_sha256="", generation_tokens=0,
        finish_reason="stop", generation_error=None, parse_status="ok" if artifact else "no_artifact",
        parsed=artifact, expected=None, check_status=None, check_reason=None, check_failing_step=None,
        correct=correct, context=None)


def _text(steps) -> str:
    return "".join(s + "\n" for s in steps)


def test_the_renaming_diagnostic_groups_by_replica() -> None:
    from benchmarks.cwr.diagnostics import by_replica

    pairs = run_pairs()
    # replica 0 of every base: F right, C wrong; the relabelled replicas: both right
    records = [_answer(p.pair_id, c, p.family, "x()\n", c == "F" or "~r" in p.pair_id)
               for p in pairs for c in ("F", "C")]
    got = by_replica(records, pairs)
    assert sorted(got["replicas"]) == ["r0", "r1", "r2"]
    assert got["replicas"]["r0"]["deficit"]["estimate"] == 1.0 and got["replicas"]["r0"]["deficit"]["bases"] == 8
    for k in ("r1", "r2"):
        assert got["replicas"][k]["deficit"]["estimate"] == 0.0
        assert got["replicas"][k]["deficit"]["lower"] < 0.0 < got["replicas"][k]["deficit"]["upper"]
    assert got["validity_spread"] == {"F": 0.0, "C": 1.0}


def test_the_budget_regrade_moves_only_answers_the_slack_decides() -> None:
    """F answers are each target's longest bounded solution, C answers a shortest one: less slack (step cap at the
    optimum) fails exactly the F answers longer than the optimum, more slack changes nothing; and on a target whose
    step cap is one short of its answer, the frozen budget fails it and more slack passes it."""
    import dataclasses
    import types

    from benchmarks.cwr.diagnostics import budget_regrade

    pairs = run_pairs()
    records, longer = [], set()
    for p in pairs:
        for c in ("F", "C"):
            side = p.side(c)
            solutions = worlds.bounded_solutions(side.target).solutions
            chosen = max(solutions, key=len) if c == "F" else min(solutions, key=len)
            if c == "F" and len(chosen) > side.optimum_length:
                longer.add(f"F:{p.pair_id}")
            records.append(_answer(p.pair_id, c, p.family, _text(chosen), True))
    assert longer  # some target has a valid answer longer than its optimum
    got = budget_regrade(records, pairs)
    assert got["frozen"]["F"]["validity"] == got["frozen"]["C"]["validity"] == 1.0
    assert got["frozen"]["F"]["changed"] == got["more_slack"]["F"]["changed"] == got["less_slack"]["C"]["changed"] == []
    assert got["less_slack"]["F"]["changed"] == sorted(longer)
    assert got["less_slack"]["F"]["validity"] == pytest.approx(1 - len(longer) / len(pairs))
    assert got["less_slack"]["deficit"]["estimate"] == pytest.approx(-len(longer) / len(pairs))
    assert got["less_slack"]["F"]["validity_interval"]["low"] < got["less_slack"]["F"]["validity"]

    # a target whose frozen step cap is one short of the answer
    pair = pairs[0]
    side = pair.side("C")
    solution = min(worlds.bounded_solutions(side.target).solutions, key=len)
    short = dataclasses.replace(side.target, budget=dataclasses.replace(side.target.budget,
                                                                        max_steps=len(solution) - 1))
    tight_side = types.SimpleNamespace(target=short, optimum_length=side.optimum_length)
    stand_in = types.SimpleNamespace(pair_id=pair.pair_id, side=lambda condition: tight_side)
    rows = [_answer(pair.pair_id, "C", pair.family, _text(solution), False)]
    got = budget_regrade(rows, [stand_in])
    assert worlds.check(short, _text(solution)).reason is worlds.Reason.OVER_BUDGET
    assert got["frozen"]["C"]["validity"] == 0.0 and got["more_slack"]["C"]["validity"] == 1.0
    assert got["more_slack"]["C"]["changed"] == [f"C:{pair.pair_id}"] and got["frozen"]["C"]["changed"] == []
