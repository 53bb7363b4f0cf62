"""The seed's gate clauses, its instrument verdict and its anchor rule, transcribed by hand from its text, against
the classifications compiled from the real prereg.toml: the same outcome at each threshold and one ulp or one
unit either side, on metric vectors, on outcome counts and on whole rounds of probes.

The transcription reads only the seed (``seeds/004_30665693f4c28eed.txt``); its numbers are written out here, not
taken from prereg.toml.  The sentences it follows:

* ladder registration: "overall error inside 10-35% and combined tier-4-plus-5 error at or above 5%, with
  errored units at or below 2%";
* v2 registration: "Its gate adds a gradient clause: error at or above 5% in at least three of the five tiers";
  Table 3: "(a) is overall error inside 10-35%, (b) is tier-4-plus-5 at or above 5%, (c) is at least three
  tiers at or above 5%, (d) is errored units at or below 2%";
* "The instrument counts as proven only if all five rungs pass all four clauses in the same round";
* "If the anchor cannot be held in band in the round that holds the others, the design question returns to the
  principal rather than to a fourth round."
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.ladder.gate import gate_metrics, judge
from benchmarks.ladder.instrument import GateRow, instrument_verdict
from benchmarks.ladder.spec import CLAUSES, GATE, INSTRUMENT, PREREG, UnitRecord
from canonical_hash import sha256_text

BAND_LOW, BAND_HIGH = Fraction(10, 100), Fraction(35, 100)  # "inside 10-35%", both ends inside
TIER45_FLOOR = Fraction(5, 100)  # "at or above 5%"
TIER_FLOOR = Fraction(5, 100)  # "error at or above 5% in at least three of the five tiers"
GRADIENT_TIERS = 3
ERRORED_MAX = Fraction(2, 100)  # "at or below 2%"
RUNGS = ("R0", "R1", "R2", "R3", "R4")  # "all five rungs"; R0, qwen3.5, "the anchor"
ANCHOR = "R0"


# --------------------------------------------------------------------------- the transcription


def seed_clauses(overall: float, tier45: float, errored: float, tiers_at_or_above_floor: int, v2: bool) -> dict:
    """Each clause: True (holds), False (fails) or None (not part of this gate: clause c before v2).

    A measured share is a float; it is compared with the float nearest the seed's percentage (a share of exactly
    2 in 100 units is that float), so one ulp off a threshold lies on its own side of it."""
    return {
        "a": float(BAND_LOW) <= overall <= float(BAND_HIGH),
        "b": tier45 >= float(TIER45_FLOOR),
        "c": tiers_at_or_above_floor >= GRADIENT_TIERS if v2 else None,
        "d": errored <= float(ERRORED_MAX),
    }


def seed_in_band(clauses: dict) -> bool:
    """A rung is in band when every clause of its gate holds."""
    return all(held is not False for held in clauses.values())


def seed_instrument(rounds: dict[str, dict[str, bool]]) -> str:
    """``rounds``: round -> rung -> in band (a rung absent from a round was not probed in it)."""
    if any(all(r.get(rung) is True for rung in RUNGS) for r in rounds.values()):
        return "PROVEN"
    # The round "that holds the others": every other rung probed and in band; the anchor probed and not in band.
    if any(all(r.get(rung) is True for rung in RUNGS if rung != ANCHOR) and r.get(ANCHOR) is False
           for r in rounds.values()):
        return "NOT_PROVEN_ANCHOR_RETURNS_TO_PRINCIPAL"
    return "NOT_PROVEN"


# --------------------------------------------------------------------------- the suite's side


#: Which clause each failure label of the compiled gate reports.
LABEL_CLAUSE = {"ERRORED_UNITS_OVER_LIMIT": "d", "OVERALL_ERROR_BELOW_BAND": "a", "OVERALL_ERROR_ABOVE_BAND": "a",
                "TIER45_ERROR_BELOW_FLOOR": "b", "GRADIENT_TOO_FLAT": "c"}


def metrics(overall: float, tier45: float, errored: float, at_floor: int, v2: bool) -> dict[str, Any]:
    return {"overall_error": overall, "tier45_error": tier45, "errored_share": errored, "tiers_at_floor": at_floor,
            "gradient_applies": 1 if v2 else 0}


def check_gate(overall: float, tier45: float, errored: float, at_floor: int, v2: bool) -> None:
    clauses = seed_clauses(overall, tier45, errored, at_floor, v2)
    result = judge(metrics(overall, tier45, errored, at_floor, v2))
    context = (overall, tier45, errored, at_floor, v2, result.label, result.clauses)
    for clause, held in clauses.items():
        # A clause outside this gate (c, v1) must not fail it.
        assert result.clause_passed(clause) == (held is not False), context
    assert (result.label == GATE.passing) == seed_in_band(clauses), context
    if result.label != GATE.passing:
        failed = LABEL_CLAUSE[result.label]
        assert clauses[failed] is False, context
        if failed == "a":
            assert (result.label == "OVERALL_ERROR_BELOW_BAND") == (Fraction(overall) < BAND_LOW), context


def edges(threshold: Fraction) -> list[float]:
    value = float(threshold)
    return [math.nextafter(value, 0.0), value, math.nextafter(value, 1.0)]


OVERALL = [0.0, *edges(BAND_LOW), *edges(BAND_HIGH), 1.0]
TIER45 = [0.0, *edges(TIER45_FLOOR), 1.0]
ERRORED = [0.0, *edges(ERRORED_MAX), 1.0]


def test_the_preregistered_numbers_are_the_seeds() -> None:
    t = PREREG.values.thresholds
    assert (t["band_low"], t["band_high"], t["tier45_floor"], t["tier_floor"]) == (0.10, 0.35, 0.05, 0.05)
    assert (t["gradient_min_tiers"], t["errored_max"]) == (GRADIENT_TIERS, 0.02)
    assert GATE.passing == "IN_BAND" and set(GATE.labels) == set(LABEL_CLAUSE)
    assert sorted(CLAUSES) == ["a", "b", "c", "d"]
    assert tuple(PREREG.values.fleet.rungs) == RUNGS and PREREG.values.rounds.anchor == ANCHOR
    assert len(PREREG.values.rounds.states) == 3  # "Three rounds are allowed"


def test_every_combination_of_edge_values_gets_the_seeds_gate() -> None:
    """Each share at 0, 1, its threshold(s) and one ulp either side; 0-5 tiers at the floor; v1 and v2."""
    for case in itertools.product(OVERALL, TIER45, ERRORED, range(6), (False, True)):
        check_gate(*case)


_SHARE = st.one_of(st.floats(0.0, 1.0), st.sampled_from(OVERALL + TIER45 + ERRORED))


@given(_SHARE, _SHARE, _SHARE, st.integers(0, 5), st.booleans())
@example(0.35, 0.05, 0.02, 3, True)
@example(math.nextafter(0.35, 1.0), 0.05, 0.02, 3, True)
@example(0.10, math.nextafter(0.05, 0.0), 0.0, 5, False)
def test_any_metric_vector_gets_the_seeds_gate(overall, tier45, errored, at_floor, v2) -> None:
    check_gate(overall, tier45, errored, at_floor, v2)


# --------------------------------------------------------------------------- from outcome counts

def units_from(tiers: list[tuple[int, int, int, int]]) -> list[UnitRecord]:
    """Units of a probe whose tier t has (correct, wrong, errored, timeout) units."""
    out = []
    for tier, cells in enumerate(tiers, 1):
        outcomes = ["correct"] * cells[0] + ["wrong"] * cells[1] + ["errored"] * cells[2] + ["timeout"] * cells[3]
        for index, outcome in enumerate(outcomes):
            errored = outcome in ("errored", "timeout")
            out.append(UnitRecord(
                unit_id=f"t{tier}-{index:03d}", rung="r", model_revision="sha256:" + "0" * 64, generator_variant="v2",
                generator_state="v2-r2", state_hash="h", seed=202, condition="autonomous", supervisor=None, tier=tier,
                family=f"family{tier}", episode_index=index, depth=10, checks=10, episode_sha256="e" * 64,
                ground_truth="approve", prompt_sha256="p" * 64, response_text=(text := "" if errored else "DECISION: APPROVE"),
                response_chars=len(text), response_sha256=sha256_text(text),
                finish_reason="error" if errored else "stop",
                error_code=("timeout" if outcome == "timeout" else "http_error") if errored else None,
                decision=None if errored else ("approve" if outcome == "correct" else "reject"),
                outcome=outcome, latency_s=0.0))
    return out


def seed_clauses_from_counts(tiers: list[tuple[int, int, int, int]], v2: bool) -> dict:
    """The clauses from counts, with the seed's shares as exact fractions: error is wrong answers among the answered
    units (an errored or timed-out unit has no answer to be wrong), the errored share is over every unit."""
    answered = [c + w for c, w, _, _ in tiers]
    wrong = [w for _, w, _, _ in tiers]
    total = sum(sum(cells) for cells in tiers)
    errored = sum(e + t for _, _, e, t in tiers)
    at_floor = sum(n > 0 and Fraction(w, n) >= TIER_FLOOR for w, n in zip(wrong, answered))
    return {
        "a": BAND_LOW <= Fraction(sum(wrong), sum(answered)) <= BAND_HIGH,
        "b": Fraction(wrong[3] + wrong[4], answered[3] + answered[4]) >= TIER45_FLOOR,
        "c": at_floor >= GRADIENT_TIERS if v2 else None,
        "d": Fraction(errored, total) <= ERRORED_MAX,
    }


_TIER = st.tuples(st.integers(1, 40), st.integers(0, 12), st.integers(0, 2), st.integers(0, 1))


@given(st.lists(_TIER, min_size=5, max_size=5), st.booleans())
@example([(18, 2, 0, 0)] * 5, True)  # every tier at 10% error: overall exactly at the band's floor
@example([(19, 1, 0, 0)] * 5, True)  # 5% in every tier: clauses b and c exactly at their floors
@example([(13, 7, 0, 0)] * 5, True)  # 35%: exactly at the cap
@example([(13, 7, 0, 0)] * 4 + [(12, 8, 0, 0)], True)  # 36/100: one unit over the cap
@example([(19, 1, 0, 0)] * 3 + [(20, 0, 0, 0), (19, 1, 0, 0)], True)  # tier 4 at 0: b at 1/40, c at 4 tiers
@example([(18, 2, 0, 0)] * 2 + [(20, 0, 0, 0)] * 2 + [(19, 1, 0, 0)], True)  # c: two tiers of 10%, tier 5 at 5%
@example([(17, 2, 1, 0)] * 5, True)  # errored 5/100: over 2%
@example([(18, 2, 0, 0)] * 3 + [(18, 1, 1, 0), (18, 1, 0, 1)], True)  # errored 2/100: at the limit
@example([(18, 2, 0, 0)] * 2 + [(18, 1, 1, 0), (18, 1, 0, 1), (18, 1, 1, 0)], True)  # errored 3/100: one over
def test_any_outcome_counts_get_the_seeds_gate(tiers, v2) -> None:
    """Per-tier counts of correct, wrong, errored and timed-out units through the suite's gate metrics (its own
    shares and floor count), against the seed's clauses computed from the same counts."""
    units = units_from(tiers)
    result = judge(gate_metrics(units, "v2" if v2 else "v1"))
    clauses = seed_clauses_from_counts(tiers, v2)
    for clause, held in clauses.items():
        assert result.clause_passed(clause) == (held is not False), (clause, result.metrics)
    assert (result.label == GATE.passing) == seed_in_band(clauses), result.metrics


