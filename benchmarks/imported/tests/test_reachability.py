"""Every outcome of the built-in imported prereg can occur at its planned size (24 samples, one epoch).

A seeded search draws how many units are recorded, how many errored, and each scored unit's success, builds
the records (the committed lm-eval samples' ids and subsets), and feeds them through the protocol's metric
function and the compiled decision (``benchmarks.core.reachability``).
"""

from __future__ import annotations

import random

from benchmarks.core.reachability import outcome_labels, reachability, seeded
from benchmarks.imported.importers import import_lm_eval
from benchmarks.imported.metrics import decide, metrics_of
from benchmarks.imported.protocol import PROTOCOL

from .conftest import LMEVAL

SOURCE = PROTOCOL.spec.source
DECISION = PROTOCOL.classifications["classification"]
SAMPLES = import_lm_eval(LMEVAL / "smollm2")[1]


def draw(rng: random.Random) -> tuple:
    kept = SAMPLES if rng.random() < 0.8 else SAMPLES[: rng.randrange(1, len(SAMPLES))]
    errored = rng.choice([0, 0, 0, 1, 2])
    rate = rng.random()
    out = []
    for index, sample in enumerate(kept):
        if index < errored:
            sample = sample.__class__(**{**sample.__dict__, "scores": {}, "error": "scripted failure"})
        else:
            sample = sample.__class__(**{**sample.__dict__, "scores": {"acc": float(rng.random() < rate)}})
        out.append(decide(sample, SOURCE))
    return tuple(out)


def test_every_label_is_reachable_at_the_planned_size() -> None:
    assert SOURCE.planned_samples == len(SAMPLES) == 24
    found = reachability(DECISION, seeded(draw, seed=39, count=20000), lambda records: metrics_of(records, SOURCE),
                         size="24 samples, 1 epoch")[DECISION.name]
    found.check()
    assert set(found.witnesses) == set(outcome_labels(DECISION))
    assert all(len(found.witnesses[label]) == 24 for label in outcome_labels(DECISION) if label != "INCOMPLETE")
