"""Pair hooks of family ``schedule``: production edges, independence, relabelling, the state bound."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..._grammar import Step
from ..._model import World
from ..._structure import one_step

__all__ = ["dependency", "production_edges", "relabel", "sort_declarations", "state_space_bound"]


def sort_declarations(raw: dict) -> None:
    """Tasks by name and machine kinds sorted (their order carries no meaning)."""
    if "tasks" in raw:
        raw["tasks"] = sorted(raw["tasks"], key=lambda x: x["name"])
    if "machine_kinds" in raw:
        raw["machine_kinds"] = sorted(raw["machine_kinds"])


def relabel(m: dict, ent: Mapping[str, str], prim: Mapping[str, str], ty: Mapping[str, str]) -> None:
    """Tasks and machines renamed by ``ent``, machine kinds by ``ty`` (the primitive ``start`` kept)."""
    m["machine_kinds"] = [ty.get(k, k) for k in m["machine_kinds"]]
    m["machines"] = {
        ent[k]: {**v, "kind": ty.get(v["kind"], v["kind"])} for k, v in m["machines"].items()
    }
    for t in m["tasks"]:
        t["name"] = ent[t["name"]]
        t["kind"] = ty.get(t["kind"], t["kind"])
        if "after" in t:
            t["after"] = [ent[a] for a in t["after"]]
    m["goal"]["scheduled"] = [ent[t] for t in m["goal"]["scheduled"]]
    for c in m.get("constraints", []):
        c["tasks"] = [ent[t] for t in c["tasks"]]


def production_edges(world: World, solution: Sequence) -> frozenset[tuple[str, str, str]]:
    """(predecessor task, "same_machine" | "cross_machine", task) for each precedence the solution realizes."""
    after = {t.name: t.after for t in world.spec.tasks}
    where: dict[str, str] = {}
    out: set[tuple[str, str, str]] = set()
    for st in [one_step(s) for s in solution]:
        task, machine = st.args[0], st.args[1]
        for pred in after[task]:
            if pred in where:
                rel = "same_machine" if where[pred] == machine else "cross_machine"
                out.add((pred, rel, task))
        where[task] = machine
    return frozenset(out)


def dependency(world: World, steps: tuple[Step, ...]) -> list[set[int]]:
    """Two ``start`` steps are dependent when they place the same task or one task is a direct predecessor
    (``after``) of the other. Machine, horizon, deadline and ``no_overlap`` tests compare placements
    symmetrically and only grow with the placement set, so they never depend on order."""
    n = len(steps)
    deps: list[set[int]] = [set() for _ in range(n)]
    after = {t.name: set(t.after) for t in world.spec.tasks}
    for j in range(n):
        tj = steps[j].args[0]
        for i in range(j):
            ti = steps[i].args[0]
            if ti == tj or ti in after.get(tj, ()) or tj in after.get(ti, ()):
                deps[j].add(i)
    return deps


def state_space_bound(world: World) -> int:
    """Per task: unplaced, or one of its kind's machines at one of the horizon's start times."""
    n = 1
    for t in world.spec.tasks:
        machines = sum(1 for _, k, _ in world.spec.machines if k == t.kind)
        n *= 1 + machines * world.spec.horizon
    return n
