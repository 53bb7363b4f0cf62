"""One-step primitive examples: a valid and an invalid exposure of every subject, and their audits.

For step sequences, examples are derived once on the base world
(``base_examples``) and translated to each side (``example_on``), which
re-derives every outcome on the replica.  A family may place them on states
it constructs (``StepFamily.isolated_examples``: token_workshop's minimal
inventories); otherwise, and as a fallback, they sit on reachable states, off
the target's solution paths where possible.  The audits say whether the valid
examples chain into a goal-reaching run and how many example states lie on
solution paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canonical_hash import canonical_json

from ._enumerate import grounded_steps
from ._errors import PairConstructionError
from ._grammar import Step
from ._graph import reachable_graph
from ._model import Failure, World
from ._pair_types import PrimitiveExample
from ._registry import get_family
from ._structure import one_step, step_map, subject_of

__all__ = ["base_examples", "example_on", "example_states_on_solution_paths", "examples_chain_to_goal", "outcome",
           "step_examples_chain_to_goal"]


def _solution_path_states(world: World, solutions) -> set:
    """Every state a bounded target solution passes through (s0 included)."""
    fam = get_family(world.family)
    seen = {world.initial_state}
    for sol in solutions:
        seen.update(fam.trajectory(world, sol))
    return seen


def outcome(fam, world: World, state, st: Step):
    """None when ``st`` may be committed in ``state``, else the Failure."""
    got = fam.apply(world, state, st.name, st.args)
    if isinstance(got, Failure):
        return got
    return fam.limits(world, got[0]) or fam.constraints(world, got[0], False)


def base_examples(base: World, solutions) -> tuple[tuple[str, Any, str, Any], ...]:
    """(subject, state, step, kind): one valid and one invalid exposure per subject, on a step-sequence base.

    First the states the family constructs for a subject's steps
    (``isolated_examples``); otherwise, and as a fallback: reachable states in
    breadth-first order, preferring for the valid exposure a state that no
    bounded target solution passes through.
    """
    fam = get_family(base.family)
    g = reachable_graph(base)
    order = sorted(g["nodes"], key=lambda s: (g["depth"][s], repr(s)))
    on_path = _solution_path_states(base, solutions)
    off_first = [s for s in order if s not in on_path] + [s for s in order if s in on_path]
    steps = grounded_steps(base)
    subjects = sorted({subject_of(base, st.render()) for st in steps})
    out = []
    for subj in subjects:
        mine = [st for st in steps if subject_of(base, st.render()) == subj]
        v, iv = fam.isolated_examples(base, mine)
        valid = None if v is None else (subj, v[0], v[1], "VALID")
        invalid = None if iv is None else (subj, iv[0], iv[1], "INVALID")
        if valid is None:
            valid = next(
                ((subj, s, st.render(), "VALID") for s in off_first for st in mine if outcome(fam, base, s, st) is None),
                None,
            )
        if invalid is None:
            invalid = next(
                ((subj, s, st.render(), "INVALID") for s in order for st in mine if outcome(fam, base, s, st) is not None),
                None,
            )
        out += [x for x in (valid, invalid) if x is not None]
    return tuple(out)


def examples_chain_to_goal(world: World, examples: Sequence[PrimitiveExample]) -> bool:
    """Whether the valid examples' transitions, followed from s0, reach a goal state (a leaked witness),
    by the world's family."""
    return get_family(world.family).examples_chain_to_goal(world, examples)


def step_examples_chain_to_goal(world: World, examples: Sequence[PrimitiveExample]) -> bool:
    """``examples_chain_to_goal`` of step sequences: the valid examples' transitions as a graph from s0."""
    fam = get_family(world.family)
    edges: dict[str, list[str]] = {}
    for ex in examples:
        if ex.status == "VALID":
            edges.setdefault(canonical_json(ex.state), []).append(canonical_json(ex.result))
    start = canonical_json(fam.describe_state(world.initial_state))
    goal_states = {canonical_json(ex.result) for ex in examples
                   if ex.status == "VALID" and fam.goal(world, fam.state_from_described(world, ex.result))}
    seen, todo = {start}, [start]
    while todo:
        cur = todo.pop()
        if cur in goal_states:
            return True
        for nxt in edges.get(cur, []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def example_states_on_solution_paths(world: World, examples: Sequence[PrimitiveExample], solutions) -> int:
    """How many example states are states some bounded target solution passes through."""
    fam = get_family(world.family)
    on = {canonical_json(fam.describe_state(s)) for s in _solution_path_states(world, solutions)}
    return sum(1 for ex in examples if canonical_json(ex.state) in on)


def example_on(side: World, ent, prim, ex) -> PrimitiveExample:
    """A base example (from ``base_examples``) written in a side's labels, its outcome re-derived on the side."""
    fam = get_family(side.family)
    subj, s, step, kind = ex
    st = fam.state_map(s, ent)
    step_t = step_map(step, ent, prim)
    one = one_step(step_t)
    bad = outcome(fam, side, st, one)
    if (bad is None) != (kind == "VALID"):
        raise PairConstructionError(f"{side.id}: translated example {step_t} changes its outcome")
    if bad is None:
        nxt, cost = fam.apply(side, st, one.name, one.args)
        return PrimitiveExample(subj, fam.describe_state(st), step_t, "VALID", None, fam.describe_state(nxt), cost, "")
    return PrimitiveExample(subj, fam.describe_state(st), step_t, "INVALID", bad.reason.value, None, None, bad.message)
