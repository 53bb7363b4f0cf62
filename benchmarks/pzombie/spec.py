"""P-Zombie: the preregistration's form, the compiled preregistration, the record types and constants.

The bottom of the package: it reads ``prereg.toml`` and imports nothing of
the package.  The metrics (:mod:`.metrics`), the intervals
(:mod:`.intervals`), the engine's configuration and records
(:mod:`.engine`), the figures (:mod:`.figures`), the planned power
(:mod:`.design`) and the protocol (:mod:`.protocol`) build on it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.core import ClassificationSpec, ProtocolHeader, classification, load_prereg

HERE = Path(__file__).resolve().parent
#: The run's two figures (drawn by :mod:`benchmarks.pzombie.figures`).
FIGURES = ("zone_entropy_by_category.png", "entropy_vs_td.png")

__all__ = ["CATEGORIES", "CLASSIFICATIONS", "DEVIATIONS_FROM_ORIGINAL", "FIGURES", "HERE", "IMPLEMENTED_GENERATION",
           "IMPLEMENTED_INTERVALS", "OTHER_SCALE_WARMUP", "PREREG", "PRESET_PREFIX", "PUBLISHED", "ZONES",
           "GenerationSpec", "IntervalSpec", "PzPrereg", "PzRecord", "PzSettings", "PzUnit", "RunSpec", "ScaleSpec",
           "WarmupSpec", "calibration_file", "unit_id"]

#: Ways this suite's engine and protocol knowingly differ from the original behind SR61_FINAL_V2 (README "Deviations").
DEVIATIONS_FROM_ORIGINAL = (
    "BASELINE runs the calibrator and router as pure observers (the original recorded nothing there, H = 0)",
    "generation stops on <end_of_turn> (the original per-prompt path did not)",
    "phi is measured and calibrated as the router's second axis (the original never updated phi under Gemma 3)",
    "ACTIVE_MANIFOLD's selector, loop and blend operators are this suite's, written down in the prereg and README",
    "the prompts are this suite's own 80 + 10, one set for every path",
    "error records stay in the ledger and are counted; they make the run incomplete",
)

# --------------------------------------------------------------------------- preregistration


@dataclass(frozen=True)
class RunSpec:
    default_scale: str  # scale used when --scale is not given
    default_device: str  # device used when --device is not given
    presets: tuple[str, ...]  # measured in this order
    rule_preset: str  # the preset the three verdicts read
    comparison_preset: str  # the preset H2 compares against
    fixture_set: str  # registered fixture-set name of the prompts
    calibration_prompts: int
    measured_prompts: int
    categories: tuple[str, ...]
    isolation_cpu: str  # fork | spawn | inprocess
    isolation_cuda: str
    prompt_timeout_s: float
    cuda_alloc_conf: str  # PYTORCH_CUDA_ALLOC_CONF of every process that loads the model on CUDA
    cuda_empty_cache: bool  # torch.cuda.empty_cache() before every generation on CUDA


@dataclass(frozen=True)
class ScaleSpec:
    model_id: str  # preregistered checkpoint (hub id)
    revision: str  # resolved to a commit sha before loading
    recur_start: int  # prelude layers [0, recur_start)
    warmup_centre: float  # synthetic kurtosis warmup: centre ...
    warmup_jitter: float  # ... plus uniform jitter in [-jitter, +jitter]
    use_cache: bool  # decoding reuses the KV cache; False recomputes the whole sequence each step


@dataclass(frozen=True)
class WarmupSpec:
    warmup_centre: float
    warmup_jitter: float


@dataclass(frozen=True)
class GenerationSpec:
    greedy: bool
    chat_template: bool
    max_new_tokens: int  # preregistered bound; a lower self-check bound is a recorded deviation
    eos_pad: str
    dtype_cuda: str
    dtype_cpu: str


@dataclass(frozen=True)
class IntervalSpec:
    """``[intervals]``: how the intervals reported beside the point values are computed (no rule reads them)."""

    confidence: float
    effect_size: str  # eta^2 and R^2: "noncentral-f" (the only method implemented)
    proportion: str  # shares: "wilson"
    bootstrap: str  # H2's gain and compare's differences: "paired-stratified-percentile"
    bootstrap_resamples: int
    bootstrap_seed: int


@dataclass(frozen=True)
class PzPrereg:
    protocol: ProtocolHeader
    run: RunSpec
    seeds: dict[str, int]
    scales: dict[str, ScaleSpec]
    generation: GenerationSpec
    telemetry: dict[str, str]  # definitions, frozen as text
    engine: dict[str, Any]  # every PX-Engine constant but the per-scale ones, by px.PxConfig field name
    metrics: dict[str, str]
    thresholds: dict[str, float]
    intervals: IntervalSpec
    token_control: ClassificationSpec
    combined: ClassificationSpec
    eta2_target: ClassificationSpec
    h2: ClassificationSpec


#: The original's fallback warmup (centre, jitter) for a model outside the preregistered scales.  No protocol run
#: uses it (every run belongs to a scale); engine tests on small models build their engine from it.
OTHER_SCALE_WARMUP = WarmupSpec(warmup_centre=1000.0, warmup_jitter=5.0)

#: What the generation code implements, by ``[generation]`` key; a preregistration asking for anything else is refused.
IMPLEMENTED_GENERATION: dict[str, Any] = {"greedy": True, "chat_template": True, "eos_pad": "tokenizer_eos"}
#: The interval methods this version computes, by ``[intervals]`` key; a preregistration asking for another is refused.
IMPLEMENTED_INTERVALS: dict[str, str] = {"effect_size": "noncentral-f", "proportion": "wilson",
                                         "bootstrap": "paired-stratified-percentile"}


#: The original's published SR61_FINAL_V2 results (ACTIVE_MANIFOLD, 80 of 80 prompts per scale, df 3 and 76).
PUBLISHED: dict[str, dict[str, Any]] = {
    "270M": {"eta_squared": 0.2899, "f": 10.342, "p_approx": 1.32e-5, "r_squared_td": 0.0508,
             "mean_h": {"math": 1.38, "logic": 1.71, "creative": 2.05, "synthesis": 2.00},
             "verdict": "ANTI_P_ZOMBIE_CONFIRMED"},
    "1B": {"eta_squared": 0.1740, "f": 5.337, "p_approx": 0.0023, "r_squared_td": 0.0513,
           "mean_h": {"math": 1.90, "logic": 2.00, "creative": 2.12, "synthesis": 2.12},
           "verdict": "ANTI_P_ZOMBIE_CONFIRMED"},
    "4B": {"eta_squared": 0.0254, "f": 0.659, "p_approx": 0.584, "r_squared_td": 0.0139,
           "mean_h": {"math": 0.32, "logic": 0.13, "creative": 0.14, "synthesis": 0.26},
           "verdict": "ETA2_BELOW_THRESHOLD"},
    "E2B": {"eta_squared": 0.3989, "f": 16.814, "p_approx": 4.85e-8, "r_squared_td": 0.1663,
            "mean_h": {"math": 1.46, "logic": 1.75, "creative": 2.06, "synthesis": 1.91},
            "verdict": "ANTI_P_ZOMBIE_CONFIRMED"},
}


# --------------------------------------------------------------------------- records and units


@dataclass(frozen=True)
class PzRecord:
    """One measured prompt under one preset: a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    unit_id: str  # "<preset>:<prompt_id>", the ledger key
    preset: str  # ACTIVE_MANIFOLD or BASELINE
    prompt_id: str  # fixture id, "<category>-<nn>"
    category: str  # math, logic, creative or synthesis
    prompt: str  # the user message (sent as a one-turn chat)
    input_token_ids: tuple[int, ...]  # the chat-templated input's token ids, special tokens included
    token_diversity: float | None  # distinct over total input token ids (None on an error record without input ids)
    zones: tuple[str, ...]  # zone names, the order of every weight vector
    zone_weights: tuple[float, ...] | None  # router weights at the last generation step (None on an error)
    zone_weights_mean: tuple[float, ...] | None  # mean of the weights over all steps (recorded, not ruled on)
    zone_entropy: float | None  # H in bits of zone_weights: the preregistered metric
    zone: str | None  # the zone with the largest last-step weight
    kurtosis: tuple[float | None, ...]  # kurtosis at the prelude boundary, one per forward step
    phi: tuple[float | None, ...]  # phi, one per forward step
    completion: str  # generated text (special tokens skipped)
    completion_token_ids: tuple[int, ...]
    new_tokens: int
    finish_reason: str  # stop, length, none or error
    error: str | None  # coded failure (timeout, child_crashed, backend_error): counted, left out of the statistics
    error_detail: str | None
    seconds: float  # generation wall time of the prompt
    engine: dict[str, Any]  # the engine's further per-prompt fields (isolation, pid, z sequences, selections, ...)


