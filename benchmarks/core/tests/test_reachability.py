"""The outcome-reachability guard: witnesses per label, unreachable labels named with the size."""

from __future__ import annotations

import random
import textwrap

import pytest

from benchmarks.core import Classification, Condition, Rule
from benchmarks.core.reachability import UnreachableOutcome, outcome_labels, reachability, seeded

N = 32


def _gate(*rules: Rule, passing: str | None = "PASSED") -> Classification:
    return Classification("toy", rules, passing, {})


def _metrics(correct: int) -> dict[str, float]:
    """Accuracy and error count of N items of which ``correct`` are right."""
    return {"accuracy": correct / N, "errors": N - correct}


LOW = Rule("LOW_ACCURACY", all=(Condition("accuracy", "<", 0.75),))
NEAR_PERFECT_WITH_ERRORS = Rule("NEAR_PERFECT_WITH_ERRORS",
                                all=(Condition("accuracy", ">=", 0.98), Condition("errors", ">=", 1)))


def test_outcome_labels_end_with_the_passing_state():
    assert outcome_labels(_gate(LOW)) == ["LOW_ACCURACY", "PASSED"]
    assert outcome_labels(_gate(LOW, Rule("REST", otherwise=True), passing=None)) == ["LOW_ACCURACY", "REST"]


def test_every_label_gets_a_witness_that_decides_it():
    gate = _gate(LOW, Rule("BORDERLINE", all=(Condition("accuracy", "<", 0.8),)))
    found = reachability(gate, range(N + 1), _metrics, size=f"{N} items", exhaustive=True)["toy"]
    assert found.unreachable == ()
    assert found.witnesses == {"LOW_ACCURACY": 0, "BORDERLINE": 24, "PASSED": 26}
    for label, correct in found.witnesses.items():
        assert gate.evaluate(_metrics(correct)).label == label
    assert found.searched == 27  # stopped at the first data set that completed the labels
    found.check()


def test_a_label_no_data_of_the_size_can_produce_is_named_with_the_size():
    gate = _gate(NEAR_PERFECT_WITH_ERRORS, LOW)
    found = reachability(gate, range(N + 1), _metrics, size=f"{N} items", exhaustive=True)["toy"]
    assert found.unreachable == ("NEAR_PERFECT_WITH_ERRORS",)
    assert found.searched == N + 1
    with pytest.raises(UnreachableOutcome) as caught:
        found.check()
    message = str(caught.value)
    assert "NEAR_PERFECT_WITH_ERRORS unreachable at 32 items" in message
    assert "all 33 enumerated" in message
    # at 64 items, 63 right is accuracy 0.984 with one error: reachable
    wide = reachability(gate, range(65), lambda k: {"accuracy": k / 64, "errors": 64 - k}, size="64 items")
    assert wide["toy"].witnesses["NEAR_PERFECT_WITH_ERRORS"] == 63


def test_a_search_that_is_not_exhaustive_says_how_many_it_searched():
    gate = _gate(NEAR_PERFECT_WITH_ERRORS, LOW)
    found = reachability(gate, seeded(lambda rng: rng.randint(0, N), seed=3, count=50), _metrics,
                         size=f"{N} items")["toy"]
    assert found.unreachable == ("NEAR_PERFECT_WITH_ERRORS",)
    assert "not decided by any of 50 searched data sets" in found.message()


def test_undefined_metrics_decide_nothing_and_are_counted():
    gate = _gate(LOW)
    found = reachability(gate, [None, 10, 30], lambda k: {} if k is None else _metrics(k), size="32 items")["toy"]
    assert found.undecided == 1 and found.witnesses == {"LOW_ACCURACY": 10, "PASSED": 30}
    nothing = reachability(gate, [None], lambda k: {"accuracy": float("nan")}, size="32 items")["toy"]
    assert nothing.unreachable == ("LOW_ACCURACY", "PASSED")
    assert "1 undecided (metric 'accuracy' was not measured" in nothing.message()


def test_several_classifications_share_one_pass():
    calls = []

    def measured(k):
        calls.append(k)
        return _metrics(k)

    other = Classification("other", (Rule("ANY_ERROR", all=(Condition("errors", ">=", 1),)),), "NO_ERROR", {})
    found = reachability([_gate(LOW), other], range(N + 1), measured, size=f"{N} items")
    assert found["toy"].witnesses == {"LOW_ACCURACY": 0, "PASSED": 24}
    assert found["other"].witnesses == {"ANY_ERROR": 0, "NO_ERROR": 32}
    assert calls == list(range(N + 1))


def test_seeded_candidates_repeat_and_misuse_is_refused():
    def draw(rng: random.Random) -> int:
        return rng.randint(0, 1000)

    assert list(seeded(draw, seed=5, count=20)) == list(seeded(draw, seed=5, count=20))
    with pytest.raises(ValueError, match="positive number of candidates"):
        list(seeded(draw, seed=5, count=0))
    with pytest.raises(ValueError, match="at least one classification"):
        reachability([], range(3), _metrics, size="3 items")


TOY_PREREG = """
[protocol]
name = "{name}"
title = "Toy gate whose first rule asks for near-perfect accuracy with errors"
registered = 2026-12-01
seed_document = "none"

[design]
items = 32

[thresholds]
near_perfect = 0.98
low = 0.75

[classification]
name = "gate"
passing = "GATE_PASSED"

[[classification.rules]]
label = "NEAR_PERFECT_WITH_ERRORS"
all = ["accuracy >= near_perfect", "errors >= 1"]

[[classification.rules]]
label = "LOW_ACCURACY"
all = ["accuracy < low"]
"""

TOY_TEST = '''
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.core import ClassificationSpec, ProtocolHeader, classification, load_prereg
from benchmarks.core.reachability import outcome_labels, reachability

HERE = Path(__file__).parent


@dataclass(frozen=True)
class ToyPrereg:
    protocol: ProtocolHeader
    design: dict[str, int]
    thresholds: dict[str, float]
    classification: ClassificationSpec


PREREG = load_prereg(HERE / "prereg.toml", ToyPrereg)
GATE = classification(PREREG)
N = PREREG.values.design["items"]


def records(correct):
    return [index < correct for index in range(N)]


def metrics(items):
    return {"accuracy": sum(items) / len(items), "errors": sum(not ok for ok in items)}


@pytest.mark.parametrize("label", outcome_labels(GATE))
def test_label_reachable(label):
    found = reachability(GATE, (records(k) for k in range(N + 1)), metrics, size=f"{N} items",
                         exhaustive=True)[GATE.name]
    assert label in found.witnesses, found.message()
'''


def test_toy_protocol_with_an_unreachable_label_fails_with_the_message(pytester: pytest.Pytester):
    folder = pytester.mkpydir("toygate")
    (folder / "prereg.toml").write_text(textwrap.dedent(TOY_PREREG).format(name="toygate"))
    (folder / "test_reachability.py").write_text(TOY_TEST)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*test_label_reachable*NEAR_PERFECT_WITH_ERRORS*",
        "*gate: label NEAR_PERFECT_WITH_ERRORS unreachable at 32 items: no data set of that size decides it "
        "(all 33 enumerated)*",
    ])
