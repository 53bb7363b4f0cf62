"""The reachable state graph of a world within its step cap (cost ignored).

Used by the isomorphism certificate, the one-step examples, the manifest's
search metrics and the replicas' abstract fingerprint.
"""

from __future__ import annotations

from ._enumerate import grounded_steps
from ._model import Failure, World
from ._registry import get_family

__all__ = ["reachable_graph"]


def reachable_graph(world: World) -> dict:
    """The reachable state graph within the step cap (cost ignored).

    Returns ``{"initial": s0, "nodes": {state: (goal, final_ok)}, "edges":
    {(state, step, next_state, cost)}, "depth": {state: first depth}}``.
    """
    fam = get_family(world.family)
    steps = grounded_steps(world)
    s0 = world.initial_state

    def flags(s):
        return (fam.goal(world, s), fam.constraints(world, s, True) is None)

    nodes = {s0: flags(s0)}
    depth = {s0: 0}
    edges: set = set()
    frontier = [s0]
    for d in range(world.budget.max_steps):
        nxt = []
        for s in frontier:
            for st in steps:
                got = fam.apply(world, s, st.name, st.args)
                if isinstance(got, Failure):
                    continue
                t, cost = got
                if fam.limits(world, t) or fam.constraints(world, t, False):
                    continue
                edges.add((s, st.render(), t, cost))
                if t not in nodes:
                    nodes[t] = flags(t)
                    depth[t] = d + 1
                    nxt.append(t)
        frontier = nxt
    return {"initial": s0, "nodes": nodes, "edges": edges, "depth": depth}
