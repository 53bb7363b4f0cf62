"""Exhaustive enumeration: memoized search against naive brute force, and against the checker."""

from __future__ import annotations

import itertools

import pytest

from worlds import (
    Bounds,
    EnumerationLimitError,
    Status,
    check,
    check_steps,
    enumerate_solutions,
    grounded_steps,
    load_world,
    world_from_mapping,
)
from worlds import reference_replay as replay

from ._worlds import SHIPPED, SHIPPED_IDS, TINY_SCHEDULE, raw


def _brute_force(world, raw_map=None):
    """Check every sequence of grounded steps up to the step cap; return the VALID ones."""
    steps = grounded_steps(world)
    found = set()
    for n in range(1, world.budget.max_steps + 1):
        for seq in itertools.product(steps, repeat=n):
            r = check_steps(world, seq)
            if raw_map is not None:
                text = "".join(s.render() + "\n" for s in seq)
                ref = replay(raw_map, text)
                state = getattr(r.final_state, "inventory", None) or getattr(
                    r.final_state, "placements", ()
                )
                assert (
                    ref.status,
                    ref.reason,
                    ref.failing_step,
                    ref.state,
                    ref.cost,
                    ref.executed,
                ) == (
                    r.status.value,
                    r.reason and r.reason.value,
                    r.failing_step,
                    tuple(state),
                    r.cost,
                    r.executed,
                ), text
            if r.status is Status.VALID:
                found.add(tuple(s.render() for s in seq))
    return found


def test_tw001_enumeration_equals_brute_force_and_reference():
    world = load_world(SHIPPED[[p.stem for p in SHIPPED].index("tw_001")])
    enum = enumerate_solutions(world)
    assert set(enum.solutions) == _brute_force(world, raw("tw_001"))
    assert len(enum.solutions) == 3 and enum.optimal_length == 5


def test_tiny_schedule_enumeration_equals_brute_force_and_reference():
    world = world_from_mapping(TINY_SCHEDULE)
    enum = enumerate_solutions(world)
    assert set(enum.solutions) == _brute_force(world, TINY_SCHEDULE)
    assert enum.solutions  # the tiny world is satisfiable


@pytest.mark.parametrize("path", SHIPPED, ids=SHIPPED_IDS)
def test_every_enumerated_solution_passes_the_checker(path):
    world = load_world(path)
    enum = enumerate_solutions(world)
    assert enum.solutions, f"{world.id} has no valid solution within its budget"
    for text in enum.texts():
        assert check(world, text).status is Status.VALID, text
    valid_examples = {e.text for e in world.examples if e.expect == "VALID"}
    for ex in valid_examples:
        r = check(world, ex)
        assert tuple(t.step for t in r.trace) in set(enum.solutions)


def test_shipped_solution_counts_are_pinned():
    got = {
        load_world(p).id: len(enumerate_solutions(load_world(p)).solutions)
        for p in SHIPPED
    }
    assert got == {"SCH-001": 9, "TW-001": 3}


def test_enumeration_depth_is_capped():
    deep = dict(TINY_SCHEDULE, budget={"max_steps": 500, "max_cost": 4, "horizon": 3})
    with pytest.raises(EnumerationLimitError, match="Bounds"):
        enumerate_solutions(world_from_mapping(deep))
    assert enumerate_solutions(world_from_mapping(deep), Bounds(max_steps=3)).solutions


def test_bounds_tighten_and_limit():
    world = load_world(SHIPPED[[p.stem for p in SHIPPED].index("sch_001")])
    assert enumerate_solutions(world, Bounds(max_steps=3)).solutions == ()
    assert enumerate_solutions(world, Bounds(max_cost=5)).solutions == ()
    with pytest.raises(EnumerationLimitError, match="tighten Bounds"):
        enumerate_solutions(world, Bounds(max_solutions=2))
