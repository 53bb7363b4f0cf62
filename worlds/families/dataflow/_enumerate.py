"""Every valid dataflow program within bounds, up to the names of intermediate wires.

A program's meaning does not depend on what its intermediate wires are
called (only on which binding reads which), so the enumerator lists each
valid program once, in canonical form: binding *i* (0-based) binds the goal
wire or ``w<i+1>``.  Renaming a valid program's intermediate wires by
position gives exactly one listed program, and every listed program is VALID
under ``worlds.check``.

The search is depth first over type-correct bindings (arguments are bound
wires of the parameter's type), memoized on (state, steps left, cost left).
Three prunings are sound for every world: the goal wire must be bound by the
end, so the last available step can only bind it, and not before the least
number of bindings and the least cost that any primitive chain from the bound
wires' types to the goal type needs (``_goal_bounds``); under
``no_dead_wires``, not while some unread wire cannot be carried into the goal
wire's binding in the steps left (``_reader_bound``); and under
``no_dead_wires`` a run ends with the goal wire's binding (any later binding
would go unread) and the unread wires must still be readable by the steps
left.  The family's semantics are read from the registry, never from the
checker module.
"""

from __future__ import annotations

import itertools

from ..._enumerate import MAX_ENUMERATION_DEPTH, Bounds, Enumeration, EnumerationLimitError
from ..._errors import WorldsError
from ..._model import Failure, World
from ..._registry import get_family
from ._grammar import Binding, canonical_wire
from ._state import DataflowSpec

__all__ = ["enumerate_programs", "program_alphabet"]


def program_alphabet(world: World, state, i: int):
    """The type-correct bindings at step ``i`` (0-based) from ``state``, canonical binders, sorted."""
    spec = world.spec
    binders = [canonical_wire(i)]
    if state.wire(spec.goal_wire) is None:
        binders.append(spec.goal_wire)
    by_type: dict[str, list[str]] = {}
    for name, typ, _, _ in state.wires:
        by_type.setdefault(typ, []).append(name)
    out = []
    for target in sorted(binders):
        for prim in spec.primitives:
            for args in itertools.product(*(by_type.get(t, []) for t in prim.params)):
                out.append(Binding(target, prim.name, tuple(args)))
    return out


def _unread(world: World, state) -> int:
    inputs = {n for n, _ in world.spec.inputs}
    return sum(1 for n, *_ in state.wires
               if n not in inputs and n != world.spec.goal_wire and n not in state.read)


def _goal_bounds(world: World):
    """``bound(state) -> (steps, cost)``: a lower bound on the bindings and the cost still needed to bind the
    goal wire with the goal type from ``state`` (infinite when no primitive chain can give that type).

    For a type T: 0 when some bound wire has type T, else the least, over primitives with result T, of 1 (their
    cost) plus the largest bound of their parameter types. The largest, not the sum: two parameters may be made
    by one shared chain. Every completion binds the goal wire with a primitive whose arguments exist by then, so
    neither figure can exceed what a completion spends.
    """
    prims = world.spec.primitives
    types = [t for t, _ in world.spec.types]
    inf = float("inf")

    def bound(state):
        have = {t for _, t, _, _ in state.wires}
        steps = {t: (0 if t in have else inf) for t in types}
        cost = {t: (0 if t in have else inf) for t in types}
        for _ in range(len(types)):
            changed = False
            for p in prims:
                ps = 1 + max((steps[t] for t in p.params), default=0)
                pc = p.cost + max((cost[t] for t in p.params), default=0)
                if ps < steps[p.result]:
                    steps[p.result], changed = ps, True
                if pc < cost[p.result]:
                    cost[p.result], changed = pc, True
            if not changed:
                break
        goal = world.spec.goal_type
        best_s = min((1 + max((steps[t] for t in p.params), default=0) for p in prims if p.result == goal), default=inf)
        best_c = min((p.cost + max((cost[t] for t in p.params), default=0) for p in prims if p.result == goal),
                     default=inf)
        return best_s, best_c

    return bound


