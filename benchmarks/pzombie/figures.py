"""The run's two figures (``PzombieProtocol.figures``), written as PNG into the run directory (matplotlib, Agg).

* ``zone_entropy_by_category.png``: left, mean zone entropy H per category, one
  bar group per preset, error bars one standard deviation, the maximum
  log2(zones) drawn as a dashed line; right, eta squared and R squared (TD -> H)
  of each preset with their 95% intervals (noncentral-F inversion, ``stats.json``
  ``intervals``) as error bars, and the thresholds the rules read.
* ``entropy_vs_td.png``: H against token diversity TD per prompt, one panel per
  preset, points coloured by category, with the least-squares line and R squared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.core import read_ledger
from benchmarks.core.report import Figure

from .intervals import intervals
from .spec import CATEGORIES, FIGURES, PREREG, PRESET_PREFIX, ZONES, PzRecord

_COLOURS = {"math": "#1f77b4", "logic": "#ff7f0e", "creative": "#2ca02c", "synthesis": "#d62728"}


def _pyplot():
    import matplotlib  # reason: matplotlib loads only when a run draws its figures

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _sd(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def write_figures(run_dir: Path, records: Sequence[PzRecord], values: Mapping[str, Any], scale: str) -> list[Path]:
    """Draw both figures from the records; returns the written paths."""
    plt = _pyplot()
    written = []
    for name, fig in zip(FIGURES, draw_figures(records, values, scale)):
        path = run_dir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def report_figures(run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
    """Both figures for the run's report (:meth:`Protocol.report_figures`), drawn from its ledger and summary."""
    records = read_ledger(run_dir / "records.jsonl", PzRecord)
    scale = str((summary.get("settings") or {}).get("scale", ""))
    values = {k: (math.nan if v is None else v) for k, v in (summary.get("metrics") or {}).items()}
    first, second = draw_figures(records, values, scale)
    return [
        Figure("zone_entropy_by_category", "Zone entropy by category", first,
               "Mean zone entropy H per category and preset (last step), error bars one standard deviation; "
               "the dashed line is the maximum log2 of the number of zones. Right: eta squared and R squared "
               "(TD -> H) of each preset with their 95% intervals (noncentral-F inversion) and the thresholds."),
        Figure("entropy_vs_td", "Zone entropy against token diversity", second,
               "H against the input's token diversity TD per prompt, one panel per preset, with the least-squares "
               "line and R squared with its 95% interval."),
    ]


def draw_figures(records: Sequence[PzRecord], values: Mapping[str, Any], scale: str) -> list[Any]:
    """The two figures (matplotlib figures, not yet saved) from the records and the metrics."""
    plt = _pyplot()
    presets = list(PRESET_PREFIX)
    ok = [r for r in records if r.error is None and r.zone_entropy is not None]
    drawn = []

    fig, (ax, effects) = plt.subplots(1, 2, figsize=(11.0, 4.2), gridspec_kw={"width_ratios": [2.2, 1.0]})
    width = 0.8 / len(presets)
    for i, preset in enumerate(presets):
        groups = [[r.zone_entropy for r in ok if r.preset == preset and r.category == c] for c in CATEGORIES]
        means = [math.fsum(g) / len(g) if g else 0.0 for g in groups]
        xs = [j + (i - (len(presets) - 1) / 2) * width for j in range(len(CATEGORIES))]
        eta = values.get(f"{PRESET_PREFIX[preset]}.eta_squared", math.nan)
        ax.bar(xs, means, width, yerr=[_sd(g) for g in groups], capsize=3,
               label=f"{preset} (eta^2 = {eta:.3f})", alpha=0.85)
    ax.axhline(math.log2(len(ZONES)), color="grey", linestyle="--", linewidth=1, label=f"log2 {len(ZONES)} (maximum)")
    ax.set_xticks(range(len(CATEGORIES)), list(CATEGORIES))
    ax.set_ylabel("zone entropy H (bits), last step")
    ax.set_title(f"P-Zombie {scale}: zone entropy by category (mean +/- 1 sd)")
    ax.legend(fontsize=8, loc="lower right")
    _effect_panel(effects, intervals(records))
    fig.tight_layout()
    drawn.append(fig)

    intervals_of = intervals(records)
    fig, axes = plt.subplots(1, len(presets), figsize=(5.0 * len(presets), 4.2), squeeze=False)
    for ax, preset in zip(axes[0], presets):
        prefix = PRESET_PREFIX[preset]
        for c in CATEGORIES:
            pts = [(r.token_diversity, r.zone_entropy) for r in ok if r.preset == preset and r.category == c]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=16, color=_COLOURS.get(c), label=c)
        slope, intercept = values.get(f"{prefix}.slope_td", math.nan), values.get(f"{prefix}.intercept_td", math.nan)
        tds = [r.token_diversity for r in ok if r.preset == preset]
        if tds and math.isfinite(slope) and math.isfinite(intercept):
            lo, hi = min(tds), max(tds)
            ax.plot([lo, hi], [intercept + slope * lo, intercept + slope * hi], color="black", linewidth=1)
        r2 = values.get(f"{prefix}.r_squared_td", math.nan)
        iv = intervals_of.get(f"{prefix}.r_squared_td") or {}
        span = (f" [{iv['low']:.3f}, {iv['high']:.3f}]" if iv.get("low") is not None and iv.get("high") is not None
                else "")
        ax.set_title(f"{preset}: R^2(TD -> H) = {r2:.3f}{span}", fontsize=10)
        ax.set_xlabel("token diversity TD (input)")
        ax.set_ylabel("zone entropy H (bits)")
        ax.legend(fontsize=8)
    fig.suptitle(f"P-Zombie {scale}: zone entropy against token diversity")
    fig.tight_layout()
    drawn.append(fig)
    return drawn


def _effect_panel(ax: Any, found: Mapping[str, Any]) -> None:
    """eta^2 and R^2(TD -> H) per preset as points with their 95% intervals, and the rules' thresholds."""
    thresholds = PREREG.values.thresholds
    names = (("eta_squared", "eta^2", "o"), ("r_squared_td", "R^2(TD->H)", "s"))
    presets = list(PRESET_PREFIX)
    for k, (key, label, marker) in enumerate(names):
        for i, preset in enumerate(presets):
            iv = found.get(f"{PRESET_PREFIX[preset]}.{key}") or {}
            x = i + (k - 0.5) * 0.3
            estimate = iv.get("estimate")
            if estimate is None:
                continue
            low, high = iv.get("low"), iv.get("high")
            err = [[estimate - low], [high - estimate]] if low is not None and high is not None else None
            ax.errorbar([x], [estimate], yerr=err, fmt=marker, color=f"C{k}", capsize=4,
                        label=label if i == 0 else None)
    ax.axhline(thresholds["eta2_confirm"], color="C0", linestyle=":", linewidth=1,
               label=f"eta^2 {thresholds['eta2_confirm']:g} (combined)")
    ax.axhline(thresholds["r2_token_control"], color="C1", linestyle=":", linewidth=1,
               label=f"R^2 {thresholds['r2_token_control']:g} (token control)")
    ax.set_xticks(range(len(presets)), presets, fontsize=8)
    ax.set_xlim(-0.6, len(presets) - 0.4)
    ax.set_ylim(0.0, 1.0)
    ax.set_title("effect sizes, 95% intervals (noncentral F)", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
