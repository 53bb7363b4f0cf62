"""Enumerator mutants: each deliberately broken enumerator is caught by a certification check.

A mutant patches one of the enumerator's decision functions in
``worlds._enumerate`` (memo key, admissibility, acceptance, expansion past the
goal, depth) and restores it in ``finally``. The checker and the reference
interpreter are never patched here: they are the witnesses. Checks:

- ``enumeration``: the checker-mutant suite's check (enumerator == brute force
  through the checker on the small certification worlds; every enumerated
  solution of every certification world VALID);
- ``tw001_audit``: the complete TW-001 sequence audit (every grounded sequence
  up to the step cap through the checker) must find exactly the enumerated
  solutions;
- ``memo_world``: enumerator == brute force through the checker on TW-E01, a
  world built so that one state is reached with different steps left and
  different cost left, and a goal-reaching run can break the inventory cap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

import worlds._enumerate as en
from worlds import Status, check_steps, grounded_steps, world_from_mapping
from worlds._audit import audit_sequences

from ._mutants import check_enumeration, patched
from ._worlds import raw

#: State {a: 1, x: 1} is reached by cheap() (2 steps and 2 cost left), by dear()
#: (2 steps, 0 cost left) and by split(), join() (1 step, 2 cost left); pile()
#: breaks the inventory cap of 2 on a run that can still reach the goal.
MEMO_WORLD = {
    "schema_version": 1,
    "id": "TW-E01",
    "family": "token_workshop",
    "title": "one state, three ways in",
    "token_types": ["t"],
    "budget": {"max_steps": 3, "max_cost": 3, "inventory_cap": 2},
    "tokens": {"a": "t", "b": "t", "x": "t", "g": "t"},
    "initial": {"a": 2},
    "recipes": [
        {"name": "cheap", "inputs": {"a": 1}, "outputs": {"x": 1}, "cost": 1},
        {"name": "dear", "inputs": {"a": 1}, "outputs": {"x": 1}, "cost": 3},
        {"name": "split", "inputs": {"a": 1}, "outputs": {"b": 1}, "cost": 0},
        {"name": "join", "inputs": {"b": 1}, "outputs": {"x": 1}, "cost": 1},
        {"name": "finish", "inputs": {"x": 1}, "outputs": {"g": 1}, "cost": 2},
        {"name": "pile", "outputs": {"a": 1}, "cost": 0},
    ],
    "goal": {"require": {"g": 1}},
}


def _patched(**attrs):
    return patched(en, **attrs)


#: the unpatched decision functions, for mutants that wrap them
REAL_ADMISSIBLE = en._admissible
REAL_EFFECTIVE_STEPS = en._effective_steps


MUTANTS: dict[str, tuple[Callable, str]] = {
    # name: (context manager factory, what is broken)
    "memo_forgets_cost_left": (
        lambda: _patched(_memo_key=lambda s, k, c: (s, k)),
        "memo key without the cost left: a suffix set found with more budget is reused with less",
    ),
    "memo_forgets_steps_left": (
        lambda: _patched(_memo_key=lambda s, k, c: (s, c)),
        "memo key without the steps left",
    ),
    "cost_cap_strict": (
        lambda: _patched(
            _admissible=lambda fam, w, n, cost, left: cost < left and REAL_ADMISSIBLE(fam, w, n, cost, left)
        ),
        "a step that spends exactly the cost left is refused",
    ),
    "ignore_family_caps": (
        lambda: _patched(
            _admissible=lambda fam, w, n, cost, left: not (cost > left or fam.constraints(w, n, False))
        ),
        "inventory cap / horizon not applied while searching",
    ),
    "ignore_every_state_rules": (
        lambda: _patched(_admissible=lambda fam, w, n, cost, left: not (cost > left or fam.limits(w, n))),
        "every-state constraints not applied while searching",
    ),
    "accept_without_final_rules": (
        lambda: _patched(_accepting=lambda fam, w, s: fam.goal(w, s)),
        "final-scope constraints not checked when a run ends",
    ),
    "prune_after_goal": (
        lambda: _patched(_expand_past=lambda accepted: not accepted),
        "no legal continuation after the goal first holds",
    ),
    "depth_off_by_one": (
        lambda: _patched(_effective_steps=lambda w, b: REAL_EFFECTIVE_STEPS(w, b) - 1),
        "searches one step less than the step cap",
    ),
}


@functools.lru_cache(maxsize=1)
def _tw001_audited_valid() -> tuple:
    """The VALID sequences of the complete TW-001 audit (checker and reference, never patched here)."""
    return audit_sequences(raw("tw_001")).valid


def check_tw001_audit() -> list[str]:
    got = tuple(sorted(en.enumerate_solutions(world_from_mapping(raw("tw_001"))).solutions))
    want = _tw001_audited_valid()
    return [] if got == want else [f"TW-001: audit {len(want)} valid, enumerator {len(got)}"]


def check_memo_world() -> list[str]:
    world = world_from_mapping(MEMO_WORLD)
    steps = grounded_steps(world)
    brute = set()
    frontier = [()]
    for _ in range(world.budget.max_steps):
        frontier = [seq + (st,) for seq in frontier for st in steps]
        brute |= {tuple(s.render() for s in seq) for seq in frontier if check_steps(world, seq).status is Status.VALID}
    got = set(en.enumerate_solutions(world).solutions)
    return [] if got == brute else [f"TW-E01: extra {sorted(got - brute)[:2]}, missing {sorted(brute - got)[:2]}"]


CHECKS = {"enumeration": check_enumeration, "tw001_audit": check_tw001_audit, "memo_world": check_memo_world}


def _run(name: str) -> list[str]:
    try:
        return CHECKS[name]()
    except Exception as exc:  # noqa: BLE001 - a broken enumerator may crash; that counts as caught
        return [f"{name}: raised {type(exc).__name__}: {exc}"]


#: which checks catch each enumerator mutant (x = kills, . = survives), in CHECKS order
KILL_MATRIX = {
    # mutant:                      enumeration, tw001_audit, memo_world
    "memo_forgets_cost_left": "..x",
    "memo_forgets_steps_left": "..x",
    "cost_cap_strict": "xxx",
    "ignore_family_caps": "..x",
    "ignore_every_state_rules": "xx.",
    "accept_without_final_rules": "x..",
    "prune_after_goal": "x.x",
    "depth_off_by_one": "xxx",
}


def test_real_enumerator_passes_every_check():
    assert {name: _run(name) for name in CHECKS} == {name: [] for name in CHECKS}


def test_enumerator_kill_matrix_is_pinned():
    got = {}
    for name, (make, _) in MUTANTS.items():
        before = (en._memo_key, en._admissible, en._accepting, en._expand_past, en._effective_steps)
        row = ""
        for check in CHECKS:
            with make():
                row += "x" if _run(check) else "."
        assert (en._memo_key, en._admissible, en._accepting, en._expand_past, en._effective_steps) == before
        got[name] = row
    assert got == KILL_MATRIX
    assert all("x" in row for row in got.values()), "every enumerator mutant must be caught"


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_enumerator_mutant_changes_some_enumeration(name):
    """Sanity: each mutant really alters the enumerator somewhere (it is not an equivalent mutant)."""
    make, _ = MUTANTS[name]
    from ._mutants import WORLDS

    all_worlds = {**{wid: w for wid, (w, _) in WORLDS.items()}, "TW-E01": world_from_mapping(MEMO_WORLD)}
    real = {wid: en.enumerate_solutions(w).solutions for wid, w in all_worlds.items()}
    with make():
        try:
            broken = {wid: en.enumerate_solutions(w).solutions for wid, w in all_worlds.items()}
        except Exception:  # noqa: BLE001 - a crash is a change
            return
    assert broken != real
