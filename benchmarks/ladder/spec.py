"""Capability ladder: the preregistration's form, the compiled preregistration, the unit record and constants.

The bottom of the package: it reads ``prereg.toml`` and imports nothing of
the package.  The worker prompt and parser (:mod:`.prompts`), the probe
(:mod:`.probe`), the probe directories (:mod:`.records`), the gate
(:mod:`.gate`), the analysis (:mod:`.analysis`), the cross-probe verdicts
(:mod:`.instrument`) and the protocol (:mod:`.protocol`) build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar, Literal

from benchmarks.core import ClassificationSpec, PreregError, ProtocolHeader, classification, load_prereg

HERE = Path(__file__).resolve().parent

OUTCOMES = ("correct", "wrong", "unparsed", "errored", "timeout")
DECISIONS = ("approve", "reject")
TIERS = (1, 2, 3, 4, 5)
VARIANTS = ("v1", "v2")
UNITS_FILE = "units.jsonl"
ANALYSIS_FILE = "analysis.json"
#: The classification a probe decides, and the four clauses reported as its breakdown.
RULE_BLOCKS = ("gate",)
BREAKDOWN_BLOCKS = ("clause_a", "clause_b", "clause_c", "clause_d")

__all__ = ["ANALYSIS_FILE", "BREAKDOWN_BLOCKS", "CLAUSES", "DECISIONS", "GATE", "HERE", "INSTRUMENT", "OUTCOMES",
           "PREREG", "RECORD_FIELDS", "RETUNE_RULE", "RULE_BLOCKS", "TIERS", "UNITS_FILE", "VARIANTS", "AnalysisSpec",
           "BalanceSpec", "FleetSpec", "LadderError", "LadderPrereg", "ProbeSpec", "RetuneSpec", "RoundsSpec",
           "RungSpec", "SharesSpec", "UnitRecord"]


# --------------------------------------------------------------------------- the preregistration


@dataclass(frozen=True)
class RungSpec:
    id: str  # the rung a plain run probes
    device: str


@dataclass(frozen=True)
class ProbeSpec:
    condition: str  # "autonomous": the worker alone
    units_per_tier: int  # episodes per tier in one probe
    max_tokens: int  # generation bound, uniform across rungs
    timeout_s: float  # per-unit deadline, uniform across rungs
    max_answer_chars: int  # characters of an answer a record keeps; a longer answer is answer_too_long
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
class BalanceSpec:
    approvable_share: tuple[float, float]  # band of every tier's approvable share, per frozen state
    episodes_per_tier: int  # sample per tier and state
    seed: int  # a tuning seed


@dataclass(frozen=True)
class FleetSpec:
    rungs: tuple[str, ...]  # rung labels, R0 the anchor
    names: tuple[str, ...]  # the served configurations of the seed's fleet
    parameters_total: tuple[float, ...]
    parameters_active: tuple[float, ...]


@dataclass(frozen=True)
class LadderPrereg:
    protocol: ProtocolHeader
    model: RungSpec
    probe: ProbeSpec
    rounds: RoundsSpec
    retune: RetuneSpec
    shares: SharesSpec
    analysis: AnalysisSpec
    balance: BalanceSpec
    fleet: FleetSpec
    thresholds: dict[str, float]
    gate: ClassificationSpec
    clause_a: ClassificationSpec
    clause_b: ClassificationSpec
    clause_c: ClassificationSpec
    clause_d: ClassificationSpec
    instrument: ClassificationSpec
    retune_rule: ClassificationSpec


class LadderError(ValueError):
    """A probe was asked for something the preregistration forbids, or its records cannot be read as asked."""


# --------------------------------------------------------------------------- the unit record


@dataclass(frozen=True)
class UnitRecord:
    """One probe unit (one episode shown to the worker once): a line of ``units.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 2  # 2: response_chars, response_sha256 and endpoint

    unit_id: str  # "t<tier>-<index:03d>": the ledger key
    rung: str  # the model as named on the command line (registry name, openai:MODEL@URL, ...)
    model_revision: str  # immutable revision of that model (commit sha or sha256 content hash)
    generator_variant: Literal["v1", "v2"]  # never pooled across
    generator_state: str  # name of the frozen generator state
    state_hash: str  # sha256 of that state's dial constants
    seed: int  # the probe's tuning seed
    condition: Literal["autonomous"]  # the worker alone
    supervisor: None  # always null: no supervisor sits in a probe
    tier: int  # 1-5, the irreversibility gradient
    family: str  # the task family of that tier
    episode_index: int  # index of the episode within its tier for this seed
    depth: int  # the episode's declared composition depth k
    checks: int  # number of checks the verdict depends on
    episode_sha256: str  # sha256 of the canonical JSON of the worker-visible fact dictionary
    ground_truth: Literal["approve", "reject"]  # the generator's verdict, confirmed by the evaluator
    prompt_sha256: str  # sha256 of the canonical JSON of the chat sent
    response_text: str  # the raw answer text ("" when none came); its first max_answer_chars when answer_too_long
    response_chars: int  # length of the whole answer in characters
    response_sha256: str  # sha256 of the whole answer (canonical_hash.sha256_text)
    finish_reason: str  # stop, length, error or none, as the backend reported it
    error_code: str | None  # the backend's coded failure (timeout, http_error, ...), else null
    decision: Literal["approve", "reject"] | None  # parse_decision(response_text); null when errored or unparsed
    outcome: Literal["correct", "wrong", "unparsed", "errored", "timeout"]  # the coded outcome the shares count
    latency_s: float  # wall-clock seconds the backend took for this unit
    endpoint: str | None = None  # the served endpoint that answered (of a pool, the one chosen); None when local


RECORD_FIELDS = tuple(f.name for f in fields(UnitRecord))
assert len(RECORD_FIELDS) == 26, RECORD_FIELDS


# --------------------------------------------------------------------------- the compiled preregistration

#: The preregistration, validated against :class:`LadderPrereg`.
PREREG = load_prereg(HERE / "prereg.toml", LadderPrereg)
_band = PREREG.values.thresholds
if [round(1 - _band["band_high"], 12), round(1 - _band["band_low"], 12)] != list(PREREG.values.analysis.band_episode_accuracy):
    raise PreregError(f"{PREREG.path}: key 'analysis.band_episode_accuracy' must be [1 - band_high, 1 - band_low] = "
                      f"[{1 - _band['band_high']:g}, {1 - _band['band_low']:g}]; the feasibility arithmetic reads it")
#: The probe's ordered gate.
GATE = classification(PREREG, "gate")
#: The gate's four clauses, by letter (``"a"`` to ``"d"``).
CLAUSES = {key[-1]: classification(PREREG, key) for key in BREAKDOWN_BLOCKS}
#: Across the probes of a round: the v2 instrument verdict and the retune rule.
INSTRUMENT = classification(PREREG, "instrument")
RETUNE_RULE = classification(PREREG, "retune_rule")
