"""The F/C pairs a run measures: every showcase pair and its seeded target replicas.

Replica 0 of a pair is the showcase pair itself (``worlds.build_showcase_pairs``).
Replica k > 0 rebuilds the same pair spec with fresh F and C replica seeds
(``f_seed + REPLICA_STRIDE * k``, ``c_seed + REPLICA_STRIDE * k``) through
``worlds.build_pair``: new labels, declaration order and ids on both sides,
with every audit of the pair construction run again.  Prompt bodies are the
pairs' own ``prompt_text``, used verbatim.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import worlds

#: Novelty label of a pair whose every bounded target solution needs the withheld motif.
MOTIF_REQUIRED = "motif-required"
#: Offset between the replica seeds of successive replicas of one pair spec.
REPLICA_STRIDE = 7919


def replica_id(pair_id: str, k: int) -> str:
    return pair_id if k == 0 else f"{pair_id}~r{k}"


#: Prefix of the flag an arm sets on the pairs it changes (``arm:<name>``; benchmarks.cwr.arms).
ARM_FLAG = "arm:"


def target_ref(pair: Any, condition: str) -> str:
    """The world ref of a pair side's target as F/C units and grading name it: ``pair:<id>:<F|C>``, with
    ``@<arm>`` after it when a diagnostic arm changed the target (the control items keep the plain ref)."""
    arm = next((flag[len(ARM_FLAG):] for flag in pair.flags if flag.startswith(ARM_FLAG)), None)
    return f"pair:{pair.pair_id}:{condition}" + ("" if arm is None else f"@{arm}")


def replica_index(pair_id: str) -> int:
    """The replica index of a pair id (``PAIR-X~r2`` -> 2; a base pair is replica 0)."""
    _, marker, k = pair_id.partition("~r")
    return int(k) if marker and k.isdigit() else 0


def further_replicas(spec: Any, replicas: int) -> list[Any]:
    """Replicas 1..replicas-1 of a pair spec (a showcase spec or a generated base's pinned spec): the spec rebuilt
    through ``worlds.build_pair`` with replica seeds offset by ``k * REPLICA_STRIDE``."""
    out = []
    for k in range(1, replicas):
        variant = dataclasses.replace(spec, pair_id=replica_id(spec.pair_id, k),
                                      f_seed=spec.f_seed + REPLICA_STRIDE * k,
                                      c_seed=spec.c_seed + REPLICA_STRIDE * k)
        out.append(worlds.build_pair(variant)[0])
    return out


@functools.lru_cache(maxsize=4)
def synthesis_pairs(replicas_per_pair: int) -> tuple[Any, ...]:
    """Every showcase pair with ``replicas_per_pair - 1`` further replicas each, in spec order then replica order."""
    if replicas_per_pair < 1:
        raise ValueError(f"replicas_per_pair must be at least 1, got {replicas_per_pair}")
    showcase = worlds.build_showcase_pairs(token_counts=False)
    paths = worlds.pair_spec_paths()
    out = []
    for pair, path in zip(showcase, paths, strict=True):
        out += [pair, *further_replicas(worlds.load_pair_spec(path), replicas_per_pair)]
    return tuple(out)


def _edge_text(edge: tuple[str, str, str]) -> str:
    return f"{edge[0]} -{edge[1]}-> {edge[2]}"


@functools.lru_cache(maxsize=1)
def showcase_interchangeable() -> dict[str, tuple[str, ...]]:
    """Showcase pair id -> the edges of its C demonstration that are interchangeable with the withheld motif in
    the target's bounded solution set (``worlds.interchangeable_edges``); a property of the base pair, so every
    replica of it shares the entry."""
    out = {}
    for path in worlds.pair_spec_paths():
        pair, facts = worlds.build_pair(worlds.load_pair_spec(path))
        demo = pair.c.demonstrations[0]
        edges = worlds.interchangeable_edges(facts["base"], facts["target_enum"].solutions, facts["motif"],
                                             facts["source_worlds"]["C"], demo.base_steps)
        out[pair.pair_id] = tuple(_edge_text(e) for e in edges)
    return out


def side_motif(pair: Any, condition: str) -> tuple[str, str, str]:
    """The pair's withheld motif, a production edge ``(producer, relation, consumer)`` in the base's labels,
    written in the labels of the pair's ``condition`` target (the relation is not a label)."""
    replica = pair.side(condition).replica
    names = {**replica.entities, **replica.primitives}
    producer, relation, consumer = pair.motif
    return names.get(producer, producer), relation, names.get(consumer, consumer)


def base_id(pair_id: str) -> str:
    """The base pair of a replica id (``<base>~r<k>``)."""
    return pair_id.split("~r", 1)[0]


def interchangeable_of(pairs: tuple[Any, ...] | list[Any]) -> dict[str, tuple[str, ...]]:
    """Pair id -> interchangeable edges of its base (generated bases carry them in their manifest; the generator
    refuses such C demonstrations, so the entry is empty there)."""
    manifests = {p.pair_id: p.manifest for p in pairs}
    showcase = None
    out = {}
    for pair in pairs:
        base = manifests.get(base_id(pair.pair_id)) or {}
        if "interchangeable_edges" in base:
            out[pair.pair_id] = tuple(base["interchangeable_edges"])
        else:
            showcase = showcase if showcase is not None else showcase_interchangeable()
            out[pair.pair_id] = showcase[base_id(pair.pair_id)]
    return out


def pair_subsets(pairs: tuple[Any, ...] | list[Any]) -> dict[str, list[str]]:
    """The pair subsets the secondary deficits are reported on (no rule reads them), each a sorted id list:

    * ``motif_required``: every bounded target solution needs the withheld motif;
    * ``exposure_matched``: the F and C demonstrations use the same primitives equally often (the base
      manifest's ``primitive_exposure_matched``);
    * ``without_interchangeable``: no edge of the C demonstration is interchangeable with the motif.
    """
    inter = interchangeable_of(pairs)
    manifests = {p.pair_id: p.manifest for p in pairs}  # a replica's audits are its base's (replica 0)
    return {
        "motif_required": sorted(p.pair_id for p in pairs if p.novelty == MOTIF_REQUIRED),
        "exposure_matched": sorted(p.pair_id for p in pairs
                                   if (manifests.get(base_id(p.pair_id)) or {}).get("primitive_exposure_matched") is True),
        "without_interchangeable": sorted(p.pair_id for p in pairs if not inter[p.pair_id]),
    }
