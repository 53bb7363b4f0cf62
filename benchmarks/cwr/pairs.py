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


@functools.lru_cache(maxsize=4)
def synthesis_pairs(replicas_per_pair: int) -> tuple[Any, ...]:
    """Every showcase pair with ``replicas_per_pair - 1`` further replicas each, in spec order then replica order."""
    if replicas_per_pair < 1:
        raise ValueError(f"replicas_per_pair must be at least 1, got {replicas_per_pair}")
    showcase = worlds.build_showcase_pairs(token_counts=False)
    paths = worlds.pair_spec_paths()
    out = []
    for pair, path in zip(showcase, paths, strict=True):
        out.append(pair)
        spec = worlds.load_pair_spec(path)
        for k in range(1, replicas_per_pair):
            variant = dataclasses.replace(spec, pair_id=replica_id(spec.pair_id, k),
                                          f_seed=spec.f_seed + REPLICA_STRIDE * k,
                                          c_seed=spec.c_seed + REPLICA_STRIDE * k)
            out.append(worlds.build_pair(variant)[0])
    return tuple(out)
