"""P-Zombie: preregistration schema, per-prompt records and the metrics the rules read.

Nothing here runs a model: the conftest measures, this module turns records
into numbers.  Statistics come from :mod:`benchmarks.core.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from benchmarks.core import ClassificationSpec, ProtocolHeader, RuleError, classification, load_prereg
from benchmarks.core.stats import one_way_anova, pearson

HERE = Path(__file__).resolve().parent

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


@dataclass(frozen=True)
class ScaleSpec:
    model_id: str  # preregistered checkpoint (hub id)
    revision: str  # resolved to a commit sha before loading
    recur_start: int  # prelude layers [0, recur_start)
    warmup_centre: float  # synthetic kurtosis warmup: centre ...
    warmup_jitter: float  # ... plus uniform jitter in [-jitter, +jitter]


@dataclass(frozen=True)
class WarmupSpec:
    warmup_centre: float
    warmup_jitter: float


@dataclass(frozen=True)
class GenerationSpec:
    greedy: bool
    chat_template: bool
    max_new_tokens: int
    stop_tokens: tuple[str, ...]
    eos_pad: str
    dtype_cuda: str
    dtype_cpu: str


@dataclass(frozen=True)
class PresetSpec:
    repetition_penalty: float
    no_repeat_ngram_size: int
    patched: bool


@dataclass(frozen=True)
class TelemetrySpec:
    kurtosis: str
    kurtosis_variance: str
    kurtosis_dtype: str
    kurtosis_position: str


@dataclass(frozen=True)
class CalibratorSpec:
    warmup_threshold: int
    warmup_samples: int
    kurtosis_std_floor: float
    phi_default_mean: float
    phi_default_std: float
    td_std_floor: float
    cv_high: float
    cv_low: float
    temperature_high_cv: float
    temperature_mid_cv: float
    temperature_low_cv: float
    blend_high_cv: float
    blend_mid_cv: float
    blend_low_cv: float
    z_scale_floor: float
    std_clip: float


@dataclass(frozen=True)
class RouterSpec:
    zones: tuple[str, ...]
    centres: tuple[float, ...]
    widths: tuple[float, ...]
    low_mass: float
    td_blend: tuple[str, ...]
    reported_step: str
    entropy_base: int


@dataclass(frozen=True)
class PzPrereg:
    protocol: ProtocolHeader
    run: RunSpec
    seeds: dict[str, int]
    scales: dict[str, ScaleSpec]
    warmup_other_scale: WarmupSpec
    generation: GenerationSpec
    presets: dict[str, PresetSpec]
    telemetry: TelemetrySpec
    calibrator: CalibratorSpec
    router: RouterSpec
    active_manifold: dict[str, Any]
    metrics: dict[str, str]
    thresholds: dict[str, float]
    token_control: ClassificationSpec
    combined: ClassificationSpec
    eta2_target: ClassificationSpec
    h2: ClassificationSpec


PREREG = load_prereg(HERE / "prereg.toml", PzPrereg)
#: The four ordered classifications, in report order.
CLASSIFICATIONS = {key: classification(PREREG, key) for key in ("token_control", "combined", "eta2_target", "h2")}
#: Metric prefix of each preset.
PRESET_PREFIX = {PREREG.values.run.rule_preset: "active", PREREG.values.run.comparison_preset: "baseline"}
CATEGORIES: tuple[str, ...] = PREREG.values.run.categories
ZONES: tuple[str, ...] = PREREG.values.router.zones

# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class PzRecord:
    """One measured prompt under one preset: a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    unit_id: str  # "<preset>:<prompt_id>", the ledger key
    preset: str  # ACTIVE_MANIFOLD or BASELINE
    prompt_id: str  # fixture id, "<category>-<nn>"
    category: str  # math, logic, creative or synthesis
    prompt: str  # the user message
    rendered_prompt: str  # the chat-templated text the model saw
    input_token_ids: tuple[int, ...]  # the chat-templated input's token ids, special tokens included
    token_diversity: float  # distinct over total input token ids
    zone_weights: tuple[float, ...] | None  # router weights at the last generation step (zones in prereg order)
    zone_weights_mean: tuple[float, ...] | None  # mean of the weights over all steps (recorded, not ruled on)
    zone_entropy: float | None  # H in bits of zone_weights: the preregistered metric
    zone: str | None  # the zone with the largest last-step weight
    kurtosis: tuple[float, ...]  # kurtosis at the prelude boundary, one per generation step
    phi: tuple[float, ...]  # phi, one per generation step
    completion: str  # generated text (special tokens skipped)
    completion_token_ids: tuple[int, ...]
    new_tokens: int
    finish_reason: str  # stop, length or error
    error: str | None  # coded failure (timeout, crash, ...): the record is counted and left out of the statistics
    error_detail: str | None
    seconds: float  # wall time of the prompt's own process (or call)
    extra: dict[str, Any]  # engine-specific per-prompt fields (loops run, window, ...)


def unit_id(preset: str, prompt_id: str) -> str:
    return f"{preset}:{prompt_id}"


# --------------------------------------------------------------------------- metrics


