"""Noncentral-F intervals for eta squared and R squared, and the stratified bootstrap (benchmarks.core.effect_intervals).

The inversion is checked against a brute-force scan of scipy's ``ncf.cdf`` and
by its coverage on simulated one-way layouts and regressions of known effect
size; the bootstrap by its determinism, its strata, its statistics against
scipy and its coverage of a known zero difference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from benchmarks.core.effect_intervals import (
    eta_squared_interval,
    eta_squared_rows,
    noncentrality_interval,
    percentile_interval,
    r_squared_interval,
    r_squared_rows,
    stratified_indices,
)
from benchmarks.core.stats import one_way_anova


def brute_force_limit(f: float, df1: float, df2: float, target: float) -> float:
    """The smallest noncentrality on a grid of step 0.001 whose cdf at ``f`` is at most ``target`` (0 if lambda = 0 is)."""
    grid = np.arange(0.0, 200.0, 0.001)
    cdf = np.where(grid == 0.0, scipy_stats.f.cdf(f, df1, df2), scipy_stats.ncf.cdf(f, df1, df2, np.maximum(grid, 1e-300)))
    below = np.nonzero(cdf <= target)[0]
    return float(grid[below[0]])


@pytest.mark.parametrize("f,df1,df2", [(10.342, 3, 76), (5.337, 3, 76), (2.5, 3, 76), (4.0, 1, 78), (1.2, 2, 20)])
def test_noncentrality_limits_are_the_roots_of_scipys_noncentral_f_cdf(f: float, df1: int, df2: int) -> None:
    low, high = noncentrality_interval(f, df1, df2, 0.95)
    assert low == pytest.approx(brute_force_limit(f, df1, df2, 0.975), abs=1.5e-3)
    assert high == pytest.approx(brute_force_limit(f, df1, df2, 0.025), abs=1.5e-3)
    if low > 0:
        assert scipy_stats.ncf.cdf(f, df1, df2, low) == pytest.approx(0.975, abs=1e-8)
    assert scipy_stats.ncf.cdf(f, df1, df2, high) == pytest.approx(0.025, abs=1e-8)


def test_eta_squared_interval_maps_lambda_by_the_number_of_observations() -> None:
    f, df1, df2 = 10.342, 3, 76  # the published 270M row: eta^2 0.2899 on 80 prompts in 4 categories
    interval = eta_squared_interval(f, df1, df2)
    low, high = noncentrality_interval(f, df1, df2)
    assert interval.estimate == pytest.approx(0.2899, abs=1e-4)
    assert (interval.low, interval.high) == pytest.approx((low / (low + 80), high / (high + 80)))
    assert 0.0 < interval.low < interval.estimate < interval.high < 1.0


def test_an_f_below_the_lower_tail_gives_a_lower_limit_of_zero() -> None:
    interval = eta_squared_interval(0.659, 3, 76)  # the published 4B row, p = 0.58
    assert interval.low == 0.0 < interval.estimate < interval.high
    assert eta_squared_interval(0.0, 3, 76).high == 0.0  # no noncentrality makes F = 0 an upper-tail value


def test_r_squared_interval_is_the_f_interval_of_one_fixed_predictor() -> None:
    r2, n = 0.1663, 80
    interval = r_squared_interval(r2, n)
    f = r2 * (n - 2) / (1 - r2)
    low, high = noncentrality_interval(f, 1, n - 2)
    assert (interval.low, interval.high) == pytest.approx((low / (low + n), high / (high + n)))
    assert interval.low < r2 < interval.high
    assert r_squared_interval(1.0, n).low == 1.0


def test_bad_input_is_refused_in_one_line() -> None:
    for call in (lambda: noncentrality_interval(-1.0, 3, 76), lambda: noncentrality_interval(math.inf, 3, 76),
                 lambda: noncentrality_interval(2.0, 0, 76), lambda: eta_squared_interval(2.0, 3, 76, 1.0),
                 lambda: r_squared_interval(1.5, 80), lambda: r_squared_interval(0.2, 2),
                 lambda: stratified_indices([], 10, 0), lambda: stratified_indices(["a"], 0, 0),
                 lambda: stratified_indices(["a"], 10, -1)):
        with pytest.raises(ValueError) as info:
            call()
        assert "\n" not in str(info.value)


def test_the_eta_squared_interval_covers_a_known_population_value() -> None:
    """400 seeded one-way layouts of 4 x 20 with population eta^2 0.15: the interval is exact under the model."""
    rng = np.random.default_rng(20261201)
    eta2 = 0.15
    pattern = np.array([-1.5, -0.5, 0.5, 1.5])
    shift = pattern * math.sqrt(eta2 / (1 - eta2) / np.mean(pattern**2))  # between variance / unit noise variance
    covered = 0
    for _ in range(400):
        groups = {str(k): list(shift[k] + rng.standard_normal(20)) for k in range(4)}
        anova = one_way_anova(groups)
        interval = eta_squared_interval(anova.f, anova.df_between, anova.df_within)
        covered += interval.low <= eta2 <= interval.high
    assert 0.92 <= covered / 400 <= 0.98, covered


def test_the_r_squared_interval_covers_a_known_population_value() -> None:
    """400 seeded regressions on 80 fixed predictor values with population R^2 0.2."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(80)
    x = (x - x.mean()) / x.std()
    r2 = 0.2
    slope = math.sqrt(r2 / (1 - r2))
    covered = 0
    for _ in range(400):
        y = slope * x + rng.standard_normal(80)
        observed = scipy_stats.pearsonr(x, y)[0] ** 2
        interval = r_squared_interval(float(observed), 80)
        covered += interval.low <= r2 <= interval.high
    assert 0.92 <= covered / 400 <= 0.98, covered


