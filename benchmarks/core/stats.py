"""Statistics shared by the protocols.

Every function takes plain numbers and returns a frozen result with the
quantities a rule or a report reads.  Degenerate inputs follow one policy,
stated at each function: a quantity that is mathematically undefined is NaN
(never a silent zero); the protocols decide what an undefined value means for
their rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = [
    "Anova",
    "Interval",
    "Pearson",
    "binomial_cdf",
    "binomial_sf",
    "clopper_pearson_interval",
    "f_sf_wilson_hilferty",
    "one_way_anova",
    "paired_difference_interval",
    "pearson",
    "proportion",
    "proportion_design_effect",
    "rule_of_three",
    "spearman",
    "wilson_interval",
]


def _scipy_stats():
    from scipy import stats  # imported on first use: it costs a noticeable share of process start-up

    return stats


#: ``ndtri(0.5 + c / 2)`` for the levels the preregistrations use, to the last bit (the stats tests compare
#: every entry with scipy): a run that needs only these levels never imports scipy.
_Z_OF_LEVEL = {0.9: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}


def _z(confidence: float) -> float:
    """The standard normal quantile at ``0.5 + confidence / 2``.

    ``scipy.special.ndtri`` is the function ``scipy.stats.norm.ppf`` evaluates (equal to the
    last bit), without importing ``scipy.stats``, which takes about a second of every protocol
    run that only needs a Wilson interval; the levels of :data:`_Z_OF_LEVEL` are read from it.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if confidence in _Z_OF_LEVEL:
        return _Z_OF_LEVEL[confidence]
    from scipy.special import ndtri

    return float(ndtri(0.5 + confidence / 2.0))


def _f_sf(f: float, df1: int, df2: int) -> float:
    """``P(F > f)`` for an F(df1, df2) variable: ``scipy.special.fdtrc``, the function ``scipy.stats.f.sf``
    evaluates inside its support (the stats tests compare the two to the last bit), with the support's ends
    as ``f.sf`` gives them, so that a run computing an ANOVA never imports ``scipy.stats``."""
    if f <= 0.0:
        return 1.0
    if math.isinf(f):
        return 0.0
    from scipy.special import fdtrc

    return float(fdtrc(df1, df2, f))


def _counts(k: int, n: int) -> None:
    if isinstance(k, bool) or isinstance(n, bool) or int(k) != k or int(n) != n:
        raise ValueError(f"counts must be integers, got k={k!r}, n={n!r}")
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")


# --------------------------------------------------------------------------- ANOVA


@dataclass(frozen=True)
class Anova:
    """One-way ANOVA of a numeric outcome across groups."""

    eta_squared: float  # SS_between / (SS_between + SS_within); 1 when within-group variance is 0
    f: float  # (SS_between / df_between) / (SS_within / df_within); inf when SS_within is 0
    df_between: int  # groups - 1
    df_within: int  # observations - groups
    p_exact: float  # upper tail of F(df_between, df_within) at f (scipy)
    p_wilson_hilferty: float  # the same tail by the Wilson-Hilferty cube-root normal approximation
    ss_between: float
    ss_within: float
    group_means: Mapping[str, float]
    n: int


