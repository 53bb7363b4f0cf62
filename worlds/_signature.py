"""Canonical motif signatures of solutions: invariant to independent-step order and to renaming.

``motif_signature`` asks the world's family.  For step sequences (``StepFamily``)
this module computes it from the family's static independence relation on
grounded steps (its ``dependency`` hook), defined so that swapping two adjacent
independent steps of a valid solution gives a valid solution with the same
final state and cost; a family without one treats every pair of steps as
dependent (the solution is a total order).  ``docs/worlds-and-fixtures.md``, section
Motif signatures, states the relation of each built-in family.

The dependency relation turns a solution into a partial order of step
occurrences (its trace). For every linearisation of that partial order the
steps are written with primitive names and entity names replaced by ``p0, p1,
...`` and ``e0, e1, ...`` in order of first occurrence (integers are kept), each
step together with the positions of the earlier steps it directly depends on.
The signature is the least of these forms: equal for every reordering of
independent steps and for every consistent renaming of entities and
primitives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._errors import WorldsError
from ._grammar import Step, parse_candidate
from ._model import World
from ._registry import get_family

__all__ = [
    "MAX_LINEARISATIONS",
    "as_steps",
    "dependent",
    "motif_signature",
    "signature_text",
    "solution_classes",
    "step_signature",
    "step_signature_text",
    "total_order",
]

#: ``(world, steps) -> deps``: for each step, the indices of earlier steps it directly depends on.
Dependency = Callable[[World, tuple[Step, ...]], list[set[int]]]

#: Most linearisations examined for one signature before refusing.
MAX_LINEARISATIONS = 200_000


def as_steps(solution: Sequence[Step | str]) -> tuple[Step, ...]:
    """The parsed steps of a solution given as steps or rendered steps."""
    out = []
    for s in solution:
        if isinstance(s, Step):
            out.append(s)
            continue
        parsed = parse_candidate(s)
        if not parsed.ok or len(parsed.steps) != 1:
            raise WorldsError(f"not a single step in the artifact grammar: {s!r}")
        out.append(parsed.steps[0])
    return tuple(out)


def total_order(world: World, steps: tuple[Step, ...]) -> list[set[int]]:
    """The dependency relation of a family without an independence relation: every earlier step."""
    return [set(range(j)) for j in range(len(steps))]


def dependent(world: World, a: Step | str, b: Step | str) -> bool:
    """Whether two grounded steps of a step-sequence ``world`` are dependent (must keep their order)."""
    return bool(get_family(world.family).dependency(world, as_steps([a, b]))[1])


def motif_signature(world: World, solution: Sequence) -> tuple:
    """The canonical motif signature of ``solution`` (parsed or rendered steps) in ``world``, by its family."""
    return get_family(world.family).signature(world, solution)


def signature_text(world: World, signature: tuple) -> str:
    """A compact text form of a signature of ``world``'s family."""
    return get_family(world.family).signature_text(signature)


def step_signature(world: World, solution: Sequence[Step | str], dependency: Dependency) -> tuple:
    """The motif signature of a step sequence under the independence relation ``dependency``.

    A hashable tuple with one entry per step: (primitive label, argument labels,
    positions of the earlier steps it directly depends on).
    """
    steps = as_steps(solution)
    n = len(steps)
    deps = dependency(world, steps)
    best: list[tuple | None] = [None]
    count = [0]

    def walk(done: list[int], form: list[tuple], prims: dict, ents: dict):
        if best[0] is not None and tuple(form) > best[0][: len(form)]:
            return  # this prefix already loses to the best complete form
        if len(done) == n:
            count[0] += 1
            if count[0] > MAX_LINEARISATIONS:
                raise WorldsError(
                    f"solution has more than {MAX_LINEARISATIONS} linearisations; "
                    "too many independent steps for an exact signature"
                )
            if best[0] is None or tuple(form) < best[0]:
                best[0] = tuple(form)
            return
        placed = set(done)
        pos = {k: i for i, k in enumerate(done)}
        for k in range(n):
            if k in placed or not deps[k] <= placed:
                continue
            st = steps[k]
            p2, e2 = dict(prims), dict(ents)
            plabel = p2.setdefault(st.name, f"p{len(p2)}")
            args = []
            for a in st.args:
                if isinstance(a, int):
                    args.append(a)
                else:
                    args.append(e2.setdefault(a, f"e{len(e2)}"))
            entry = (
                plabel,
                tuple((isinstance(a, int), a) for a in args),
                tuple(sorted(pos[d] for d in deps[k])),
            )
            walk(done + [k], form + [entry], p2, e2)

    walk([], [], {}, {})
    return best[0] if best[0] is not None else ()


def step_signature_text(sig: tuple) -> str:
    """A compact text form of a step-sequence signature."""
    parts = []
    for prim, args, deps in sig:
        a = ",".join(str(v) for _, v in args)
        d = ",".join(str(x) for x in deps)
        parts.append(f"{prim}({a})<[{d}]")
    return " ; ".join(parts)


def solution_classes(world: World, solutions) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Group solutions (an ``Enumeration`` or a sequence of rendered-step tuples) by signature.

    Returns the classes, each a sorted tuple of solutions, sorted by their first member.
    """
    sols = getattr(solutions, "solutions", solutions)
    by_sig: dict[tuple, list[tuple[str, ...]]] = {}
    for sol in sols:
        key = tuple(s if isinstance(s, str) else s.render() for s in sol)
        by_sig.setdefault(motif_signature(world, sol), []).append(key)
    return tuple(sorted(tuple(sorted(v)) for v in by_sig.values()))
