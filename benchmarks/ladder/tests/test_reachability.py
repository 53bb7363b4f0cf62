"""Every ladder gate and clause label is reachable at the planned 30 episodes per tier, and so is every
instrument label over rounds of such probes.

Per probe, a seeded search draws a probe-level error rate, a per-tier spread
around it, a share of unparsed answers among the errors and a number of
errored or timed-out units, codes the outcome of each episode of the
registered generator state and seed accordingly, and feeds the 150 unit
records through the protocol's gate metrics and the compiled gate and clause
classifications (``benchmarks.core.reachability``).

The instrument verdict reads gate rows of whole rounds.  Its candidates are
rounds built from the probe witnesses found above: every assignment of an
in-band or an out-of-band probe to each (round, rung), enumerated in order.

The retune rule counts breaches of the retune discipline in the probes'
metadata (which probe retunes which, the dials moved, the seeds); no sample
size enters it, so it has no reachability question of its own.
"""

from __future__ import annotations

import itertools
import random
from functools import lru_cache

import pytest

from benchmarks.core.reachability import outcome_labels, reachability, seeded
from benchmarks.ladder.gate import gate_metrics, judge
from benchmarks.ladder.instrument import GateRow, instrument_verdict
from benchmarks.ladder.probe import episode_key, probe_episodes
from benchmarks.ladder.spec import CLAUSES, GATE, INSTRUMENT, PREREG, TIERS, UnitRecord
from fixtures.ladder import get_state
from canonical_hash import sha256_text

SEED = 20261201
SEARCH = 5000  # probe candidates at most; the search stops once every label has a witness
PROBE = PREREG.values.probe
STATE = get_state(PROBE.state)
EPISODES = probe_episodes(STATE, PROBE.seed, PROBE.units_per_tier)
SIZE = f"{PROBE.units_per_tier} episodes per tier ({len(TIERS)} tiers, {len(EPISODES)} units)"
OTHER = {"approve": "reject", "reject": "approve"}


def unit(episode, outcome: str) -> UnitRecord:
    error = {"timeout": "timeout", "errored": "http_error"}.get(outcome)
    decision = {"correct": episode.ground_truth, "wrong": OTHER[episode.ground_truth]}.get(outcome)
    return UnitRecord(
        unit_id=episode_key(episode), rung="R0", model_revision="sha256:" + "0" * 64,
        generator_variant=STATE.variant, generator_state=STATE.name, state_hash=STATE.state_hash, seed=PROBE.seed,
        condition="autonomous", supervisor=None, tier=episode.tier, family=episode.family,
        episode_index=episode.index, depth=episode.depth, checks=len(episode.checks), episode_sha256="",
        ground_truth=episode.ground_truth, prompt_sha256="", response_text=(text := "" if decision is None else decision),
        response_chars=len(text), response_sha256=sha256_text(text),
        finish_reason="error" if error else "stop", error_code=error, decision=decision, outcome=outcome,
        latency_s=0.0,
    )


def draw(rng: random.Random) -> tuple[UnitRecord, ...]:
    rate = rng.random()
    spread = {tier: rng.uniform(0.0, 2.0) for tier in TIERS}
    unparsed_share = rng.random()
    broken = set(rng.sample(range(len(EPISODES)), rng.randint(0, 8)))
    out = []
    for index, episode in enumerate(EPISODES):
        if index in broken:
            outcome = rng.choice(("errored", "timeout"))
        elif rng.random() < min(1.0, rate * spread[episode.tier]):
            outcome = "unparsed" if rng.random() < unparsed_share else "wrong"
        else:
            outcome = "correct"
        out.append(unit(episode, outcome))
    return tuple(out)


def probe_metrics(units):
    return gate_metrics(units, STATE.variant)


PROBE_BLOCKS = [GATE, *CLAUSES.values()]


@lru_cache(maxsize=1)
def probe_search():
    return reachability(PROBE_BLOCKS, seeded(draw, seed=SEED, count=SEARCH), probe_metrics, size=SIZE)


def test_planned_size():
    assert PROBE.units_per_tier == 30 and len(EPISODES) == 150
    assert STATE.variant == "v2"  # the gradient clause applies to the probed state


@pytest.mark.parametrize("block,label", [(b.name, label) for b in PROBE_BLOCKS for label in outcome_labels(b)])
def test_probe_label_reachable_at_planned_size(block, label):
    found = probe_search()[block]
    assert label in found.witnesses, found.message()
    witness = found.witnesses[label]
    assert len(witness) == len(EPISODES)
    result = judge(probe_metrics(witness))
    assert (result.label if block == GATE.name else result.clauses[block[-1]]) == label


ROUNDS = tuple(zip(PREREG.values.rounds.states, PREREG.values.rounds.seeds))
FLEET = {rung: rung for rung in PREREG.values.fleet.rungs}


def rounds():
    """Every assignment of the in-band witness or an out-of-band witness to each (round, rung)."""
    witnesses = probe_search()[GATE.name].witnesses
    inside = witnesses[GATE.passing]
    outside = next(w for label, w in witnesses.items() if label != GATE.passing)
    rows_of = {True: judge(probe_metrics(inside)), False: judge(probe_metrics(outside))}
    cells = [(state, seed, rung) for state, seed in ROUNDS for rung in FLEET]
    for choice in itertools.product((True, False), repeat=len(cells)):
        yield tuple(GateRow(f"{state}-{rung}", rung, state, "v2", seed, rows_of[passed])
                    for (state, seed, rung), passed in zip(cells, choice))


def round_metrics(rows):
    return instrument_verdict(rows, FLEET).metrics()


@pytest.mark.parametrize("label", outcome_labels(INSTRUMENT))
def test_instrument_label_reachable_from_planned_probes(label):
    size = f"{len(ROUNDS)} rounds of {len(FLEET)} probes of {SIZE}"
    found = reachability(INSTRUMENT, rounds(), round_metrics, size=size, exhaustive=True)[INSTRUMENT.name]
    assert label in found.witnesses, found.message()
    assert instrument_verdict(found.witnesses[label], FLEET).label == label
