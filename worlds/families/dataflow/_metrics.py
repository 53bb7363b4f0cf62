"""Tier properties and search metrics of family ``dataflow``.

A program world has no small step-state graph, so branching is counted over
the states the bounded programs pass through before their last binding, and
the state-space bound counts program prefixes.
"""

from __future__ import annotations

from typing import Any

from ..._enumerate import Enumeration
from ..._model import Failure, World
from ..._registry import get_family
from ._enumerate import program_alphabet
from ._grammar import bindings

__all__ = ["dataflow_tier_properties", "path_states", "prefix_bound", "search_metrics"]


def _start_branching(world: World) -> int:
    fam = get_family(world.family)
    n = 0
    for b in program_alphabet(world, world.initial_state, 0):
        got = fam.bind(world, world.initial_state, b)
        if not isinstance(got, Failure) and not fam.limits(world, got[0]) and not fam.constraints(world, got[0], False):
            n += 1
    return n


def path_states(world: World, solutions) -> list:
    """The states the bounded programs pass through before their last binding (s0 included), without repeats."""
    fam = get_family(world.family)
    seen = {world.initial_state: 0}
    for sol in solutions:
        s = world.initial_state
        for i, b in enumerate(bindings(sol)[:-1]):
            s = fam.bind(world, s, b)[0]
            seen.setdefault(s, i + 1)
    return list(seen.items())


def _branching(world: World, solutions) -> tuple[float, int]:
    fam = get_family(world.family)
    degs = []
    for s, depth in path_states(world, solutions):
        n = 0
        for b in program_alphabet(world, s, depth):
            got = fam.bind(world, s, b)
            if not isinstance(got, Failure) and not fam.limits(world, got[0]) and not fam.constraints(world, got[0], False):
                n += 1
        degs.append(n)
    return (round(sum(degs) / len(degs), 4) if degs else 0.0), max(degs, default=0)


def dataflow_tier_properties(world: World, enum: Enumeration) -> dict[str, Any]:
    """The tier properties of a dataflow world (the keys ``tier_of`` reads; branching over the states the
    bounded programs pass through, since a program world has no small step-state graph)."""
    sols = enum.solutions
    opt = enum.optimal_length
    optimal = [s for s in sols if len(s) == opt]
    used = {b.name for s in optimal for b in bindings(s)}
    mean, _ = _branching(world, sols)
    return {
        "optimum_length": opt,
        "solutions": len(sols),
        "optimal_solutions": len(optimal),
        "distractor_primitives": sum(1 for p in world.primitives if p.name not in used),
        "constraints": len(world.spec.max_uses) + int(world.spec.no_dead_wires),
        "grounded_steps": len(program_alphabet(world, world.initial_state, 0)),
        "branching_at_start": _start_branching(world),
        "mean_branching": mean,
    }


def search_metrics(world: World, enum: Enumeration) -> dict[str, Any]:
    """A manifest's ``solver_search_metrics`` of a dataflow target: the enumeration's memo states, the states the
    bounded programs pass through and their bindings, the branching over those states."""
    mean, top = _branching(world, enum.solutions)
    return {
        "enumeration_nodes": enum.states,
        "reachable_states": len(path_states(world, enum.solutions)),
        "transitions": sum(len(s) for s in enum.solutions),
        "mean_branching": mean,
        "max_branching": top,
        "bfs_states_to_first_goal_depth": None,
        "solutions": len(enum.solutions),
    }


def prefix_bound(world: World) -> int:
    """An upper bound on the states within the step cap: a state is fixed by the program prefix that made it, and
    binding i (0-based) has at most 2 binders (``w<i+1>`` or the goal wire) times, per primitive, one choice of a
    wire per parameter among the inputs and the i wires bound before it."""
    n = len(world.spec.inputs)
    total, prefixes = 1, 1
    for i in range(world.budget.max_steps):
        prefixes *= 2 * sum((n + i) ** len(p.params) for p in world.spec.primitives)
        total += prefixes
    return total
