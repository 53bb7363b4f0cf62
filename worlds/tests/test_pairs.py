"""Pair construction pieces: fresh-label replicas, abstract fingerprints, copy-solvability."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worlds import (
    abstract_fingerprint,
    copy_solves,
    enumerate_solutions,
    instantiate_replica,
    world_from_mapping,
)

from ._mutants import CERT_TOKEN, cert_raws

BASES = cert_raws()
BASE_WORLDS = {k: world_from_mapping(v) for k, v in BASES.items()}
BASE_PRINTS = {k: abstract_fingerprint(w) for k, w in BASE_WORLDS.items()}


def _labels(world) -> set[str]:
    return {e for e, _ in world.entities} | {p.name for p in world.primitives} - {"start"}


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(BASES)), st.integers(0, 2**32))
def test_replica_has_fresh_labels_and_the_same_fingerprint(stem, seed):
    base = BASE_WORLDS[stem]
    rep = instantiate_replica(BASES[stem], seed, "F")
    assert not _labels(base) & _labels(rep.world)
    assert rep.world.id != base.id and rep.world.id.startswith("F-")
    assert abstract_fingerprint(rep.world) == BASE_PRINTS[stem]
    want = {rep.translate(s) for s in enumerate_solutions(base).solutions}
    assert set(enumerate_solutions(rep.world).solutions) == want


@pytest.mark.parametrize("stem", sorted(BASES))
def test_f_and_c_replicas_match_each_other_but_share_no_label(stem):
    f = instantiate_replica(BASES[stem], 11, "F")
    c = instantiate_replica(BASES[stem], 12, "C")
    assert abstract_fingerprint(f.world) == abstract_fingerprint(c.world)
    assert not _labels(f.world) & _labels(c.world)
    assert f.raw != c.raw


def test_fingerprint_sees_a_structural_change():
    m = copy.deepcopy(BASES["tw_001"])
    m["budget"]["max_cost"] = 9  # the costlier distractor route becomes legal
    assert abstract_fingerprint(world_from_mapping(m)) != BASE_PRINTS["tw_001"]


def test_renamed_copy_of_a_target_solution_is_rejected():
    target = instantiate_replica(BASES["tw_001"], 5, "C")
    base = BASE_WORLDS["tw_001"]
    demo = enumerate_solutions(base).solutions[0]
    why = copy_solves(base, demo, target.world)
    assert why is not None and "renamed" in why
    verbatim = copy_solves(target.world, target.translate(demo), target.world)
    assert verbatim is not None and "verbatim" in verbatim


def test_truncated_copy_is_rejected():
    shorter = copy.deepcopy(CERT_TOKEN)
    shorter["budget"]["max_steps"] = 2
    shorter["budget"]["max_cost"] = 2
    target = world_from_mapping(shorter)
    demo_world = BASE_WORLDS["tw_c01"]
    demo = max(enumerate_solutions(demo_world).solutions, key=len)
    assert len(demo) == 4  # too long for the target's step cap, but a prefix solves it
    why = copy_solves(demo_world, demo, target)
    assert why is not None and "first 2" in why


def test_demonstration_with_a_changed_goal_does_not_copy_solve():
    source = copy.deepcopy(BASES["tw_001"])
    source["goal"] = {"require": {"hammer": 1}}  # same machinery, different goal
    source.pop("examples")
    demo_world = world_from_mapping(source)
    demo = enumerate_solutions(demo_world).solutions[0]
    target = instantiate_replica(BASES["tw_001"], 7, "F")
    assert copy_solves(demo_world, demo, target.world) is None
