"""Paired-difference intervals with clustering, McNemar, and the binomial intervals they build on.

Each function is checked against a published value where one could be
verified, against statsmodels or scipy, or against an independent
computation (Tango's restricted maximum-likelihood step solved numerically).
"""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize
from scipy import stats as sp
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from benchmarks.core import paired, stats
from benchmarks.core.rundir import SUITE_ROOT

# The coverage benchmark lives outside the installed packages (scripts/bench/); load it by path.
_spec = importlib.util.spec_from_file_location("bench_coverage", SUITE_ROOT / "scripts" / "bench" / "bench_coverage.py")
bench_coverage = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench_coverage  # its dataclasses resolve their annotations through sys.modules
_spec.loader.exec_module(bench_coverage)

Z95 = sp.norm.ppf(0.975)

counts = st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))
levels = st.sampled_from([0.8, 0.9, 0.95, 0.99])


tables = st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)).filter(
    lambda cells: sum(cells) > 0
)


# --------------------------------------------------------------------------- single proportions


@given(counts, levels)
def test_wilson_matches_statsmodels_and_scipy(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    got = stats.wilson_interval(k, n, confidence)
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
    ref = sp.binomtest(k, n).proportion_ci(confidence, method="wilson")
    assert (got.low, got.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert (got.low, got.high) == (pytest.approx(ref.low, abs=1e-12), pytest.approx(ref.high, abs=1e-12))


@given(counts, levels)
def test_clopper_pearson_matches_statsmodels_and_scipy(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    got = stats.clopper_pearson_interval(k, n, confidence)
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    ref = sp.binomtest(k, n).proportion_ci(confidence, method="exact")
    assert (got.low, got.high) == (pytest.approx(low, abs=1e-10), pytest.approx(high, abs=1e-10))
    assert (got.low, got.high) == (pytest.approx(ref.low, abs=1e-10), pytest.approx(ref.high, abs=1e-10))


# --------------------------------------------------------------------------- Newcombe


def test_newcombe_method_10_reproduces_the_published_worked_example() -> None:
    # Both, first only, second only, neither = 20, 15, 6, 5 (n = 46): ad - bc = 10 lies in
    # [0, n/2], so method 10's phi is 0; published limits 0.002602 to 0.369943
    # (Altman et al., Statistics with Confidence, worked in the PHUSE CAMIS notes).
    got = stats.paired_difference_interval(20, 15, 6, 5, phi_correction=True)
    assert got.estimate == pytest.approx(9 / 46)
    assert (got.low, got.high) == (pytest.approx(0.002602, abs=5e-7), pytest.approx(0.369943, abs=5e-7))
    # The plain phi (0.0223 here) the suite has used narrows that interval.
    plain = stats.paired_difference_interval(20, 15, 6, 5)
    assert plain.low > got.low + 1e-3 and plain.high < got.high - 1e-3


@given(tables)
def test_newcombe_phi_correction_only_widens(cells: tuple[int, int, int, int]) -> None:
    a, b, c, d = cells
    plain = stats.paired_difference_interval(*cells)
    corrected = stats.paired_difference_interval(*cells, phi_correction=True)
    assert corrected.estimate == plain.estimate
    if a * d - b * c < 0:  # a negative cross product is kept as it is
        assert (corrected.low, corrected.high) == (plain.low, plain.high)
    else:
        assert corrected.low <= plain.low + 1e-15 and corrected.high >= plain.high - 1e-15


def test_newcombe_plain_phi_collapses_on_a_concordant_table_and_method_10_does_not() -> None:
    plain = stats.paired_difference_interval(4, 0, 0, 4)
    assert (plain.low, plain.high) == (0.0, 0.0)
    corrected = stats.paired_difference_interval(4, 0, 0, 4, phi_correction=True)
    assert corrected.low < -0.15 and corrected.high > 0.15


# --------------------------------------------------------------------------- Tango


def _tango_independent(b: float, c: float, n: float, delta: float) -> float:
    """Tango's statistic with the restricted MLE of the cell probabilities found numerically.

    Maximises the multinomial log-likelihood over q21 with q12 = q21 + delta
    (the concordant cells pooled), without the closed form.
    """
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta) / 1.0
    hi = min(hi, (1.0 - delta) / 2.0)

    def negative_loglik(q21: float) -> float:
        q12 = q21 + delta
        rest = 1.0 - q12 - q21
        total = 0.0
        for count, prob in ((b, q12), (c, q21), (n - b - c, rest)):
            if count > 0:
                total -= count * math.log(max(prob, 1e-300))
        return total

    if hi - lo < 1e-15:
        q21 = lo
    else:
        q21 = optimize.minimize_scalar(negative_loglik, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13}).x
    variance = n * (2 * q21 + delta * (1 - delta))
    return (b - c - n * delta) / math.sqrt(variance)


def test_tango_reproduces_the_published_example() -> None:
    # Discordant 15 and 6 of 46 pairs: Tango's interval 0.000419 to 0.377185 as
    # computed by the %PAIRBINCI macro (Laud), reported in the PHUSE CAMIS notes.
    got = paired.tango_interval(15, 6, 46)
    assert (got.low, got.high) == (pytest.approx(0.000419, abs=5e-7), pytest.approx(0.377185, abs=5e-7))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.integers(0, n), st.just(n))).filter(
    lambda t: t[0] + t[1] <= t[2]
))
def test_tango_limits_solve_the_independently_computed_statistic(bcn: tuple[int, int, int]) -> None:
    b, c, n = bcn
    got = paired.tango_interval(b, c, n)
    assert got.low < got.high
    assert got.low <= got.estimate <= got.high
    for limit, target in ((got.low, Z95), (got.high, -Z95)):
        if -1.0 < limit < 1.0:
            assert _tango_independent(b, c, n, limit) == pytest.approx(target, abs=1e-5)
    # Just inside the limits the statistic is below z, just outside above.
    for inside in (got.low + 1e-4, got.high - 1e-4):
        if got.low + 1e-4 < got.high - 1e-4:
            assert abs(_tango_independent(b, c, n, inside)) < Z95


