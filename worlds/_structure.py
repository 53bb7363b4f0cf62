"""What a pair's construction compares: production edges, step subjects, replica isomorphism, structure hash.

Production edges are type-level dependencies a solution realizes; the world's
family defines them (``Family.production_edges``).  The isomorphism
certificate proves two replicas of one base equal under their explicit label
bijection (``step_isomorphism`` compares the reachable state graphs of step
sequences).  The structure hash identifies a base world's latent structure
whatever its declaration order, id or title.
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
from ._registry import get_family

__all__ = [
    "inverse",
    "isomorphism_certificate",
    "one_step",
    "production_edges",
    "state_map",
    "step_isomorphism",
    "step_map",
    "structure_hash",
    "structure_json",
    "subject_of",
]


def production_edges(world: World, solution: Sequence) -> frozenset[tuple[str, str, str]]:
    """Type-level production dependencies ``(producer, relation, consumer)`` a solution of ``world`` realizes
    (by its family: which recipe's output a later step consumes or holds as a catalyst, which predecessor a
    task follows on the same or another machine, which primitive's wire a binding reads at which argument)."""
    return get_family(world.family).production_edges(world, solution)


def one_step(s: str | Step) -> Step:
    """The one step that ``s`` writes (a ``Step`` passes through)."""
    if isinstance(s, Step):
        return s
    got = parse_candidate(s)
    if not got.ok or len(got.steps) != 1:
        raise PairConstructionError(f"not a single step in the artifact grammar: {s!r}")
    return got.steps[0]


def subject_of(world: World, step: str) -> str:
    """What a rendered step exposes, by the world's family (a recipe, a task, a primitive)."""
    return get_family(world.family).subject_of(world, step)


def state_map(world: World, state: Any, ent: Mapping[str, str]) -> Any:
    """``state`` of ``world``'s step-sequence family with its entities relabelled by ``ent`` (``StepFamily.state_map``)."""
    return get_family(world.family).state_map(state, ent)


def step_map(step: str, ent: Mapping[str, str], prim: Mapping[str, str]) -> str:
    """``step`` with its entities relabelled by ``ent`` and its primitive by ``prim`` (unmapped names kept)."""
    st = one_step(step)
    args = [a if isinstance(a, int) else ent[a] for a in st.args]
    return f"{prim.get(st.name, st.name)}({', '.join(str(a) for a in args)})"


def inverse(d: Mapping[str, str]) -> dict[str, str]:
    """A one-to-one label map turned around."""
    return {v: k for k, v in d.items()}


def isomorphism_certificate(a: Replica, b: Replica, enum_a=None, enum_b=None) -> dict:
    """Prove two replicas of one base isomorphic under their explicit label bijection, by their family.

    ``enum_a`` / ``enum_b``: the replicas' enumerations, when the caller has them (a family that compares
    bounded solutions reads them; None enumerates).  Raises PairConstructionError on the first difference.
    """
    return get_family(a.world.family).isomorphism(a, b, enum_a, enum_b)


def step_isomorphism(a: Replica, b: Replica) -> dict:
    """Prove two replicas of a step-sequence base isomorphic under their explicit label bijection.

    The bijection is a's labels -> base -> b's labels. Checked: the mappings,
    written back in the base's labels, are structurally equal (budget,
    constraints, recipes or tasks, initial state, goal); and the reachable
    state graphs within the step cap coincide node for node and edge for edge
    (with costs, goal flags and final-rule flags) under the bijection.
    Raises PairConstructionError on the first difference.
    """
    fam = get_family(a.world.family)
    ent = {k: b.entities[v] for k, v in inverse(a.entities).items()}
    prim = {k: b.primitives[v] for k, v in inverse(a.primitives).items()}
    ty = {k: b.types[v] for k, v in inverse(a.types).items()}
    back_a = structure_json(rename_mapping(a.raw, inverse(a.entities), inverse(a.primitives), inverse(a.types)))
    back_b = structure_json(rename_mapping(b.raw, inverse(b.entities), inverse(b.primitives), inverse(b.types)))
    if back_a != back_b:
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: mappings differ under the label bijection")
    ga, gb = reachable_graph(a.world), reachable_graph(b.world)
    if fam.state_map(ga["initial"], ent) != gb["initial"]:
        raise PairConstructionError("initial states differ under the bijection")
    mapped_nodes = {fam.state_map(s, ent): f for s, f in ga["nodes"].items()}
    if mapped_nodes != gb["nodes"]:
        raise PairConstructionError(
            f"{a.world.id} and {b.world.id}: reachable states or their goal/final flags differ under the bijection"
        )
    mapped_edges = {
        (fam.state_map(s, ent), step_map(st, ent, prim), fam.state_map(t, ent), c)
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
    get_family(d["family"]).sort_declarations(d)
    if "constraints" in d:
        d["constraints"] = sorted(d["constraints"], key=lambda c: canonical_json(c, ensure_ascii=True))
    return canonical_json(d, ensure_ascii=True)


def structure_hash(raw: Mapping[str, Any]) -> str:
    """sha256 of the canonical latent structure of a base mapping (labels included, order and id ignored)."""
    return sha256_text(structure_json(raw))
