"""Intervals for a paired difference of success rates when the pairs come in clusters.

A unit is ``(base, first, second)``: the id of the cluster the unit belongs to
(in CWR the base pair whose replicas share world, motif and demonstrations),
success under the first condition (F) and under the second (C).  Every
function estimates p1 - p2, the difference of the two success rates, and
returns a :class:`benchmarks.core.stats.Interval`.

The candidates, compared by ``scripts/bench/bench_coverage.py``:

- :func:`newcombe_replica_interval`: Newcombe's hybrid score interval over the
  units as if they were independent pairs (the baseline; with or without
  method 10's correction of phi);
- :func:`tango_base_interval`: Tango's score interval with each base as one
  observation (base-level proportions);
- :func:`tango_rao_scott_interval`: Tango's score interval on the pooled
  table divided by its Rao-Scott design effect (between 1 and the base size);
- :func:`cluster_wald_interval`: the cluster-adjusted matched-pair Wald
  interval of Obuchowski (1998);
- :func:`cluster_bootstrap_interval`: a percentile bootstrap over bases.

Apart from the two noted below, everything here uses only the standard
library (``math``, ``statistics``), so a rescorer run under ``python -S -I``
can carry the same arithmetic: the baseline calls
:func:`benchmarks.core.stats.paired_difference_interval` and the bootstrap
draws its resamples with numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Hashable, Iterable, Sequence

from .stats import Interval, paired_difference_interval

__all__ = [
    "BaseCounts",
    "base_counts",
    "cluster_bootstrap_interval",
    "cluster_wald_interval",
    "design_effect",
    "mcnemar_exact",
    "newcombe_replica_interval",
    "replica_table",
    "tango_base_interval",
    "tango_interval",
    "tango_rao_scott_interval",
    "tango_statistic",
]

Unit = tuple[Hashable, object, object]


def _z(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class BaseCounts:
    """The 2x2 table of one base's replicas."""

    base: Hashable
    both: int  # replicas that succeed under both conditions
    first_only: int  # ... under the first (F) only
    second_only: int  # ... under the second (C) only
    neither: int

    def __post_init__(self) -> None:
        cells = (self.both, self.first_only, self.second_only, self.neither)
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in cells) or sum(cells) == 0:
            raise ValueError(f"base {self.base!r}: cell counts must be non-negative integers, not all 0, got {cells}")

    @property
    def replicas(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither

    @property
    def difference(self) -> int:
        """First-condition successes minus second-condition successes in this base."""
        return self.first_only - self.second_only


def _success(value: object, unit: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"unit {unit!r}: a success must be True/False or 1/0, got {value!r}")


def base_counts(units: Iterable[Unit]) -> list[BaseCounts]:
    """Per-base 2x2 tables of ``(base, first, second)`` units, bases in order of first appearance."""
    tables: dict[Hashable, list[int]] = {}
    for unit in units:
        if not isinstance(unit, (tuple, list)) or len(unit) != 3:
            raise ValueError(f"a unit must be a (base, first success, second success) triple, got {unit!r}")
        base, first, second = unit
        try:
            cells = tables.setdefault(base, [0, 0, 0, 0])
        except TypeError:
            raise ValueError(f"a base id must be hashable, got {base!r}") from None
        f, c = _success(first, unit), _success(second, unit)
        cells[(0 if c else 1) if f else (2 if c else 3)] += 1
    if not tables:
        raise ValueError("a paired difference needs at least one unit")
    return [BaseCounts(base, *cells) for base, cells in tables.items()]


def replica_table(bases: Sequence[BaseCounts]) -> tuple[int, int, int, int]:
    """The pooled 2x2 table (both, first only, second only, neither) over every unit."""
    return (
        sum(b.both for b in bases),
        sum(b.first_only for b in bases),
        sum(b.second_only for b in bases),
        sum(b.neither for b in bases),
    )


def _bases(data: Iterable[Unit] | Sequence[BaseCounts]) -> list[BaseCounts]:
    data = list(data)
    if data and all(isinstance(item, BaseCounts) for item in data):
        return data
    return base_counts(data)


# --------------------------------------------------------------------------- McNemar


def mcnemar_exact(first_only: int, second_only: int) -> float:
    """Two-sided exact McNemar p-value: twice the smaller binomial(b + c, 1/2) tail, at most 1.

    Only the discordant pairs count; with none the p-value is 1.
    """
    for value in (first_only, second_only):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"discordant counts must be non-negative integers, got {first_only!r}, {second_only!r}")
    n = first_only + second_only
    k = min(first_only, second_only)
    # P[X <= k] for X ~ Binomial(n, 1/2), summed exactly in integers.
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / (1 << n)) if n else 1.0  # integer ratio: exact for any n


