"""``stats.proportion``: a reported share with its interval, plain and cluster-aware (Rao-Scott)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from benchmarks.core import stats

counts = st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))
levels = st.sampled_from([0.9, 0.95, 0.99])


@given(counts, levels)
@settings(max_examples=200, deadline=None)
def test_wilson_and_clopper_pearson_match_statsmodels(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    alpha = 1.0 - confidence
    wilson = stats.proportion(k, n, confidence=confidence)
    low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
    assert (wilson["low"], wilson["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    exact = stats.proportion(k, n, method="clopper-pearson", confidence=confidence)
    low, high = proportion_confint(k, n, alpha=alpha, method="beta")
    assert (exact["low"], exact["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    for result in (wilson, exact):
        assert result["k"] == k and result["n"] == n and result["value"] == k / n
        assert 0.0 <= result["low"] <= result["value"] <= result["high"] <= 1.0
    # the plain helper is the existing functions, unchanged
    assert (wilson["low"], wilson["high"]) == (stats.wilson_interval(k, n, confidence).low,
                                               stats.wilson_interval(k, n, confidence).high)


def test_published_wilson_value_and_json_shape() -> None:
    # 24 of 32 at 95%: [0.5789, 0.8675] (worked by hand in test_stats.py)
    result = stats.proportion(24, 32)
    assert (round(result["low"], 4), round(result["high"], 4)) == (0.5789, 0.8675)
    assert set(result) == {"k", "n", "value", "low", "high", "method", "confidence"}
    assert result["method"] == "wilson" and result["confidence"] == 0.95
    assert json.loads(json.dumps(result)) == result


def test_an_empty_denominator_is_undefined_not_zero() -> None:
    result = stats.proportion(0, 0)
    assert (result["value"], result["low"], result["high"], result["n"]) == (None, None, None, 0)
    clustered = stats.proportion(0, 0, clusters=[])
    assert clustered["value"] is None and clustered["design_effect"] is None


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((3, 2), {}, "0 <= k <= n"),
    ((1.5, 2), {}, "integers"),
    ((1, 2), {"method": "wald"}, "unknown interval method 'wald'; available: wilson, clopper-pearson"),
    ((1, 2), {"method": "clopper-pearson", "clusters": [(1, 2)]}, "use method='wilson'"),
    ((1, 4), {"clusters": [(1, 2)]}, "the clusters sum to 1 of 2, not the k=1 of n=4"),
    ((1, 2), {"confidence": 1.5}, "confidence"),
])
def test_bad_input_says_what_is_wrong(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        stats.proportion(*args, **kwargs)


base_outcomes = st.lists(st.booleans(), min_size=2, max_size=48)


@given(base_outcomes, st.integers(2, 5), levels)
@settings(max_examples=200, deadline=None)
def test_perfectly_correlated_replicas_give_the_base_level_interval(bases: list[bool], replicas: int,
                                                                    confidence: float) -> None:
    """Every replica of a base copies the base's outcome: the clustered interval is plain Wilson on the bases."""
    clusters = [(replicas if ok else 0, replicas) for ok in bases]
    k, n = sum(c for c, _ in clusters), replicas * len(bases)
    clustered = stats.proportion(k, n, confidence=confidence, clusters=clusters)
    base = stats.wilson_interval(sum(bases), len(bases), confidence)
    assert clustered["design_effect"] == pytest.approx(replicas, rel=1e-12)
    assert clustered["effective_n"] == pytest.approx(len(bases), rel=1e-12)
    assert clustered["value"] == base.estimate
    assert (clustered["low"], clustered["high"]) == (pytest.approx(base.low, abs=1e-12), pytest.approx(base.high, abs=1e-12))


@given(st.lists(st.integers(1, 4).flatmap(lambda m: st.tuples(st.integers(0, m), st.just(m))), min_size=1, max_size=30),
       levels)
@settings(max_examples=200, deadline=None)
def test_clustered_interval_is_wilson_on_the_effective_size(clusters: list[tuple[int, int]], confidence: float) -> None:
    """Between the two extremes: Wilson (statsmodels, fractional counts) on k / deff of n / deff, deff in [1, largest]."""
    k, n = sum(c for c, _ in clusters), sum(m for _, m in clusters)
    result = stats.proportion(k, n, confidence=confidence, clusters=clusters)
    deff = result["design_effect"]
    assert 1.0 <= deff <= max(m for _, m in clusters)
    low, high = proportion_confint(k / deff, n / deff, alpha=1 - confidence, method="wilson")
    assert result["low"] == pytest.approx(max(0.0, low) if k else 0.0, abs=1e-9)
    assert result["high"] == pytest.approx(min(1.0, high) if k < n else 1.0, abs=1e-9)
    assert 0.0 <= result["low"] <= result["value"] <= result["high"] <= 1.0
    plain = stats.wilson_interval(k, n, confidence)
    assert result["high"] - result["low"] >= plain.high - plain.low - 1e-12  # never narrower than independence


def test_design_effect_hand_values() -> None:
    # 4 bases of 3: successes 3, 0, 2, 1 -> p = 0.5, N = 12; sum (k_i - 1.5)^2 = 2.25 + 2.25 + 0.25 + 0.25 = 5;
    # deff = 5 / (12 * 0.25) = 5/3.
    assert stats.proportion_design_effect([(3, 3), (0, 3), (2, 3), (1, 3)]) == pytest.approx(5 / 3)
    # replicas that vary inside every base as much as across bases: deff clipped to 1 (plain Wilson)
    assert stats.proportion_design_effect([(1, 2), (1, 2), (1, 2)]) == 1.0
    independent = stats.proportion(3, 6, clusters=[(1, 2), (1, 2), (1, 2)])
    assert (independent["low"], independent["high"]) == (pytest.approx(stats.wilson_interval(3, 6).low),
                                                         pytest.approx(stats.wilson_interval(3, 6).high))
    # no variance to measure the clustering by (all or none succeed), or one cluster: the mean cluster size,
    # each cluster one observation
    assert stats.proportion_design_effect([(3, 3), (3, 3)]) == 3.0
    assert stats.proportion_design_effect([(0, 3), (0, 2)]) == 2.5
    assert stats.proportion_design_effect([(2, 5)]) == 5.0
    all_valid = stats.proportion(24, 24, clusters=[(3, 3)] * 8)
    assert (all_valid["effective_n"], all_valid["low"]) == (8.0, pytest.approx(stats.wilson_interval(8, 8).low))
    with pytest.raises(ValueError, match="at least one cluster"):
        stats.proportion_design_effect([])


def test_the_normal_quantile_is_scipy_stats_to_the_last_bit() -> None:
    """``stats._z`` reads ``scipy.special.ndtri`` instead of importing ``scipy.stats``: same float everywhere."""
    from scipy.stats import norm

    grid = [i / 2000 for i in range(1, 2000)] + [0.8, 0.9, 0.95, 0.975, 0.99, 0.999, 1e-9, 1 - 1e-9]
    for confidence in grid:
        assert stats._z(confidence) == float(norm.ppf(0.5 + confidence / 2.0)), confidence
    for bad in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            stats._z(bad)
