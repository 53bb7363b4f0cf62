"""Fiction-CWR: the preregistration's form, the compiled preregistration and the record types.

The bottom of the package: it reads ``prereg.toml`` and imports nothing of
the package.  The prompts and parsers (:mod:`.prompts`), the metrics
(:mod:`.metrics`), the pairs and splits (:mod:`.pairs`, :mod:`.splits`), the
units (:mod:`.units`), the planned power (:mod:`.design`) and the protocol
(:mod:`.protocol`) build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

import worlds
from benchmarks.core import (
    ClassificationSpec,
    ModelSpec,
    ProtocolHeader,
    classification,
    load_prereg,
)

#: The interval the CWR rules read: Tango's score interval for a paired difference on the pooled replica table,
#: its counts divided by the Rao-Scott design effect of the replicas within their base pairs.
INTERVAL_METHOD = "tango-score-rao-scott"

#: The F/C artifact extraction this version implements (``measurement.artifact_extraction``): the one
#: candidate artifact of an answer is graded and the prose around it unscored (``prompts.extract_artifact``).
ARTIFACT_EXTRACTION = "one-candidate"

HERE = Path(__file__).resolve().parent

CONDITIONS = ("P", "R", "E", "F", "C")
CONTROL_CONDITIONS = ("P", "R", "E")
SYNTHESIS_CONDITIONS = ("F", "C")
#: The pair sets a preregistration may name.
PAIR_SETS = ("showcase",)
#: Name under which the run's F/C pairs enter ``fixtures.json`` and the run identity (built by ``worlds``,
#: not a registered fixture set).
PAIRS_FIXTURE = "cwr-pairs"
BASELINES_FILE = "baselines.json"


@dataclass(frozen=True)
class SplitSpec:
    """One preregistered split (``[splits.<name>]``)."""

    generator: str  # the worlds generator version the split was frozen with (worlds.GENERATOR_VERSION)
    families: tuple[str, ...]  # families drawn, in this order
    pairs_per_tier: dict[str, int]  # tier -> base pairs per family, tiers in this order
    replicas: int  # F/C target replicas per base pair; each replica is one paired unit
    seed: int | None = None  # public split: the generator's seed
    seed_sha256: str | None = None  # committed split: sha256 of the secret seed text

    @property
    def committed(self) -> bool:
        return self.seed_sha256 is not None

    def bases_per_family(self) -> int:
        return sum(self.pairs_per_tier.values())


@dataclass(frozen=True)
class MeasurementSpec:
    fixture_set: str  # registered P/R/E fixture set
    pair_set: str  # "showcase": worlds.build_showcase_pairs()
    replicas_per_pair: int  # target replica seeds per showcase pair; each replica is one paired unit
    max_new_tokens: dict[str, int]  # generation bound per condition
    max_answer_chars: int  # characters of an answer a record keeps; a longer answer is answer_too_long
    artifact_extraction: str  # how an F/C answer's artifact is found (ARTIFACT_EXTRACTION)


@dataclass(frozen=True)
class BaselineSpec:
    random_samples: int  # seeded random step sequences per target


@dataclass(frozen=True)
class AnalysisSpec:
    confidence: float  # level of the paired F - C interval
    interval: str  # the method of the interval the rules read (INTERVAL_METHOD)


@dataclass(frozen=True)
class SensitivitySpec:
    delta: tuple[float, ...]  # deficit values the summary re-classifies at (report only)
    tau: tuple[float, ...]  # mastery values the summary re-classifies at (report only)


@dataclass(frozen=True)
class DiagnosticsSpec:
    analyses: tuple[str, ...]  # the diagnostic analyses a summary reports (benchmarks.cwr.diagnostics.ANALYSES)
    arms: tuple[str, ...] = ()  # the diagnostic arms a run may measure (--cwr-arm; benchmarks.cwr.arms.ARMS)


@dataclass(frozen=True)
class ConfirmatoryDesignSpec:
    """The prospective sample design of the confirmatory split (read by ``python -m benchmarks.core.design cwr``;
    no rule reads it and it sizes nothing in a development run)."""

    families: tuple[str, ...]  # families the base pairs come from, equal numbers of bases each
    bases_per_family: int  # base pairs per family
    replicas: int  # F/C target replicas per base pair
    c_validity: float  # assumed C exact validity of one replica
    theta: float  # assumed dependence of the F and C sides of one replica
    rho: float  # assumed within-base correlation of the replicas
    null_difference: float  # true F - C at which DEFICIT_OF_DELTA_REJECTED is the correct outcome
    effect_difference: float  # true F - C at which RECOMBINATION_DEFICIT_SUPPORTED is the correct outcome
    target: float  # required probability of the correct outcome at both
    simulations: int  # simulated data sets per probability
    seed: int  # simulation seed
    p_reject_at_null: float  # computed P(DEFICIT_OF_DELTA_REJECTED) at null_difference
    p_support_at_effect: float  # computed P(RECOMBINATION_DEFICIT_SUPPORTED) at effect_difference


@dataclass(frozen=True)
class DesignSpec:
    confirmatory: ConfirmatoryDesignSpec


@dataclass(frozen=True)
class CwrPrereg:
    protocol: ProtocolHeader
    model: ModelSpec
    seeds: dict[str, int]
    measurement: MeasurementSpec
    baselines: BaselineSpec
    analysis: AnalysisSpec
    thresholds: dict[str, float]
    diagnostics: DiagnosticsSpec
    sensitivity: SensitivitySpec
    design: DesignSpec
    splits: dict[str, SplitSpec]
    classification: ClassificationSpec



@dataclass(frozen=True)
class Unit:
    """One prompt to measure: a P/R/E item or one side of a pair."""

    item_id: str  # P/R/E: the fixture item id; F/C: "<F|C>:<pair id>"
    condition: str
    kind: str  # P: verdict/effect; R: retrieval; E: goal/non_goal/illegal; F/C: synthesis
    pair_id: str | None  # F/C: the pair; None for controls
    world_ref: str  # world behind the prompt (for F/C: "pair:<id>:<F|C>")
    family: str
    prompt_text: str  # the user message
    expected: Any  # P/R/E: the expected answer; F/C: None (every valid artifact passes)
    context: str | None = None  # E: "C", "F" or "none" (the condition context the prompt shows); None otherwise
    target: worlds.World | None = field(default=None, repr=False, compare=False)  # F/C: the world the checker grades
    #: F/C: the pair's withheld motif in the target's labels (producer, relation, consumer); not shown, not recorded
    motif: tuple[str, str, str] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class CwrRecord:
    """One unit's measurement: a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 3  # 2: the E context field; 3: generation_chars, generation_sha256, endpoint

    item_id: str
    condition: str  # P, R, E, F or C
    kind: str
    pair_id: str | None
    world_ref: str
    family: str
    prompt: str  # the rendered prompt text the model saw
    prompt_sha256: str
    prompt_tokens: int | None
    max_new_tokens: int  # the generation bound actually used
    generation: str  # raw greedy text; its first max_answer_chars when answer_too_long
    generation_chars: int  # length of the whole answer in characters
    generation_sha256: str  # sha256 of the whole answer (canonical_hash.sha256_text)
    generation_tokens: int  # generated token count (0 for backends that report no token ids, e.g. scripted)
    finish_reason: str
    generation_error: str | None  # coded backend failure; the unit counts as wrong
    parse_status: str  # one of PARSE_STATUSES
    parsed: Any  # P/R/E: the parsed answer; F/C: the extracted artifact text; None when not ok
    expected: Any  # P/R/E: the expected answer; F/C: None
    check_status: str | None  # F/C: VALID / INVALID / MALFORMED from worlds.check; None for controls
    check_reason: str | None  # F/C: the checker's reason
    check_failing_step: int | None  # F/C: the checker's first failing step (0-based)
    correct: bool  # P/R/E: exact match; F/C: check_status == VALID
    context: str | None  # E: "C", "F" or "none" (E_C, E_F, context-free); None for other conditions
    endpoint: str | None = None  # the served endpoint that answered (of a pool, the one chosen); None when local


#: The preregistration, validated against :class:`CwrPrereg`.
PREREG = load_prereg(HERE / "prereg.toml", CwrPrereg)
#: The five ordered rules, compiled with the prereg's thresholds.
GATE = classification(PREREG, "classification")


def gate_at(delta: float, tau: float):
    """The preregistered rule order compiled with other thresholds (for the sensitivity grid only)."""
    thresholds = {**PREREG.values.thresholds, "delta": float(delta), "tau": float(tau)}
    return PREREG.values.classification.build(thresholds)



def preregistered_names(key: str, listed: Sequence[str], known: Sequence[str], verb: str) -> tuple[str, ...]:
    """The names the prereg lists under ``key``, each one this version knows (``known``); else a ValueError naming
    the others (the callers check at import, so an unknown name stops before any work)."""
    unknown = [name for name in listed if name not in known]
    if unknown:
        raise ValueError(f"benchmarks/cwr/prereg.toml: {key} names {unknown}; this version {verb} "
                         f"{', '.join(known)}")
    return tuple(listed)


def base_pair(pair_id: str) -> str:
    """The base pair a replica belongs to (``PAIR-X~r2`` -> ``PAIR-X``; a base pair is its own)."""
    return pair_id.split("~r", 1)[0]

