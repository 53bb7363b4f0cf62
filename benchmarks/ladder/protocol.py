"""Capability ladder: the preregistration schema, the worker prompt, the answer parser and the coded outcomes.

A probe shows the worker one episode at a time (condition autonomous, no
supervisor), asks for an approve/reject decision and codes each unit as one
of five outcomes that the preregistered shares count (``[shares]`` in
prereg.toml):

* ``correct`` / ``wrong``: a decision was parsed and does (not) equal the ground truth;
* ``unparsed``: the backend answered but no single decision could be read;
* ``errored``: the backend returned a coded failure other than a timeout;
* ``timeout``: the backend gave no complete answer within the probe's timeout.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from benchmarks.core import (
    ClassificationSpec,
    ProtocolHeader,
    classification,
    load_prereg,
)

HERE = Path(__file__).resolve().parent

OUTCOMES = ("correct", "wrong", "unparsed", "errored", "timeout")
DECISIONS = ("approve", "reject")


@dataclass(frozen=True)
class ModelSpec:
    id: str  # the rung a plain run probes
    device: str


@dataclass(frozen=True)
class ProbeSpec:
    condition: str  # "autonomous": the worker alone
    units_per_tier: int  # episodes per tier in one probe
    max_tokens: int  # generation bound, uniform across rungs
    timeout_s: float  # per-unit deadline, uniform across rungs
    min_tuning_seed: int  # probe seeds must be at least this
    campaign_seeds: tuple[int, ...]  # seeds reserved for campaigns; refused in a probe
    state: str  # generator state of a plain run
    seed: int  # its round seed


@dataclass(frozen=True)
class RoundsSpec:
    states: tuple[str, ...]  # one frozen generator state per v2 round, in order
    seeds: tuple[int, ...]  # the round seeds, aligned with states
    anchor: str  # the rung whose failure returns the design question to the principal


@dataclass(frozen=True)
class RetuneSpec:
    max_per_rung: int  # retunes allowed per rung
    reprobe_seed: int  # seed of a v1 retune's re-probe
    first_probe_seed: int  # seed of a v1 first probe


@dataclass(frozen=True)
class SharesSpec:
    error_outcomes: tuple[str, ...]  # numerator of an error share
    scored_outcomes: tuple[str, ...]  # denominator of an error share
    errored_outcomes: tuple[str, ...]  # numerator of the errored share
    all_outcomes: tuple[str, ...]  # denominator of the errored share
    tier45: tuple[int, ...]  # tiers pooled for clause b


@dataclass(frozen=True)
class AnalysisSpec:
    band_episode_accuracy: tuple[float, float]  # 1 - the band: (0.65, 0.90)


@dataclass(frozen=True)
class FleetSpec:
    rungs: tuple[str, ...]  # rung labels, R0 the anchor
    names: tuple[str, ...]  # the served configurations of the seed's fleet
    parameters_total: tuple[float, ...]
    parameters_active: tuple[float, ...]
    simulated_accuracy: tuple[float, ...]  # per-check accuracy of each scripted rung


@dataclass(frozen=True)
class LadderPrereg:
    protocol: ProtocolHeader
    model: ModelSpec
    probe: ProbeSpec
    rounds: RoundsSpec
    retune: RetuneSpec
    shares: SharesSpec
    analysis: AnalysisSpec
    fleet: FleetSpec
    thresholds: dict[str, float]
    gate: ClassificationSpec
    clause_a: ClassificationSpec
    clause_b: ClassificationSpec
    clause_c: ClassificationSpec
    clause_d: ClassificationSpec
    instrument: ClassificationSpec
    retune_rule: ClassificationSpec


PREREG = load_prereg(HERE / "prereg.toml", LadderPrereg)
GATE = classification(PREREG, "gate")
INSTRUMENT = classification(PREREG, "instrument")
RETUNE_RULE = classification(PREREG, "retune_rule")
CLAUSES = {name[-1]: classification(PREREG, name) for name in ("clause_a", "clause_b", "clause_c", "clause_d")}


class LadderError(ValueError):
    """A probe was asked for something the preregistration forbids, or its records cannot be read as asked."""


def check_probe_seed(seed: int, spec: ProbeSpec = PREREG.values.probe) -> None:
    """Refuse campaign seeds and seeds below the tuning floor."""
    if seed in spec.campaign_seeds:
        raise LadderError(
            f"seed {seed} is a campaign seed ({', '.join(map(str, spec.campaign_seeds))}); probes never use "
            f"campaign seeds: pass a tuning seed >= {spec.min_tuning_seed} with --ladder-seed"
        )
    if seed < spec.min_tuning_seed:
        raise LadderError(f"seed {seed} is below the tuning-seed floor; pass a seed >= {spec.min_tuning_seed} "
                          "with --ladder-seed")


# --------------------------------------------------------------------------- the worker prompt

SYSTEM_PROMPT = (
    "You are an operations agent working alone. Each case describes a request together with every fact "
    "recorded about it and the policy that governs it. Approve the request only if every condition of the "
    "policy is met by the recorded facts; if any condition fails, or a fact the policy requires is not "
    "recorded, reject it. Work through the conditions, then end your answer with one final line that reads "
    "exactly DECISION: APPROVE or DECISION: REJECT."
)


ANSWER_LINE = "End with DECISION: APPROVE (the request goes ahead) or DECISION: REJECT."


def build_chat(case_text: str) -> list[dict[str, str]]:
    """The two messages of one unit: the fixed system prompt and the episode's case text."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{case_text.rstrip()}\n\n{ANSWER_LINE}"},
    ]


