"""P-Zombie: the protocol's science (records, engine configuration, metrics) and its :class:`PzombieProtocol`.

The units are (preset, measured prompt) pairs.  :meth:`PzombieProtocol.run_units`
drives the PX-Engine (``benchmarks.pzombie.px``) once per preset: it calibrates
on the calibration prompts (or reuses the preset's stored frozen state when a
run resumes), then measures every prompt from that state in its own process,
one ledger record each.  Everything else (run directory, resume checks,
provenance, the generated rule and completeness tests, the summary) is
``benchmarks.core``'s.  Statistics come from :mod:`benchmarks.core.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

import models
from benchmarks.core import ClassificationSpec, ProtocolHeader
from benchmarks.core.protocol import (
    ModelChoice,
    Option,
    Protocol,
    ProtocolRun,
    ResumeRefused,
    UsageProblem,
    identity_conflicts,
)
from benchmarks.core.effect_intervals import (
    eta_squared_interval,
    eta_squared_rows,
    percentile_interval,
    r_squared_interval,
    r_squared_rows,
    stratified_indices,
)
from benchmarks.core.stats import Interval, one_way_anova, pearson, wilson_interval
from fixtures import FIXTURE_SETS

from . import px

HERE = Path(__file__).resolve().parent
#: The run's two figures (drawn by :mod:`benchmarks.pzombie.figures`).
FIGURES = ("zone_entropy_by_category.png", "entropy_vs_td.png")

#: Ways this suite's engine and protocol knowingly differ from the original behind SR61_FINAL_V2 (README "Deviations").
DEVIATIONS_FROM_ORIGINAL = (
    "BASELINE runs the calibrator and router as pure observers (the original recorded nothing there, H = 0)",
    "generation stops on <end_of_turn> (the original per-prompt path did not)",
    "decoding uses the KV cache; the prelude-boundary kurtosis of the newest position does not depend on it",
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




# --------------------------------------------------------------------------- the engine's configuration

#: The original's fallback warmup (centre, jitter) for a model outside the preregistered scales.  No protocol run
#: uses it (every run belongs to a scale); engine tests on small models build their engine from it.
OTHER_SCALE_WARMUP = WarmupSpec(warmup_centre=1000.0, warmup_jitter=5.0)

#: What the generation code implements, by ``[generation]`` key; a preregistration asking for anything else is refused.
IMPLEMENTED_GENERATION: dict[str, Any] = {"greedy": True, "chat_template": True, "eos_pad": "tokenizer_eos"}
#: The interval methods this version computes, by ``[intervals]`` key; a preregistration asking for another is refused.
IMPLEMENTED_INTERVALS: dict[str, str] = {"effect_size": "noncentral-f", "proportion": "wilson",
                                         "bootstrap": "paired-stratified-percentile"}


def engine_config(scale: str | None, **overrides: Any) -> px.PxConfig:
    """The PX-Engine constants: the prereg's ``[engine]`` table plus the scale's ``[scales.<scale>]`` values.

    ``scale=None`` is a model outside the preregistered scales: the warmup is
    :data:`OTHER_SCALE_WARMUP` and ``recur_start`` must be given in ``overrides``
    (the prereg has none for it).  ``overrides`` replace fields (engine tests
    on small models use them); a protocol run never passes any.
    """
    spec = PREREG.values
    if scale is None:
        if "recur_start" not in overrides:
            raise px.PxError("a model outside the preregistered scales needs recur_start= (the prereg gives none for it)")
        other = OTHER_SCALE_WARMUP
        values: dict[str, Any] = {"scale": "other", "warmup_centre": other.warmup_centre,
                                  "warmup_jitter": other.warmup_jitter}
    elif scale in spec.scales:
        chosen = spec.scales[scale]
        values = {"scale": scale, "recur_start": chosen.recur_start, "warmup_centre": chosen.warmup_centre,
                  "warmup_jitter": chosen.warmup_jitter}
    else:
        raise px.PxError(f"unknown scale {scale!r}; preregistered scales: {', '.join(spec.scales)} "
                         "(or scale=None with recur_start= for another model)")
    return px.PxConfig.from_mapping({**spec.engine, **values, **overrides})
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


def record_from_engine(record: Any, row: Mapping[str, Any]) -> PzRecord:
    """The ledger record of one engine record (``px.PxRecord``) for the fixture row it measured."""
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
        # A prompt whose process timed out or died before tokenising has no input ids, hence no TD (null).
        token_diversity=float(record.token_diversity) if record.token_diversity is not None else (
            token_diversity(ids) if ids else None),
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


def preset_metrics(records: Sequence[PzRecord], categories: Sequence[str] | None = None) -> dict[str, Any]:
    """Statistics of one preset's records (error records counted, left out of the statistics)."""
    categories = CATEGORIES if categories is None else categories
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


