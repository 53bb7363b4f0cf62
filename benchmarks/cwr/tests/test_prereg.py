"""The preregistration as the tests read it: thresholds, rule order, seeds, sensitivity grid."""

from __future__ import annotations

import itertools

import pytest

from benchmarks.cwr.protocol import GATE, PREREG, gate_at, sensitivity_grid
from fixtures.cwr import CWR_SEED

SPEC = PREREG.values


def test_seed_values_are_the_preregistered_ones():
    assert SPEC.thresholds == {"tau": 0.90, "delta": 0.20, "errored_max": 0.02, "greedy_max": 0.20,
                               "random_max": 0.05}
    assert SPEC.seeds["fixtures"] == CWR_SEED
    assert SPEC.analysis.confidence == 0.95


def test_rule_order():
    assert GATE.labels == ["ERRORED_UNITS_OVER_LIMIT", "WITNESS_ONLY_PAIRS_IN_CLAIM", "EXPOSURE_NOT_MATCHED",
                           "BASELINE_SOLVES_TARGETS", "FIXTURE_REJECTED_BY_COPY_BASELINE", "PRIMITIVE_MASTERY_NOT_ESTABLISHED",
                           "RECOMBINATION_DEFICIT_SUPPORTED", "DEFICIT_OF_DELTA_REJECTED", "INCONCLUSIVE"]
    assert [r.passes for r in GATE.rules] == [False] * 6 + [True, False, False]


def _metrics(p_accuracy, lower, upper, flagged=0, errored=0.0, witness=0, unmatched=0, greedy=0.0, random=0.0):
    return {"mastery.min_family_accuracy": p_accuracy, "deficit.lower": lower, "deficit.upper": upper,
            "baselines.copy_flagged_pairs": flagged, "errored_share": errored, "pairs.witness_only": witness,
            "pairs.exposure_unmatched": unmatched, "baselines.greedy_solved_share": greedy,
            "baselines.random_valid_rate": random}


@pytest.mark.parametrize(("values", "label"), [
    (_metrics(0.95, 0.25, 0.6), "RECOMBINATION_DEFICIT_SUPPORTED"),
    (_metrics(0.90, 0.20, 0.6), "RECOMBINATION_DEFICIT_SUPPORTED"),  # both bounds inclusive ("at least", "reaches")
    (_metrics(0.95, -0.1, 0.19), "DEFICIT_OF_DELTA_REJECTED"),
    (_metrics(0.95, -0.1, 0.20), "INCONCLUSIVE"),  # the upper bound must be below delta
    (_metrics(0.95, 0.05, 0.45), "INCONCLUSIVE"),
    (_metrics(0.899, 0.5, 0.9), "PRIMITIVE_MASTERY_NOT_ESTABLISHED"),  # mastery blocks attribution
    (_metrics(1.0, 0.5, 0.9, flagged=2), "FIXTURE_REJECTED_BY_COPY_BASELINE"),
    (_metrics(1.0, 0.5, 0.9, errored=0.02), "RECOMBINATION_DEFICIT_SUPPORTED"),  # the limit itself is allowed
    (_metrics(0.5, 0.5, 0.9, flagged=2, errored=0.021), "ERRORED_UNITS_OVER_LIMIT"),  # errors are read first
    (_metrics(1.0, 0.5, 0.9, witness=1, unmatched=3, greedy=1.0), "WITNESS_ONLY_PAIRS_IN_CLAIM"),
    (_metrics(1.0, 0.5, 0.9, unmatched=3, greedy=1.0), "EXPOSURE_NOT_MATCHED"),
    (_metrics(1.0, 0.5, 0.9, greedy=0.21, flagged=1), "BASELINE_SOLVES_TARGETS"),
    (_metrics(1.0, 0.5, 0.9, random=0.051), "BASELINE_SOLVES_TARGETS"),
    (_metrics(1.0, 0.5, 0.9, greedy=0.20, random=0.05), "RECOMBINATION_DEFICIT_SUPPORTED"),  # the limits allowed
])
def test_classification_at_the_boundaries(values, label):
    assert GATE.evaluate(values).label == label


def test_sensitivity_grid_covers_the_preregistered_point_and_changes_nothing_else():
    values = _metrics(0.87, 0.12, 0.5)
    grid = sensitivity_grid(values)
    assert [(g["delta"], g["tau"]) for g in grid] == list(itertools.product(SPEC.sensitivity.delta, SPEC.sensitivity.tau))
    at = {(g["delta"], g["tau"]): g["classification"] for g in grid}
    assert at[(SPEC.thresholds["delta"], SPEC.thresholds["tau"])] == GATE.evaluate(values).label
    assert at[(0.10, 0.85)] == "RECOMBINATION_DEFICIT_SUPPORTED"  # a looser pair of values would read differently
    assert GATE.thresholds["delta"] == SPEC.thresholds["delta"]  # re-classifying never touched the preregistered gate
    assert gate_at(0.1, 0.85).labels == GATE.labels


def test_unmeasured_metric_is_not_classifiable_in_the_grid():
    grid = sensitivity_grid({"mastery.min_family_accuracy": 1.0})
    assert all(g["classification"].startswith("not classifiable") for g in grid)
