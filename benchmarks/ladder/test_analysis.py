"""The probe's analysis report, number by number: each is recomputed from the ledger and recorded on its test."""

import math

import pytest

from .analysis import HIGH_ACC, LOW_ACC, required_depth_window
from .protocol import ANALYSIS_FILE


@pytest.fixture(scope="session")
def analysis(run, result_files):
    """The probe's ``analysis.json``, as written into the run directory."""
    return run.read_json(ANALYSIS_FILE)


def _record(record_property, prefix, values):
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            record_property(f"{prefix}.{key}", value)


def test_failure_signature(analysis, records, record_property):
    report = analysis["analysis"]
    scored = [u for u in records if u.outcome in ("correct", "wrong", "unparsed")]
    errors = [u for u in scored if u.outcome != "correct"]
    assert report["errors"] == len(errors) and report["scored_units"] == len(scored)
    if errors:
        refusals = sum(u.ground_truth == "approve" for u in errors)
        assert report["refusal_share_of_errors"] == pytest.approx(refusals / len(errors))
    for truth, key in (("approve", "error_on_approvable"), ("reject", "error_on_rejectable")):
        side = [u for u in scored if u.ground_truth == truth]
        if side:
            assert report[key] == pytest.approx(sum(u.outcome != "correct" for u in side) / len(side))
    _record(record_property, "signature", {k: report[k] for k in
                                           ("errors", "refusal_share_of_errors", "error_on_approvable",
                                            "error_on_rejectable") if report[k] is not None})


def test_approve_rate_by_tier(analysis, records, record_property):
    for tier, cell in analysis["analysis"]["tiers"].items():
        units = [u for u in records if u.tier == int(tier) and u.outcome in ("correct", "wrong", "unparsed")]
        if not units:
            continue
        assert cell["approve_rate"] == pytest.approx(sum(u.decision == "approve" for u in units) / len(units))
        assert cell["generated_approvable_share"] == pytest.approx(
            sum(u.ground_truth == "approve" for u in units) / len(units))
        assert 0.0 <= cell["dip_probability"] <= 1.0
        _record(record_property, f"tier{tier}", cell)


def test_per_check_accuracy_and_depth_window(analysis, record_property):
    report = analysis["analysis"]
    if not report["approvable_units"]:
        pytest.skip("no scored approvable unit in this probe: per-check accuracy is undefined")
    a, acc, k = report["per_check_accuracy"], report["approvable_accuracy"], report["mean_depth_approvable"]
    if a is None:
        assert acc == 0
        pytest.skip("no approvable unit was answered right: a^k = 0 has no per-check accuracy")
    assert a ** k == pytest.approx(acc)
    if report["approvable_accuracy_is_bound"]:
        assert acc == pytest.approx(1 - 3 / report["approvable_units"])
    low, high = report["required_depth_window"]
    assert (low, high) == pytest.approx(required_depth_window(a))
    assert LOW_ACC == pytest.approx(a ** high) and HIGH_ACC == pytest.approx(a ** low)
    _record(record_property, "accuracy", {"approvable_accuracy": acc, "mean_depth": k, "per_check_accuracy": a,
                                          "depth_window_low": low, "depth_window_high": high})
    assert math.isfinite(low) and math.isfinite(high)
