"""The seed's decision rules, transcribed by hand, agree with the rules compiled from ``prereg.toml``.

The transcription below is written from the Fiction-CWR seed
(``seeds/003_011fefb3b7344729.txt``), not from the preregistration:

* "Reject copying-solvable structural fixtures before observing model
  outcomes": a pair a copied demonstration solves rejects the fixture before
  any model outcome counts;
* "For each pinned evaluated model meeting a preregistered primitive-mastery
  criterion", tau = 0.90 ("ninety percent requires high prerequisite
  performance"), and "failed design/prerequisite gates block attribution":
  P accuracy below tau in a family the run scores blocks every deficit reading;
* "Success criterion: ... lower interval bound reaches the chosen deficit",
  delta = 0.20: lower bound at least delta;
* "Failure criterion: upper bound below the chosen deficit rejects that size":
  upper bound strictly below delta;
* "Intervals spanning the boundary are inconclusive": everything else
  (lower below delta, upper at or above it).

The errored-units limit is the suite's, not the seed's: the seed only says
that the grader "separates provider/harness errors from returned
malformed/semantic failures", so errored units leave every denominator and a
run with more than ``errored_max`` of its units errored (the ladder's limit,
0.02) is not read at all; it comes first.

The attribution gates: "If only one witness is audited, label the fixture
'witness-only demonstration-relative novelty' and exclude it from
confirmatory necessary-composition claims" (a witness-only pair blocks the
claim); the release gates "complete F/C exposure and novelty manifests" and
"baseline competence and family difficulty" (F and C demonstrations of
unequal primitive exposure block it; so does a target set that a greedy
heuristic or random sequences solve, the limits greedy_max = delta = 0.20 and
random_max = 0.05 being the suite's); and "the success criterion ... all
attribution gates survive". The seed does not order the gates among
themselves; the suite puts them witness-only, exposure, baselines, copy,
mastery.

The seed orders the two gates before the two criteria ("before observing
model outcomes"; gates "block attribution") and does not order the copy gate
against the mastery gate; the copy gate comes first here because it is
decided before any model outcome is seen.  Success and failure exclude each
other for any interval (lower <= upper), so their order is not a choice.
Hypothesis draws metric vectors, the boundary values themselves and their
floating-point neighbours included, and checks the compiled classification
(``GATE``, from the real ``prereg.toml``) against this transcription.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.cwr.protocol import GATE, PREREG

#: The seed's proposed decision values (section "Substantive scoped hypothesis").
SEED_DELTA = 0.20
SEED_TAU = 0.90
#: The suite's errored-units limit (the ladder's) and baseline-competence limits.
ERRORED_MAX = 0.02
GREEDY_MAX = SEED_DELTA
RANDOM_MAX = 0.05


@dataclass(frozen=True)
class Gates:
    """The pair set's gate properties (all open by default)."""

    witness_only: int = 0
    exposure_unmatched: int = 0
    greedy: float = 0.0
    random: float = 0.0

    def values(self) -> dict[str, float]:
        return {"pairs.witness_only": float(self.witness_only), "pairs.exposure_unmatched": float(self.exposure_unmatched),
                "baselines.greedy_solved_share": self.greedy, "baselines.random_valid_rate": self.random}


def seed_classification(copy_flagged_pairs: int, p_accuracy: float, lower: float, upper: float,
                        errored_share: float = 0.0, gates: Gates = Gates()) -> str:
    """The seed's decision, in its own words' order (see the module docstring)."""
    if errored_share > ERRORED_MAX:
        return "ERRORED_UNITS_OVER_LIMIT"
    if gates.witness_only:
        return "WITNESS_ONLY_PAIRS_IN_CLAIM"
    if gates.exposure_unmatched:
        return "EXPOSURE_NOT_MATCHED"
    if gates.greedy > GREEDY_MAX or gates.random > RANDOM_MAX:
        return "BASELINE_SOLVES_TARGETS"
    if copy_flagged_pairs > 0:
        return "FIXTURE_REJECTED_BY_COPY_BASELINE"
    if not p_accuracy >= SEED_TAU:
        return "PRIMITIVE_MASTERY_NOT_ESTABLISHED"
    if lower >= SEED_DELTA:
        return "RECOMBINATION_DEFICIT_SUPPORTED"
    if upper < SEED_DELTA:
        return "DEFICIT_OF_DELTA_REJECTED"
    return "INCONCLUSIVE"


def _near(value: float) -> list[float]:
    return [math.nextafter(value, -math.inf), value, math.nextafter(value, math.inf)]


ACCURACY = st.one_of(st.sampled_from(_near(SEED_TAU) + [0.0, 1.0]), st.floats(0.0, 1.0))
BOUND = st.one_of(st.sampled_from(_near(SEED_DELTA) + [-1.0, 0.0, 1.0]), st.floats(-1.0, 1.0))
FLAGGED = st.one_of(st.just(0), st.integers(0, 24))
ERRORED = st.one_of(st.sampled_from(_near(ERRORED_MAX) + [0.0, 1.0]), st.floats(0.0, 1.0))
GATES = st.one_of(st.just(Gates()), st.builds(
    Gates, st.one_of(st.just(0), st.integers(0, 6)), st.one_of(st.just(0), st.integers(0, 6)),
    st.one_of(st.sampled_from(_near(GREEDY_MAX) + [0.0, 1.0]), st.floats(0.0, 1.0)),
    st.one_of(st.sampled_from(_near(RANDOM_MAX) + [0.0, 1.0]), st.floats(0.0, 1.0))))


