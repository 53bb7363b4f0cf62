"""The seed's six frozen decision rules, transcribed by hand from its text, against the classification compiled from
the real prereg.toml: the same label on every metric vector, at each threshold and one ulp or one item either side.

The transcription below reads only the seed (``seeds/000_67a70d731acf44c4.txt``, "Frozen decision rules"):
its numbers are written out here, not taken from prereg.toml, so that a changed threshold, a reordered rule or a
flipped comparison in the preregistration shows up as a disagreement.
"""

from __future__ import annotations

import itertools
import math

from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.core.protocol import finite
from benchmarks.res.protocol import GATE, PROTOCOL

# "The adequacy threshold for each accuracy is 0.75 and the generated-answer parser-coverage threshold is 0.95."
ACCURACY = 0.75
COVERAGE = 0.95
ITEMS = 32  # "Two balanced, 32-item conditions"

FIVE, MINIMAL = "five_factor", "minimal_owner_indexed"


def seed_classification(m: dict[str, float]) -> str:
    """The seed's rules 1-6 in its order; the first that applies decides."""
    five_logit, five_generated = m[f"{FIVE}.logit_accuracy"], m[f"{FIVE}.generated_accuracy"]
    minimal_logit, minimal_generated = m[f"{MINIMAL}.logit_accuracy"], m[f"{MINIMAL}.generated_accuracy"]
    # 1. "if either condition's parser coverage is below 0.95"
    if m[f"{FIVE}.parser_coverage"] < COVERAGE or m[f"{MINIMAL}.parser_coverage"] < COVERAGE:
        return "GENERATION_RESPONSE_UNPARSEABLE"
    # 2. "if the five-pressure generated accuracy is at least 0.75 while its first-token-logit accuracy is below 0.75"
    if five_generated >= ACCURACY and five_logit < ACCURACY:
        return "RESPONSE_INTERFACE_MISMATCH"
    # 3. "if both five-pressure accuracies are below 0.75 and at least one minimal-audit accuracy is at least 0.75"
    if five_logit < ACCURACY and five_generated < ACCURACY and (minimal_logit >= ACCURACY or minimal_generated >= ACCURACY):
        return "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED"
    # 4. "if both minimal-audit accuracies are below 0.75"
    if minimal_logit < ACCURACY and minimal_generated < ACCURACY:
        return "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED"
    # 5. "if both accuracy methods clear 0.75 for both conditions" ("clear" read as "at least", as in rules 2-4)
    if min(five_logit, five_generated, minimal_logit, minimal_generated) >= ACCURACY:
        return "RESPONSE_INTERFACE_GATE_PASSED"
    # 6. "otherwise"
    return "MIXED_GATE_OUTCOME"


SEED_ORDER = ["GENERATION_RESPONSE_UNPARSEABLE", "RESPONSE_INTERFACE_MISMATCH",
              "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED", "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED",
              "RESPONSE_INTERFACE_GATE_PASSED", "MIXED_GATE_OUTCOME"]


def compiled(m: dict[str, float]) -> str:
    """The label the suite decides: the prereg's compiled classification on the run's finite metrics."""
    return GATE.evaluate(finite(m)).label


def edges(threshold: float) -> list[float]:
    """The threshold, one ulp either side, and the item counts of a 32-item condition just around it."""
    below = math.floor(threshold * ITEMS)
    counts = sorted({below - 1, below, below + 1, math.ceil(threshold * ITEMS)})
    return sorted({math.nextafter(threshold, 0.0), threshold, math.nextafter(threshold, 1.0),
                   *(k / ITEMS for k in counts if 0 <= k <= ITEMS)})


ACCURACY_EDGES = [0.0, *edges(ACCURACY), 1.0]
COVERAGE_EDGES = [*edges(COVERAGE), 1.0]
ACCURACIES = [f"{c}.{k}" for c in (FIVE, MINIMAL) for k in ("logit_accuracy", "generated_accuracy")]
COVERAGES = [f"{c}.parser_coverage" for c in (FIVE, MINIMAL)]


def test_the_rule_order_is_the_seeds() -> None:
    assert GATE.labels == SEED_ORDER
    assert [r.passes for r in GATE.rules] == [False, False, False, False, True, False]
    assert PROTOCOL.spec.thresholds == {"accuracy": ACCURACY, "coverage": COVERAGE}


def test_every_combination_of_edge_values_gets_the_seeds_label() -> None:
    """Each accuracy at 0, 1, 0.75 (24/32) and one ulp either side, 23/32 and 25/32; each coverage at 1, 0.95 and
    one ulp either side: all 4^2 x 7^4 combinations get the seed's label (the item counts around the coverage
    threshold, 30/32 and 31/32, lie beyond its ulps and are read in test_coverage_edges)."""
    seen = set()
    near = [math.nextafter(COVERAGE, 0.0), COVERAGE, math.nextafter(COVERAGE, 1.0), 1.0]
    for coverage in itertools.product(near, repeat=2):
        for accuracy in itertools.product(ACCURACY_EDGES, repeat=4):
            m = {**dict(zip(COVERAGES, coverage)), **dict(zip(ACCURACIES, accuracy))}
            label = seed_classification(m)
            assert compiled(m) == label, m
            seen.add(label)
    assert seen == set(SEED_ORDER)


def test_coverage_edges() -> None:
    for five, minimal in itertools.product(COVERAGE_EDGES, repeat=2):
        m = {**dict(zip(COVERAGES, (five, minimal))), **dict.fromkeys(ACCURACIES, 1.0)}
        assert compiled(m) == seed_classification(m), m
    assert compiled({**dict(zip(COVERAGES, (COVERAGE, 1.0))), **dict.fromkeys(ACCURACIES, 1.0)}) == \
        "RESPONSE_INTERFACE_GATE_PASSED"
    below = math.nextafter(COVERAGE, 0.0)
    assert compiled({**dict(zip(COVERAGES, (1.0, below))), **dict.fromkeys(ACCURACIES, 1.0)}) == \
        "GENERATION_RESPONSE_UNPARSEABLE"


_SHARE = st.one_of(st.floats(0.0, 1.0), st.sampled_from(ACCURACY_EDGES + COVERAGE_EDGES),
                   st.integers(0, ITEMS).map(lambda k: k / ITEMS))


@given(st.fixed_dictionaries({name: _SHARE for name in COVERAGES + ACCURACIES}))
@example({**dict.fromkeys(COVERAGES, 1.0), **dict.fromkeys(ACCURACIES, ACCURACY)})
@example({**dict.fromkeys(COVERAGES, COVERAGE), f"{FIVE}.logit_accuracy": math.nextafter(ACCURACY, 0.0),
          f"{FIVE}.generated_accuracy": ACCURACY, f"{MINIMAL}.logit_accuracy": 0.0,
          f"{MINIMAL}.generated_accuracy": 0.0})
def test_any_metric_vector_gets_the_seeds_label(m: dict[str, float]) -> None:
    assert compiled(m) == seed_classification(m)
