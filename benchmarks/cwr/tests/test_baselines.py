"""Copy, random and greedy baselines: deterministic, run on every pair; a copy that solves a target flags the pair."""

from __future__ import annotations

import dataclasses

import worlds
from benchmarks.cwr.baselines import (
    COPY_FLAG,
    copy_baseline,
    greedy_baseline,
    pair_baselines,
    random_baseline,
)
from benchmarks.cwr.protocol import GATE, PREREG, run_pairs

SPEC = PREREG.values


def _baselines():
    return pair_baselines(run_pairs(), SPEC.baselines.random_samples, SPEC.seeds["baselines"])


def test_baselines_run_on_every_pair_and_flag_no_showcase_pair():
    result = _baselines()
    assert sorted(result["pairs"]) == sorted(p.pair_id for p in run_pairs())
    assert result["copy_flagged_pairs"] == 0 and result["flagged"] == []
    for row in result["pairs"].values():
        assert [s["condition"] for s in row["sides"]] == ["F", "C"]
        assert all(s["random_samples"] == SPEC.baselines.random_samples for s in row["sides"])


def test_baselines_are_deterministic():
    pair = run_pairs()[0]
    seed = SPEC.seeds["baselines"]
    assert random_baseline(pair.f.target, 50, seed) == random_baseline(pair.f.target, 50, seed)
    assert greedy_baseline(pair.c.target) == greedy_baseline(pair.c.target)


def test_greedy_result_is_what_the_checker_says():
    for pair in run_pairs():
        for side in (pair.f, pair.c):
            steps, result = greedy_baseline(side.target)
            assert worlds.check(side.target, "".join(s + "\n" for s in steps) if steps else "") == result
            assert len(steps) <= side.target.budget.max_steps


def _bad_pair(pair, steps, source):
    """``pair`` with its F demonstration replaced by ``steps`` of ``source``."""
    demo = dataclasses.replace(pair.f.demonstrations[0], source=source, steps=tuple(steps),
                               text="".join(s + "\n" for s in steps))
    return dataclasses.replace(pair, f=dataclasses.replace(pair.f, demonstrations=(demo,)))


def test_a_copied_target_solution_flags_the_pair():
    pair = run_pairs()[0]
    solution = worlds.enumerate_solutions(pair.f.target).solutions[0]
    bad = _bad_pair(pair, solution, pair.f.target)
    result = pair_baselines([bad], 10, SPEC.seeds["baselines"])
    assert result["copy_flagged_pairs"] == 1 and result["flagged"] == [pair.pair_id]
    assert result["pairs"][pair.pair_id]["flags"] == [COPY_FLAG]
    assert copy_baseline(pair.f.target, [(pair.f.target, solution)])


def test_a_renamed_copy_from_another_replica_flags_the_pair():
    """The C target's own solution, written in the C labels, is a renamed copy of an F target solution."""
    pair = run_pairs()[0]
    c_solution = worlds.enumerate_solutions(pair.c.target).solutions[0]
    bad = _bad_pair(pair, c_solution, pair.c.target)
    assert pair_baselines([bad], 10, SPEC.seeds["baselines"])["flagged"] == [pair.pair_id]


def test_a_flagged_fixture_decides_the_classification():
    metrics = {"baselines.copy_flagged_pairs": 1.0, "mastery.min_family_accuracy": 1.0, "deficit.lower": 0.5, "deficit.upper": 0.9,
               "errored_share": 0.0, "pairs.witness_only": 0.0, "pairs.exposure_unmatched": 0.0,
               "baselines.greedy_solved_share": 0.0, "baselines.random_valid_rate": 0.0}
    assert GATE.evaluate(metrics).label == "FIXTURE_REJECTED_BY_COPY_BASELINE"
