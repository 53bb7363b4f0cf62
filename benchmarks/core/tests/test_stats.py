"""Each statistic against scipy or a published / hand-computed value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from benchmarks.core import stats

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


@given(st.lists(st.lists(finite, min_size=1, max_size=12), min_size=2, max_size=5))
def test_anova_matches_scipy(groups: list[list[float]]) -> None:
    data = {f"g{i}": g for i, g in enumerate(groups)}
    n = sum(len(g) for g in groups)
    if n <= len(groups):
        with pytest.raises(ValueError, match="more observations"):
            stats.one_way_anova(data)
        return
    result = stats.one_way_anova(data)
    assert (result.df_between, result.df_within) == (len(groups) - 1, n - len(groups))
    if result.ss_within > 1e-9 * max(1.0, result.ss_between):
        ref = sp.f_oneway(*groups)
        assert result.f == pytest.approx(ref.statistic, rel=1e-6, abs=1e-9)
        assert result.p_exact == pytest.approx(sp.f.sf(ref.statistic, len(groups) - 1, n - len(groups)), rel=1e-6, abs=1e-12)
        assert 0.0 <= result.eta_squared <= 1.0


def test_anova_textbook_example() -> None:
    # Three groups of three: means 2, 5, 8; SS_between = 54, SS_within = 6.
    result = stats.one_way_anova({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9]})
    assert result.ss_between == pytest.approx(54.0)
    assert result.ss_within == pytest.approx(6.0)
    assert result.eta_squared == pytest.approx(0.9)
    assert result.f == pytest.approx(27.0)
    assert result.group_means == {"a": 2.0, "b": 5.0, "c": 8.0}


def test_anova_degenerate_cases() -> None:
    zero_within = stats.one_way_anova({"a": [1, 1], "b": [2, 2]})
    assert zero_within.eta_squared == 1.0 and math.isinf(zero_within.f) and zero_within.p_exact == 0.0
    constant = stats.one_way_anova({"a": [3, 3], "b": [3, 3]})
    assert math.isnan(constant.eta_squared) and math.isnan(constant.f)
    with pytest.raises(ValueError, match="empty: b"):
        stats.one_way_anova({"a": [1, 2], "b": []})
    with pytest.raises(ValueError, match="at least two groups"):
        stats.one_way_anova({"a": [1, 2]})


@pytest.mark.parametrize(
    ("f", "published_p"),
    # The P-Zombie seed's published p_approx values (F with df 3 and 76).
    [(10.342, 1.32e-5), (5.337, 0.0023), (0.659, 0.584), (16.814, 4.85e-8)],
)
def test_wilson_hilferty_reproduces_published_p_approx(f: float, published_p: float) -> None:
    assert stats.f_sf_wilson_hilferty(f, 3, 76) == pytest.approx(published_p, rel=0.01)


@given(st.floats(0.05, 30), st.integers(1, 10), st.integers(20, 400))
def test_wilson_hilferty_is_close_to_exact(f: float, df1: int, df2: int) -> None:
    exact = sp.f.sf(f, df1, df2)
    assert abs(stats.f_sf_wilson_hilferty(f, df1, df2) - exact) < 0.02


@given(st.lists(st.tuples(finite, finite), min_size=3, max_size=30))
def test_pearson_and_line_match_scipy(pairs: list[tuple[float, float]]) -> None:
    x, y = map(np.array, zip(*pairs))
    result = stats.pearson(x, y)
    if np.ptp(x) < 1e-6 or np.ptp(y) < 1e-6:
        return
    ref = sp.linregress(x, y)
    assert result.r == pytest.approx(ref.rvalue, abs=1e-7)
    assert result.r_squared == pytest.approx(ref.rvalue**2, abs=1e-7)
    assert result.slope == pytest.approx(ref.slope, rel=1e-6, abs=1e-9)
    assert result.intercept == pytest.approx(ref.intercept, rel=1e-6, abs=1e-6)


def test_pearson_hand_example_and_degenerate() -> None:
    result = stats.pearson([1, 2, 3, 4], [2, 4, 5, 7])
    # Sxx = 5, Syy = 12.75, Sxy = 7.9... computed: slope 1.6, intercept 0.5, r = 8/sqrt(5*13)
    assert result.slope == pytest.approx(1.6)
    assert result.intercept == pytest.approx(0.5)
    assert result.r == pytest.approx(8 / math.sqrt(5 * 13))
    assert math.isnan(stats.pearson([1, 1, 1], [1, 2, 3]).r)


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=3, max_size=30))
def test_spearman_with_ties_matches_scipy(pairs: list[tuple[int, int]]) -> None:
    x, y = map(np.array, zip(*pairs))
    if len(set(x)) < 2 or len(set(y)) < 2:
        return
    assert stats.spearman(x, y) == pytest.approx(sp.spearmanr(x, y).statistic, abs=1e-9)


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))), st.sampled_from([0.9, 0.95, 0.99]))
@settings(max_examples=150)
def test_binomial_intervals_match_scipy(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    ref = sp.binomtest(k, n)
    wilson = stats.wilson_interval(k, n, confidence)
    w = ref.proportion_ci(confidence, method="wilson")
    assert (wilson.low, wilson.high) == (pytest.approx(w.low, abs=1e-9), pytest.approx(w.high, abs=1e-9))
    cp = stats.clopper_pearson_interval(k, n, confidence)
    e = ref.proportion_ci(confidence, method="exact")
    assert (cp.low, cp.high) == (pytest.approx(e.low, abs=1e-9), pytest.approx(e.high, abs=1e-9))


def test_wilson_hand_value_and_rule_of_three() -> None:
    # 24 of 32 at 95%, z^2 = 3.84146: centre = (0.75 + z^2/64) / (1 + z^2/32) = 0.81002 / 1.12005 = 0.72321;
    # half width = z sqrt(0.75 * 0.25 / 32 + z^2 / 4096) / 1.12005 = 1.95996 * 0.082445 / 1.12005 = 0.14427.
    interval = stats.wilson_interval(24, 32)
    assert (round(interval.low, 4), round(interval.high, 4)) == (0.5789, 0.8675)
    assert stats.rule_of_three(300) == pytest.approx(0.01)
    # The rule of three approximates the exact one-sided bound 1 - 0.05^(1/n).
    assert stats.rule_of_three(300) == pytest.approx(1 - 0.05 ** (1 / 300), rel=0.01)
    with pytest.raises(ValueError, match="positive integer"):
        stats.rule_of_three(0)


def test_paired_difference_reduces_to_wilson_margins() -> None:
    # Hand computation of the hybrid score interval from scipy's Wilson limits.
    a, b, c, d = 12, 9, 2, 13
    n = a + b + c + d
    w1 = sp.binomtest(a + b, n).proportion_ci(0.95, method="wilson")
    w2 = sp.binomtest(a + c, n).proportion_ci(0.95, method="wilson")
    p1, p2 = (a + b) / n, (a + c) / n
    phi = (a * d - b * c) / math.sqrt((a + b) * (c + d) * (a + c) * (b + d))
    low = p1 - p2 - math.sqrt((p1 - w1.low) ** 2 - 2 * phi * (p1 - w1.low) * (w2.high - p2) + (w2.high - p2) ** 2)
    high = p1 - p2 + math.sqrt((w1.high - p1) ** 2 - 2 * phi * (w1.high - p1) * (p2 - w2.low) + (p2 - w2.low) ** 2)
    got = stats.paired_difference_interval(a, b, c, d)
    assert got.estimate == pytest.approx(7 / 36)
    assert (got.low, got.high) == (pytest.approx(low), pytest.approx(high))


def test_paired_difference_coverage() -> None:
    """Simulated coverage of the 95% interval stays near nominal."""
    rng = np.random.default_rng(7)
    probs = np.array([0.3, 0.25, 0.1, 0.35])  # both, first only, second only, neither
    truth = probs[1] - probs[2]
    hits = 0
    trials = 2000
    for cells in rng.multinomial(60, probs, size=trials):
        interval = stats.paired_difference_interval(*map(int, cells))
        hits += interval.low <= truth <= interval.high
    assert 0.93 <= hits / trials <= 0.975


def test_paired_difference_extremes_stay_in_range() -> None:
    for cells in [(0, 10, 0, 0), (0, 0, 10, 0), (5, 0, 0, 5), (0, 0, 0, 1)]:
        interval = stats.paired_difference_interval(*cells)
        assert -1.0 <= interval.low <= interval.estimate <= interval.high <= 1.0
    with pytest.raises(ValueError, match="at least one pair"):
        stats.paired_difference_interval(0, 0, 0, 0)


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(st.integers(-2, n + 2), st.just(n))), st.floats(0, 1))
def test_binomial_tails_match_scipy(kn: tuple[int, int], p: float) -> None:
    k, n = kn
    assert stats.binomial_sf(k, n, p) == pytest.approx(sp.binom.sf(k - 1, n, p), rel=1e-9, abs=1e-15)
    assert stats.binomial_cdf(k, n, p) == pytest.approx(sp.binom.cdf(k, n, p), rel=1e-9, abs=1e-15)


def test_binomial_tail_hand_value() -> None:
    # P[X >= 9] for X ~ Binomial(10, 0.5) = (10 + 1) / 1024.
    assert stats.binomial_sf(9, 10, 0.5) == pytest.approx(11 / 1024)
    assert stats.binomial_cdf(1, 10, 0.5) == pytest.approx(11 / 1024)


def test_the_tabled_normal_quantiles_are_scipys_to_the_last_bit() -> None:
    from scipy.special import ndtri

    assert 0.95 in stats._Z_OF_LEVEL
    for level, z in stats._Z_OF_LEVEL.items():
        assert z == float(ndtri(0.5 + level / 2.0)) == float(sp.norm.ppf(0.5 + level / 2.0)), level
        assert stats._z(level) == z
    # a level outside the table still goes to scipy
    assert stats._z(0.8) == float(ndtri(0.9))


@settings(max_examples=300)
@given(f=st.floats(min_value=0.0, max_value=1e6, allow_nan=False) | st.sampled_from([0.0, 5e-324, 1e-300, math.inf]),
       df1=st.integers(min_value=1, max_value=60), df2=st.integers(min_value=1, max_value=5000))
def test_the_anova_tail_is_scipy_stats_f_sf_to_the_last_bit(f: float, df1: int, df2: int) -> None:
    # the support's ends (0 and infinity) included: what a constant or a zero-within-variance design gives
    assert stats._f_sf(f, df1, df2) == float(sp.f.sf(f, df1, df2)), (f, df1, df2)


def test_an_anova_reads_no_scipy_stats() -> None:
    import subprocess
    import sys

    code = ("import sys; from benchmarks.core import stats; "
            "r = stats.one_way_anova({'a': [1.0, 2.0, 4.0], 'b': [3.0, 5.0, 8.0]}); "
            "print(r.p_exact, 'scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert 0.0 < float(out[0]) < 1.0 and out[1] == "False"
