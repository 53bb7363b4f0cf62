"""Confidence intervals for variance-explained effect sizes, and a stratified bootstrap over units.

Two families:

* **Noncentral-F inversion** (:func:`noncentrality_interval`,
  :func:`eta_squared_interval`, :func:`r_squared_interval`).  Under the
  fixed-effects normal model an observed F with (df1, df2) degrees of freedom
  follows a noncentral F with noncentrality lambda = N f^2, N = df1 + df2 + 1
  observations and f^2 = eta^2 / (1 - eta^2).  The interval for lambda is
  every value the observed F does not reject at level 1 - confidence, split
  equally over the two tails (Steiger and Fouladi 1997; Steiger 2004): the
  lower limit solves ``ncf.cdf(F; df1, df2, lambda) = (1 + confidence) / 2``,
  the upper ``... = (1 - confidence) / 2``, each 0 when even lambda = 0 gives
  less.  The limits map to eta^2 = lambda / (lambda + N).  A one-way ANOVA of
  k groups gives df1 = k - 1, df2 = N - k; a simple regression with one
  predictor held fixed gives df1 = 1, df2 = N - 2 and F = R^2 (N - 2) / (1 - R^2).

* **Stratified bootstrap** (:func:`stratified_indices`, :func:`eta_squared_rows`,
  :func:`r_squared_rows`, :func:`percentile_interval`): resample units with
  replacement within each stratum, so every resample keeps the strata sizes;
  a statistic is computed for every resample at once (one row each) and the
  percentile interval is read from those values.  Applying the same index
  matrix to two aligned data sets gives the paired bootstrap of a difference.

Every function returns :class:`benchmarks.core.stats.Interval` (or arrays), is
deterministic for a given seed, and raises ``ValueError`` with one line on bad
input.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from .stats import Interval

__all__ = [
    "eta_squared_interval",
    "eta_squared_rows",
    "noncentrality_interval",
    "percentile_interval",
    "r_squared_interval",
    "r_squared_rows",
    "stratified_indices",
]


def _confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return float(confidence)


def _dfs(df1: float, df2: float) -> None:
    for name, value in (("df1", df1), ("df2", df2)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive number of degrees of freedom, got {value!r}")


# --------------------------------------------------------------------------- noncentral F


def _cdf(f: float, df1: float, df2: float, nc: float) -> float:
    from scipy import stats

    if nc <= 0.0:
        return float(stats.f.cdf(f, df1, df2))
    return float(stats.ncf.cdf(f, df1, df2, nc))


def _solve(f: float, df1: float, df2: float, target: float) -> float:
    """The noncentrality at which ``cdf(f; df1, df2, nc) = target`` (the cdf falls as nc grows); 0 when none is positive."""
    from scipy.optimize import brentq

    if _cdf(f, df1, df2, 0.0) <= target:
        return 0.0
    high = max(10.0, 2.0 * f * df1)
    while _cdf(f, df1, df2, high) > target:
        high *= 2.0
        if high > 1e9:
            raise ValueError(f"no noncentrality below 1e9 reaches cdf {target} at F = {f} ({df1}, {df2})")
    return float(brentq(lambda nc: _cdf(f, df1, df2, nc) - target, 0.0, high, xtol=1e-10, rtol=1e-12, maxiter=500))


def noncentrality_interval(f: float, df1: float, df2: float, confidence: float = 0.95) -> tuple[float, float]:
    """The (lower, upper) limits for the noncentrality lambda of an observed F(df1, df2) statistic."""
    confidence = _confidence(confidence)
    _dfs(df1, df2)
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f < 0:
        raise ValueError(f"F must be a finite non-negative number, got {f!r}")
    lower = _solve(float(f), df1, df2, (1.0 + confidence) / 2.0)
    upper = _solve(float(f), df1, df2, (1.0 - confidence) / 2.0)
    return lower, upper


def _variance_share(nc: float, n: float) -> float:
    return nc / (nc + n)


def eta_squared_interval(f: float, df1: float, df2: float, confidence: float = 0.95) -> Interval:
    """Eta squared of a one-way (fixed-effects) ANOVA with its noncentral-F interval.

    The estimate is F df1 / (F df1 + df2) = SS_between / SS_total; the limits
    are lambda / (lambda + N), N = df1 + df2 + 1, at the limits of
    :func:`noncentrality_interval`.
    """
    low, high = noncentrality_interval(f, df1, df2, confidence)
    n = df1 + df2 + 1
    estimate = f * df1 / (f * df1 + df2)
    return Interval(estimate, _variance_share(low, n), _variance_share(high, n), confidence, "noncentral-f")


def r_squared_interval(r_squared: float, n: int, confidence: float = 0.95) -> Interval:
    """R squared of a simple regression (one predictor, held fixed) with its noncentral-F interval.

    F = R^2 (n - 2) / (1 - R^2) on (1, n - 2) degrees of freedom; the limits
    are lambda / (lambda + n).  R^2 = 1 (a perfect fit) has no finite F: the
    interval is then [1, 1].
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 3:
        raise ValueError(f"an R^2 interval needs at least 3 observations, got n={n!r}")
    if isinstance(r_squared, bool) or not isinstance(r_squared, (int, float)) or not 0.0 <= r_squared <= 1.0:
        raise ValueError(f"R^2 must be a number in [0, 1], got {r_squared!r}")
    confidence = _confidence(confidence)
    if r_squared >= 1.0:
        return Interval(1.0, 1.0, 1.0, confidence, "noncentral-f")
    f = r_squared * (n - 2) / (1.0 - r_squared)
    low, high = noncentrality_interval(f, 1, n - 2, confidence)
    return Interval(float(r_squared), _variance_share(low, n), _variance_share(high, n), confidence, "noncentral-f")


