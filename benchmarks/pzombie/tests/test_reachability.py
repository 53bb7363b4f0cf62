"""Every label of the four P-Zombie classifications is reachable at the planned 80 measured prompts
(20 per category) under each of the two presets.

A seeded search draws, per preset, how sharply the router's weights peak in
each category, how strongly the sharpness follows the token diversity of the
input and how much noise it carries, and, per candidate, how far the token
diversity of the inputs differs between categories.  From these it builds a
record per preset and measured prompt (input token ids with that diversity,
zone weights whose entropy is the recorded H), and feeds them through the
protocol's metric function and every compiled classification
(``benchmarks.core.reachability``).
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

import pytest

from benchmarks.core.reachability import outcome_labels, reachability, seeded
from benchmarks.pzombie.metrics import metrics, token_diversity, zone_entropy_bits
from benchmarks.pzombie.spec import CATEGORIES, CLASSIFICATIONS, PREREG, PRESET_PREFIX, ZONES, PzRecord, unit_id
from fixtures.pzombie import measured_prompts

SEED = 20261201
SEARCH = 2000  # candidates at most; the search stops once every label has a witness
PROMPTS = measured_prompts()
TOKENS = 40  # length of each synthetic input: its diversity takes the values k / 40
BLOCKS = list(CLASSIFICATIONS.values())
SIZE = f"{len(PROMPTS)} measured prompts per preset ({', '.join(CATEGORIES)}: 20 each)"


def _ids(rng: random.Random, diversity: float) -> tuple[int, ...]:
    distinct = min(TOKENS, max(2, round(diversity * TOKENS)))
    ids = list(range(2, 2 + distinct)) + [rng.randrange(2, 2 + distinct) for _ in range(TOKENS - distinct)]
    rng.shuffle(ids)
    return tuple(ids)


def _weights(sharpness: float, direction: list[float]) -> tuple[float, ...]:
    logits = [sharpness * g for g in direction]
    top = max(logits)
    raw = [math.exp(v - top) for v in logits]
    return tuple(v / math.fsum(raw) for v in raw)


def _record(preset: str, row: dict, ids: tuple[int, ...], weights: tuple[float, ...]) -> PzRecord:
    return PzRecord(
        unit_id=unit_id(preset, row["prompt_id"]), preset=preset, prompt_id=row["prompt_id"],
        category=row["category"], prompt=row["text"], input_token_ids=ids, token_diversity=token_diversity(ids),
        zones=ZONES, zone_weights=weights, zone_weights_mean=weights, zone_entropy=zone_entropy_bits(weights),
        zone=ZONES[max(range(len(ZONES)), key=weights.__getitem__)], kurtosis=(), phi=(), completion="",
        completion_token_ids=(), new_tokens=0, finish_reason="length", error=None, error_detail=None,
        seconds=0.0, engine={},
    )


def draw(rng: random.Random) -> tuple[PzRecord, ...]:
    direction = [rng.gauss(0.0, 1.0) for _ in ZONES]
    separation, spread = rng.uniform(0.0, 0.15), rng.uniform(0.02, 0.12)
    td_mean = {c: 0.7 + rng.gauss(0.0, separation) for c in CATEGORIES}
    inputs = {row["prompt_id"]: _ids(rng, min(1.0, max(0.05, rng.gauss(td_mean[row["category"]], spread))))
              for row in PROMPTS}
    records = []
    for preset in PRESET_PREFIX:
        base, scale = rng.uniform(0.0, 3.0), rng.uniform(0.0, 1.5)
        level = {c: base + scale * rng.gauss(0.0, 1.0) for c in CATEGORIES}
        coupling = rng.uniform(-15.0, 15.0) if rng.random() < 0.5 else 0.0
        noise = rng.uniform(0.01, 1.0)
        for row in PROMPTS:
            ids = inputs[row["prompt_id"]]
            sharp = level[row["category"]] + coupling * (token_diversity(ids) - 0.7) + rng.gauss(0.0, noise)
            records.append(_record(preset, row, ids, _weights(max(0.0, sharp), direction)))
    return tuple(records)


@lru_cache(maxsize=1)
def search():
    return reachability(BLOCKS, seeded(draw, seed=SEED, count=SEARCH), metrics, size=SIZE)


def test_planned_size():
    assert PREREG.values.run.measured_prompts == len(PROMPTS) == 80
    assert {c: sum(r["category"] == c for r in PROMPTS) for c in CATEGORIES} == {c: 20 for c in CATEGORIES}


@pytest.mark.parametrize("block,label", [(b.name, label) for b in BLOCKS for label in outcome_labels(b)])
def test_label_reachable_at_planned_size(block, label):
    found = search()[block]
    assert label in found.witnesses, found.message()
    witness = found.witnesses[label]
    assert len(witness) == len(PROMPTS) * len(PRESET_PREFIX)
    measured = {k: float(v) for k, v in metrics(witness).items() if isinstance(v, (int, float)) and math.isfinite(v)}
    assert next(b for b in BLOCKS if b.name == block).evaluate(measured).label == label