def zone_entropy_bits(weights: Sequence[float]) -> float:
    """H = -sum p log2 p over p = w / sum w (zero weights contribute nothing)."""
    total = math.fsum(weights)
    if not total > 0:
        raise ValueError(f"zone weights must have a positive sum, got {list(weights)}")
    h = 0.0
    for w in weights:
        if w < 0:
            raise ValueError(f"zone weights must be non-negative, got {list(weights)}")
        p = w / total
        if p > 0:  # a weight too small to give a positive share contributes nothing
            h -= p * math.log2(p)
    return max(0.0, h)


def token_diversity(token_ids: Sequence[int]) -> float:
    """Distinct over total token ids (the original's type-token ratio of the templated input)."""
    if not token_ids:
        raise ValueError("token diversity of an empty input is undefined")
    return len(set(token_ids)) / len(token_ids)


@dataclass(frozen=True)
class EtaForms:
    """Eta squared in the two forms the seed names; algebraically equal since SS_total = SS_between + SS_within."""

    over_total: float  # SS_between / SS_total, SS_total summed directly about the grand mean
    over_sum: float  # SS_between / (SS_between + SS_within)
    ss_total: float


def eta_squared_forms(groups: Mapping[str, Sequence[float]]) -> EtaForms:
    values = [float(v) for name in sorted(groups) for v in groups[name]]
    grand = math.fsum(values) / len(values)
    ss_total = math.fsum((v - grand) ** 2 for v in values)
    ss_between = math.fsum(len(g) * (math.fsum(g) / len(g) - grand) ** 2 for g in (list(map(float, groups[n])) for n in sorted(groups)))
    ss_within = 0.0
    for name in sorted(groups):
        g = [float(v) for v in groups[name]]
        m = math.fsum(g) / len(g)
        ss_within += math.fsum((v - m) ** 2 for v in g)
    over_total = ss_between / ss_total if ss_total > 0 else math.nan
    denom = ss_between + ss_within
    over_sum = ss_between / denom if denom > 0 else math.nan
    return EtaForms(over_total=over_total, over_sum=over_sum, ss_total=ss_total)


def preset_metrics(records: Sequence[PzRecord], categories: Sequence[str] = CATEGORIES) -> dict[str, Any]:
    """Statistics of one preset's records (error records counted, left out of the statistics)."""
    ok = [r for r in records if r.error is None and r.zone_entropy is not None]
    groups = {c: [r.zone_entropy for r in ok if r.category == c] for c in categories}
    out: dict[str, Any] = {
        "n": len(records),
        "n_ok": len(ok),
        "errors": len(records) - len(ok),
        "mean_h": _mean([r.zone_entropy for r in ok]),
        "mean_td": _mean([r.token_diversity for r in ok]),
    }
    for c in categories:
        out[f"mean_h.{c}"] = _mean(groups[c])
        out[f"n.{c}"] = len(groups[c])
    usable = {c: g for c, g in groups.items() if g}
    if len(usable) >= 2 and sum(map(len, usable.values())) > len(usable):
        anova = one_way_anova(usable)
        forms = eta_squared_forms(usable)
        out.update({
            "eta_squared": anova.eta_squared,
            "eta_squared_over_total": forms.over_total,
            "f": anova.f,
            "df_between": anova.df_between,
            "df_within": anova.df_within,
            "p_exact": anova.p_exact,
            "p_approx": anova.p_wilson_hilferty,
            "ss_between": anova.ss_between,
            "ss_within": anova.ss_within,
        })
    else:
        out.update({k: math.nan for k in ("eta_squared", "eta_squared_over_total", "f", "p_exact", "p_approx")})
    if len(ok) >= 2:
        fit = pearson([r.token_diversity for r in ok], [r.zone_entropy for r in ok])
        out.update({"r_td": fit.r, "r_squared_td": fit.r_squared, "slope_td": fit.slope, "intercept_td": fit.intercept})
    else:
        out.update({"r_td": math.nan, "r_squared_td": math.nan, "slope_td": math.nan, "intercept_td": math.nan})
    return out


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def metrics(records: Sequence[PzRecord]) -> dict[str, Any]:
    """Flat ``<active|baseline>.<metric>`` values plus ``h2.eta_squared_gain`` (NaN where undefined)."""
    out: dict[str, Any] = {}
    for preset, prefix in PRESET_PREFIX.items():
        for key, value in preset_metrics([r for r in records if r.preset == preset]).items():
            out[f"{prefix}.{key}"] = value
    out["h2.eta_squared_gain"] = out["active.eta_squared"] - out["baseline.eta_squared"]
    return out


def finite(values: Mapping[str, Any]) -> dict[str, float]:
    """The metrics a rule may read: NaN and infinite values are left out, so a rule reading one errors."""
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}


def classify(values: Mapping[str, Any]) -> dict[str, str | None]:
    """Label of each classification, or None where a metric it reads is undefined."""
    usable = finite(values)
    labels: dict[str, str | None] = {}
    for key, block in CLASSIFICATIONS.items():
        try:
            labels[key] = block.evaluate(usable).label
        except RuleError:  # a rule read an undefined metric: no verdict, and the rule tests report the run broken
            labels[key] = None
    return labels