# --------------------------------------------------------------------------- stratified bootstrap


def stratified_indices(strata: Sequence[Hashable], resamples: int, seed: int) -> np.ndarray:
    """A (resamples, n) matrix of unit indices, each row drawn with replacement within every stratum.

    Column j of every row belongs to the stratum of unit j, so the strata
    sizes and positions are those of the data.  numpy's default generator,
    seeded with ``seed``; strata are drawn in order of first appearance.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    strata = list(strata)
    if not strata:
        raise ValueError("a bootstrap needs at least one unit")
    members: dict[Hashable, list[int]] = {}
    for index, stratum in enumerate(strata):
        members.setdefault(stratum, []).append(index)
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, len(strata)), dtype=np.int64)
    for columns in members.values():
        pool = np.asarray(columns, dtype=np.int64)
        out[:, pool] = pool[rng.integers(0, len(pool), size=(resamples, len(pool)))]
    return out


def eta_squared_rows(values: np.ndarray, strata: Sequence[Hashable]) -> np.ndarray:
    """SS_between / SS_total of every row of ``values`` (rows x units), groups given per column by ``strata``.

    A row with no variance at all gives NaN.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[1] != len(strata):
        raise ValueError(f"values must be rows x {len(strata)} units, got shape {values.shape}")
    grand = values.mean(axis=1, keepdims=True)
    ss_total = ((values - grand) ** 2).sum(axis=1)
    ss_between = np.zeros(values.shape[0])
    labels = list(strata)
    for stratum in dict.fromkeys(labels):
        columns = [j for j, s in enumerate(labels) if s == stratum]
        group = values[:, columns]
        ss_between += len(columns) * (group.mean(axis=1) - grand[:, 0]) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ss_total > 0, ss_between / np.where(ss_total > 0, ss_total, 1.0), np.nan)


def r_squared_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r squared of every row pair of ``x`` and ``y`` (rows x units); NaN where either row is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"x and y must be matrices of one shape, got {x.shape} and {y.shape}")
    dx = x - x.mean(axis=1, keepdims=True)
    dy = y - y.mean(axis=1, keepdims=True)
    sxx, syy, sxy = (dx * dx).sum(axis=1), (dy * dy).sum(axis=1), (dx * dy).sum(axis=1)
    ok = (sxx > 0) & (syy > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, sxy * sxy / np.where(ok, sxx * syy, 1.0), np.nan)


def percentile_interval(estimate: float, draws: np.ndarray, confidence: float = 0.95,
                        method: str = "percentile-bootstrap") -> Interval:
    """The (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of the finite ``draws`` (numpy's linear
    interpolation) around ``estimate``; NaN limits when fewer than half the draws are finite."""
    confidence = _confidence(confidence)
    draws = np.asarray(draws, dtype=float)
    finite = draws[np.isfinite(draws)]
    if draws.size == 0 or finite.size * 2 < draws.size:
        return Interval(estimate, math.nan, math.nan, confidence, method)
    alpha = 1.0 - confidence
    low, high = np.quantile(finite, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(estimate, float(low), float(high), confidence, method)
