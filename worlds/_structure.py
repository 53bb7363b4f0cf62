"""What a pair's construction compares: production edges, step subjects, replica isomorphism, structure hash.

Production edges are type-level dependencies a solution realizes (which
primitive's output a later step consumes or holds as a catalyst; for
schedules, which predecessor a task follows on the same or another machine; for
dataflow programs, which primitive's wire a later binding reads at which argument).
The isomorphism certificate proves two replicas of one base equal under their
explicit label bijection.  The structure hash identifies a base world's
latent structure whatever its declaration order, id or title.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from canonical_hash import canonical_json, sha256_text

from ._errors import PairConstructionError
from ._grammar import Step, parse_candidate
from ._graph import reachable_graph
from ._model import World
from ._pairs import Replica, rename_mapping

__all__ = [
    "inverse",
    "isomorphism_certificate",
    "one_step",
    "production_edges",
    "state_map",
    "step_map",
    "structure_hash",
    "structure_json",
    "subject_of",
]


def production_edges(world: World, solution: Sequence[str]) -> frozenset[tuple[str, str, str]]:
    """Type-level production dependencies realized by a solution of ``world``.

    token_workshop: (producer recipe, "input" | "catalyst", consumer recipe)
    whenever a step consumes or holds as catalyst a token that an earlier step
    of the solution produced.  schedule: (predecessor task, "same_machine" |
    "cross_machine", task) for each precedence the solution realizes.
    """
    if world.family == "dataflow":
        from ._dataflow_pairs import program_edges

        return program_edges(world, solution)
    steps = [one_step(s) for s in solution]
    out: set[tuple[str, str, str]] = set()
    if world.family == "token_workshop":
        recipes = {r.name: r for r in world.spec.recipes}
        producers: dict[str, set[str]] = {}
        for st in steps:
            r = recipes[st.name]
            bind = {p.name: a for p, a in zip(r.params, st.args)}
            for role, refs in (("input", r.inputs), ("catalyst", r.catalysts)):
                for ref, _ in refs:
                    for prod in producers.get(bind.get(ref, ref), ()):
                        out.add((prod, role, r.name))
            for tok, _ in r.outputs:
                producers.setdefault(tok, set()).add(r.name)
    elif world.family == "schedule":
        after = {t.name: t.after for t in world.spec.tasks}
        where: dict[str, str] = {}
        for st in steps:
            task, machine = st.args[0], st.args[1]
            for pred in after[task]:
                if pred in where:
                    rel = "same_machine" if where[pred] == machine else "cross_machine"
                    out.add((pred, rel, task))
            where[task] = machine
    else:
        raise PairConstructionError(f"no production edges defined for family {world.family!r}")
    return frozenset(out)


def one_step(s: str | Step) -> Step:
    """The one step that ``s`` writes (a ``Step`` passes through)."""
    if isinstance(s, Step):
        return s
    got = parse_candidate(s)
    if not got.ok or len(got.steps) != 1:
        raise PairConstructionError(f"not a single step in the artifact grammar: {s!r}")
    return got.steps[0]


def subject_of(world: World, step: str) -> str:
    """What a step exposes: its recipe (token_workshop), its task (schedule) or its primitive (a dataflow binding)."""
    if world.family == "dataflow":
        from ._dataflow import parse_program

        got = parse_program(step)
        if not got.ok or len(got.steps) != 1:
            raise PairConstructionError(f"not a single binding in the program grammar: {step!r}")
        return got.steps[0].name
    st = one_step(step)
    return st.name if world.family == "token_workshop" else f"start:{st.args[0]}"


def state_map(family: str, state: Any, ent: Mapping[str, str]) -> Any:
    """``state`` with its entities relabelled by ``ent``."""
    from ._schedule import ScheduleState
    from ._token_workshop import TokenState

    if family == "token_workshop":
        return TokenState.of({ent[k]: v for k, v in state.inventory})
    if family == "schedule":
        return ScheduleState(tuple(sorted((ent[t], ent[m], s) for t, m, s in state.placements)))
    raise PairConstructionError(f"no state translation for family {family!r}")


def step_map(step: str, ent: Mapping[str, str], prim: Mapping[str, str]) -> str:
    """``step`` with its entities relabelled by ``ent`` and its primitive by ``prim`` (unmapped names kept)."""
    st = one_step(step)
    args = [a if isinstance(a, int) else ent[a] for a in st.args]
    return f"{prim.get(st.name, st.name)}({', '.join(str(a) for a in args)})"


def inverse(d: Mapping[str, str]) -> dict[str, str]:
    """A one-to-one label map turned around."""
    return {v: k for k, v in d.items()}


def isomorphism_certificate(a: Replica, b: Replica) -> dict:
    """Prove two replicas of one base isomorphic under their explicit label bijection.

    The bijection is a's labels -> base -> b's labels. Checked: the mappings,
    written back in the base's labels, are structurally equal (budget,
    constraints, recipes or tasks, initial state, goal); and the reachable
    state graphs within the step cap coincide node for node and edge for edge
    (with costs, goal flags and final-rule flags) under the bijection.
    Raises PairConstructionError on the first difference.
    """
    fam = a.world.family
    ent = {k: b.entities[v] for k, v in inverse(a.entities).items()}
    prim = {k: b.primitives[v] for k, v in inverse(a.primitives).items()}
    ty = {k: b.types[v] for k, v in inverse(a.types).items()}
    back_a = structure_json(rename_mapping(a.raw, inverse(a.entities), inverse(a.primitives), inverse(a.types)))
    back_b = structure_json(rename_mapping(b.raw, inverse(b.entities), inverse(b.primitives), inverse(b.types)))
    if back_a != back_b:
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: mappings differ under the label bijection")
    ga, gb = reachable_graph(a.world), reachable_graph(b.world)
    if state_map(fam, ga["initial"], ent) != gb["initial"]:
        raise PairConstructionError("initial states differ under the bijection")
    mapped_nodes = {state_map(fam, s, ent): f for s, f in ga["nodes"].items()}
    if mapped_nodes != gb["nodes"]:
        raise PairConstructionError(
            f"{a.world.id} and {b.world.id}: reachable states or their goal/final flags differ under the bijection"
        )
    mapped_edges = {
        (state_map(fam, s, ent), step_map(st, ent, prim), state_map(fam, t, ent), c)
        for s, st, t, c in ga["edges"]
    }
    if mapped_edges != gb["edges"]:
        raise PairConstructionError(
            f"{a.world.id} and {b.world.id}: transitions differ under the bijection"
        )
    return {
        "method": "explicit label bijection; reachable state graphs compared edge for edge",
        "states": len(gb["nodes"]),
        "transitions": len(gb["edges"]),
        "goal_states": sum(1 for g, ok in gb["nodes"].values() if g and ok),
        "bijection_size": len(ent) + len(prim) + len(ty),
    }


def structure_json(m: Mapping[str, Any]) -> str:
    """Order-insensitive canonical JSON of a world mapping without id, title and examples."""
    d = copy.deepcopy(dict(m))
    for k in ("id", "title", "examples"):
        d.pop(k, None)
    for key, by in (("recipes", "name"), ("tasks", "name")):
        if key in d:
            d[key] = sorted(d[key], key=lambda x: x[by])
    for key in ("token_types", "machine_kinds"):
        if key in d:
            d[key] = sorted(d[key])
    if "constraints" in d:
        d["constraints"] = sorted(d["constraints"], key=lambda c: canonical_json(c, ensure_ascii=True))
    return canonical_json(d, ensure_ascii=True)


def structure_hash(raw: Mapping[str, Any]) -> str:
    """sha256 of the canonical latent structure of a base mapping (labels included, order and id ignored)."""
    return sha256_text(structure_json(raw))