def _reader_bound(world: World):
    """``need(state) -> steps``: under ``no_dead_wires``, a lower bound on the bindings still needed to carry every
    unread wire into the goal wire's binding (infinite when some unread wire can never get there).

    Every bound wire but the goal wire must be read by a later binding, whose wire in turn must be read, so each
    unread wire of type T needs a chain of primitives from T to the goal type; only primitives a ``max_uses``
    rule has not used up can be in it (uses only grow). For T the least chain length is 1 over a primitive with
    a T parameter and the goal type as result, else 1 plus the least for that primitive's result type.
    """
    spec = world.spec
    limits = dict(spec.max_uses)
    types = [t for t, _ in spec.types]
    inputs = {n for n, _ in spec.inputs}
    inf = float("inf")

    def need(state) -> float:
        live = [p for p in spec.primitives if state.count(p.name) < limits.get(p.name, inf)]
        h = {t: inf for t in types}
        for _ in range(len(types) + 1):
            changed = False
            for p in live:
                via = 1 if p.result == spec.goal_type else 1 + h[p.result]
                for t in set(p.params):
                    if via < h[t]:
                        h[t], changed = via, True
            if not changed:
                break
        read = set(state.read)
        return max((h[t] for n, t, _, _ in state.wires
                    if n not in inputs and n != spec.goal_wire and n not in read), default=0)

    return need


def enumerate_programs(world: World, bounds: Bounds | None = None) -> Enumeration:
    """All valid programs of a dataflow ``world`` within ``bounds`` (and its budget), in canonical form."""
    if not isinstance(world, World) or not isinstance(world.spec, DataflowSpec):
        raise WorldsError("enumerate_programs() needs a dataflow World (from load_world)")
    b = bounds or Bounds()
    max_steps = world.budget.max_steps if b.max_steps is None else min(b.max_steps, world.budget.max_steps)
    max_cost = world.budget.max_cost if b.max_cost is None else min(b.max_cost, world.budget.max_cost)
    if max_steps > MAX_ENUMERATION_DEPTH:
        raise EnumerationLimitError(
            f"enumerating {max_steps} bindings deep exceeds the supported depth {MAX_ENUMERATION_DEPTH}; "
            "pass Bounds(max_steps=...) with a smaller value")
    fam = get_family(world.family)
    spec = world.spec
    arity = max((len(p.params) for p in spec.primitives), default=0)
    memo: dict[tuple, tuple[tuple[str, ...], ...]] = {}
    goal_bound = _goal_bounds(world)
    reader_bound = _reader_bound(world)

    def suffixes(state, k, c):
        key = (state, k, c)
        hit = memo.get(key)
        if hit is not None:
            return hit
        acc: list[tuple[str, ...]] = []
        bound = state.wire(spec.goal_wire) is not None
        if bound and fam.constraints(world, state, True) is None and fam.goal(world, state):
            acc.append(())
        ended = bound and spec.no_dead_wires  # nothing after the goal wire could be read
        feasible = bound or not spec.no_dead_wires or _unread(world, state) <= arity + max(0, (k - 1) * (arity - 1))
        if feasible and not bound and k > 0:
            need_steps, need_cost = goal_bound(state)
            feasible = need_steps <= k and need_cost <= c  # the goal wire cannot be bound in time otherwise
            if feasible and spec.no_dead_wires:
                feasible = reader_bound(state) <= k  # some unread wire cannot reach the goal wire in time
        if k > 0 and not ended and feasible:
            i = max_steps - k
            for bnd in program_alphabet(world, state, i):
                if k == 1 and not bound and bnd.target != spec.goal_wire:
                    continue  # the goal wire would stay unbound
                got = fam.bind(world, state, bnd)
                if isinstance(got, Failure):
                    continue
                nxt, cost = got
                if cost > c or fam.limits(world, nxt) or fam.constraints(world, nxt, False):
                    continue
                text = bnd.render()
                for tail in suffixes(nxt, k - 1, c - cost):
                    acc.append((text,) + tail)
                    if len(acc) > b.max_solutions:
                        raise EnumerationLimitError(
                            f"world {world.id} has more than {b.max_solutions} programs within "
                            f"{max_steps} bindings and cost {max_cost}; tighten Bounds or raise max_solutions")
        res = tuple(acc)
        memo[key] = res
        return res

    sols = [s for s in suffixes(world.initial_state, max_steps, max_cost) if s]
    return Enumeration(world.id, max_steps, max_cost, tuple(sorted(sols)), len(memo))
