"""Fiction-CWR: the units of a run (P, R and E items, then both sides of every pair) and its F/C material."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from benchmarks.core import sha256_bytes
from benchmarks.core.protocol import UsageProblem
from fixtures.cwr import build_cwr_items, resolve_control_world

from .pairs import side_motif, synthesis_pairs, target_ref
from .prompts import control_prompt
from .spec import CONTROL_CONDITIONS, PAIR_SETS, PREREG, SYNTHESIS_CONDITIONS, Unit, base_pair
from .splits import generated_split


def spread(rows: Sequence[Any], n: int | None) -> list[Any]:
    """``n`` rows evenly spaced over ``rows`` (all when n is None or not smaller)."""
    if n is None or n >= len(rows):
        return list(rows)
    if n == 1:
        return [rows[0]]
    return [rows[round(i * (len(rows) - 1) / (n - 1))] for i in range(n)]


def check_pair_set(name: str) -> str:
    if name not in PAIR_SETS:
        raise UsageProblem(f"unknown pair set {name!r}; available: {', '.join(PAIR_SETS)}")
    return name


def run_pairs(split: str | None = None, seed_file: str | None = None) -> tuple[Any, ...]:
    """The pairs a run measures: every showcase pair and its replicas (the preregistered pair set), or with
    ``split`` every pair of that preregistered split (a committed split's seed read from ``seed_file`` or the
    environment; see :mod:`benchmarks.cwr.splits`)."""
    if split is not None:
        return generated_split(split, seed_file).pairs
    spec = PREREG.values.measurement
    check_pair_set(spec.pair_set)
    return synthesis_pairs(spec.replicas_per_pair)



def split_controls(pairs: Sequence[Any], seed: int) -> dict[str, list[dict[str, Any]]]:
    """The P/R/E items of a split run: built on both targets of every base pair of the split (a replica is its
    base relabelled), so every world the run scores is probed."""
    return build_cwr_items(seed, [p for p in pairs if base_pair(p.pair_id) == p.pair_id])


def build_units(items: Mapping[str, Sequence[Mapping[str, Any]]], pairs: Sequence[Any],
                per_condition: int | None, control_pairs: Sequence[Any] | None = None) -> list[Unit]:
    """Every unit of the run in a fixed order: P, R and E items, then the F side and the C side of each pair.

    ``control_pairs``: the pairs the P/R/E items were built on, where they are not ``pairs`` (a diagnostic arm
    changes the F/C targets, never the controls)."""
    units: list[Unit] = []
    for condition in CONTROL_CONDITIONS:
        for item in spread(items[condition], per_condition):
            _, world, raw, side = resolve_control_world(item["world_ref"],
                                                        pairs if control_pairs is None else control_pairs)
            units.append(Unit(item["item_id"], condition, item["kind"], None, item["world_ref"], world.family,
                              control_prompt(item, world, raw, side), item["expected"],
                              item["context"] if condition == "E" else None))
    chosen = spread(list(pairs), per_condition)
    for condition in SYNTHESIS_CONDITIONS:
        for pair in chosen:
            side = pair.side(condition)
            units.append(Unit(f"{condition}:{pair.pair_id}", condition, "synthesis", pair.pair_id,
                              target_ref(pair, condition), side.target.family, side.prompt_text, None,
                              target=side.target, motif=side_motif(pair, condition)))
    return units


def pair_rows(pairs: Sequence[Any]) -> list[dict[str, Any]]:
    """What a run's F/C material is, pair by pair: its targets and the sha256 of both prompt bodies."""
    return [{"pair_id": p.pair_id, "family": p.family, "novelty": p.novelty, "flags": list(p.flags),
             "f_target": p.f.target.id, "c_target": p.c.target.id,
             "f_prompt_sha256": sha256_bytes(p.f.prompt_text.encode("utf-8")),
             "c_prompt_sha256": sha256_bytes(p.c.prompt_text.encode("utf-8"))} for p in pairs]