@given(st.integers(0, 80), st.integers(0, 80))
def test_tango_at_zero_is_mcnemars_statistic(b: int, c: int) -> None:
    n = b + c + 5
    expected = (b - c) / math.sqrt(b + c) if b + c else 0.0
    assert paired.tango_statistic(b, c, n, 0.0) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@given(st.integers(1, 500))
def test_tango_without_discordant_pairs_has_the_closed_form_width(n: int) -> None:
    got = paired.tango_interval(0, 0, n)
    bound = Z95**2 / (n + Z95**2)
    assert (got.low, got.high) == (pytest.approx(-bound, abs=1e-10), pytest.approx(bound, abs=1e-10))


def test_tango_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="b \\+ c <= n"):
        paired.tango_interval(5, 6, 10)
    with pytest.raises(ValueError, match="confidence"):
        paired.tango_interval(1, 1, 10, confidence=1.5)


# --------------------------------------------------------------------------- McNemar


@given(st.integers(0, 80), st.integers(0, 80), st.integers(0, 20), st.integers(0, 20))
def test_mcnemar_exact_matches_statsmodels(b: int, c: int, a: int, d: int) -> None:
    expected = mcnemar([[a, b], [c, d]], exact=True).pvalue
    assert paired.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-10, abs=1e-300)


def test_mcnemar_exact_small_cases() -> None:
    assert paired.mcnemar_exact(0, 0) == 1.0
    assert paired.mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert paired.mcnemar_exact(1, 7) == pytest.approx(2 * 9 / 256)
    with pytest.raises(ValueError, match="non-negative integers"):
        paired.mcnemar_exact(-1, 2)
    # Past 1023 discordant pairs a float 2**n would overflow.
    assert paired.mcnemar_exact(700, 760) == pytest.approx(mcnemar([[0, 700], [760, 0]], exact=True).pvalue, rel=1e-9)


