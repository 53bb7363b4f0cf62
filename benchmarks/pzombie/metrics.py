"""P-Zombie: the statistics the rules read, from the per-prompt records.

Zone entropy and token diversity of one prompt, eta squared in its two
forms, each preset's statistics (one-way ANOVA over the categories, the
least-squares fit of H on TD) and the flat metrics of a run.  Statistics
come from :mod:`benchmarks.core.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.core.stats import one_way_anova, pearson

from .spec import CATEGORIES, PRESET_PREFIX, PzRecord

__all__ = ["EtaForms", "aggregate", "eta_squared_forms", "metrics", "preset_metrics", "token_diversity",
           "zone_entropy_bits"]


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
