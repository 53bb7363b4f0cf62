"""The reachable state graph of a step-sequence world within its step cap (cost ignored).

Used by the isomorphism certificate, the one-step examples, the manifest's
search metrics, the tier properties and the replicas' abstract fingerprint.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ._enumerate import grounded_steps
from ._model import Failure, World
from ._registry import get_family

__all__ = ["reachable_graph", "step_search_metrics"]


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


def step_search_metrics(world: World, enum) -> dict[str, Any]:
    """A manifest's ``solver_search_metrics`` of a step-sequence target, from its reachable state graph."""
    g = reachable_graph(world)
    out_deg = Counter(s for s, _, _, _ in g["edges"])
    expanded = [s for s in g["nodes"] if g["depth"][s] < world.budget.max_steps]
    degs = [out_deg[s] for s in expanded]
    # fixed oracle: breadth-first search by depth; states it visits up to and including the first goal depth
    goal_depths = [g["depth"][s] for s, (goal, ok) in g["nodes"].items() if goal and ok and s != g["initial"]]
    first = min(goal_depths, default=None)
    bfs = None if first is None else sum(1 for d in g["depth"].values() if d <= first)
    return {
        "enumeration_nodes": enum.states,
        "reachable_states": len(g["nodes"]),
        "transitions": len(g["edges"]),
        "mean_branching": round(sum(degs) / len(degs), 4) if degs else 0.0,
        "max_branching": max(degs, default=0),
        "bfs_states_to_first_goal_depth": bfs,
        "solutions": len(enum.solutions),
    }