def unit_id(preset: str, prompt_id: str) -> str:
    return f"{preset}:{prompt_id}"


@dataclass(frozen=True)
class PzUnit:
    """One measurement: a measured prompt under one preset."""

    unit_id: str  # "<preset>:<prompt_id>", the ledger key
    preset: str
    prompt_id: str
    category: str
    text: str  # the user message


@dataclass(frozen=True)
class PzSettings:
    """This run's settings beyond model and device, resolved from the options and the preregistration."""

    scale: str  # selects the preregistered checkpoint and the engine's per-scale constants
    dtype: str  # [generation] dtype_cuda or dtype_cpu, by the device
    isolation: str  # fork | spawn | inprocess
    max_new_tokens: int  # generation bound per prompt
    presets: tuple[str, ...]  # the presets measured, in the preregistered order (one with --pzombie-preset)


def calibration_file(preset: str) -> str:
    """The run-directory file that keeps a preset's frozen calibrator state (a resume hands it back)."""
    return f"calibration-{preset}.json"


# --------------------------------------------------------------------------- the compiled preregistration

#: The preregistration, validated against :class:`PzPrereg`.
PREREG = load_prereg(HERE / "prereg.toml", PzPrereg)
#: The four ordered classifications, by prereg key, in report order.
CLASSIFICATIONS = {f.name: classification(PREREG, f.name) for f in dataclasses.fields(PzPrereg)
                   if f.type in (ClassificationSpec, "ClassificationSpec")}
#: Metric prefix of each preset.
PRESET_PREFIX = {PREREG.values.run.rule_preset: "active", PREREG.values.run.comparison_preset: "baseline"}
CATEGORIES: tuple[str, ...] = PREREG.values.run.categories
ZONES: tuple[str, ...] = tuple(PREREG.values.engine["zones"])
