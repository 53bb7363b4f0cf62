"""Every valid dataflow program within bounds, up to the names of intermediate wires.

A program's meaning does not depend on what its intermediate wires are
called (only on which binding reads which), so the enumerator lists each
valid program once, in canonical form: binding *i* (0-based) binds the goal
wire or ``w<i+1>``.  Renaming a valid program's intermediate wires by
position gives exactly one listed program, and every listed program is VALID
under ``worlds.check``.

The search is depth first over type-correct bindings (arguments are bound
wires of the parameter's type), memoized on (state, steps left, cost left).
Two prunings are sound for every world: the goal wire must be bound by the
end, so the last available step can only bind it; and under
``no_dead_wires`` a run ends with the goal wire's binding (any later binding
would go unread) and the unread wires must still be readable by the steps
left.  The family's semantics are read from the registry, never from the
checker module.
"""

from __future__ import annotations

import itertools

from ._dataflow import Binding, canonical_wire
from ._enumerate import MAX_ENUMERATION_DEPTH, Bounds, Enumeration, EnumerationLimitError
from ._errors import WorldsError
from ._model import Failure, World
from ._registry import get_family

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


def enumerate_programs(world: World, bounds: Bounds | None = None) -> Enumeration:
    """All valid programs of a dataflow ``world`` within ``bounds`` (and its budget), in canonical form."""
    if not isinstance(world, World) or world.family != "dataflow":
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