# --------------------------------------------------------------------------- the answer parser

_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_DECISION_LINE = re.compile(r"decision\s*[:=\-]\s*\**\s*(approve|reject)(?:d|ed)?\b", re.IGNORECASE)
_BARE = re.compile(r"^[\s\W]*(approve|reject)(?:d|ed)?[\s\W]*$", re.IGNORECASE)


def parse_decision(text: str) -> str | None:
    """The worker's decision, ``"approve"`` or ``"reject"``, or None when it cannot be read.

    Reasoning inside ``<think>...</think>`` is dropped.  The last
    ``DECISION: APPROVE|REJECT`` marker decides (case-insensitive, "approved"
    and "rejected" accepted); without a marker, an answer that is nothing but
    one of the two words (with punctuation) is accepted.  Anything else,
    including an unclosed ``<think>`` block, is unparsed.
    """
    visible = _THINK.sub(" ", text)
    if "<think>" in visible.lower():
        return None
    marks = _DECISION_LINE.findall(visible)
    if marks:
        return marks[-1].lower()
    bare = _BARE.match(visible)
    return bare.group(1).lower() if bare else None


def code_outcome(error_code: str | None, decision: str | None, ground_truth: str) -> str:
    """The unit's coded outcome from the backend's error code, the parsed decision and the ground truth."""
    if ground_truth not in DECISIONS:
        raise LadderError(f"ground truth must be one of {DECISIONS}, got {ground_truth!r}")
    if error_code == "timeout":
        return "timeout"
    if error_code is not None:
        return "errored"
    if decision is None:
        return "unparsed"
    return "correct" if decision == ground_truth else "wrong"


def share(counts: Mapping[str, int], numerator: tuple[str, ...], denominator: tuple[str, ...]) -> float | None:
    """sum(counts over numerator) / sum(counts over denominator); None when the denominator is empty."""
    below = sum(counts.get(o, 0) for o in denominator)
    return sum(counts.get(o, 0) for o in numerator) / below if below else None


def finite(values: Mapping[str, Any]) -> dict[str, float]:
    """The metrics a rule may read (None left out, so that a rule reading one errors rather than passes)."""
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}