# --------------------------------------------------------------------------- Tango


def _tango_args(b: float, c: float, n: float) -> None:
    for name, value in (("b", b), ("c", c), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"Tango needs finite numbers, got {name}={value!r}")
    if n <= 0 or b < 0 or c < 0 or b + c > n * (1 + 1e-12):
        raise ValueError(f"Tango needs n > 0, b >= 0, c >= 0 and b + c <= n, got b={b}, c={c}, n={n}")


def tango_statistic(b: float, c: float, n: float, delta: float) -> float:
    """Tango's (1998) score statistic for H0: p1 - p2 = ``delta``.

    ``b`` and ``c`` are the discordant counts (first only, second only) of ``n``
    pairs; they may be fractional (base-level proportions summed over bases).
    With q21 the restricted maximum-likelihood estimate of P(second only)
    under the null,

        Z(delta) = (b - c - n delta) / sqrt(n (2 q21 + delta (1 - delta)))
        q21 = (sqrt(B^2 - 4 A C) - B) / (2 A),
        A = 2n,  B = -b - c + (2n - b + c) delta,  C = -c delta (1 - delta).

    A zero variance gives +inf, -inf or 0 by the sign of the numerator.
    """
    _tango_args(b, c, n)
    if not -1.0 <= delta <= 1.0:
        raise ValueError(f"delta must lie in [-1, 1], got {delta}")
    return _tango_z(b, c, n, delta)


def _tango_z(b: float, c: float, n: float, delta: float) -> float:
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta
    c_ = -c * delta * (1.0 - delta)
    q21 = (math.sqrt(max(0.0, b_ * b_ - 4.0 * a_ * c_)) - b_) / (2.0 * a_)
    variance = n * (2.0 * q21 + delta * (1.0 - delta))
    numerator = b - c - n * delta
    if variance <= 1e-300:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def _bisect(b: float, c: float, n: float, low: float, high: float, target: float) -> float:
    """The delta in [low, high] where Z(delta) crosses ``target`` (Z decreases in delta)."""
    for _ in range(200):
        if high - low <= 1e-13:
            break
        mid = 0.5 * (low + high)
        if _tango_z(b, c, n, mid) > target:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def tango_interval(b: float, c: float, n: float, confidence: float = 0.95) -> Interval:
    """Tango's score interval for p1 - p2: every delta with |Z(delta)| < z.

    Limits are found by bisection to 1e-13.  With b = c = 0 the interval is
    [-z^2 / (n + z^2), z^2 / (n + z^2)], never a point.
    """
    _tango_args(b, c, n)
    z = _z(confidence)
    estimate = (b - c) / n
    lower = -1.0 if _tango_z(b, c, n, -1.0) <= z else _bisect(b, c, n, -1.0, estimate, z)
    upper = 1.0 if _tango_z(b, c, n, 1.0) >= -z else _bisect(b, c, n, estimate, 1.0, -z)
    return Interval(estimate, lower, upper, confidence, "tango-score")


def tango_base_interval(data: Iterable[Unit] | Sequence[BaseCounts], confidence: float = 0.95) -> Interval:
    """Tango's score interval over bases, each base one observation (base-level proportions).

    Base i with r_i replicas contributes f_i / r_i (its share of first-only
    replicas) to b and s_i / r_i (second-only share) to c; n is the number of
    bases.  The estimate (b - c) / n is the mean of the bases' differences in
    success rate, which is p1 - p2 when every base has the same number of
    replicas.  Treating each base as one pair ignores the information the
    replicas add when they are not perfectly correlated, so the interval errs
    on the wide side; when replicas of a base always agree it is exactly
    Tango's interval on the base-level data.
    """
    bases = _bases(data)
    b = math.fsum(base.first_only / base.replicas for base in bases)
    c = math.fsum(base.second_only / base.replicas for base in bases)
    interval = tango_interval(b, c, len(bases), confidence)
    return Interval(interval.estimate, interval.low, interval.high, confidence, "tango-score-base-proportions")


# --------------------------------------------------------------------------- the other candidates


