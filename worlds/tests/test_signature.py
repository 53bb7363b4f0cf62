"""Motif signatures: invariant to consistent renaming and to swapping independent adjacent steps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worlds import (
    Status,
    check,
    dependent,
    enumerate_solutions,
    get_family,
    load_world,
    motif_signature,
    parse_candidate,
    rename_mapping,
    solution_classes,
    world_from_mapping,
)

from ._mutants import cert_raws
from ._worlds import SHIPPED

RAWS = cert_raws()
WORLDS = {k: world_from_mapping(v) for k, v in RAWS.items()}
SOLUTIONS = {k: enumerate_solutions(w).solutions for k, w in WORLDS.items()}


def _text(sol) -> str:
    return "".join(s + "\n" for s in sol)


def _rename_solution(sol, ent: dict, prim: dict) -> tuple[str, ...]:
    out = []
    for s in parse_candidate(_text(sol)).steps:
        args = ", ".join(str(a) if isinstance(a, int) else ent[a] for a in s.args)
        out.append(f"{prim.get(s.name, s.name)}({args})")
    return tuple(out)


@st.composite
def _renaming(draw, stem):
    world = WORLDS[stem]
    ents = [e for e, _ in world.entities]
    prims = [p.name for p in world.primitives] if get_family(world.family).relabels_primitives else []
    prefix = draw(st.sampled_from(["x", "Q_", "tok", "z9_", "_"]))
    order = draw(st.permutations(range(len(ents) + len(prims))))
    names = [f"{prefix}{i}" for i in order]
    return dict(zip(ents, names)), dict(zip(prims, names[len(ents) :]))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_signature_is_invariant_under_consistent_renaming(data):
    stem = data.draw(st.sampled_from(sorted(WORLDS)))
    ent, prim = data.draw(_renaming(stem))
    renamed = world_from_mapping(rename_mapping(RAWS[stem], ent, prim))
    for sol in SOLUTIONS[stem]:
        new = _rename_solution(sol, ent, prim)
        assert check(renamed, _text(new)).status is Status.VALID
        assert motif_signature(renamed, new) == motif_signature(WORLDS[stem], sol)


SWAPPABLE = sorted(
    (stem, k, i)
    for stem, sols in SOLUTIONS.items()
    for k, sol in enumerate(sols)
    for i in range(len(sol) - 1)
    if not dependent(WORLDS[stem], sol[i], sol[i + 1])
)


def test_there_are_independent_adjacent_steps_to_swap():
    assert {stem for stem, _, _ in SWAPPABLE} >= {"tw_001", "sch_001"}


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(SWAPPABLE))
def test_swapping_independent_adjacent_steps_keeps_validity_and_signature(case):
    stem, k, i = case
    world, sol = WORLDS[stem], SOLUTIONS[stem][k]
    swapped = sol[:i] + (sol[i + 1], sol[i]) + sol[i + 2 :]
    a, b = check(world, _text(sol)), check(world, _text(swapped))
    assert b.status is Status.VALID and (a.final_state, a.cost) == (b.final_state, b.cost)
    assert motif_signature(world, swapped) == motif_signature(world, sol)


@pytest.mark.parametrize("stem", sorted(WORLDS))
def test_every_independent_swap_of_every_solution_stays_valid(stem):
    """Soundness of the independence relation: the swapped solution is always enumerated too."""
    sols = set(SOLUTIONS[stem])
    for sol in sols:
        for i in range(len(sol) - 1):
            if not dependent(WORLDS[stem], sol[i], sol[i + 1]):
                assert sol[:i] + (sol[i + 1], sol[i]) + sol[i + 2 :] in sols


def test_different_structure_gets_different_signatures():
    tw = WORLDS["tw_001"]
    valid = [e.text for e in tw.examples if e.expect == "VALID"]
    first, second = (
        tuple(s.render() for s in parse_candidate(t).steps) for t in valid
    )
    # hammer forged before the second smelt vs after it: a different dependency order
    assert motif_signature(tw, first) != motif_signature(tw, second)


def test_shipped_class_counts_are_pinned():
    got = {
        load_world(p).id: len(solution_classes(load_world(p), enumerate_solutions(load_world(p))))
        for p in SHIPPED
    }
    # SCH-001: three timelines, each reachable in three step orders; TW-001: two motifs
    assert got == {"SCH-001": 3, "TW-001": 2}
    for p in SHIPPED:
        w = load_world(p)
        classes = solution_classes(w, enumerate_solutions(w))
        for cls in classes:
            assert len({motif_signature(w, s) for s in cls}) == 1


def test_dependency_examples():
    tw = WORLDS["tw_001"]
    assert dependent(tw, "smelt_a()", "bury_slag()")  # both write slag
    assert not dependent(tw, "forge_hammer(ingot_a)", "bury_slag()")
    sch = WORLDS["sch_001"]
    assert dependent(sch, "start(cut, lathe1, 0)", "start(bake, oven1, 2)")  # bake after cut
    assert not dependent(sch, "start(cut, lathe1, 0)", "start(drill, lathe1, 4)")


def test_never_together_tokens_count_as_one_resource():
    m = {
        "schema_version": 1,
        "id": "TW-NT1",
        "family": "token_workshop",
        "title": "order forced only by a never_together rule",
        "token_types": ["thing"],
        "budget": {"max_steps": 2, "max_cost": 2, "inventory_cap": 1},
        "tokens": {"a": "thing", "b": "thing", "c": "thing"},
        "initial": {"a": 1},
        "recipes": [
            {"name": "use_a", "inputs": {"a": 1}, "outputs": {"c": 1}, "cost": 1},
            {"name": "make_b", "outputs": {"b": 1}, "cost": 1},
        ],
        "goal": {"require": {"b": 1, "c": 1}},
        "constraints": [
            {"kind": "never_together", "scope": "every_state", "tokens": ["a", "b"]}
        ],
    }
    w = world_from_mapping(m)
    # the footprints {a, c} and {b} are disjoint, yet only one order is legal
    assert enumerate_solutions(w).solutions == (("use_a()", "make_b()"),)
    assert dependent(w, "use_a()", "make_b()")