def f_sf_wilson_hilferty(f: float, df1: int, df2: int) -> float:
    """Upper-tail probability of F(df1, df2) by the Wilson-Hilferty cube-root approximation.

    Each chi-square over its degrees of freedom is taken as the cube of a normal
    variable with mean 1 - 2/(9 df) and variance 2/(9 df); the difference of
    F^(1/3) times one and the other is then normal (Paulson's form).
    """
    if df1 <= 0 or df2 <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df1}, {df2}")
    if math.isinf(f):
        return 0.0
    if f < 0 or math.isnan(f):
        return math.nan
    a, b = 2.0 / (9.0 * df1), 2.0 / (9.0 * df2)
    cube = f ** (1.0 / 3.0)
    z = ((1.0 - b) * cube - (1.0 - a)) / math.sqrt(a + b * cube * cube)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def one_way_anova(groups: Mapping[str, Sequence[float]]) -> Anova:
    """One-way ANOVA of the values in ``groups`` (name -> observations).

    Needs at least two groups, each non-empty, and more observations than groups.
    When every value is equal, eta squared and F are undefined (NaN).
    """
    names = sorted(groups)
    arrays = [np.asarray(groups[name], dtype=float) for name in names]
    if len(arrays) < 2:
        raise ValueError(f"ANOVA needs at least two groups, got {len(arrays)}")
    empty = [name for name, values in zip(names, arrays) if values.size == 0]
    if empty:
        raise ValueError(f"ANOVA groups must be non-empty; empty: {', '.join(empty)}")
    if any(not np.all(np.isfinite(values)) for values in arrays):
        raise ValueError("ANOVA values must be finite numbers")
    n = int(sum(values.size for values in arrays))
    df_between, df_within = len(arrays) - 1, n - len(arrays)
    if df_within <= 0:
        raise ValueError(f"ANOVA needs more observations ({n}) than groups ({len(arrays)})")
    grand = float(np.concatenate(arrays).mean())
    ss_between = float(sum(values.size * (values.mean() - grand) ** 2 for values in arrays))
    ss_within = float(sum(((values - values.mean()) ** 2).sum() for values in arrays))
    total = ss_between + ss_within
    if total == 0.0:
        eta, f_value = math.nan, math.nan
    elif ss_within == 0.0:
        eta, f_value = 1.0, math.inf
    else:
        eta = ss_between / total
        f_value = (ss_between / df_between) / (ss_within / df_within)
    if math.isnan(f_value):
        p_exact = p_wh = math.nan
    else:
        p_exact = _f_sf(f_value, df_between, df_within)
        p_wh = f_sf_wilson_hilferty(f_value, df_between, df_within)
    return Anova(
        eta_squared=eta,
        f=f_value,
        df_between=df_between,
        df_within=df_within,
        p_exact=p_exact,
        p_wilson_hilferty=p_wh,
        ss_between=ss_between,
        ss_within=ss_within,
        group_means={name: float(values.mean()) for name, values in zip(names, arrays)},
        n=n,
    )


# --------------------------------------------------------------------------- correlation


@dataclass(frozen=True)
class Pearson:
    """Pearson correlation of y on x with the least-squares line y = intercept + slope x."""

    r: float
    r_squared: float
    slope: float
    intercept: float
    n: int