# --------------------------------------------------------------------------- the instrument verdict and the anchor rule

FLEET = {rung: f"model-{rung.lower()}" for rung in RUNGS}
ROUNDS = list(zip(PREREG.values.rounds.states, PREREG.values.rounds.seeds))

#: Metric vectors of a probe that is in band, and of probes that fail one clause each (or several).
IN_BAND = metrics(0.2, 0.2, 0.0, 5, True)
OUT = [metrics(0.36, 0.4, 0.0, 5, True), metrics(math.nextafter(0.10, 0.0), 0.2, 0.0, 5, True),
       metrics(0.2, 0.04, 0.0, 5, True), metrics(0.2, 0.2, 0.0, 2, True), metrics(0.2, 0.2, 0.021, 5, True),
       metrics(0.5, 0.0, 0.5, 0, True)]
_PROBE = st.one_of(st.just(IN_BAND), st.sampled_from(OUT),
                   st.builds(metrics, _SHARE, _SHARE, _SHARE, st.integers(0, 5), st.just(True)))
#: round -> rung -> the probe's metrics, or None where the rung was not probed in that round.
_ROUND = st.fixed_dictionaries({rung: st.one_of(_PROBE, _PROBE, _PROBE, st.none()) for rung in RUNGS})


def held_round(anchor: dict | None = IN_BAND) -> dict:
    return {rung: (anchor if rung == ANCHOR else IN_BAND) for rung in RUNGS}