def newcombe_replica_interval(
    data: Iterable[Unit] | Sequence[BaseCounts], confidence: float = 0.95, *, phi_correction: bool = False
) -> Interval:
    """Newcombe's hybrid score interval on the pooled table, every unit an independent pair (baseline).

    ``phi_correction`` as in :func:`benchmarks.core.stats.paired_difference_interval`:
    False is the interval CWR has used, True Newcombe's published method 10.
    """
    interval = paired_difference_interval(*replica_table(_bases(data)), confidence=confidence, phi_correction=phi_correction)
    name = "newcombe-method-10-per-replica" if phi_correction else "newcombe-per-replica"
    return Interval(interval.estimate, interval.low, interval.high, confidence, name)


def _estimate(bases: Sequence[BaseCounts]) -> tuple[float, int]:
    total = sum(base.replicas for base in bases)
    return sum(base.difference for base in bases) / total, total


def cluster_wald_interval(data: Iterable[Unit] | Sequence[BaseCounts], confidence: float = 0.95) -> Interval:
    """Obuchowski's (1998) cluster-adjusted Wald interval for a paired difference.

    With K bases, d_i the first-minus-second success count of base i, r_i its
    replicas, N their sum and D = sum(d_i) / N:

        var(D) = K / (K - 1) * sum_i (d_i - r_i D)^2 / N^2,   D +- z sqrt(var(D)), clipped to [-1, 1].

    Needs at least two bases.  A table whose bases all show d_i = r_i D (for
    instance no discordant unit at all) has zero variance: the interval is a point.
    """
    bases = _bases(data)
    if len(bases) < 2:
        raise ValueError(f"the cluster-adjusted interval needs at least two bases, got {len(bases)}")
    z = _z(confidence)
    estimate, total = _estimate(bases)
    k = len(bases)
    variance = k / (k - 1) * math.fsum((base.difference - base.replicas * estimate) ** 2 for base in bases) / total**2
    half = z * math.sqrt(variance)
    return Interval(estimate, max(-1.0, estimate - half), min(1.0, estimate + half), confidence, "obuchowski-cluster-wald")


def cluster_bootstrap_interval(
    data: Iterable[Unit] | Sequence[BaseCounts], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Interval:
    """Percentile bootstrap over bases: resample bases with replacement, recompute the pooled difference.

    Seeded (numpy's default generator with ``seed``); the limits are the
    (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of ``resamples``
    resampled differences (numpy's linear interpolation).  When every base
    has the same difference rate the interval is a point.
    """
    import numpy as np

    bases = _bases(data)
    _z(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    estimate, _ = _estimate(bases)
    diffs = np.array([base.difference for base in bases], dtype=float)
    sizes = np.array([base.replicas for base in bases], dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(bases), size=(resamples, len(bases)))
    values = diffs[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(values, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(estimate, float(low), float(high), confidence, "cluster-percentile-bootstrap")


def design_effect(data: Iterable[Unit] | Sequence[BaseCounts]) -> float:
    """Rao-Scott design effect of the pooled difference, clipped to [1, largest base size].

    The ratio of the cluster-adjusted variance of the pooled difference D
    (Obuchowski's, without the K / (K - 1) factor) to its variance if every
    unit were an independent pair:

        deff = sum_i (d_i - r_i D)^2 / (N v),   v = (b + c) / N - D^2,

    with b, c the pooled discordant counts and N the number of units.  With
    one base, or no variance among units (v = 0: no discordant unit, or all
    discordant one way), the replicas give no evidence of independence and
    deff is the largest base size.
    """
    bases = _bases(data)
    largest = max(base.replicas for base in bases)
    estimate, total = _estimate(bases)
    _, b, c, _ = replica_table(bases)
    unit_variance = (b + c) / total - estimate * estimate
    if len(bases) < 2 or unit_variance <= 1e-12:
        return float(largest)
    cluster = math.fsum((base.difference - base.replicas * estimate) ** 2 for base in bases)
    return min(float(largest), max(1.0, cluster / (total * unit_variance)))


def tango_rao_scott_interval(data: Iterable[Unit] | Sequence[BaseCounts], confidence: float = 0.95) -> Interval:
    """Tango's score interval on the pooled table divided by the Rao-Scott design effect.

    b, c and N are each divided by :func:`design_effect`, which lies between 1
    (replicas behave as independent pairs) and the base size (replicas always
    agree: the interval of the base-level data).
    """
    bases = _bases(data)
    deff = design_effect(bases)
    _, b, c, _ = replica_table(bases)
    total = sum(base.replicas for base in bases)
    interval = tango_interval(b / deff, c / deff, total / deff, confidence)
    return Interval(interval.estimate, interval.low, interval.high, confidence, "tango-score-rao-scott")
