"""Every RES gate label is reachable at the planned 32 items per condition.

A seeded search draws, per condition, how many items the logit choice gets
right, how many generations are right and how many are unparsed, builds the
records of the preregistered fixture set with those counts, and feeds them
through the protocol's metric function and the compiled gate
(``benchmarks.core.reachability``).  Each label must be decided by some
data set of that size; the witness is of that size and decides that label.
"""

from __future__ import annotations

import random
from functools import lru_cache

import pytest

from benchmarks.core.reachability import outcome_labels, reachability, seeded
from benchmarks.res.metrics import metrics
from benchmarks.res.spec import GATE, PREREG, ResRecord
from fixtures.res import CONDITIONS, build_res_fixtures, gold_label

SEED = 20261201
SEARCH = 20000  # candidates at most; the search stops once every label has a witness


def _rows() -> dict[str, list[dict]]:
    return build_res_fixtures(PREREG.values.measurement.fixture_set)


ROWS = _rows()
SIZES = {condition: len(ROWS[condition]) for condition in CONDITIONS}


def _other(label: str) -> str:
    return "B" if label == "A" else "A"


@lru_cache(maxsize=None)
def condition_records(condition: str, logit_right: int, generated_right: int, unparsed: int) -> tuple[ResRecord, ...]:
    """The condition's records with those counts: the first items right, then unparsed, then wrong."""
    out = []
    for index, row in enumerate(ROWS[condition]):
        ideal = gold_label(row)
        logit = ideal if index < logit_right else _other(ideal)
        if index < generated_right:
            parsed = ideal
        elif index < generated_right + unparsed:
            parsed = None
        else:
            parsed = _other(ideal)
        margin = 1.0 if logit == "A" else -1.0
        out.append(ResRecord(
            item_id=f"{condition}:{index:02d}", condition=condition, index=index, family_id=row["family_id"],
            ideal=ideal, prompt="", prompt_sha256="", prompt_tokens=None, label_token_ids=(1, 2),
            label_logits=(margin, 0.0), margin=margin, logit_choice=logit,
            generation="" if parsed is None else f"Answer: {parsed}", generation_token_ids=(),
            finish_reason="stop", generation_error=None, parsed=parsed,
        ))
    return tuple(out)


def draw(rng: random.Random) -> tuple[ResRecord, ...]:
    records: list[ResRecord] = []
    for condition in CONDITIONS:
        n = SIZES[condition]
        generated = rng.randint(0, n)
        records.extend(condition_records(condition, rng.randint(0, n), generated, rng.randint(0, n - generated)))
    return tuple(records)


SIZE = " and ".join(f"{n} items ({c})" for c, n in SIZES.items())


@lru_cache(maxsize=1)
def search():
    return reachability(GATE, seeded(draw, seed=SEED, count=SEARCH), metrics, size=SIZE)[GATE.name]


def test_planned_size_is_the_fixture_size():
    assert SIZES == {"five_factor": 32, "minimal_owner_indexed": 32}


@pytest.mark.parametrize("label", outcome_labels(GATE))
def test_label_reachable_at_planned_size(label):
    found = search()
    assert label in found.witnesses, found.message()
    witness = found.witnesses[label]
    assert len(witness) == sum(SIZES.values())
    assert GATE.evaluate({k: float(v) for k, v in metrics(witness).items() if v is not None}).label == label
