"""The ladder report's figure (``LadderProtocol.report_figures``): per probe, the error by tier with the band.

Read from each probe's ``analysis.json`` (the run summary's ``analysis_files``); the band and the tier
floor are the preregistered thresholds of the summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from benchmarks.core.report import Figure, pyplot

from .spec import TIERS


def _probes(run_dir: Path, summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for name in summary.get("analysis_files") or []:
        path = run_dir / str(name)
        if path.parent == run_dir or not path.is_file() or path.is_symlink():
            continue
        try:
            analysis = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        out.append((str(analysis.get("probe") or path.parent.name), analysis.get("metrics") or {}))
    if not out:  # a single probe without analysis files: the summary's own metrics
        out.append((str(summary.get("probe") or "probe"), summary.get("metrics") or {}))
    return out


def report_figures(run_dir: Path, summary: Mapping[str, Any]) -> list[Figure]:
    plt = pyplot()
    thresholds = summary.get("thresholds") or {}
    low, high, floor = thresholds.get("band_low"), thresholds.get("band_high"), thresholds.get("tier_floor")
    figures = []
    for probe, metrics in _probes(run_dir, summary):
        errors = [metrics.get(f"tier{t}.error") for t in TIERS]
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        if isinstance(low, (int, float)) and isinstance(high, (int, float)):
            ax.axhspan(low, high, color="#55a868", alpha=0.18, label=f"band {low:g} to {high:g}")
        if isinstance(floor, (int, float)):
            ax.axhline(floor, color="#a4161a", linestyle=":", linewidth=1, label=f"tier floor {floor:g}")
        ax.bar(TIERS, [e if isinstance(e, (int, float)) else 0.0 for e in errors], color="#4c72b0", width=0.6)
        for t, e in zip(TIERS, errors):
            ax.text(t, (e if isinstance(e, (int, float)) else 0.0) + 0.01,
                    f"{e:.3f}" if isinstance(e, (int, float)) else "n/a", ha="center", fontsize=8)
        overall = metrics.get("overall_error")
        if isinstance(overall, (int, float)):
            ax.axhline(overall, color="black", linestyle="--", linewidth=1, label=f"overall error {overall:.3f}")
        ax.set_xticks(TIERS, [f"tier {t}" for t in TIERS])
        top = max([0.4] + [e for e in errors if isinstance(e, (int, float))] + ([high] if isinstance(high, (int, float)) else []))
        ax.set_ylim(0, top * 1.15)
        ax.set_ylabel("error rate")
        ax.set_title(f"Probe {probe}: error by tier")
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        figures.append(Figure(f"error_by_tier_{probe}", f"Error by tier, probe {probe}", fig,
                              "Share of scored units decided wrongly per tier (errored units excluded), the "
                              "preregistered band shaded, the tier floor dotted, the overall error dashed."))
    return figures
