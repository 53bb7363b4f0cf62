"""Replicas for F/C pairs: fresh-label replicas, abstract fingerprints, copy checks.

``instantiate_replica`` turns a latent base world mapping into a target replica
with fresh entity and primitive names, shuffled declaration order and a fresh
id. ``abstract_fingerprint`` summarises what a replica must share with its
twin (budget, constraint count, alphabet size, reachable state graph size,
solution count, optimum length, multiset of motif signatures); equal
fingerprints are necessary for matched transition graphs, not a proof of
isomorphism. ``copy_solves`` says whether a demonstration, verbatim, renamed or
truncated to a prefix, already solves a target.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._checker import Status, check
from ._enumerate import Bounds, enumerate_solutions, grounded_steps
from ._graph import reachable_graph
from ._loader import world_from_mapping
from ._model import World
from ._signature import motif_signature

__all__ = [
    "Fingerprint",
    "Replica",
    "abstract_fingerprint",
    "copy_solves",
    "instantiate_replica",
    "rename_mapping",
]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def rename_mapping(
    raw: Mapping[str, Any],
    ent: Mapping[str, str],
    prim: Mapping[str, str],
    types: Mapping[str, str] | None = None,
) -> dict:
    """A copy of a world mapping with entities renamed by ``ent``, recipes by ``prim``
    and token types / machine kinds by ``types``.

    Examples are dropped (their text names the old labels). Names absent from
    a map are kept (recipe parameter names, the schedule primitive ``start``).
    """
    ty = dict(types or {})
    m = copy.deepcopy(dict(raw))
    m.pop("examples", None)
    if m["family"] == "token_workshop":
        m["token_types"] = [ty.get(t, t) for t in m["token_types"]]
        m["tokens"] = {ent[k]: ty.get(v, v) for k, v in m["tokens"].items()}
        m["initial"] = {ent[k]: v for k, v in m["initial"].items()}
        for r in m["recipes"]:
            r["name"] = prim[r["name"]]
            for prm in r.get("params", []):
                prm["type"] = ty.get(prm["type"], prm["type"])
            for part in ("inputs", "outputs"):
                if part in r:
                    r[part] = {ent.get(k, k): v for k, v in r[part].items()}
            if "catalysts" in r:
                r["catalysts"] = [ent.get(c, c) for c in r["catalysts"]]
        m["goal"]["require"] = {ent[k]: v for k, v in m["goal"]["require"].items()}
        for c in m.get("constraints", []):
            c["tokens"] = [ent[t] for t in c["tokens"]]
    elif m["family"] == "schedule":
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
    else:
        raise ValueError(f"no renaming defined for family {m['family']!r}")
    return m


@dataclass(frozen=True)
class Replica:
    """A target replica: its mapping, its loaded world, and the base -> replica name maps.

    ``types`` maps token types (token_workshop) or machine kinds (schedule).
    """

    raw: dict
    world: World
    entities: dict[str, str]
    primitives: dict[str, str]
    types: dict[str, str] = field(default_factory=dict)

    def rename(self, raw: Mapping[str, Any]) -> dict:
        """Another mapping over the base's labels (a variant of the base) written in this replica's labels."""
        return rename_mapping(raw, self.entities, self.primitives, self.types)

    def translate(self, solution) -> tuple[str, ...]:
        """A base-world solution (rendered steps) written with the replica's names."""
        out = []
        for s in solution:
            name, _, rest = s.partition("(")
            args = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()]
            new = [a if a.isdigit() else self.entities[a] for a in args]
            out.append(f"{self.primitives.get(name, name)}({', '.join(new)})")
        return tuple(out)


def _fresh_names(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = "".join(rng.choice(_LETTERS) for _ in range(6))
        if name not in taken and name != "start":
            taken.add(name)
            out.append(name)
    return out


def _shuffled_dict(rng: random.Random, d: dict) -> dict:
    items = list(d.items())
    rng.shuffle(items)
    return dict(items)


def instantiate_replica(raw: Mapping[str, Any], seed: int, id_prefix: str = "R") -> Replica:
    """A replica of base mapping ``raw`` with fresh labels, shuffled order and a fresh id."""
    rng = random.Random(seed)
    base = world_from_mapping(dict(raw))
    ents = [e for e, _ in base.entities]
    prims = [p.name for p in base.primitives] if base.family == "token_workshop" else []
    kinds = list(raw.get("token_types", raw.get("machine_kinds", [])))
    taken = set(ents) | set(prims) | set(kinds) | set(base.entity_types)
    for r in raw.get("recipes", []):
        taken.update(p["name"] for p in r.get("params", []))
    fresh = _fresh_names(rng, len(ents) + len(prims) + len(kinds), taken)
    ent = dict(zip(ents, fresh))
    prim = dict(zip(prims, fresh[len(ents) :]))
    types = dict(zip(kinds, fresh[len(ents) + len(prims) :]))
    m = rename_mapping(raw, ent, prim, types)
    m["id"] = f"{id_prefix}-{rng.randrange(16**6):06x}"
    m["title"] = f"world {m['id']}"
    for key in ("tokens", "initial", "machines"):
        if key in m:
            m[key] = _shuffled_dict(rng, m[key])
    for key in ("recipes", "tasks", "constraints"):
        if key in m:
            rng.shuffle(m[key])
    return Replica(m, world_from_mapping(m), ent, prim, types)


@dataclass(frozen=True)
class Fingerprint:
    """Abstract, label-free summary of a world that F and C replicas must share."""

    family: str
    max_steps: int
    max_cost: int
    budget_extra: tuple
    constraint_count: int
    alphabet: int
    reachable_states: int
    edges: int
    solutions: int
    optimal_length: int | None
    signatures: tuple


def abstract_fingerprint(world: World, bounds: Bounds | None = None) -> Fingerprint:
    """The label-free fingerprint of ``world``."""
    enum = enumerate_solutions(world, bounds)
    sigs = Counter(motif_signature(world, s) for s in enum.solutions)
    graph = reachable_graph(world)
    return Fingerprint(
        world.family,
        world.budget.max_steps,
        world.budget.max_cost,
        world.budget.extra,
        len(world.spec.constraints),
        len(grounded_steps(world)),
        len(graph["nodes"]),
        len(graph["edges"]),
        len(enum.solutions),
        enum.optimal_length,
        tuple(sorted(sigs.items())),
    )


def copy_solves(demo_world: World, demo: tuple[str, ...], target: World) -> str | None:
    """Why ``demo`` (a solution of ``demo_world``) would solve ``target`` when copied, or None.

    Rejected when the demonstration or any of its prefixes is VALID in the
    target as written (a verbatim or truncated copy), or has the motif
    signature of some target solution (a renamed copy, possibly truncated).
    """
    target_sigs = {
        motif_signature(target, s) for s in enumerate_solutions(target).solutions
    }
    for k in range(len(demo), 0, -1):
        prefix = demo[:k]
        what = "the demonstration" if k == len(demo) else f"its first {k} step(s)"
        if check(target, "".join(s + "\n" for s in prefix)).status is Status.VALID:
            return f"{what}, copied verbatim, solve(s) the target"
        if motif_signature(demo_world, prefix) in target_sigs:
            return f"{what}, renamed, match(es) a target solution's motif signature"
    return None
