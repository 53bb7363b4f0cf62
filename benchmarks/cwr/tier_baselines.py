"""Greedy, random and copy baseline solve rates per difficulty tier on generated pairs.

    python -m benchmarks.cwr.tier_baselines --seed 2026 --n 6 [--samples 200] [--family schedule]

Generates ``n`` pairs per tier with ``worlds.generate_pairs`` (family
``token_workshop`` unless ``--family`` says otherwise) and runs the baselines
of ``benchmarks.cwr.baselines`` on both targets (F and C) of every pair. A
target counts as solved by greedy when its greedy run is VALID, by copy when
some demonstration (or window), copied verbatim, renamed, relabelled or
reordered, solves it; the random rate is VALID samples over all samples.
Tiers the generator cannot draw for the family (``worlds.GENERATED_TIERS``;
today every family it draws has T1-T3) are not generated and are listed under
``tiers_not_drawn``. Prints one JSON object: per tier and overall, targets,
greedy and copy solves and rates, the random rate, and the tier properties'
ranges.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import worlds

from .baselines import side_baselines


def baseline_counts(pairs, samples: int, seed: int) -> dict[str, int]:
    """Targets (F and C of every pair), greedy and copy solves, and random VALID samples over all samples."""
    row = {"targets": 0, "greedy": 0, "copy": 0, "random_valid": 0, "random_samples": 0}
    for pair in pairs:
        for side in (pair.f, pair.c):
            outcome = side_baselines(side, samples, seed)
            row["targets"] += 1
            row["greedy"] += outcome.greedy_status == "VALID"
            row["copy"] += bool(outcome.copy_solves)
            row["random_valid"] += outcome.random_valid
            row["random_samples"] += outcome.random_samples
    return row


def tier_rates(seed: int, n: int, samples: int, tiers=worlds.TIERS, family: str = "token_workshop") -> dict[str, Any]:
    """Baseline outcomes per tier (see the module docstring)."""
    if family not in worlds.GENERATED_FAMILIES:
        raise worlds.WorldsError(f"the generator has no family {family!r}; it draws: "
                                 f"{', '.join(worlds.GENERATED_FAMILIES)}")
    drawn = worlds.GENERATED_TIERS[family]
    out: dict[str, Any] = {"family": family, "seed": seed, "pairs_per_tier": n, "random_samples_per_target": samples,
                           "tiers": {}, "tiers_not_drawn": [t for t in tiers if t not in drawn]}
    total = {"targets": 0, "greedy": 0, "copy": 0, "random_valid": 0, "random_samples": 0}
    for tier in (t for t in tiers if t in drawn):
        res = worlds.generate_pairs(family, seed, n, tier)
        row = baseline_counts(res.pairs, samples, seed)
        props: dict[str, list] = {}
        for pair in res.pairs:
            for k, v in pair.manifest["tier"]["properties"].items():
                props.setdefault(k, []).append(v)
        for k in total:
            total[k] += row[k]
        out["tiers"][tier] = {**_rates(row), "property_ranges": {k: [min(v), max(v)] for k, v in sorted(props.items())},
                              "draws": res.draws, "rejections": dict(sorted(res.rejections.items()))}
    out["overall"] = _rates(total)
    return out


def _rates(row: dict[str, int]) -> dict[str, Any]:
    t = row["targets"]
    return {**row, "greedy_rate": row["greedy"] / t if t else None, "copy_rate": row["copy"] / t if t else None,
            "random_rate": row["random_valid"] / row["random_samples"] if row["random_samples"] else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cwr.tier_baselines")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--family", default="token_workshop", choices=worlds.GENERATED_FAMILIES)
    a = ap.parse_args(argv)
    print(json.dumps(tier_rates(a.seed, a.n, a.samples, family=a.family), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
