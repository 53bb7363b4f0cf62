"""The seed's pure arithmetic, reproduced by the suite's own functions (sections 4.5, 5 and 8 of the seed)."""

import math

import pytest

from benchmarks.core import stats
from benchmarks.ladder.analysis import (
    accuracy_estimate,
    any_of,
    cell_dip_probability,
    feasibility_window,
    intersect,
    log_inaccuracy_ratio,
    per_check_accuracy,
    ratio_limit,
    required_depth_window,
)


def test_k10_window(record_property):
    low, high = feasibility_window(10)
    record_property("window_low", low)
    record_property("window_high", high)
    assert (round(low, 4), round(high, 4)) == (0.9578, 0.9895)


def test_depth1_window_is_the_band_itself():
    assert feasibility_window(1) == pytest.approx((0.65, 0.90))


@pytest.mark.parametrize("k", [5, 10, 27, 100])
def test_window_width_is_about_0_325_over_k(k):
    """For k beyond a few the width tends to (ln 0.90 - ln 0.65) / k = 0.325 / k."""
    low, high = feasibility_window(k)
    assert (high - low) * k == pytest.approx(math.log(0.90) - math.log(0.65), rel=0.1)
    assert (high - low) * k < 0.33


def test_depth27_window_is_about_1_2_points():
    low, high = feasibility_window(27)
    assert round(100 * (high - low), 1) == 1.2


def test_ratio_limit(record_property):
    record_property("ratio_limit", ratio_limit())
    assert round(ratio_limit(), 2) == 4.09


def test_zero_of_450_bound(record_property):
    bound = stats.rule_of_three(450)
    record_property("bound", bound)
    assert f"{100 * bound:.2f}%" == "0.67%"
    assert accuracy_estimate(450, 450).bound and accuracy_estimate(450, 450).value == pytest.approx(1 - bound)


def test_single_cell_and_any_of_fifteen(record_property):
    single = cell_dip_probability(11, 30, 0.52)
    anyone = any_of(single, 15)
    record_property("single_cell", single)
    record_property("any_of_fifteen", anyone)
    assert round(100 * single, 1) == 6.7
    assert round(anyone, 2) == 0.65


def test_table4_required_depth_windows(record_property):
    """Table 4: the anchor's window closes at 4.4, the next opens at 5.9; the middle pair closes at 24.0,
    the saturated pair (a lower bound) opens at 27.0; no intersection across all, nor across any two groups."""
    fleet = {"anchor": 0.9063, "qwen3:8b": 0.9837, "deepseek-r1:70b": 0.9822, "saturated": 0.9961}
    windows = {name: required_depth_window(a) for name, a in fleet.items()}
    for name, (low, high) in windows.items():
        record_property(f"{name}.low", low)
        record_property(f"{name}.high", high)
    assert round(windows["anchor"][1], 1) == 4.4
    assert round(windows["deepseek-r1:70b"][0], 1) == 5.9
    assert round(windows["deepseek-r1:70b"][1], 1) == 24.0
    assert round(windows["saturated"][0], 1) == 27.0
    assert intersect(list(windows.values())) is None
    assert intersect([windows["anchor"], windows["deepseek-r1:70b"]]) is None
    assert intersect([windows["qwen3:8b"], windows["saturated"]]) is None
    assert intersect([windows["qwen3:8b"], windows["deepseek-r1:70b"]]) is not None


def test_saturated_rung_lower_bound_from_rule_of_three():
    """Zero errors on about 75 approvable episodes at mean depth 10.3 give a >= 0.9961 (Table 4's bound)."""
    estimate = accuracy_estimate(75, 75)
    assert estimate.bound
    assert round(per_check_accuracy(estimate.value, 10.3), 4) == 0.9960


def test_anchor_per_check_accuracy_from_approvable_error():
    """The anchor erred on 63.6% of approvable episodes in round 3; at k = 10.3 that is a = 0.906."""
    assert per_check_accuracy(1 - 0.636, 10.3) == pytest.approx(0.9063, abs=5e-4)


def test_depth_cancels_from_the_ratio():
    """ln a1 / ln a2 is the same whatever k the episode accuracies were generated at."""
    for k in (3, 10.3, 27):
        acc1, acc2 = 0.95 ** k, 0.995 ** k
        assert log_inaccuracy_ratio(acc1, acc2) == pytest.approx(math.log(0.95) / math.log(0.995))


def test_anchor_ratio_exceeds_the_limit():
    """Round 3: anchor approvable accuracy 0.364 against a zero-error rung's rule-of-three bound.

    The seed gives the ratio as at least 25.5 without the approvable count; with 75-80 approvable
    episodes (30 per tier at a 52% share) the bound puts it between 24.7 and 26.5, far above 4.09."""
    ratios = [log_inaccuracy_ratio(0.364, accuracy_estimate(n, n).value) for n in range(75, 81)]
    assert min(ratios) < 25.5 < max(ratios)
    assert min(ratios) > 6 * ratio_limit()


def test_degenerate_inputs_are_refused():
    with pytest.raises(ValueError):
        per_check_accuracy(0.0, 10)
    with pytest.raises(ValueError):
        required_depth_window(1.0)
    with pytest.raises(ValueError):
        accuracy_estimate(0, 0)
