"""P-Zombie: the intervals reported beside the point values the rules read (none of them changes a classification).

Per preset eta squared and R squared (TD -> H) by noncentral-F inversion and
the error share by Wilson; H2's gain and ``preregbench compare``'s
differences by the paired stratified bootstrap; all sized and seeded by the
prereg's ``[intervals]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.core.effect_intervals import (
    eta_squared_interval,
    eta_squared_rows,
    percentile_interval,
    r_squared_interval,
    r_squared_rows,
    stratified_indices,
)
from benchmarks.core.stats import Interval, wilson_interval

from .metrics import preset_metrics
from .spec import CATEGORIES, PREREG, PRESET_PREFIX, IntervalSpec, PzRecord

__all__ = ["interval_record", "intervals", "paired_bootstrap", "preset_intervals"]


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