# --------------------------------------------------------------------------- intervals (reported, never ruled on)


def _number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def interval_record(interval: Interval | None, estimate: float | None = None, **facts: Any) -> dict[str, Any]:
    """The JSON form of an interval (None limits where it is undefined) with the facts it rests on."""
    if interval is None:
        return {"estimate": _number(math.nan if estimate is None else estimate), "low": None, "high": None, **facts}
    return {"estimate": _number(interval.estimate), "low": _number(interval.low), "high": _number(interval.high),
            "confidence": interval.confidence, "method": interval.method, **facts}


def preset_intervals(records: Sequence[PzRecord], spec: IntervalSpec | None = None,
                     categories: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """One preset's intervals: eta^2 and R^2(TD -> H) by noncentral-F inversion, the error share by Wilson."""
    spec = PREREG.values.intervals if spec is None else spec
    values = preset_metrics(records, categories)
    out: dict[str, dict[str, Any]] = {}
    f, df1, df2 = values["f"], values.get("df_between"), values.get("df_within")
    eta = None
    if df1 and df2 and math.isfinite(f):
        eta = eta_squared_interval(float(f), df1, df2, spec.confidence)
    out["eta_squared"] = interval_record(eta, values["eta_squared"], df_between=df1, df_within=df2)
    r2, n_ok = values["r_squared_td"], values["n_ok"]
    r2_interval = r_squared_interval(float(r2), n_ok, spec.confidence) if n_ok >= 3 and math.isfinite(r2) else None
    out["r_squared_td"] = interval_record(r2_interval, r2, n=n_ok)
    n = values["n"]
    share = wilson_interval(values["errors"], n, spec.confidence) if n else None
    out["error_share"] = interval_record(share, math.nan, k=values["errors"], n=n)
    return out


def _paired_prompts(first: Sequence[PzRecord], second: Sequence[PzRecord]) -> list[tuple[PzRecord, PzRecord]]:
    """(first, second) records of every prompt measured without an error in both, by category then prompt id."""
    def usable(records: Sequence[PzRecord]) -> dict[str, PzRecord]:
        return {r.prompt_id: r for r in records if r.error is None and r.zone_entropy is not None
                and r.token_diversity is not None}

    a, b = usable(first), usable(second)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    shared = sorted(set(a) & set(b), key=lambda pid: (order.get(a[pid].category, len(order)), pid))
    return [(a[pid], b[pid]) for pid in shared]


def paired_bootstrap(first: Sequence[PzRecord], second: Sequence[PzRecord],
                     spec: IntervalSpec | None = None) -> dict[str, dict[str, Any]]:
    """Paired bootstrap over prompts of first minus second: eta^2 (category -> H) and R^2 (TD -> H).

    The prompts measured without an error in both are resampled with
    replacement within their category (every resample keeps the category
    sizes), the same prompts for both; each resample gives the two statistics
    of each side, and the interval is the percentile interval of their
    differences.  Seeded and sized by ``[intervals]``.
    """
    spec = PREREG.values.intervals if spec is None else spec
    pairs = _paired_prompts(first, second)
    facts = {"prompts": len(pairs), "resamples": spec.bootstrap_resamples, "seed": spec.bootstrap_seed}
    method = f"{spec.bootstrap}-bootstrap"
    strata = [a.category for a, _ in pairs]
    if len(set(strata)) < 2 or len(pairs) <= len(set(strata)):
        return {"eta_squared": interval_record(None, **facts), "r_squared_td": interval_record(None, **facts)}
    index = stratified_indices(strata, spec.bootstrap_resamples, spec.bootstrap_seed)
    h_a = np.array([a.zone_entropy for a, _ in pairs], dtype=float)
    h_b = np.array([b.zone_entropy for _, b in pairs], dtype=float)
    td_a = np.array([a.token_diversity for a, _ in pairs], dtype=float)
    td_b = np.array([b.token_diversity for _, b in pairs], dtype=float)
    whole = np.arange(len(pairs))[None, :]
    out = {}
    for name, statistic in (
            ("eta_squared", lambda h, td, rows: eta_squared_rows(h[rows], strata)),
            ("r_squared_td", lambda h, td, rows: r_squared_rows(td[rows], h[rows]))):
        value_a, value_b = float(statistic(h_a, td_a, whole)[0]), float(statistic(h_b, td_b, whole)[0])
        draws = statistic(h_a, td_a, index) - statistic(h_b, td_b, index)
        interval = percentile_interval(value_a - value_b, draws, spec.confidence, method)
        out[name] = interval_record(interval, value_a=_number(value_a), value_b=_number(value_b), **facts)
    return out


def intervals(records: Sequence[PzRecord]) -> dict[str, Any]:
    """``stats.json`` ``intervals``: per preset eta^2, R^2 and the error share, and H2's paired gain interval.

    Beside the point values the rules read; none of them changes a classification.
    """
    spec = PREREG.values.intervals
    out: dict[str, Any] = {"settings": {"confidence": spec.confidence, "effect_size": spec.effect_size,
                                        "proportion": spec.proportion, "bootstrap": spec.bootstrap,
                                        "bootstrap_resamples": spec.bootstrap_resamples,
                                        "bootstrap_seed": spec.bootstrap_seed}}
    by_preset = {preset: [r for r in records if r.preset == preset] for preset in PRESET_PREFIX}
    for preset, prefix in PRESET_PREFIX.items():
        for key, value in preset_intervals(by_preset[preset], spec).items():
            out[f"{prefix}.{key}"] = value
    active, baseline = (by_preset[p] for p in PRESET_PREFIX)
    gain = paired_bootstrap(active, baseline, spec)["eta_squared"]
    out["h2.eta_squared_gain"] = {**gain, "rule_reads": "the point value h2.eta_squared_gain of all prompts per preset"}
    return out


# --------------------------------------------------------------------------- the protocol


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


def calibration_file(preset: str) -> str:
    """The run-directory file that keeps a preset's frozen calibrator state (a resume hands it back)."""
    return f"calibration-{preset}.json"


class PzombieProtocol(Protocol[PzUnit, PzRecord]):
    """The P-Zombie evaluation on the shape of ``benchmarks.core``: four ordered classifications from the
    zone routing of 80 prompts under two presets."""

    title = "P-Zombie"
    prereg_schema = PzPrereg
    record_type = PzRecord
    record_key = "unit_id"
    summary_file = "stats.json"
    figures = FIGURES

    @property
    def options(self) -> tuple[Option, ...]:  # type: ignore[override]  # help texts quote the prereg's values
        run, bound = self.spec.run, self.spec.generation.max_new_tokens
        return (
            Option("max-new-tokens", f"generation bound per prompt, 1 to {bound} (default {bound}, as preregistered); "
                   "a lower value is recorded as a deviation", type=int),
            Option("isolation", "fork (load once, fork a child per prompt; CPU), spawn (fresh process per prompt) or "
                   f"inprocess (quick, a recorded deviation); default {run.isolation_cpu} on cpu, "
                   f"{run.isolation_cuda} on cuda", choices=px.ISOLATION_MODES),
        )

    # ----------------------------------------------------------------- settings

    def preregistered_model(self, scale: str | None) -> ModelChoice:
        name = scale or self.spec.run.default_scale
        if name not in self.spec.scales:
            raise UsageProblem(f"--scale {name!r} is not a P-Zombie scale; choose one of: {', '.join(self.spec.scales)}")
        chosen = self.spec.scales[name]
        return ModelChoice(chosen.model_id, chosen.revision)

    def default_device(self) -> str:
        return self.spec.run.default_device

    def configure(self, run: ProtocolRun) -> PzSettings:
        spec = self.spec
        cuda = run.device.startswith("cuda")
        for key, implemented in IMPLEMENTED_GENERATION.items():
            if getattr(spec.generation, key) != implemented:
                raise UsageProblem(f"[generation] {key} = {getattr(spec.generation, key)!r} in {self.prereg.path} is not "
                                   f"what this suite's generation does ({implemented!r}); restore the frozen value")
        for key, implemented in IMPLEMENTED_INTERVALS.items():
            if getattr(spec.intervals, key) != implemented:
                raise UsageProblem(f"[intervals] {key} = {getattr(spec.intervals, key)!r} in {self.prereg.path} is not "
                                   f"a method this version computes ({implemented!r}); restore the frozen value")
        dtypes = {"cuda": spec.generation.dtype_cuda, "cpu": spec.generation.dtype_cpu}
        bound = run.option("max-new-tokens")
        if bound is None:
            bound = spec.generation.max_new_tokens
        if not 1 <= bound <= spec.generation.max_new_tokens:
            raise UsageProblem(f"--pzombie-max-new-tokens {bound} is not valid; give 1 to {spec.generation.max_new_tokens}")
        isolation = run.option("isolation") or (spec.run.isolation_cuda if cuda else spec.run.isolation_cpu)
        if cuda and isolation == "fork":
            raise UsageProblem("--pzombie-isolation fork cannot run on cuda (CUDA does not survive fork); use spawn")
        return PzSettings(scale=run.scale or spec.run.default_scale,
                          dtype=dtypes["cuda" if cuda else "cpu"],
                          isolation=isolation, max_new_tokens=bound)

    def deviations(self, run: ProtocolRun) -> list[str]:
        """Beyond another model and device (which core records): the bundled checkpoint, the bound, the isolation."""
        spec, settings = self.spec, run.settings
        found = []
        if run.model != run.preregistered.id and run.model in models.BUNDLED:
            found.append(f"{run.model} is the bundled offline checkpoint ({models.BUNDLED[run.model].summary}), "
                         "not the instruct checkpoint; its chat template is the registry's")
        if settings.max_new_tokens != spec.generation.max_new_tokens:
            found.append(f"max_new_tokens {settings.max_new_tokens} instead of {spec.generation.max_new_tokens}")
        expected = spec.run.isolation_cuda if run.device.startswith("cuda") else spec.run.isolation_cpu
        if settings.isolation != expected:
            found.append(f"isolation {settings.isolation!r} instead of {expected!r}")
        return found

    def provenance_extra(self, run: ProtocolRun) -> dict[str, Any]:
        return {"deviations_from_original": list(DEVIATIONS_FROM_ORIGINAL),
                "engine_config_sha256": engine_config(run.settings.scale).sha256()}

    # ----------------------------------------------------------------- units

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        name = self.spec.run.fixture_set
        return {name: FIXTURE_SETS[name]()}

    def prompts(self, run: ProtocolRun, phase: str) -> list[dict[str, Any]]:
        """The fixture rows of one phase ("calibration" or "measured"), in fixture order."""
        return [row for row in run.fixture_sets[self.spec.run.fixture_set] if row["phase"] == phase]

    def fixture_extras(self, run: ProtocolRun) -> dict[str, Any]:
        measured = self.prompts(run, "measured")
        return {"calibration_prompt_ids": [row["prompt_id"] for row in self.prompts(run, "calibration")],
                "measured_per_category": {c: sum(row["category"] == c for row in measured) for c in CATEGORIES}}

    def units(self, run: ProtocolRun) -> list[PzUnit]:
        return [PzUnit(unit_id(preset, row["prompt_id"]), preset, row["prompt_id"], row["category"], row["text"])
                for preset in self.spec.run.presets for row in self.prompts(run, "measured")]

    # ----------------------------------------------------------------- measurement

    def model_spec(self, run: ProtocolRun) -> px.ModelSpec:
        """How each engine process loads the model (device, dtype, torch seed and the pinned revision)."""
        options: dict[str, Any] = {"device": run.device, "dtype": run.settings.dtype, "seed": self.spec.seeds["torch"]}
        if run.revision:
            options["revision"] = run.revision
        return px.ModelSpec(run.model, options)

    def calibration_problem(self, run: ProtocolRun, preset: str) -> str | None:
        """Why a preset's stored frozen state cannot be resumed (another run wrote it), or None."""
        if not run.path(calibration_file(preset)).exists():
            return None
        try:
            stored = run.read_json(calibration_file(preset))
        except (OSError, ValueError) as exc:
            return f"{calibration_file(preset)} cannot be read ({exc})"
        if not isinstance(stored, dict):
            return f"{calibration_file(preset)} holds a JSON {type(stored).__name__}, not a calibration state"
        conflicts = identity_conflicts(stored.get("identity") or {}, run.identity())
        if stored.get("identity") and not conflicts:
            return None
        return f"{calibration_file(preset)} belongs to another run ({'; '.join(conflicts) or 'it carries no run identity'})"

    def resume_problems(self, run: ProtocolRun) -> list[str]:
        return [p for preset in self.spec.run.presets if (p := self.calibration_problem(run, preset))]

    def stored_calibration(self, run: ProtocolRun, preset: str) -> dict[str, Any] | None:
        """A preset's frozen state from an earlier session of this run (core's resume check refused any other)."""
        problem = self.calibration_problem(run, preset)
        if problem:
            raise ResumeRefused(f"{self.label}: run {run.run_id}: {problem}; leave out --run-id to start a new run")
        path = run.path(calibration_file(preset))
        return run.read_json(path.name) if path.exists() else None

    def run_units(self, run: ProtocolRun, todo: Sequence[PzUnit], append: Callable[[PzRecord], None]) -> None:
        """Per preset with units left: calibrate (or take the stored frozen state), then measure its prompts."""
        settings = run.settings
        calibration = self.prompts(run, "calibration")
        rows = {row["prompt_id"]: row for row in self.prompts(run, "measured")}
        stored = {preset: self.stored_calibration(run, preset) for preset in self.spec.run.presets}
        config = engine_config(settings.scale)
        if run.model in models.BUNDLED and settings.isolation == "fork":
            # Convert the bundled GGUF here, once, if its cache is missing: the loader process must only load
            # (a loader that computed before forking would hang its children, see DESIGN.md).
            models.bundled_folder(run.model)
        started = False

        def calibrated(preset: str, summary: dict[str, Any]) -> None:
            """Before the preset's first measured prompt: provenance (once), then keep the frozen state."""
            nonlocal started
            if not started:
                run.start(summary["model"])
                started = True
            if stored[preset] is None:
                run.write_json(calibration_file(preset), {
                    "preset": preset,
                    "calibration_prompt_ids": [row["prompt_id"] for row in calibration],
                    "identity": run.identity(str(summary["model"].get("revision") or "")),
                    **summary,
                })
            elif summary["frozen_state_sha256"] != stored[preset]["frozen_state_sha256"]:
                raise px.PxError(f"the resumed {preset} run was handed a different frozen state")

        for preset in self.spec.run.presets:
            mine = [unit for unit in todo if unit.preset == preset]
            if not mine:
                continue
            px.run_prompts(
                self.model_spec(run),
                [{"id": unit.prompt_id, "text": unit.text} for unit in mine],
                preset=preset,
                config=config,
                settings=px.generation_settings(preset, settings.max_new_tokens, config),
                isolation=settings.isolation,
                calibration_prompts=[{"id": row["prompt_id"], "text": row["text"]} for row in calibration],
                on_calibrated=lambda summary, preset=preset: calibrated(preset, summary),
                on_record=lambda record: append(record_from_engine(record, rows[record.prompt_id])),
                frozen_state=stored[preset]["frozen_state"] if stored[preset] else None,
                timeout_s=self.spec.run.prompt_timeout_s,
            )

    # ----------------------------------------------------------------- results

    def metrics(self, run: ProtocolRun, records: Sequence[PzRecord]) -> dict[str, Any]:
        return metrics(records)

    def paired_statistics(self, records_a: Sequence[PzRecord], records_b: Sequence[PzRecord]) -> list[dict[str, Any]]:
        """``preregbench compare``: eta^2 and R^2(TD -> H) of each preset, run A minus run B, by the paired
        bootstrap over the prompts both runs measured without an error (resampled within category, the same
        prompts in both runs; ``[intervals]`` gives the resamples and the seed)."""
        rows = []
        for preset, prefix in PRESET_PREFIX.items():
            found = paired_bootstrap([r for r in records_a if r.preset == preset],
                                     [r for r in records_b if r.preset == preset])
            for key in ("eta_squared", "r_squared_td"):
                row = found[key]
                rows.append({
                    "measure": f"{prefix}.{key}", "units": row["prompts"], "value_a": row.get("value_a"),
                    "value_b": row.get("value_b"), "difference": row["estimate"],
                    "interval": {"low": row["low"], "high": row["high"], "confidence": row.get("confidence"),
                                 "method": row.get("method")},
                    "resamples": row["resamples"], "seed": row["seed"],
                })
        return rows

    def summary(self, run: ProtocolRun, records: Sequence[PzRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "published_sr61_final_v2": PUBLISHED.get(run.settings.scale),
            "deviations_from_original": list(DEVIATIONS_FROM_ORIGINAL),
            "engine_config_sha256": engine_config(run.settings.scale).sha256(),
            # The frozen definitions the telemetry and the statistics follow, as text beside the numbers.
            "definitions": {"telemetry": dict(self.spec.telemetry), "metrics": dict(self.spec.metrics)},
            "intervals": intervals(records),
        }

    def result_files(self, run: ProtocolRun, records: Sequence[PzRecord],
                     measured: Mapping[str, Any]) -> dict[str, Callable[[], Any]]:
        return {"aggregate.json": lambda: aggregate(records)}

    def write_figures(self, run: ProtocolRun, records: Sequence[PzRecord], measured: Mapping[str, Any]) -> None:
        from .figures import write_figures

        write_figures(run.dir, records, measured, run.settings.scale)

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        from .figures import report_figures

        return report_figures(run_dir, summary)


def aggregate(records: Sequence[PzRecord]) -> dict[str, Any]:
    """``aggregate.json``: per preset, the counts and one row per prompt (the original's aggregate file)."""
    presets = {}
    for preset in PRESET_PREFIX:
        rows = [r for r in records if r.preset == preset]
        presets[preset] = {
            "n": len(rows),
            "errors": sum(r.error is not None for r in rows),
            "prompts": [
                {"unit_id": r.unit_id, "category": r.category, "zone_entropy": r.zone_entropy,
                 "token_diversity": r.token_diversity, "zone": r.zone, "zone_weights": r.zone_weights,
                 "new_tokens": r.new_tokens, "finish_reason": r.finish_reason, "error": r.error}
                for r in rows
            ],
        }
    return {"schema_version": 1, "presets": presets}


PROTOCOL = PzombieProtocol(HERE)
PREREG = PROTOCOL.prereg
#: The four ordered classifications, by prereg key, in report order.
CLASSIFICATIONS = PROTOCOL.classifications
#: Metric prefix of each preset.
PRESET_PREFIX = {PREREG.values.run.rule_preset: "active", PREREG.values.run.comparison_preset: "baseline"}
CATEGORIES: tuple[str, ...] = PREREG.values.run.categories
ZONES: tuple[str, ...] = tuple(PREREG.values.engine["zones"])
