"""A fourth family, defined here and registered for these tests only: built, checked and enumerated.

``toy_tally`` is a step-sequence family (``worlds.StepFamily``): named
counters start at 0, the one primitive ``bump(c, k)`` adds ``k`` (1 or 2) to
counter ``c`` at cost 1, no counter may exceed ``budget.cap`` (a budget
breach), and the goal is every counter at exactly its target.  Nothing in
``worlds`` names it: the registry hands it to the loader, the checker and the
enumerator like any built-in family.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

import worlds
from worlds import (
    INT_TYPE,
    Bounds,
    Failure,
    FamilyRegistryError,
    Param,
    Primitive,
    Reason,
    Status,
    StepFamily,
    WorldFileError,
    WorldsError,
    check,
    enumerate_solutions,
    get_family,
    register_family,
    unregister_family,
    world_from_mapping,
)

NAME = "toy_tally"


@dataclass(frozen=True, order=True)
class TallyState:
    """Counter values above 0, sorted by counter (canonical, hashable)."""

    counts: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> TallyState:
        return cls(tuple(sorted((k, v) for k, v in counts.items() if v > 0)))


@dataclass(frozen=True)
class TallySpec:
    targets: tuple[tuple[str, int], ...]
    cap: int


class Tally(StepFamily):
    name = NAME
    fields = ("counters", "targets")
    budget_fields = ("cap",)

    def validate(self, raw: Mapping[str, Any], err) -> None:
        counters = raw.get("counters")
        if not isinstance(counters, list) or not counters or not all(isinstance(c, str) for c in counters):
            err("counters", "must list at least one counter name")
        targets = raw.get("targets")
        if not isinstance(targets, dict) or set(targets) != set(counters):
            err("targets", "must give every counter, and only counters, a target")
        cap = raw["budget"].get("cap")
        if not isinstance(cap, int) or cap < 1:
            err("budget.cap", "must be a positive integer")
        for c, t in targets.items():
            if not isinstance(t, int) or not 0 <= t <= cap:
                err(f"targets.{c}", f"must be an integer from 0 to the cap {cap}")

    def build(self, raw: Mapping[str, Any]):
        cap = raw["budget"]["cap"]
        entities = tuple(sorted((c, "counter") for c in raw["counters"]))
        bump = Primitive("bump", (Param("c", "counter"), Param("k", INT_TYPE, 1, 2)))
        spec = TallySpec(tuple(sorted(raw["targets"].items())), cap)
        return entities, (bump,), spec, TallyState(()), (("cap", cap),), ("counter",)

    def apply(self, world, state: TallyState, name: str, args: tuple):
        counter, k = args
        counts = dict(state.counts)
        counts[counter] = counts.get(counter, 0) + k
        return TallyState.of(counts), 1

    def limits(self, world, state: TallyState):
        for counter, value in state.counts:
            if value > world.spec.cap:
                return Failure(Reason.OVER_BUDGET, f"counter {counter} at {value}, past the cap {world.spec.cap}")
        return None

    def constraints(self, world, state: TallyState, final: bool):
        return None

    def goal(self, world, state: TallyState) -> bool:
        counts = dict(state.counts)
        return all(counts.get(c, 0) == t for c, t in world.spec.targets)

    def describe_state(self, state: TallyState):
        return dict(state.counts)

    def state_from_described(self, world, described):
        return TallyState.of(described)


RAW = {
    "schema_version": 1,
    "id": "TOY-001",
    "family": NAME,
    "title": "three on a, two on b",
    "budget": {"max_steps": 4, "max_cost": 4, "cap": 3},
    "counters": ["a", "b"],
    "targets": {"a": 3, "b": 2},
}


@pytest.fixture(scope="module")
def tally():
    register_family(Tally())
    try:
        yield world_from_mapping(RAW)
    finally:
        unregister_family(NAME)


def test_the_registry_hands_out_the_new_family_and_refuses_it_twice(tally):
    assert isinstance(get_family(NAME), Tally) and NAME in worlds.family_names()
    with pytest.raises(FamilyRegistryError, match="already registered"):
        register_family(Tally())
    with pytest.raises(FamilyRegistryError, match="did you mean 'toy_tally'"):
        get_family("toy_tallly")


def test_a_world_of_it_is_built_and_its_own_rules_are_enforced(tally):
    assert (tally.id, tally.family, tally.entities) == ("TOY-001", NAME, (("a", "counter"), ("b", "counter")))
    assert tally.budget.get("cap") == 3 and tally.initial_state == TallyState(())
    with pytest.raises(WorldFileError, match="field targets"):
        world_from_mapping({**RAW, "targets": {"a": 3}})
    with pytest.raises(WorldFileError, match="field budget.horizon: .*allowed: cap, max_cost, max_steps"):
        world_from_mapping({**RAW, "budget": {**RAW["budget"], "horizon": 5}})


def test_a_valid_solution_checks_valid(tally):
    r = check(tally, "bump(a, 2)\nbump(b, 2)\nbump(a, 1)\n")
    assert r.status is Status.VALID and r.reason is None
    assert (r.cost, r.executed, r.final_state) == (3, 3, TallyState((("a", 3), ("b", 2))))


@pytest.mark.parametrize(
    ("text", "reason", "step"),
    [
        ("bump(c, 1)\n", Reason.UNKNOWN_ENTITY, 0),
        ("bump(a, 3)\n", Reason.BAD_ARGUMENT, 0),
        ("bump(a)\n", Reason.BAD_ARGUMENT, 0),
        ("hop(a, 1)\n", Reason.UNKNOWN_PRIMITIVE, 0),
        ("bump(a, 2)\nbump(a, 2)\n", Reason.OVER_BUDGET, 1),
        ("bump(a, 1)\n" * 5, Reason.OVER_BUDGET, 3),
        ("bump(a, 2)\nbump(b, 2)\n", Reason.GOAL_NOT_MET, None),
        ("bump(a, 2)\nbump(a, 1)\nbump(b, 1)\nbump(b, 2)\n", Reason.GOAL_NOT_MET, None),
    ],
)
def test_an_invalid_solution_is_refused_with_its_reason(tally, text, reason, step):
    r = check(tally, text)
    assert (r.status, r.reason, r.failing_step) == (Status.INVALID, reason, step), r.message


def test_a_malformed_text_is_refused_by_the_shared_grammar(tally):
    r = check(tally, "bump a\n")
    assert (r.status, r.reason, r.line) == (Status.MALFORMED, Reason.SCHEMA, 1)


def _expected_count(targets: tuple[int, ...], max_steps: int) -> int:
    """Bounded solutions, counted by hand: a counter reaches target t in p bumps of 1 or 2 in C(p, t - p) ways
    (compositions of t into p parts), and the counters' bump sequences interleave in a multinomial number of
    ways; sum over the part counts whose total stays within the step cap (cost 1 a step, cost cap = step cap)."""
    total = 0
    for parts in itertools.product(*(range(t + 1) for t in targets)):
        if sum(parts) > max_steps or any(p > t or t - p > p for p, t in zip(parts, targets)):
            continue
        ways = math.prod(math.comb(p, t - p) for p, t in zip(parts, targets))
        total += ways * math.factorial(sum(parts)) // math.prod(math.factorial(p) for p in parts)
    return total


def test_the_enumerator_finds_exactly_the_counted_solutions_and_each_checks_valid(tally):
    enum = enumerate_solutions(tally)
    assert len(enum.solutions) == _expected_count((3, 2), 4) == 22
    assert enum.optimal_length == 3  # a = 2 + 1 (either order) and b = 2
    for text in enum.texts():
        assert check(tally, text).status is Status.VALID, text
    assert worlds.bounded_solutions(tally).solutions == enum.solutions
    wider = world_from_mapping({**RAW, "budget": {"max_steps": 5, "max_cost": 5, "cap": 3}})
    assert len(enumerate_solutions(wider).solutions) == _expected_count((3, 2), 5) == 32
    assert len(enumerate_solutions(wider, Bounds(max_steps=3)).solutions) == _expected_count((3, 2), 3) == 6


def test_what_the_family_does_not_define_is_refused_by_name(tally):
    sol = enumerate_solutions(tally).solutions[0]
    assert worlds.motif_signature(tally, sol)  # steps of a family without an independence relation: a total order
    with pytest.raises(WorldsError, match="no handbook renderer for family 'toy_tally'"):
        worlds.render_world(RAW)
    with pytest.raises(WorldsError, match="family 'toy_tally' defines no reference interpreter"):
        worlds.reference_replay(RAW, "bump(a, 1)\n")
