"""One-step primitive examples: a valid and an invalid exposure of every subject, and their audits.

Examples are derived once on the base world (``base_examples``) and
translated to each side (``example_on``), which re-derives every outcome on
the replica.  Token workshop examples sit on constructed minimal inventories;
otherwise, and as a fallback, on reachable states, off the target's solution
paths where possible.  The audits say whether the valid examples chain into a
goal-reaching run and how many example states lie on solution paths.
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
from ._structure import one_step, state_map, step_map, subject_of

__all__ = ["base_examples", "example_on", "example_states_on_solution_paths", "examples_chain_to_goal"]


def _solution_path_states(world: World, solutions) -> set:
    """Every state a bounded target solution passes through (s0 included)."""
    fam = get_family(world.family)
    seen = {world.initial_state}
    for sol in solutions:
        s = world.initial_state
        for text in sol:
            st = one_step(text)
            got = fam.apply(world, s, st.name, st.args)
            s = got[0]
            seen.add(s)
    return seen


def _outcome(fam, world: World, state, st: Step):
    """None when ``st`` may be committed in ``state``, else the Failure."""
    got = fam.apply(world, state, st.name, st.args)
    if isinstance(got, Failure):
        return got
    return fam.limits(world, got[0]) or fam.constraints(world, got[0], False)


def _isolated_token_examples(world: World, fam, mine: Sequence[Step]):
    """Valid and invalid exposures of a recipe on constructed minimal inventories.

    The valid state holds exactly what the step consumes plus one unit of each
    catalyst; the invalid state is the same with one unit of its first catalyst
    (or, without catalysts, of its first input) removed. Such states belong to
    no trajectory of the target, so the examples cannot be chained into a
    target solution. Returns (valid, invalid); either may be None.
    """
    from ._token_workshop import TokenState

    for st in mine:
        r = next(x for x in world.spec.recipes if x.name == st.name)
        bind = {p.name: a for p, a in zip(r.params, st.args)}
        need: dict[str, int] = {}
        for ref, n in r.inputs:
            need[bind.get(ref, ref)] = need.get(bind.get(ref, ref), 0) + n
        for ref, _ in r.catalysts:
            need[bind.get(ref, ref)] = need.get(bind.get(ref, ref), 0) + 1
        state = TokenState.of(need)
        if fam.limits(world, state) or fam.constraints(world, state, False) or _outcome(fam, world, state, st):
            continue
        short = ([bind.get(ref, ref) for ref, _ in r.catalysts] or [bind.get(ref, ref) for ref, _ in r.inputs])[:1]
        invalid = None
        if short:
            less = dict(need)
            less[short[0]] -= 1
            bad_state = TokenState.of(less)
            if _outcome(fam, world, bad_state, st) is not None and not fam.constraints(world, bad_state, False):
                invalid = (bad_state, st.render())
        return (state, st.render()), invalid
    return None, None


def base_examples(base: World, solutions) -> tuple[tuple[str, Any, str, Any], ...]:
    """(subject, state, step, kind): one valid and one invalid exposure per subject, on the base.

    token_workshop: constructed minimal inventories (see
    ``_isolated_token_examples``). Otherwise, and as a fallback: reachable
    states in breadth-first order, preferring for the valid exposure a state
    that no bounded target solution passes through.
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
        valid = invalid = None
        if base.family == "token_workshop":
            v, iv = _isolated_token_examples(base, fam, mine)
            valid = None if v is None else (subj, v[0], v[1], "VALID")
            invalid = None if iv is None else (subj, iv[0], iv[1], "INVALID")
        if valid is None:
            valid = next(
                ((subj, s, st.render(), "VALID") for s in off_first for st in mine if _outcome(fam, base, s, st) is None),
                None,
            )
        if invalid is None:
            invalid = next(
                ((subj, s, st.render(), "INVALID") for s in order for st in mine if _outcome(fam, base, s, st) is not None),
                None,
            )
        out += [x for x in (valid, invalid) if x is not None]
    return tuple(out)


def examples_chain_to_goal(world: World, examples: Sequence[PrimitiveExample]) -> bool:
    """Whether the valid examples' transitions, followed from s0, reach a goal state (a leaked witness)."""
    fam = get_family(world.family)
    edges: dict[str, list[str]] = {}
    for ex in examples:
        if ex.status == "VALID":
            edges.setdefault(canonical_json(ex.state), []).append(canonical_json(ex.result))
    start = canonical_json(fam.describe_state(world.initial_state))
    goal_states = {canonical_json(ex.result) for ex in examples
                   if ex.status == "VALID" and _goal_of_described(world, ex.result)}
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


def _goal_of_described(world: World, described: Any) -> bool:
    if world.family == "token_workshop":
        return all(described.get(t, 0) >= n for t, n in world.spec.goal)
    return all(t in described for t in world.spec.goal)


def example_states_on_solution_paths(world: World, examples: Sequence[PrimitiveExample], solutions) -> int:
    """How many example states are states some bounded target solution passes through."""
    fam = get_family(world.family)
    on = {canonical_json(fam.describe_state(s)) for s in _solution_path_states(world, solutions)}
    return sum(1 for ex in examples if canonical_json(ex.state) in on)


def example_on(side: World, ent, prim, ex) -> PrimitiveExample:
    """A base example (from ``base_examples``) written in a side's labels, its outcome re-derived on the side."""
    fam = get_family(side.family)
    subj, s, step, kind = ex
    st = state_map(side.family, s, ent)
    step_t = step_map(step, ent, prim)
    one = one_step(step_t)
    bad = _outcome(fam, side, st, one)
    if (bad is None) != (kind == "VALID"):
        raise PairConstructionError(f"{side.id}: translated example {step_t} changes its outcome")
    if bad is None:
        nxt, cost = fam.apply(side, st, one.name, one.args)
        return PrimitiveExample(subj, fam.describe_state(st), step_t, "VALID", None, fam.describe_state(nxt), cost, "")
    return PrimitiveExample(subj, fam.describe_state(st), step_t, "INVALID", bad.reason.value, None, None, bad.message)
