"""P-Zombie: preregistration schema, per-prompt records and the metrics the rules read.

Nothing here runs a model: the conftest measures, this module turns records
into numbers.  Statistics come from :mod:`benchmarks.core.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.core import (
    ClassificationSpec,
    ProtocolHeader,
    RuleError,
    classification,
    load_prereg,
)
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
    max_new_tokens: int  # preregistered bound; a lower self-check bound is a recorded deviation
    eos_pad: str
    dtype_cuda: str
    dtype_cpu: str


@dataclass(frozen=True)
class PzPrereg:
    protocol: ProtocolHeader
    run: RunSpec
    seeds: dict[str, int]
    scales: dict[str, ScaleSpec]
    warmup_other_scale: WarmupSpec
    generation: GenerationSpec
    telemetry: dict[str, str]  # definitions, frozen as text
    engine: dict[str, Any]  # every PX-Engine constant, by models.px.PxConfig field name (checked there)
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
ZONES: tuple[str, ...] = tuple(PREREG.values.engine["zones"])

# --------------------------------------------------------------------------- records


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
    token_diversity: float  # distinct over total input token ids
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


def record_from_engine(record: Any, row: Mapping[str, Any]) -> PzRecord:
    """The ledger record of one engine record (``models.px.PxRecord``) for the fixture row it measured."""
    zones = tuple(record.zones)
    weights = record.zone_weights_last
    mean = record.zone_weights_mean
    ids = tuple(getattr(record, "input_token_ids", ()) or ())
    kept = ("isolation", "pid", "steps", "z_kurtosis", "z_phi", "z_td", "fallback", "selections", "loops_run",
            "temperature", "blend", "start_state_sha256", "input_tokens", "distinct_input_tokens", "zone_entropy_of_mean")
    return PzRecord(
        unit_id=unit_id(record.preset, record.prompt_id),
        preset=record.preset,
        prompt_id=record.prompt_id,
        category=row["category"],
        prompt=row["text"],
        input_token_ids=ids,
        token_diversity=float(record.token_diversity) if record.token_diversity is not None else (
            token_diversity(ids) if ids else math.nan),
        zones=zones,
        zone_weights=None if weights is None else tuple(float(weights[z]) for z in zones),
        zone_weights_mean=None if mean is None else tuple(float(mean[z]) for z in zones),
        zone_entropy=record.zone_entropy,
        zone=record.dominant_zone,
        kurtosis=tuple(record.kurtosis),
        phi=tuple(record.phi),
        completion=record.text,
        completion_token_ids=tuple(record.token_ids),
        new_tokens=record.new_tokens,
        finish_reason=record.finish_reason,
        error=record.error,
        error_detail=record.error_detail,
        seconds=float(record.seconds),
        engine={key: getattr(record, key) for key in kept if hasattr(record, key)},
    )


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