def _pair(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(f"x and y must be equal-length sequences, got {xs.shape} and {ys.shape}")
    if xs.size < 2:
        raise ValueError(f"correlation needs at least two pairs, got {xs.size}")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise ValueError("correlation values must be finite numbers")
    return xs, ys


def pearson(x: Sequence[float], y: Sequence[float]) -> Pearson:
    """Pearson r, r squared and the fitted line.

    A constant x leaves the slope and r undefined (NaN); a constant y (with
    varying x) gives slope 0 and an undefined r (NaN).
    """
    xs, ys = _pair(x, y)
    dx, dy = xs - xs.mean(), ys - ys.mean()
    sxx, syy, sxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    slope = sxy / sxx if sxx > 0 else math.nan
    intercept = float(ys.mean() - slope * xs.mean()) if sxx > 0 else math.nan
    r = sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan
    if not math.isnan(r):
        r = max(-1.0, min(1.0, r))
    return Pearson(r=r, r_squared=r * r, slope=slope, intercept=intercept, n=int(xs.size))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=float)
    sorted_values = values[order]
    start = 0
    while start < values.size:
        stop = start
        while stop + 1 < values.size and sorted_values[stop + 1] == sorted_values[start]:
            stop += 1
        ranks[order[start : stop + 1]] = (start + stop) / 2.0 + 1.0
        start = stop + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson r of the average ranks (ties share their mean rank)."""
    xs, ys = _pair(x, y)
    return pearson(_average_ranks(xs), _average_ranks(ys)).r


# --------------------------------------------------------------------------- proportions


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    confidence: float
    method: str


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for k successes in n trials."""
    _counts(k, n)
    z = _z(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    if k == 0:
        low = 0.0
    if k == n:
        high = 1.0
    return Interval(p, low, high, confidence, "wilson")


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Exact (Clopper-Pearson) interval from beta quantiles."""
    _counts(k, n)
    alpha = 1.0 - confidence
    _z(confidence)
    low = 0.0 if k == 0 else float(_scipy_stats().beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(_scipy_stats().beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Interval(k / n, low, high, confidence, "clopper-pearson")


PROPORTION_METHODS = ("wilson", "clopper-pearson")


def proportion_design_effect(clusters: Sequence[tuple[int, int]]) -> float:
    """Rao-Scott design effect of a pooled proportion over clusters, clipped to [1, largest cluster size].

    ``clusters`` holds (successes, units) per cluster.  With p = sum k_i / N
    the pooled share, the ratio of the cluster-robust variance of p to its
    binomial variance p (1 - p) / N is

        deff = sum_i (k_i - n_i p)^2 / (N p (1 - p))

    (no K / (K - 1) factor, as in :func:`benchmarks.core.paired.design_effect`).
    With one cluster, or p = 0 or 1 (no variance among units to measure the
    clustering by), the clusters give no evidence that their units are
    independent: deff is then the mean cluster size N / K, so that each
    cluster counts as one observation.
    """
    cells = [(k, n) for k, n in clusters]
    if not cells:
        raise ValueError("a clustered proportion needs at least one cluster")
    for k, n in cells:
        _counts(k, n)
    total = sum(n for _, n in cells)
    successes = sum(k for k, _ in cells)
    largest = max(n for _, n in cells)
    p = successes / total
    if len(cells) < 2 or successes in (0, total):
        return total / len(cells)
    spread = math.fsum((k - n * p) ** 2 for k, n in cells)
    return min(float(largest), max(1.0, spread / (total * p * (1.0 - p))))


def _wilson_bounds(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score bounds for an observed share p on a (possibly fractional, effective) sample size n."""
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if p == 0.0 else low), (1.0 if p == 1.0 else high)


def proportion(k: int, n: int, *, method: str = "wilson", confidence: float = 0.95,
               clusters: Sequence[tuple[int, int]] | None = None) -> dict[str, Any]:
    """A reported share with its interval, as JSON: ``{"k", "n", "value", "low", "high", "method", "confidence"}``.

    ``method`` is ``"wilson"`` (:func:`wilson_interval`) or ``"clopper-pearson"``
    (:func:`clopper_pearson_interval`).  With ``n == 0`` the share is undefined:
    value, low and high are None.  ``clusters`` ((successes, units) per
    cluster, summing to k and n) makes the Wilson interval cluster-aware: it is
    computed on the effective sample size n / deff, deff from
    :func:`proportion_design_effect` (Rao-Scott); the method is then
    ``"wilson-rao-scott"`` and the result also carries ``clusters``,
    ``design_effect`` and ``effective_n``.
    """
    if method not in PROPORTION_METHODS:
        raise ValueError(f"unknown interval method {method!r}; available: {', '.join(PROPORTION_METHODS)}")
    if isinstance(k, bool) or isinstance(n, bool) or int(k) != k or int(n) != n or n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"need integers 0 <= k <= n, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    out: dict[str, Any] = {"k": k, "n": n, "value": None, "low": None, "high": None, "confidence": confidence}
    if clusters is not None:
        cells = [(int(ck), int(cn)) for ck, cn in clusters]
        if method != "wilson":
            raise ValueError("a clustered proportion has a Wilson (Rao-Scott) interval only; use method='wilson'")
        if sum(c for c, _ in cells) != k or sum(c for _, c in cells) != n:
            raise ValueError(f"the clusters sum to {sum(c for c, _ in cells)} of {sum(c for _, c in cells)}, "
                             f"not the k={k} of n={n} given")
        out.update(method="wilson-rao-scott", clusters=len(cells), design_effect=None, effective_n=None)
        if n == 0:
            return out
        deff = proportion_design_effect([c for c in cells if c[1] > 0])
        low, high = _wilson_bounds(k / n, n / deff, _z(confidence))
        out.update(value=k / n, low=low, high=high, design_effect=deff, effective_n=n / deff)
        return out
    out["method"] = method
    if n == 0:
        _z(confidence)
        return out
    interval = (wilson_interval if method == "wilson" else clopper_pearson_interval)(k, n, confidence)
    out.update(value=interval.estimate, low=interval.low, high=interval.high)
    return out