def test_stratified_indices_are_seeded_and_keep_every_unit_in_its_stratum() -> None:
    strata = ["math"] * 5 + ["logic"] * 3 + ["math"] * 2
    first = stratified_indices(strata, 200, 11)
    assert np.array_equal(first, stratified_indices(strata, 200, 11))
    assert not np.array_equal(first, stratified_indices(strata, 200, 12))
    assert first.shape == (200, 10)
    labels = np.array(strata)
    assert (labels[first] == labels[None, :]).all()
    assert len({tuple(row) for row in first}) > 150  # resampled, not copied


def test_bootstrap_statistics_agree_with_scipy_and_the_anova() -> None:
    rng = np.random.default_rng(3)
    strata = ["a"] * 6 + ["b"] * 5 + ["c"] * 7
    h, td = rng.standard_normal(18), rng.uniform(0.4, 0.9, 18)
    rows = stratified_indices(strata, 5, 1)
    etas, r2s = eta_squared_rows(h[rows], strata), r_squared_rows(td[rows], h[rows])
    for row, eta, r2 in zip(rows, etas, r2s):
        groups = {s: [float(h[j]) for j, t in zip(row, strata) if t == s] for s in "abc"}
        assert eta == pytest.approx(one_way_anova(groups).eta_squared, rel=1e-12)
        assert r2 == pytest.approx(scipy_stats.pearsonr(td[row], h[row])[0] ** 2, rel=1e-10)
    assert math.isnan(eta_squared_rows(np.ones((1, 18)), strata)[0])
    assert math.isnan(r_squared_rows(np.ones((1, 18)), h[None, :])[0])


def test_the_paired_bootstrap_covers_a_zero_difference_of_eta_squared() -> None:
    """Two presets with the same population eta^2 (0.2) measured on the same prompts: the paired percentile
    interval of the difference covers 0 in about 95% of 200 seeded data sets."""
    rng = np.random.default_rng(99)
    strata = [c for c in range(4) for _ in range(20)]
    pattern = np.repeat(np.array([-1.5, -0.5, 0.5, 1.5]), 20)
    shift = pattern * math.sqrt(0.25 / 1.25)
    covered = 0
    for k in range(200):
        a = shift + rng.standard_normal(80)
        b = shift + rng.standard_normal(80)
        rows = stratified_indices(strata, 500, k)
        whole = np.arange(80)[None, :]
        estimate = float(eta_squared_rows(a[whole], strata)[0] - eta_squared_rows(b[whole], strata)[0])
        interval = percentile_interval(estimate, eta_squared_rows(a[rows], strata) - eta_squared_rows(b[rows], strata))
        covered += interval.low <= 0.0 <= interval.high
    assert 0.90 <= covered / 200 <= 0.99, covered


def test_percentile_interval_is_undefined_when_most_draws_are() -> None:
    draws = np.array([np.nan] * 6 + [0.1, 0.2, 0.3, 0.4])
    assert math.isnan(percentile_interval(0.2, draws).low)
    assert percentile_interval(0.2, np.array([0.1, 0.2, 0.3, np.nan])).low == pytest.approx(0.105)
