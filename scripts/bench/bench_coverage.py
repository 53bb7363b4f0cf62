"""Coverage of the candidate F - C intervals when replicas of one base are correlated.

    python scripts/bench/bench_coverage.py            # the full grid (a few minutes on one core)
    python scripts/bench/bench_coverage.py --quick    # a small grid, for a look in seconds

Data model, per grid point: ``bases`` bases of 3 replicas.  Each replica is one
(F, C) pair drawn from the cell probabilities

    P(both) = pF pC + theta (min(pF, pC) - pF pC),  P(F only) = pF - P(both),
    P(C only) = pC - P(both),                        P(neither) = 1 - P(F only) - P(C only) - P(both),

so theta = 0 makes F and C of one unit independent and theta = 1 makes them as
positively dependent as the margins allow.  Replicas of one base are
correlated by a shared draw: with probability rho every replica of the base
copies one (F, C) draw, otherwise each replica draws its own.  rho is the
intra-base correlation of F (and of C); the true F - C is pF - pC whatever rho.

Every candidate sees the same simulated data sets (``--sims`` per grid point,
numpy's default generator seeded from ``--seed`` and the grid point's index).
A data set is covered when low <= pF - pC <= high; the width is high - low.
The chosen method is the narrowest (by mean width over the grid) of those
whose coverage is at least ``--floor`` at every grid point and whose
interval has positive width on every table; every concordant table (no
discordant unit) is checked directly for every number of bases.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.core import paired  # noqa: E402
from benchmarks.core.stats import Interval  # noqa: E402

REPLICAS = 3
CONFIDENCE = 0.95
FLOOR = 0.93

RATES: tuple[tuple[float, float], ...] = ((0.5, 0.5), (0.9, 0.9), (0.7, 0.5), (0.6, 0.3), (0.95, 0.7))
THETAS: tuple[float, ...] = (0.0, 0.8)
RHOS: tuple[float, ...] = (0.0, 0.3, 0.7, 0.95)
BASES: tuple[int, ...] = (8, 16, 48)
SIMS = 2000
BOOTSTRAP_RESAMPLES = 999

QUICK_RATES: tuple[tuple[float, float], ...] = ((0.5, 0.5), (0.7, 0.5))
QUICK_THETAS: tuple[float, ...] = (0.8,)
QUICK_RHOS: tuple[float, ...] = (0.0, 0.95)
QUICK_BASES: tuple[int, ...] = (8, 16)
QUICK_SIMS = 300


@dataclass(frozen=True)
class Point:
    p_f: float
    p_c: float
    theta: float
    rho: float
    bases: int

    @property
    def truth(self) -> float:
        return self.p_f - self.p_c

    def cells(self) -> tuple[float, float, float, float]:
        both = self.p_f * self.p_c + self.theta * (min(self.p_f, self.p_c) - self.p_f * self.p_c)
        f_only, c_only = self.p_f - both, self.p_c - both
        return both, f_only, c_only, max(0.0, 1.0 - both - f_only - c_only)


@dataclass(frozen=True)
class Result:
    point: Point
    method: str
    coverage: float
    mean_width: float
    zero_width: int  # data sets on which the interval was a point


def simulate(point: Point, sims: int, seed: int) -> np.ndarray:
    """Per-base cell counts, shape (sims, bases, 4): both, F only, C only, neither."""
    rng = np.random.default_rng(seed)
    cells = np.asarray(point.cells())
    cells = cells / cells.sum()
    shared = rng.random((sims, point.bases)) < point.rho
    one = rng.choice(4, size=(sims, point.bases), p=cells)
    own = rng.choice(4, size=(sims, point.bases, REPLICAS), p=cells)
    category = np.where(shared[..., None], one[..., None], own)
    return np.stack([(category == k).sum(axis=2) for k in range(4)], axis=2)


def _as_bases(counts: np.ndarray) -> list[paired.BaseCounts]:
    return [paired.BaseCounts(i, int(row[0]), int(row[1]), int(row[2]), int(row[3])) for i, row in enumerate(counts)]


Method = Callable[[Sequence[paired.BaseCounts]], Interval]

# How a method's interval depends on the data: on the pooled table only
# ("pooled"; Newcombe, and Tango over base proportions when every base has 3
# replicas) or on the multiset of per-base tables ("bases").  Data sets with
# the same key share one computation.
POOLED, BASES_KEY = "pooled", "bases"


def _methods(seed: int) -> dict[str, tuple[Method, str]]:
    return {
        "newcombe (as used)": (lambda b: paired.newcombe_replica_interval(b, CONFIDENCE), POOLED),
        "newcombe method 10": (lambda b: paired.newcombe_replica_interval(b, CONFIDENCE, phi_correction=True), POOLED),
        "tango (base proportions)": (lambda b: paired.tango_base_interval(b, CONFIDENCE), POOLED),
        "tango (rao-scott deff)": (lambda b: paired.tango_rao_scott_interval(b, CONFIDENCE), BASES_KEY),
        "obuchowski (cluster wald)": (lambda b: paired.cluster_wald_interval(b, CONFIDENCE), BASES_KEY),
        # Bases handed over sorted, so that with a fixed seed the interval is a function of the multiset.
        "bootstrap (over bases)": (
            lambda b: paired.cluster_bootstrap_interval(b, CONFIDENCE, resamples=BOOTSTRAP_RESAMPLES, seed=seed),
            BASES_KEY,
        ),
    }


SHORT = ("newcombe used", "newcombe m10", "tango base", "tango rao-scott", "obuchowski", "bootstrap")


def evaluate(point: Point, sims: int, seed: int, only: Sequence[str] | None = None) -> list[Result]:
    """Coverage, mean width and point intervals of each method on ``sims`` data sets at ``point``."""
    data = simulate(point, sims, seed)
    methods = {name: spec for name, spec in _methods(seed).items() if only is None or name in only}
    caches: dict[str, dict[tuple, tuple[float, float]]] = {name: {} for name in methods}
    covered = dict.fromkeys(methods, 0)
    zero = dict.fromkeys(methods, 0)
    widths = dict.fromkeys(methods, 0.0)
    for counts in data:
        rows = sorted(tuple(int(v) for v in row) for row in counts)
        keys = {POOLED: tuple(sum(column) for column in zip(*rows)), BASES_KEY: tuple(rows)}
        bases = None
        for name, (method, kind) in methods.items():
            hit = caches[name].get(keys[kind])
            if hit is None:
                if bases is None:
                    bases = [paired.BaseCounts(i, *row) for i, row in enumerate(rows)]
                interval = method(bases)
                hit = caches[name][keys[kind]] = (interval.low, interval.high)
            low, high = hit
            covered[name] += low - 1e-9 <= point.truth <= high + 1e-9
            zero[name] += high - low <= 1e-12
            widths[name] += high - low
    return [Result(point, name, covered[name] / sims, widths[name] / sims, zero[name]) for name in methods]


def concordant_point_tables(bases: int) -> dict[str, bool]:
    """Per method: does every concordant table of ``bases`` bases of 3 replicas give a positive width?

    A concordant table has no discordant unit; only how many replicas succeed
    under both conditions in each base varies, and the methods see no more
    than the per-base counts, so the tables with base i holding ``k`` both-successes
    for k = 0..3 in every combination are all of them up to order: checked
    through every multiset of per-base counts.
    """
    from itertools import combinations_with_replacement

    ok = {name: True for name in _methods(0)}
    for combo in combinations_with_replacement(range(REPLICAS + 1), bases):
        table = [paired.BaseCounts(i, k, 0, 0, REPLICAS - k) for i, k in enumerate(combo)]
        for name, (method, _) in _methods(0).items():
            if ok[name]:
                interval = method(table)
                ok[name] = interval.high - interval.low > 1e-12
        if not any(ok.values()):
            break
    return ok


def grid(quick: bool) -> list[Point]:
    rates, thetas, rhos, bases = (
        (QUICK_RATES, QUICK_THETAS, QUICK_RHOS, QUICK_BASES) if quick else (RATES, THETAS, RHOS, BASES)
    )
    return [Point(f, c, t, r, m) for m in bases for (f, c) in rates for t in thetas for r in rhos]


def choose(results: Sequence[Result], positive: dict[str, bool], floor: float) -> tuple[str | None, dict[str, float]]:
    """The narrowest method that holds ``floor`` everywhere and never returns a point; and each method's minimum coverage."""
    names = list(dict.fromkeys(r.method for r in results))
    minimum = {name: min(r.coverage for r in results if r.method == name) for name in names}
    width = {name: float(np.mean([r.mean_width for r in results if r.method == name])) for name in names}
    qualified = [
        name
        for name in names
        if minimum[name] >= floor and positive[name] and not any(r.zero_width for r in results if r.method == name)
    ]
    return (min(qualified, key=lambda name: width[name]) if qualified else None), minimum


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small grid with few data sets")
    parser.add_argument("--sims", type=int, default=None, help=f"data sets per grid point (default {SIMS}, quick {QUICK_SIMS})")
    parser.add_argument("--seed", type=int, default=20261201, help="base seed; grid point i uses seed + i")
    parser.add_argument("--floor", type=float, default=FLOOR, help="coverage every grid point must reach")
    args = parser.parse_args(argv)
    sims = args.sims if args.sims is not None else (QUICK_SIMS if args.quick else SIMS)
    if sims < 1:
        parser.error(f"--sims must be a positive integer, got {sims}")
    if not 0.0 < args.floor < 1.0:
        parser.error(f"--floor must lie strictly between 0 and 1, got {args.floor}")
    started = time.perf_counter()
    points = grid(args.quick)
    results: list[Result] = []
    names = list(_methods(0))
    print(f"nominal {CONFIDENCE}, {REPLICAS} replicas per base, {sims} data sets per point, seed {args.seed}")
    print("coverage / mean width per method")
    header = f"{'bases':>5} {'pF':>5} {'pC':>5} {'theta':>5} {'rho':>5} | " + " | ".join(f"{s:>15}" for s in SHORT)
    print(header)
    print("-" * len(header))
    for index, point in enumerate(points):
        row = evaluate(point, sims, args.seed + index)
        results.extend(row)
        cells = " | ".join(f"{r.coverage:5.3f} / {r.mean_width:5.3f}" for r in row)
        print(f"{point.bases:>5} {point.p_f:>5.2f} {point.p_c:>5.2f} {point.theta:>5.1f} {point.rho:>5.2f} | {cells}", flush=True)
    positive = {name: True for name in names}
    for m in sorted({p.bases for p in points}):
        for name, ok in concordant_point_tables(m).items():
            positive[name] = positive[name] and ok
    chosen, minimum = choose(results, positive, args.floor)
    sizes = sorted({p.bases for p in points})
    print()
    print("per method: minimum coverage / mean width over the grid, by number of bases")
    print(f"{'method':<28} " + " ".join(f"{f'{m} bases':>15}" for m in sizes)
          + f" {'all: min cov':>12} {'mean width':>10} {'point intervals':>15} {'concordant tables':>17}")
    for name in names:
        mine = [r for r in results if r.method == name]
        by_size = " ".join(
            f"{min(r.coverage for r in mine if r.point.bases == m):6.3f} / "
            f"{np.mean([r.mean_width for r in mine if r.point.bases == m]):5.3f}"
            for m in sizes
        )
        print(
            f"{name:<28} {by_size} {minimum[name]:>12.3f} {np.mean([r.mean_width for r in mine]):>10.3f} "
            f"{sum(r.zero_width for r in mine):>15d} {'positive' if positive[name] else 'a point':>17}"
        )
    print()
    if chosen is None:
        best = max(names, key=lambda name: minimum[name])
        print(f"no method holds coverage {args.floor} everywhere with positive width; best minimum coverage: {best}")
    else:
        print(f"chosen: {chosen} (coverage >= {args.floor} at every point, positive width on every table)")
    print(f"time: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