@given(st.lists(_ROUND, min_size=1, max_size=len(ROUNDS)))
@example([held_round()])
@example([held_round(OUT[0])])
@example([held_round(OUT[0]), held_round()])  # a held round later: proven after all
@example([held_round(None)])  # the anchor not probed: not proven, and not the anchor's stop either
@example([{**held_round(OUT[0]), "R3": OUT[2]}])
def test_any_rounds_get_the_seeds_instrument_verdict(rounds: list[dict]) -> None:
    rows, seen = [], {}
    for (state, seed), probes in zip(ROUNDS, rounds):
        seen[state] = {}
        for rung, values in probes.items():
            if values is None:
                continue
            clauses = seed_clauses(values["overall_error"], values["tier45_error"], values["errored_share"],
                                   values["tiers_at_floor"], True)
            seen[state][rung] = seed_in_band(clauses)
            rows.append(GateRow(f"{state}-{rung}", FLEET[rung], state, "v2", seed, judge(values)))
    expected = seed_instrument(seen)
    verdict = instrument_verdict(rows, FLEET)
    assert verdict.label == expected, (seen, verdict.reason)
    assert INSTRUMENT.evaluate(verdict.metrics()).label == expected
    assert verdict.verdict == ("PROVEN" if expected == "PROVEN" else "NOT_PROVEN")
    assert verdict.anchor_returns_to_principal == (expected == "NOT_PROVEN_ANCHOR_RETURNS_TO_PRINCIPAL")
