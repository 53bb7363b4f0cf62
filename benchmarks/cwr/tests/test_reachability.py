"""Every CWR classification label is reachable at the planned design: the registered P/R/E items and the
8 showcase pairs with their replicas (24 F/C pairs).

A seeded search draws how many P items are answered right, an F and a C
validity rate from which each pair's two sides are drawn, the R and E
accuracies, a share of provider errors (none in half the draws), the copy
baseline's count of flagged pairs and the pair set's gate properties
(witness-only and exposure-unmatched pairs, greedy and random solves; each
failing in a quarter of the draws), builds the
records of every unit of the preregistered design with those outcomes, and
feeds them through the protocol's metric function (so the F - C interval is
whatever interval the protocol computes) and the compiled classification
(``benchmarks.core.reachability``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import pytest

from benchmarks.core.reachability import outcome_labels, reachability, seeded
from benchmarks.cwr.pairs import MOTIF_REQUIRED
from benchmarks.cwr.protocol import (
    GATE,
    PREREG,
    SYNTHESIS_CONDITIONS,
    CwrRecord,
    build_units,
    metrics,
    run_pairs,
)
from fixtures import FIXTURE_SETS
from canonical_hash import sha256_text

EMPTY = sha256_text("")  # the hash of an empty answer

SEED = 20261201
SEARCH = 4000  # candidates at most; the search stops once every label has a witness



@dataclass(frozen=True)
class Design:
    """The preregistered design's units, with a record of every unit answered right and wrong."""

    pairs: tuple
    units: list
    motif: set
    bases: list
    counts: dict
    size: str
    records: dict


@lru_cache(maxsize=1)
def design() -> Design:
    """Built on first use, not when the module is imported: a protocol run collects this module without
    running it."""
    pairs = run_pairs()
    units = build_units(FIXTURE_SETS[PREREG.values.measurement.fixture_set](), pairs, None)
    bases = sorted({p.pair_id.split("~")[0] for p in pairs})
    counts = {c: sum(u.condition == c for u in units) for c in ("P", "R", "E", "F", "C")}
    size = (f"{len(bases)} showcase pairs x {PREREG.values.measurement.replicas_per_pair} replicas "
            f"({counts['F']} F/C pairs) and {counts['P']} P items")
    records = {(u.item_id, flag): _record(u, flag) for u in units for flag in (True, False, None)}
    return Design(pairs, units, {p.pair_id for p in pairs if p.novelty == MOTIF_REQUIRED}, bases, counts, size,
                  records)


def _record(unit, correct: bool | None) -> CwrRecord:
    """The unit answered right (True), wrong (False) or errored by the provider (None)."""
    if correct is None:
        return CwrRecord(
            item_id=unit.item_id, condition=unit.condition, kind=unit.kind, pair_id=unit.pair_id,
            world_ref=unit.world_ref, family=unit.family, prompt="", prompt_sha256="", prompt_tokens=None,
            max_new_tokens=1, generation="", generation_chars=0, generation_sha256=EMPTY, generation_tokens=0,
            finish_reason="error", generation_error="provider_error", parse_status="generation_error", parsed=None,
            expected=unit.expected, check_status=None, check_reason=None, check_failing_step=None, correct=False,
            context=unit.context)
    synthesis = unit.condition in SYNTHESIS_CONDITIONS
    return CwrRecord(
        item_id=unit.item_id, condition=unit.condition, kind=unit.kind, pair_id=unit.pair_id,
        world_ref=unit.world_ref, family=unit.family, prompt="", prompt_sha256="", prompt_tokens=None,
        max_new_tokens=1, generation="", generation_chars=0,
            generation_sha256=EMPTY, generation_tokens=0, finish_reason="stop", generation_error=None,
        parse_status="ok", parsed=unit.expected if correct else None, expected=unit.expected,
        check_status=("VALID" if correct else "INVALID") if synthesis else None,
        check_reason=None if correct or not synthesis else "synthetic", check_failing_step=None,
        correct=correct, context=unit.context,
    )


def draw(rng: random.Random) -> tuple[tuple[CwrRecord, ...], dict]:
    made = design()
    p_right = set(rng.sample(range(made.counts["P"]), rng.randint(0, made.counts["P"])))
    rates = {"F": rng.random(), "C": rng.random(), "R": rng.random(), "E": rng.random()}
    # provider errors: none in half the draws, otherwise a share up to a tenth of the units
    error_rate = 0.0 if rng.random() < 0.5 else rng.random() * 0.1
    out, p_index = [], 0
    for u in made.units:
        if u.condition == "P":
            flag = p_index in p_right
            p_index += 1
        else:
            flag = rng.random() < rates[u.condition]
        out.append(made.records[(u.item_id, None if rng.random() < error_rate else flag)])
    flagged = 0 if rng.random() < 0.5 else rng.randint(1, len(made.pairs))
    # the pair set's gate properties, each failing in a quarter of the draws
    ids = sorted(p.pair_id for p in made.pairs)
    targets = 2 * len(ids)
    samples = PREREG.values.baselines.random_samples * targets

    def some() -> set[str]:
        return set() if rng.random() < 0.75 else set(rng.sample(ids, rng.randint(1, len(ids))))

    baselines = {"copy_flagged_pairs": flagged, "pairs": dict.fromkeys(ids, {}), "targets": targets,
                 "greedy_solved": 0 if rng.random() < 0.75 else rng.randint(0, targets),
                 "random_valid": 0 if rng.random() < 0.75 else rng.randint(0, samples // 10), "random_samples": samples}
    motif = set(ids) - some()
    subsets = {"motif_required": sorted(motif), "exposure_matched": sorted(set(ids) - some())}
    return tuple(out), (baselines, motif, subsets)


def candidate_metrics(candidate):
    records, (baselines, motif, subsets) = candidate
    return metrics(records, baselines, motif, subsets)


@lru_cache(maxsize=1)
def search():
    return reachability(GATE, seeded(draw, seed=SEED, count=SEARCH), candidate_metrics, size=design().size)[GATE.name]


def test_planned_design():
    made = design()
    assert len(made.bases) == 8 and PREREG.values.measurement.replicas_per_pair == 3
    assert made.counts["F"] == made.counts["C"] == len(made.pairs) == 24


@pytest.mark.parametrize("label", outcome_labels(GATE))
def test_label_reachable_at_planned_size(label):
    found = search()
    assert label in found.witnesses, found.message()
    records, baselines = found.witnesses[label]
    assert len(records) == len(design().units)
    measured = {k: float(v) for k, v in candidate_metrics((records, baselines)).items()
                if isinstance(v, (int, float)) and v == v}
    assert GATE.evaluate(measured).label == label