# --------------------------------------------------------------------------- clustered data


def _units(bases: list[list[tuple[int, int]]]) -> list[tuple[str, int, int]]:
    return [(f"base-{i}", f, c) for i, base in enumerate(bases) for f, c in base]


outcome = st.tuples(st.integers(0, 1), st.integers(0, 1))


@given(st.lists(st.integers(0, 3), min_size=1, max_size=48))
def test_every_concordant_table_gives_a_positive_width(both_per_base: list[int]) -> None:
    # No discordant unit: base i has k units succeeding under both conditions and 3 - k under neither.
    units = _units([[(1, 1)] * k + [(0, 0)] * (3 - k) for k in both_per_base])
    for interval in (paired.tango_base_interval(units), paired.tango_rao_scott_interval(units),
                     paired.newcombe_replica_interval(units, phi_correction=True)):
        assert interval.high - interval.low > 1e-3, interval


@given(st.lists(st.lists(outcome, min_size=1, max_size=5), min_size=1, max_size=20))
def test_chosen_interval_is_never_a_point(bases: list[list[tuple[int, int]]]) -> None:
    interval = paired.tango_rao_scott_interval(_units(bases))
    assert interval.low < interval.high
    assert -1.0 <= interval.low <= interval.estimate <= interval.high <= 1.0
    assert 1.0 <= paired.design_effect(_units(bases)) <= max(len(base) for base in bases)


@given(st.lists(outcome, min_size=2, max_size=24))
def test_perfectly_correlated_replicas_give_the_base_level_interval(base_outcomes: list[tuple[int, int]]) -> None:
    replicated = _units([[pair] * 3 for pair in base_outcomes])
    alone = _units([[pair] for pair in base_outcomes])
    b = sum(1 for f, c in base_outcomes if f and not c)
    c = sum(1 for f, c in base_outcomes if c and not f)
    base_level = paired.tango_interval(b, c, len(base_outcomes))
    for interval in (paired.tango_base_interval(replicated), paired.tango_rao_scott_interval(replicated)):
        assert (interval.low, interval.high) == (pytest.approx(base_level.low, abs=1e-9),
                                                 pytest.approx(base_level.high, abs=1e-9))
    wald, wald_alone = paired.cluster_wald_interval(replicated), paired.cluster_wald_interval(alone)
    assert (wald.low, wald.high) == (pytest.approx(wald_alone.low, abs=1e-12), pytest.approx(wald_alone.high, abs=1e-12))
    boot = paired.cluster_bootstrap_interval(replicated, resamples=200, seed=3)
    boot_alone = paired.cluster_bootstrap_interval(alone, resamples=200, seed=3)
    assert (boot.low, boot.high) == (pytest.approx(boot_alone.low, abs=1e-12), pytest.approx(boot_alone.high, abs=1e-12))


def test_cluster_wald_matches_a_hand_computation() -> None:
    # Three bases of two: differences d = (2, 0, -1), N = 6, D = 1/6.
    units = _units([[(1, 0), (1, 0)], [(1, 1), (0, 0)], [(0, 1), (1, 1)]])
    got = paired.cluster_wald_interval(units)
    d, r, total = [2, 0, -1], 2, 6
    estimate = sum(d) / total
    variance = 3 / 2 * sum((di - r * estimate) ** 2 for di in d) / total**2
    assert got.estimate == pytest.approx(1 / 6)
    assert (got.low, got.high) == (pytest.approx(estimate - Z95 * math.sqrt(variance)),
                                   pytest.approx(min(1.0, estimate + Z95 * math.sqrt(variance))))


