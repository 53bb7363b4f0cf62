"""Canonical motif signatures of solutions: invariant to independent-step order and to renaming.

Independence is a static relation on grounded steps, defined per family so
that swapping two adjacent independent steps of a valid solution gives a valid
solution with the same final state and cost:

- token_workshop: a step *reads* its input and catalyst tokens and *writes*
  its input and output tokens. Tokens named together in a ``never_together``
  rule count as one resource (otherwise the intermediate state of the swapped
  order could hold all of them at once). Two steps are dependent when one
  writes a resource the other reads or writes.
- schedule: two ``start`` steps are dependent when they place the same task or
  one task is a direct predecessor (``after``) of the other. Machine, horizon,
  deadline and ``no_overlap`` tests compare placements symmetrically and only
  grow with the placement set, so they never depend on order.
- any other family: every pair is dependent (the solution is a total order).

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

from collections.abc import Sequence

from ._errors import WorldsError
from ._grammar import Step, parse_candidate
from ._model import World

__all__ = [
    "MAX_LINEARISATIONS",
    "dependent",
    "motif_signature",
    "solution_classes",
]

#: Most linearisations examined for one signature before refusing.
MAX_LINEARISATIONS = 200_000


def _as_steps(solution: Sequence[Step | str]) -> tuple[Step, ...]:
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


def _token_footprint(world: World, st: Step, group: dict[str, str]):
    recipe = next((r for r in world.spec.recipes if r.name == st.name), None)
    if recipe is None:
        raise WorldsError(f"{st.name!r} is not a recipe of world {world.id}")
    bind = {p.name: a for p, a in zip(recipe.params, st.args)}

    def res(ref: str) -> str:
        tok = bind.get(ref, ref)
        return group.get(tok, tok)

    ins = {res(r) for r, _ in recipe.inputs}
    reads = ins | {res(r) for r, _ in recipe.catalysts}
    writes = ins | {res(t) for t, _ in recipe.outputs}
    return frozenset(reads), frozenset(writes)


def _never_together_groups(world: World) -> dict[str, str]:
    """Token -> representative of its never_together group (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for kind, _scope, toks, _limit in world.spec.constraints:
        if kind == "never_together":
            roots = sorted({find(t) for t in toks})
            for r in roots[1:]:
                parent[r] = roots[0]
    return {t: find(t) for t in parent}


def _dependency(world: World, steps: tuple[Step, ...]) -> list[set[int]]:
    """For each step, the indices of earlier steps it directly depends on."""
    n = len(steps)
    deps: list[set[int]] = [set() for _ in range(n)]
    if world.family == "token_workshop":
        group = _never_together_groups(world)
        fp = [_token_footprint(world, s, group) for s in steps]
        for j in range(n):
            rj, wj = fp[j]
            for i in range(j):
                ri, wi = fp[i]
                if wi & (rj | wj) or ri & wj:
                    deps[j].add(i)
    elif world.family == "schedule":
        after = {t.name: set(t.after) for t in world.spec.tasks}
        for j in range(n):
            tj = steps[j].args[0]
            for i in range(j):
                ti = steps[i].args[0]
                if ti == tj or ti in after.get(tj, ()) or tj in after.get(ti, ()):
                    deps[j].add(i)
    else:
        for j in range(n):
            deps[j].update(range(j))
    return deps


def dependent(world: World, a: Step | str, b: Step | str) -> bool:
    """Whether two grounded steps of ``world`` are dependent (must keep their order)."""
    return bool(_dependency(world, _as_steps([a, b]))[1])


def motif_signature(world: World, solution: Sequence[Step | str]) -> tuple:
    """The canonical motif signature of ``solution`` (steps or rendered steps) in ``world``.

    A hashable tuple with one entry per step: (primitive label, argument labels,
    positions of the earlier steps it directly depends on).
    """
    if world.family == "dataflow":  # programs: see ``_dataflow_pairs.program_signature``
        from ._dataflow_pairs import program_signature

        return program_signature(world, solution)
    steps = _as_steps(solution)
    n = len(steps)
    deps = _dependency(world, steps)
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
