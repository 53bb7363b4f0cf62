"""Coverage of two 95% intervals for eta squared at P-Zombie's planned size (4 categories x 20 prompts).

``python scripts/bench/bench_eta_interval.py [--datasets N] [--resamples R] [--seed S]`` simulates
one-way normal layouts with category means d x (-1.5, -0.5, 0.5, 1.5) and unit noise, d set for each row's
population eta squared, and prints how often each interval covers it: the noncentral-F inversion the
protocol reports, and the percentile bootstrap over prompts stratified by category (the alternative it
did not choose).  Seeded; the README quotes one run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a file: the suite is imported from the checkout that holds this script
    sys.path.insert(0, str(REPO))

from benchmarks.core.effect_intervals import (  # noqa: E402
    eta_squared_interval,
    eta_squared_rows,
    percentile_interval,
    stratified_indices,
)
from benchmarks.core.stats import one_way_anova  # noqa: E402

PATTERN = np.array([-1.5, -0.5, 0.5, 1.5])
ETAS = (0.02, 0.05, 0.10, 0.15, 0.30)


def coverage(eta2: float, datasets: int, resamples: int, seed: int) -> dict[str, float]:
    strata = [c for c in range(len(PATTERN)) for _ in range(20)]
    labels = np.array(strata)
    shift = np.repeat(PATTERN, 20) * math.sqrt(eta2 / (1 - eta2) / float(np.mean(PATTERN**2)))
    rng = np.random.default_rng(seed)
    hits = {"noncentral-f": 0, "bootstrap": 0}
    widths = {"noncentral-f": 0.0, "bootstrap": 0.0}
    for k in range(datasets):
        h = shift + rng.standard_normal(len(strata))
        anova = one_way_anova({str(c): list(h[labels == c]) for c in range(len(PATTERN))})
        exact = eta_squared_interval(anova.f, anova.df_between, anova.df_within)
        draws = eta_squared_rows(h[stratified_indices(strata, resamples, seed + k + 1)], strata)
        boot = percentile_interval(anova.eta_squared, draws)
        for name, iv in (("noncentral-f", exact), ("bootstrap", boot)):
            hits[name] += iv.low <= eta2 <= iv.high
            widths[name] += iv.high - iv.low
    return {f"{name} {what}": (hits[name] if what == "coverage" else widths[name]) / datasets
            for name in hits for what in ("coverage", "mean width")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench/bench_eta_interval.py", description=__doc__)
    parser.add_argument("--datasets", type=int, default=300)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    if args.datasets < 1 or args.resamples < 1 or args.seed < 0:
        parser.error("--datasets and --resamples must be positive and --seed non-negative")
    print(f"{args.datasets} data sets per row, {args.resamples} bootstrap resamples, seed {args.seed}")
    rows = [(eta, coverage(eta, args.datasets, args.resamples, args.seed)) for eta in ETAS]
    columns = list(rows[0][1])
    print("| population eta^2 | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for eta, found in rows:
        print(f"| {eta:.2f} | " + " | ".join(f"{found[c]:.3f}" for c in columns) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
