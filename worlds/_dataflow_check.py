"""The strict checker path of the ``dataflow`` family.

``check_program(world, text)`` parses the binding grammar and runs the
bindings in order; ``worlds.check`` dispatches here for a dataflow world.  It
returns the same ``CheckResult`` as the generic checker and never raises on a
``str``.  The family is looked up through this module's ``get_family`` and the
cap tests are the small functions below, so the mutant certification can
break one decision at a time without touching the enumerator or the
reference interpreter.

Order of checks for binding *i*: step cap -> primitive known -> arity and each
argument in order (not an integer, a bound wire, of the parameter's type) ->
applicability (the bound name is fresh) -> cost cap -> depth cap ->
``max_uses`` rules.  A binding failing any of these is not committed.  After
the last binding: ``no_dead_wires``, then the goal.
"""

from __future__ import annotations

from ._checker import CheckResult, Status, TraceEntry
from ._dataflow import Binding, parse_program
from ._errors import CheckerUsageError
from ._model import Failure, Reason, World
from ._registry import get_family

__all__ = ["check_bindings", "check_program"]


def _over_step_cap(i: int, world: World) -> bool:
    return i >= world.budget.max_steps


def _over_cost_cap(cost: int, step_cost: int, world: World) -> bool:
    return cost + step_cost > world.budget.max_cost


def _goal_miss(world: World, state) -> str:
    """Why the goal does not hold, in words."""
    spec = world.spec
    w = state.wire(spec.goal_wire)
    if w is None:
        return f"the goal wire {spec.goal_wire} is never bound"
    if w[1] != spec.goal_type:
        return f"the goal wire {spec.goal_wire} is a {w[1]}, the goal needs a {spec.goal_type}"
    wrong = [c for c, (x, y) in enumerate(zip(w[3], spec.expect)) if x != y]
    if wrong:
        return f"the goal wire {spec.goal_wire} differs from the expected value on case {wrong[0]}"
    return f"the goal wire {spec.goal_wire} does not meet the goal"


def check_program(world: World, text: str) -> CheckResult:
    """Check a dataflow program's text against ``world``; never raises on any ``str``."""
    if not isinstance(world, World):
        raise CheckerUsageError(f"check() needs a World (from load_world), got {type(world).__name__}")
    parsed = parse_program(text)
    if not parsed.ok:
        return CheckResult(Status.MALFORMED, Reason.SCHEMA, None,
                           f"line {parsed.line}, column {parsed.column}: {parsed.message}",
                           world.initial_state, 0, 0, (), parsed.line, parsed.column)
    return check_bindings(world, parsed.steps)


def check_bindings(world: World, bindings) -> CheckResult:
    """Check already-parsed ``Binding``s against a dataflow ``world``."""
    if not isinstance(world, World):
        raise CheckerUsageError(f"check_bindings() needs a World (from load_world), got {type(world).__name__}")
    fam = get_family(world.family)
    state = world.initial_state
    cost = 0
    trace: list[TraceEntry] = []

    def fail(i, f: Failure, line) -> CheckResult:
        return CheckResult(Status.INVALID, f.reason, i, f.message, state, cost, len(trace), tuple(trace), line)

    for i, b in enumerate(bindings):
        if not isinstance(b, Binding):
            raise CheckerUsageError(f"check_bindings() needs Binding values, got {type(b).__name__}")
        if _over_step_cap(i, world):
            return fail(i, Failure(Reason.OVER_BUDGET, f"node cap {world.budget.max_steps} exceeded"), b.line)
        bad = fam.resolve(world, state, b)
        if bad is not None:
            return fail(i, bad, b.line)
        got = fam.bind(world, state, b)
        if isinstance(got, Failure):
            return fail(i, got, b.line)
        nxt, step_cost = got
        if _over_cost_cap(cost, step_cost, world):
            return fail(i, Failure(Reason.OVER_BUDGET,
                                   f"cost cap {world.budget.max_cost} exceeded: {cost} + {step_cost}"), b.line)
        bad = fam.limits(world, nxt) or fam.constraints(world, nxt, False)
        if bad is not None:
            return fail(i, bad, b.line)
        state = nxt
        cost += step_cost
        trace.append(TraceEntry(b.render(), step_cost, state))
    bad = fam.constraints(world, state, True)
    if bad is not None:
        return fail(None, bad, None)
    if not fam.goal(world, state):
        why = _goal_miss(world, state)
        return fail(None, Failure(Reason.GOAL_NOT_MET, f"every binding is legal but {why}"), None)
    return CheckResult(Status.VALID, None, None, "", state, cost, len(trace), tuple(trace))
