"""Exhaustive bounded enumeration of valid solutions, memoized over (state, steps left, cost left)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ._errors import WorldsError
from ._grammar import Step
from ._model import INT_TYPE, Failure, World
from ._registry import get_family

__all__ = [
    "Bounds",
    "bounded_solutions",
    "Enumeration",
    "EnumerationLimitError",
    "enumerate_solutions",
    "grounded_steps",
]


#: Deepest enumeration supported (the search recurses once per step).
MAX_ENUMERATION_DEPTH = 200


class EnumerationLimitError(WorldsError):
    """The bounded solution set is larger than ``Bounds.max_solutions``."""


@dataclass(frozen=True)
class Bounds:
    """Bounds of an enumeration; None keeps the world's own budget.

    max_steps: longest solution enumerated (at most the world's step cap).
    max_cost: highest accumulated cost (at most the world's cost cap).
    max_solutions: refuse (raise) rather than build a larger solution set.
    """

    max_steps: int | None = None
    max_cost: int | None = None
    max_solutions: int = 200_000


@dataclass(frozen=True)
class Enumeration:
    """Every valid solution within the bounds.

    world_id: id of the enumerated world.
    max_steps, max_cost: the effective bounds used.
    solutions: every valid solution as a tuple of rendered steps, sorted.
    states: number of distinct (state, steps left, cost left) nodes expanded.
    """

    world_id: str
    max_steps: int
    max_cost: int
    solutions: tuple[tuple[str, ...], ...]
    states: int

    def texts(self) -> tuple[str, ...]:
        """Each solution as artifact text (one step per line)."""
        return tuple("".join(s + "\n" for s in sol) for sol in self.solutions)

    @property
    def optimal_length(self) -> int | None:
        """Length of the shortest valid solution, or None when there is none."""
        return min((len(s) for s in self.solutions), default=None)


def grounded_steps(world: World) -> tuple[Step, ...]:
    """Every type-correct step of ``world`` (entities of the right type, integers in range), sorted."""
    by_type: dict[str, list[str]] = {}
    for name, etype in world.entities:
        by_type.setdefault(etype, []).append(name)
    out: list[Step] = []
    for prim in world.primitives:
        domains = []
        for p in prim.params:
            if p.type == INT_TYPE:
                domains.append(list(range(p.lo, p.hi + 1)))
            else:
                domains.append(sorted(by_type.get(p.type, [])))
        for args in itertools.product(*domains):
            out.append(Step(prim.name, tuple(args), 0))
    return tuple(
        sorted(
            out, key=lambda s: (s.name, tuple((isinstance(a, int), a) for a in s.args))
        )
    )


# The search's decisions live in these small module-level functions so that the
# certification tests can break one at a time (enumerator mutants) and show that
# the brute-force comparison catches it.


def _memo_key(state, steps_left: int, cost_left: int) -> tuple:
    """Memo key: the suffix set depends on the state, the steps left and the cost left."""
    return (state, steps_left, cost_left)


def _admissible(fam, world: World, nxt, cost: int, cost_left: int) -> bool:
    """Whether an applicable step may be committed: within the cost left, the family caps and every-state rules."""
    return not (cost > cost_left or fam.limits(world, nxt) or fam.constraints(world, nxt, False))


def _accepting(fam, world: World, state) -> bool:
    """Whether a run may end in ``state``: the goal holds and the final-scope rules pass."""
    return fam.constraints(world, state, True) is None and fam.goal(world, state)


def _expand_past(accepted: bool) -> bool:
    """Whether to search on from a state (also from one that already meets the goal: a legal continuation)."""
    return True


def _effective_steps(world: World, b: Bounds) -> int:
    """The enumeration depth: the world's step cap, or the smaller bound."""
    return world.budget.max_steps if b.max_steps is None else min(b.max_steps, world.budget.max_steps)


def enumerate_solutions(world: World, bounds: Bounds | None = None) -> Enumeration:
    """All valid solutions of ``world`` within ``bounds`` (and the world's budget)."""
    if not isinstance(world, World):
        raise WorldsError(
            f"enumerate_solutions() needs a World (from load_world), got {type(world).__name__}"
        )
    own = get_family(world.family)
    if own.step_type is not Step:  # its own artifact grammar: name the family's enumerator
        raise WorldsError(
            f"world {world.id} of family {world.family} is not a step sequence; "
            f"enumerate it with {own.enumerate.__name__}() or worlds.bounded_solutions()"
        )
    b = bounds or Bounds()
    max_steps = _effective_steps(world, b)
    max_cost = (
        world.budget.max_cost
        if b.max_cost is None
        else min(b.max_cost, world.budget.max_cost)
    )
    if max_steps > MAX_ENUMERATION_DEPTH:
        raise EnumerationLimitError(
            f"enumerating {max_steps} steps deep exceeds the supported depth {MAX_ENUMERATION_DEPTH}; "
            "pass Bounds(max_steps=...) with a smaller value"
        )
    fam = get_family(world.family)
    steps = grounded_steps(world)
    memo: dict[tuple, tuple[tuple[str, ...], ...]] = {}

    def successors(state, cost_left):
        for st in steps:
            got = fam.apply(world, state, st.name, st.args)
            if isinstance(got, Failure):
                continue
            nxt, cost = got
            if _admissible(fam, world, nxt, cost, cost_left):
                yield st.render(), nxt, cost

    def suffixes(state, k, c):
        key = _memo_key(state, k, c)
        hit = memo.get(key)
        if hit is not None:
            return hit
        acc: list[tuple[str, ...]] = []
        accepted = _accepting(fam, world, state)
        if accepted:
            acc.append(())
        if k > 0 and _expand_past(accepted):
            for text, nxt, cost in successors(state, c):
                for tail in suffixes(nxt, k - 1, c - cost):
                    acc.append((text,) + tail)
                    if len(acc) > b.max_solutions:
                        raise EnumerationLimitError(
                            f"world {world.id} has more than {b.max_solutions} solutions within "
                            f"{max_steps} steps and cost {max_cost}; tighten Bounds or raise max_solutions"
                        )
        res = tuple(acc)
        memo[key] = res
        return res

    sols = [s for s in suffixes(world.initial_state, max_steps, max_cost) if s]
    return Enumeration(world.id, max_steps, max_cost, tuple(sorted(sols)), len(memo))


def bounded_solutions(world: World, bounds: Bounds | None = None) -> Enumeration:
    """Every valid bounded solution of ``world`` by its family's enumerator (step sequences, or programs)."""
    if not isinstance(world, World):
        raise WorldsError(f"bounded_solutions() needs a World (from load_world), got {type(world).__name__}")
    return get_family(world.family).enumerate(world, bounds)
