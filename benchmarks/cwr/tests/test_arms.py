"""The diagnostic arms (``--cwr-arm``): the pairs under another stated budget, a whole arm run with the rescorer
agreeing, and the arm read against the primary run (``python -m benchmarks.cwr.arms``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import worlds
from benchmarks.core.protocol import UsageProblem
from benchmarks.cwr.arms import arm_pairs, arm_table, check_arm, compare_arm, main
from benchmarks.cwr.pairs import MOTIF_REQUIRED, side_motif, target_ref
from benchmarks.cwr.protocol import run_pairs

from benchmarks.core.selfcheck import run_protocol
from benchmarks.cwr.protocol import HERE

from .test_protocol_runs import SELFCHECK, rescore, run_cwr

RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)


def test_an_arm_must_be_preregistered_and_defined() -> None:
    assert check_arm("budget-less") == "budget-less"
    with pytest.raises(UsageProblem, match=r"'budget-wide' is not a preregistered arm; .* lists: budget-less, "
                                           r"budget-more$"):
        check_arm("budget-wide")


def test_an_unknown_arm_stops_the_session_before_any_work(pytester: pytest.Pytester, tmp_path: Path) -> None:
    results = tmp_path / "results"
    refused = run_protocol(pytester, HERE, results, "--model", "scripted-oracle", "--cwr-arm", "budget-wide",
                           in_process=True)
    out = refused.stdout.str() + refused.stderr.str()
    assert refused.ret == 4 and "--cwr-arm 'budget-wide' is not a preregistered arm" in out
    assert not results.exists()


def test_less_slack_states_and_grades_the_optimum_as_the_step_cap() -> None:
    pairs = run_pairs()[:3]
    armed = arm_pairs(pairs, "budget-less")
    assert arm_pairs(pairs, "budget-less") is armed and arm_pairs(pairs, None) == tuple(pairs)
    for before, after in zip(pairs, armed):
        assert after.pair_id == before.pair_id and after.novelty == before.novelty
        assert after.flags == (*before.flags, "arm:budget-less")
        assert target_ref(after, "F") == f"pair:{after.pair_id}:F@budget-less" != target_ref(before, "F")
        for condition in ("F", "C"):
            old, new = before.side(condition), after.side(condition)
            assert new.target.budget.max_steps == old.optimum_length <= old.target.budget.max_steps
            assert new.target.budget.max_cost == old.target.budget.max_cost
            assert new.prompt_text == worlds.render_prompt(new.target_raw, old.demonstrations, old.primitive_examples)
            assert new.prompt_text != old.prompt_text or old.optimum_length == old.target.budget.max_steps
            solutions = worlds.bounded_solutions(old.target).solutions
            for solution in solutions:  # valid under the arm exactly when no longer than the optimum
                text = "".join(s + "\n" for s in solution)
                assert (worlds.check(new.target, text).status is worlds.Status.VALID) == \
                    (len(solution) == old.optimum_length), (after.pair_id, condition, solution)


def test_more_slack_audits_the_novelty_again() -> None:
    """Showcase targets that one more step lets be solved without the withheld motif turn their pair witness-only;
    every other pair keeps its label."""
    pairs = run_pairs()
    armed = arm_pairs(pairs, "budget-more")
    changed = 0
    for before, after in zip(pairs, armed):
        for condition in ("F", "C"):
            old, new = before.side(condition), after.side(condition)
            assert new.target.budget.max_steps == old.target.budget.max_steps + 1
            assert new.target.budget.max_cost == 2 * old.target.budget.max_cost
        without = any(side_motif(after, c) not in worlds.production_edges(after.side(c).target, s)
                      for c in ("F", "C") for s in worlds.bounded_solutions(after.side(c).target).solutions)
        expected = before.novelty if before.novelty != MOTIF_REQUIRED or not without else worlds.WITNESS_ONLY
        assert after.novelty == expected, after.pair_id
        changed += after.novelty != before.novelty
    assert changed > 0  # the showcase set has such targets


def test_an_arm_run_and_its_reading_against_the_primary_run(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _, _, primary = run_cwr(pytester, tmp_path / "primary", "--model", "scripted-oracle", *SELFCHECK,
                            in_process=True)
    result, _, arm = run_cwr(pytester, tmp_path / "arm", "--model", "scripted-oracle", *SELFCHECK,
                             "--cwr-arm", "budget-less", in_process=True)
    summary = json.loads((arm / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["settings"]["arm"] == "budget-less"
    assert any(d.startswith("diagnostic arm budget-less: the step cap cut") for d in summary["deviations"])
    rescored = rescore(arm)
    assert rescored["classification"] == summary["classifications"]["cwr"] and rescored["mismatched_units"] == []
    # the F/C targets are graded from their own files; the P/R/E items are the primary run's
    grading = json.loads((arm / "grading.json").read_text())
    assert all(e["world"].endswith("@budget-less.json") for u, e in grading["units"].items() if u[0] in "FC")
    assert not any("@" in e["world"] for u, e in grading["units"].items() if u[0] in "PRE")
    primary_summary = json.loads((primary / "summary.json").read_text())
    controls = "cwr-controls:selfcheck"
    assert summary["fixtures_sha256"][controls] == primary_summary["fixtures_sha256"][controls]
    assert summary["fixtures_sha256"]["cwr-pairs"] != primary_summary["fixtures_sha256"]["cwr-pairs"]
    got = compare_arm(primary, arm)
    assert (got["F"]["units"], got["C"]["units"]) == (8, 8)
    assert got["F"]["change"]["estimate"] == 0.0 < got["F"]["change"]["upper"]  # never a zero-width interval
    # two F answers of the arm made wrong (in a copy): the change is -2/8 with its clustered interval
    copy = tmp_path / "arm-copy"
    shutil.copytree(arm, copy)
    lines = [json.loads(line) for line in (copy / "records.jsonl").read_text().splitlines()]
    flipped = 0
    for row in lines:
        if row["condition"] == "F" and flipped < 2:
            row["correct"], flipped = False, flipped + 1
    (copy / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    changed = compare_arm(primary, copy)
    assert changed["F"]["change"]["estimate"] == pytest.approx(-0.25) and changed["F"]["arm_validity"] == 0.75
    assert changed["F"]["change"]["lower"] < -0.25 < changed["F"]["change"]["upper"]
    assert changed["C"] == got["C"]
    assert "| F | 8 | 1.000 | 0.750 | -0.250 [" in arm_table(changed)
    # refused in one line: the arm first, or another model
    assert main([str(arm), str(primary)]) == 4
    other = json.loads((copy / "summary.json").read_text())
    other["model"]["id"] = "another-model"
    (copy / "summary.json").write_text(json.dumps(other))
    with pytest.raises(UsageProblem, match=r"the runs differ in model.id \('scripted-oracle' and 'another-model'\)"):
        compare_arm(primary, copy)
    (copy / "records.jsonl").write_text("[1, 2]\n")
    assert main([str(primary), str(copy)]) == 4
    (copy / "summary.json").write_text("not json")
    assert main([str(primary), str(copy)]) == 4
