"""The diagnostic arms (``--cwr-arm``): the pairs under another stated budget or label scheme, whole arm runs with
the rescorer agreeing, and an arm read against the primary run (``python -m benchmarks.cwr.arms``)."""

from __future__ import annotations

import dataclasses
import json
import re
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
                                           r"budget-more, renaming-syllables, representation-tables$"):
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


#: A name of the ``syllables`` scheme: three consonant-vowel syllables.
SYLLABLES = re.compile(r"(?:[bdfgklmnprstvz][aeiou]){3}")


def _labels(side) -> set[str]:
    rep = side.replica
    return set(rep.entities.values()) | set(rep.primitives.values()) | set(rep.types.values())


@pytest.mark.parametrize("split", [None, "selfcheck", "development"])
def test_renaming_rebuilds_every_pair_under_the_other_label_scheme(split: str | None) -> None:
    """The same bases, seeds and demonstrations, every fresh name drawn as a nonce word; the rebuilt targets are the
    old ones up to renaming (isomorphic under the label maps) and no old label is left in a prompt."""
    seed_file = str(Path(__file__).parents[1] / "selfcheck.seed") if split else None
    pairs = run_pairs(split, seed_file)
    armed = arm_pairs(pairs, "renaming-syllables")
    assert {p.family for p in pairs} == ({"schedule", "token_workshop"} if split is None
                                         else {"token_workshop", "dataflow"})
    # (on the development split one C replica would draw a name its F side holds; it draws another)
    for before, after in zip(pairs, armed, strict=True):
        assert after.pair_id == before.pair_id and after.motif == before.motif and after.novelty == before.novelty
        assert after.flags == (*before.flags, "arm:renaming-syllables") and after.manifest == before.manifest
        assert target_ref(after, "C") == f"pair:{after.pair_id}:C@renaming-syllables"
        for condition in ("F", "C"):
            old, new = before.side(condition), after.side(condition)
            # only the names change: same id and declaration order, and the two replicas of the base isomorphic
            assert new.target.id == old.target.id and new.optimum_length == old.optimum_length
            assert list(new.target_raw) == list(old.target_raw)
            worlds.get_family(after.family).isomorphism(old.replica, new.replica)
            assert [d.base_steps for d in new.demonstrations] == [d.base_steps for d in old.demonstrations]
            fresh = _labels(new)
            assert fresh and all(SYLLABLES.fullmatch(name) for name in fresh), sorted(fresh)
            words = set(re.findall(r"[a-z]+", new.prompt_text))
            assert not words & _labels(old), (after.pair_id, condition, sorted(words & _labels(old)))
        assert not _labels(after.f) & _labels(after.c)  # the two sides still share no label


def test_representation_writes_the_handbook_as_tables_and_keeps_the_world() -> None:
    pairs = run_pairs()
    armed = arm_pairs(pairs, "representation-tables")
    for before, after in zip(pairs, armed, strict=True):
        assert after.flags == (*before.flags, "arm:representation-tables") and after.novelty == before.novelty
        for condition in ("F", "C"):
            old, new = before.side(condition), after.side(condition)
            assert new.target is old.target and new.demonstrations == old.demonstrations
            handbook = worlds.render_world(old.target_raw).rstrip("\n")
            tables = worlds.render_world(old.target_raw, "tables").rstrip("\n")
            assert new.prompt_text == old.prompt_text.replace(handbook, tables) != old.prompt_text
            assert "\n|---|" in new.prompt_text


def test_a_pair_that_cannot_be_rebuilt_is_a_usage_problem() -> None:
    pair = run_pairs()[0]
    with pytest.raises(UsageProblem, match=r"^arm renaming-syllables: pair PAIR-SCH-01 carries no pair spec"):
        arm_pairs((dataclasses.replace(pair, spec=None),), "renaming-syllables")
    clash = dataclasses.replace(pair, spec=dataclasses.replace(pair.spec, c_seed=pair.spec.f_seed))
    with pytest.raises(UsageProblem, match=r"^arm renaming-syllables: pair PAIR-SCH-01 cannot be rebuilt with "
                                           r"syllables labels: PAIR-SCH-01: F and C targets got the same id"):
        arm_pairs((clash,), "renaming-syllables")
    with pytest.raises(worlds.WorldsError, match=r"^label scheme 'runes' is unknown; the schemes are letters, "
                                                r"syllables$"):
        worlds.build_pair(dataclasses.replace(pair.spec, labels="runes"))


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
    # the renaming arm: graded on the rebuilt targets, which name everything with nonce words
    _, _, renamed = run_cwr(pytester, tmp_path / "renamed", "--model", "scripted-oracle", *SELFCHECK,
                            "--cwr-arm", "renaming-syllables", in_process=True)
    summary = json.loads((renamed / "summary.json").read_text())
    assert any(d.startswith("diagnostic arm renaming-syllables: every pair rebuilt with pronounceable")
               for d in summary["deviations"])
    rescored = rescore(renamed)
    assert rescored["classification"] == summary["classifications"]["cwr"] and rescored["mismatched_units"] == []
    grading = json.loads((renamed / "grading.json").read_text())
    worlds_graded = {e["world"] for u, e in grading["units"].items() if u[0] in "FC"}
    assert len(worlds_graded) == 16 and all(w.endswith("@renaming-syllables.json") for w in worlds_graded)
    for world_file in worlds_graded:
        graded = json.loads((renamed / world_file).read_text())
        names = [e for e, _ in worlds.world_from_mapping(graded).entities]
        assert names and all(SYLLABLES.fullmatch(n) for n in names if not n.startswith("w")), names
    got = compare_arm(primary, renamed)
    assert (got["F"]["units"], got["C"]["units"]) == (8, 8) and got["C"]["arm_validity"] == 1.0
    # the representation arm: the same worlds, the prompts' handbooks as tables
    _, _, tabled = run_cwr(pytester, tmp_path / "tabled", "--model", "scripted-oracle", *SELFCHECK,
                           "--cwr-arm", "representation-tables", in_process=True)
    summary = json.loads((tabled / "summary.json").read_text())
    rescored = rescore(tabled)
    assert rescored["classification"] == summary["classifications"]["cwr"] and rescored["mismatched_units"] == []
    prompts = [json.loads(line) for line in (tabled / "records.jsonl").read_text().splitlines()]
    assert all("\n|---|" in r["prompt"] for r in prompts if r["condition"] in "FC")
    assert compare_arm(primary, tabled)["F"]["arm_validity"] == 1.0