def test_bad_units_are_refused_with_one_line() -> None:
    with pytest.raises(ValueError, match="at least one unit"):
        paired.tango_base_interval([])
    with pytest.raises(ValueError, match="triple"):
        paired.tango_base_interval([("b", 1)])
    with pytest.raises(ValueError, match="True/False or 1/0"):
        paired.tango_base_interval([("b", 2, 0)])
    with pytest.raises(ValueError, match="at least two bases"):
        paired.cluster_wald_interval([("b", 1, 0), ("b", 0, 0)])
    with pytest.raises(ValueError, match="non-negative integers, not all 0"):
        paired.BaseCounts("b", 0, 0, 0, 0)
    with pytest.raises(ValueError, match="non-negative integers"):
        paired.BaseCounts("b", 1, -1, 0, 0)


# --------------------------------------------------------------------------- coverage


def test_coverage_simulation_small() -> None:
    """A slice of ``bench_coverage``: the chosen interval holds 0.93 where the replica Newcombe does not."""
    names = ["newcombe (as used)", "tango (rao-scott deff)"]
    high_rho = bench_coverage.Point(0.7, 0.5, theta=0.8, rho=0.95, bases=8)
    mid_rho = bench_coverage.Point(0.5, 0.5, theta=0.0, rho=0.3, bases=8)
    coverage = {}
    for point, seed in ((high_rho, 11), (mid_rho, 12)):
        for result in bench_coverage.evaluate(point, sims=500, seed=seed, only=names):
            coverage[point, result.method] = result.coverage
            if result.method == "tango (rao-scott deff)":
                assert result.zero_width == 0
    assert coverage[high_rho, "tango (rao-scott deff)"] >= 0.93
    assert coverage[mid_rho, "tango (rao-scott deff)"] >= 0.93
    # With replicas almost always agreeing, 24 replicas carry the information of
    # 8 pairs: treating them as independent undercovers.
    assert coverage[high_rho, "newcombe (as used)"] < 0.90


def test_simulated_data_follow_the_model() -> None:
    point = bench_coverage.Point(0.7, 0.4, theta=0.5, rho=1.0, bases=40)
    data = bench_coverage.simulate(point, sims=200, seed=5)
    assert data.shape == (200, 40, 4) and (data.sum(axis=2) == 3).all()
    # rho = 1: every base's replicas copy one draw, so one cell holds all three.
    assert ((data == 3).sum(axis=2) == 1).all()
    f_rate = (data[..., 0] + data[..., 1]).sum() / (200 * 40 * 3)
    c_rate = (data[..., 0] + data[..., 2]).sum() / (200 * 40 * 3)
    assert f_rate == pytest.approx(0.7, abs=0.02) and c_rate == pytest.approx(0.4, abs=0.02)


def test_benchmark_quick_run_prints_its_choice(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_coverage.main(["--quick", "--sims", "40"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n    8 ") + out.count("\n   16 ") == len(bench_coverage.grid(quick=True))
    assert "chosen:" in out or "no method holds" in out


@given(st.lists(st.lists(outcome, min_size=3, max_size=3), min_size=2, max_size=16))
def test_rao_scott_is_pooled_tango_at_a_critical_value_scaled_by_the_design_effect(
    bases: list[list[tuple[int, int]]],
) -> None:
    # Dividing b, c and n by deff divides Tango's statistic by sqrt(deff): the interval
    # is the pooled one at critical value z * sqrt(deff).
    units = _units(bases)
    deff = paired.design_effect(units)
    a, b, c, d = paired.replica_table(paired.base_counts(units))
    level = 2 * sp.norm.cdf(Z95 * math.sqrt(deff)) - 1
    if level >= 1 - 1e-12:
        return
    pooled = paired.tango_interval(b, c, a + b + c + d, confidence=level)
    got = paired.tango_rao_scott_interval(units)
    assert (got.low, got.high) == (pytest.approx(pooled.low, abs=1e-7), pytest.approx(pooled.high, abs=1e-7))