def rule_of_three(n: int) -> float:
    """Approximate one-sided 95% upper bound, 3/n, on a rate after zero events in n trials."""
    if isinstance(n, bool) or int(n) != n or n <= 0:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return min(1.0, 3.0 / n)


def paired_difference_interval(
    both: int,
    first_only: int,
    second_only: int,
    neither: int,
    confidence: float = 0.95,
    *,
    phi_correction: bool = False,
) -> Interval:
    """Interval for p1 - p2 from paired binary outcomes (Newcombe's hybrid score, after method 10).

    ``both`` units succeed under both conditions, ``first_only`` under the first
    only, and so on; p1 = (both + first_only) / n and p2 = (both + second_only) / n.
    The Wilson intervals of the two margins are combined with a phi
    correlation of the 2x2 table (phi is 0 when a margin is empty).

    With the default ``phi_correction=False`` phi is the plain
    (ad - bc) / sqrt(product of the margins), as this suite has always
    computed it; the interval then shrinks to a point on a concordant table
    with both diagonal cells filled ((4, 0, 0, 4) gives [0, 0]).  With
    ``phi_correction=True`` phi is Newcombe's published method 10 (as worked
    in Altman et al., Statistics with Confidence, 2000): the numerator
    ad - bc is replaced by ad - bc - n/2 when ad - bc > n/2, by 0 when
    0 <= ad - bc <= n/2, and kept when negative.
    """
    cells = (both, first_only, second_only, neither)
    for cell in cells:
        if isinstance(cell, bool) or int(cell) != cell or cell < 0:
            raise ValueError(f"cell counts must be non-negative integers, got {cells}")
    n = sum(cells)
    if n == 0:
        raise ValueError("paired difference needs at least one pair")
    a, b, c, d = cells
    p1, p2 = (a + b) / n, (a + c) / n
    w1, w2 = wilson_interval(a + b, n, confidence), wilson_interval(a + c, n, confidence)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if phi_correction:
        cross = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
    phi = cross / math.sqrt(margins) if margins > 0 else 0.0
    delta = math.sqrt(max(0.0, (p1 - w1.low) ** 2 - 2 * phi * (p1 - w1.low) * (w2.high - p2) + (w2.high - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (w1.high - p1) ** 2 - 2 * phi * (w1.high - p1) * (p2 - w2.low) + (p2 - w2.low) ** 2))
    diff = p1 - p2
    method = "newcombe-method-10" if phi_correction else "newcombe-hybrid-score"
    return Interval(diff, max(-1.0, diff - delta), min(1.0, diff + epsilon), confidence, method)


def _log_pmf(i: int, n: int, p: float) -> float:
    if p == 0.0:
        return 0.0 if i == 0 else -math.inf
    if p == 1.0:
        return 0.0 if i == n else -math.inf
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)


def _tail(indices: range, n: int, p: float) -> float:
    logs = [_log_pmf(i, n, p) for i in indices]
    finite = [v for v in logs if v != -math.inf]
    if not finite:
        return 0.0
    top = max(finite)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in finite))


def _binomial_args(k: int, n: int, p: float) -> None:
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if isinstance(k, bool) or int(k) != k:
        raise ValueError(f"k must be an integer, got {k!r}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")


def binomial_sf(k: int, n: int, p: float) -> float:
    """P[X >= k] for X ~ Binomial(n, p) (the upper tail, k included)."""
    _binomial_args(k, n, p)
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return _tail(range(k, n + 1), n, p)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P[X <= k] for X ~ Binomial(n, p) (the lower tail, k included)."""
    _binomial_args(k, n, p)
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return _tail(range(0, k + 1), n, p)