def test_the_preregistration_freezes_the_seed_values():
    assert PREREG.values.thresholds["delta"] == SEED_DELTA
    assert PREREG.values.thresholds["tau"] == SEED_TAU
    assert PREREG.values.thresholds["errored_max"] == ERRORED_MAX
    assert PREREG.values.thresholds["greedy_max"] == GREEDY_MAX
    assert PREREG.values.thresholds["random_max"] == RANDOM_MAX


@given(flagged=FLAGGED, p_accuracy=ACCURACY, bounds=st.tuples(BOUND, BOUND), errored=ERRORED, gates=GATES)
@example(flagged=0, p_accuracy=SEED_TAU, bounds=(SEED_DELTA, SEED_DELTA), errored=0.0, gates=Gates())
@example(flagged=0, p_accuracy=SEED_TAU, bounds=(math.nextafter(SEED_DELTA, 0), SEED_DELTA), errored=0.0, gates=Gates())
@example(flagged=0, p_accuracy=SEED_TAU, bounds=(0.0, math.nextafter(SEED_DELTA, 0)), errored=0.0, gates=Gates())
@example(flagged=0, p_accuracy=math.nextafter(SEED_TAU, 0), bounds=(0.5, 0.9), errored=0.0, gates=Gates())
@example(flagged=1, p_accuracy=1.0, bounds=(0.5, 0.9), errored=0.0, gates=Gates())
@example(flagged=0, p_accuracy=1.0, bounds=(0.20000000000000004, 0.5), errored=0.0, gates=Gates())
@example(flagged=1, p_accuracy=0.0, bounds=(0.5, 0.9), errored=math.nextafter(ERRORED_MAX, 1), gates=Gates(1, 1))
@example(flagged=0, p_accuracy=1.0, bounds=(0.5, 0.9), errored=ERRORED_MAX, gates=Gates())
@example(flagged=0, p_accuracy=1.0, bounds=(0.5, 0.9), errored=0.0, gates=Gates(greedy=GREEDY_MAX, random=RANDOM_MAX))
@example(flagged=0, p_accuracy=1.0, bounds=(0.5, 0.9), errored=0.0,
         gates=Gates(greedy=math.nextafter(GREEDY_MAX, 1)))
@example(flagged=0, p_accuracy=1.0, bounds=(0.5, 0.9), errored=0.0,
         gates=Gates(random=math.nextafter(RANDOM_MAX, 1)))
@example(flagged=1, p_accuracy=1.0, bounds=(0.5, 0.9), errored=0.0, gates=Gates(0, 2, 1.0))
def test_compiled_rules_follow_the_seed(flagged: int, p_accuracy: float, bounds: tuple[float, float],
                                        errored: float, gates: Gates):
    lower, upper = sorted(bounds)
    values = {"baselines.copy_flagged_pairs": float(flagged), "mastery.min_family_accuracy": p_accuracy,
              "deficit.lower": lower, "deficit.upper": upper, "errored_share": errored, **gates.values()}
    assert GATE.evaluate(values).label == seed_classification(flagged, p_accuracy, lower, upper, errored, gates)


def test_every_seed_outcome_is_reachable_by_the_compiled_rules():
    """One vector per outcome of the seed, each decided identically (the boundary cases are the examples above)."""
    vectors = {
        "ERRORED_UNITS_OVER_LIMIT": (0, 1.0, 0.5, 0.9, 0.05),
        "WITNESS_ONLY_PAIRS_IN_CLAIM": (0, 1.0, 0.5, 0.9, 0.0, Gates(witness_only=2)),
        "EXPOSURE_NOT_MATCHED": (0, 1.0, 0.5, 0.9, 0.0, Gates(exposure_unmatched=7)),
        "BASELINE_SOLVES_TARGETS": (0, 1.0, 0.5, 0.9, 0.0, Gates(greedy=0.96)),
        "FIXTURE_REJECTED_BY_COPY_BASELINE": (1, 1.0, 0.5, 0.9),
        "PRIMITIVE_MASTERY_NOT_ESTABLISHED": (0, 0.5, 0.5, 0.9),
        "RECOMBINATION_DEFICIT_SUPPORTED": (0, 1.0, 0.2, 0.9),
        "DEFICIT_OF_DELTA_REJECTED": (0, 1.0, -0.3, 0.1),
        "INCONCLUSIVE": (0, 1.0, 0.1, 0.2),
    }
    assert sorted(vectors) == sorted(GATE.labels)
    for label, (flagged, p_accuracy, lower, upper, *rest) in vectors.items():
        share = rest[0] if rest else 0.0
        gates = rest[1] if len(rest) > 1 else Gates()
        assert seed_classification(flagged, p_accuracy, lower, upper, share, gates) == label
        values = {"baselines.copy_flagged_pairs": float(flagged), "mastery.min_family_accuracy": p_accuracy,
                  "deficit.lower": lower, "deficit.upper": upper, "errored_share": share, **gates.values()}
        assert GATE.evaluate(values).label == label
