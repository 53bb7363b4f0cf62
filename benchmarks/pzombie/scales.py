"""P-Zombie across its four scales: the cross-scale table of a ``--scale all`` group.

The seed's result (section 8, SR-61 FINAL V2) is one table over the four
scales: eta^2, F, p_approx, R^2(TD -> H), the mean zone entropy H per
category and the combined verdict, all of the rule preset ACTIVE_MANIFOLD.
:func:`write_scale_report` writes that table for a scale group
(:mod:`benchmarks.core.scales`), each scale's row beside the published row of
the same scale, into the group directory:

* ``scales.json``: per scale the run's status, model, deviations, both
  presets' statistics with the 95% intervals of eta^2 and R^2, every
  classification, and the published row; the thresholds the rules read;
* ``scales.md`` and ``report.html``: the table in the seed's layout, a second
  table with the intervals and the other classifications, and one figure
  (eta^2 and R^2 per scale with their intervals, the published values and the
  thresholds), its numbers printed beneath it; ``scales_figures/`` holds the
  figure as SVG for the Markdown page.

Every number is copied from a scale's own ``stats.json``, the summary its
run wrote and ``preregbench verify`` checks; a scale whose run is missing or
unreadable has a row saying why, and the group is then ``incomplete``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks.core import FileReadError, atomic_write_json, atomic_write_text, read_json_file
from benchmarks.core.report import FORMATS, REPORT_CSS, Figure, ReportError, pyplot, svg_figures, write_svg_figures
from benchmarks.core.report import escape_html as _e
from benchmarks.core.report import escape_md as _md
from benchmarks.core.scales import GROUP_FILE, ScaleGroupError, group_runs, read_group

from .spec import CATEGORIES, PREREG, PRESET_PREFIX, PUBLISHED

SCALES_JSON = "scales.json"
SCALES_MD = "scales.md"
SCALES_HTML = "report.html"
SCALES_FIGURES_DIR = "scales_figures"
FIGURE_STEM = "eta2_r2_by_scale"
PUBLISHED_SOURCE = "SR-61 FINAL V2 (seed section 8; ACTIVE_MANIFOLD, n = 80 per scale)"
_STATISTICS = ("eta_squared", "f", "p_approx", "p_exact", "r_squared_td", "n", "n_ok", "errors")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(float(value)) else None


def _preset_row(metrics: Mapping[str, Any], found: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    row: dict[str, Any] = {key: _number(metrics.get(f"{prefix}.{key}")) for key in _STATISTICS}
    row["mean_h"] = {c: _number(metrics.get(f"{prefix}.mean_h.{c}")) for c in CATEGORIES}
    for key in ("eta_squared", "r_squared_td"):
        iv = found.get(f"{prefix}.{key}")
        row[f"{key}_interval"] = ({"low": _number(iv.get("low")), "high": _number(iv.get("high")),
                                   "confidence": _number(iv.get("confidence")), "method": iv.get("method")}
                                  if isinstance(iv, Mapping) else None)
    return row


def scale_row(scale: str, run_dir: Path, parent: Path) -> dict[str, Any]:
    """One scale's row, read from its run's ``stats.json`` (a row with ``problem`` when it cannot be)."""
    row: dict[str, Any] = {"scale": scale, "run_dir": str(run_dir.relative_to(parent)) if run_dir.is_relative_to(parent)
                           else str(run_dir), "published": PUBLISHED.get(scale)}
    path = run_dir / "stats.json"
    if run_dir.is_symlink() or path.is_symlink():
        return {**row, "status": "missing", "problem": f"{path} is reached through a symbolic link; not read"}
    if not path.is_file():
        return {**row, "status": "missing", "problem": f"{run_dir.name}: no stats.json (the run did not finish)"}
    try:
        stats = read_json_file(path)
    except FileReadError as exc:
        return {**row, "status": "missing", "problem": str(exc)}
    settings = stats.get("settings") if isinstance(stats, dict) else None
    if not isinstance(stats, dict) or not isinstance(settings, dict) or not isinstance(stats.get("metrics"), dict):
        return {**row, "status": "missing", "problem": f"{path} is not a P-Zombie summary"}
    if settings.get("scale") != scale:
        return {**row, "status": "missing", "problem": f"{path} is the summary of scale {settings.get('scale')!r}, "
                                                         f"not {scale!r}"}
    metrics, found = stats["metrics"], stats.get("intervals") if isinstance(stats.get("intervals"), dict) else {}
    model = stats.get("model") if isinstance(stats.get("model"), dict) else {}
    classifications = stats.get("classifications") if isinstance(stats.get("classifications"), dict) else {}
    return {
        **row,
        "run_id": stats.get("run_id"),
        "status": stats.get("status"),
        "model": model.get("id"),
        "revision": model.get("revision"),
        "settings": settings,
        "deviations": [str(d) for d in stats.get("deviations") or []],
        "classifications": {str(k): v for k, v in classifications.items()},
        "verdict": classifications.get("combined"),
        "presets": {preset: _preset_row(metrics, found, prefix) for preset, prefix in PRESET_PREFIX.items()},
    }


def scale_table(parent: Path, runs: Mapping[str, Path]) -> dict[str, Any]:
    """The content of ``scales.json`` for the group in ``parent``."""
    group = read_group(parent) or {}
    rows = [scale_row(scale, Path(run_dir), Path(parent)) for scale, run_dir in runs.items()]
    complete = sum(row.get("status") == "complete" for row in rows)
    return {
        "protocol": "pzombie",
        "group_id": group.get("group_id", Path(parent).name),
        "status": "complete" if rows and complete == len(rows) else "incomplete",
        "complete_scales": complete,
        "rule_preset": PREREG.values.run.rule_preset,
        "thresholds": dict(PREREG.values.thresholds),
        "published_source": PUBLISHED_SOURCE,
        "scales": rows,
    }


# --------------------------------------------------------------------------- text


def _f(value: Any, digits: int = 3) -> str:
    return "-" if _number(value) is None else f"{float(value):.{digits}f}"


def _p(value: Any) -> str:
    v = _number(value)
    if v is None:
        return "-"
    return f"{v:.3f}" if v >= 1e-3 else f"{v:.1e}"


def _span(iv: Any) -> str:
    if not isinstance(iv, Mapping) or _number(iv.get("low")) is None or _number(iv.get("high")) is None:
        return "undefined"
    return f"[{iv['low']:.3f}, {iv['high']:.3f}]"


def _means(mean_h: Any) -> str:
    values = mean_h if isinstance(mean_h, Mapping) else {}
    return " / ".join(_f(values.get(c), 2) for c in CATEGORIES)


def seed_rows(table: Mapping[str, Any]) -> list[list[str]]:
    """The seed's section-8 table: per scale this group's row, then the published one."""
    preset = table["rule_preset"]
    rows = []
    for row in table["scales"]:
        mine = (row.get("presets") or {}).get(preset)
        if mine is None:
            rows.append([row["scale"], "this group", "-", "-", "-", "-", "-", f"not measured: {row.get('problem')}"])
        else:
            rows.append([row["scale"], "this group", _f(mine["eta_squared"]), _f(mine["f"], 2), _p(mine["p_approx"]),
                         _f(mine["r_squared_td"]), _means(mine["mean_h"]), str(row.get("verdict") or "undecided")])
        published = row.get("published")
        if published:
            rows.append([row["scale"], "SR-61 FINAL V2", _f(published["eta_squared"]), _f(published["f"], 2),
                         _p(published["p_approx"]), _f(published["r_squared_td"]), _means(published["mean_h"]),
                         str(published["verdict"])])
    return rows


SEED_HEADER = ["Scale", "Source", "η²", "F", "p_approx", "R²(TD→H)", "Mean H (math/logic/creative/synth)", "Verdict"]
DETAIL_HEADER = ["Scale", "status", "model", "η² 95% interval", "R² 95% interval", "prompts without error",
                 "BASELINE η²", "H2/A2", "token control", "η² target"]


def detail_rows(table: Mapping[str, Any]) -> list[list[str]]:
    preset = table["rule_preset"]
    rows = []
    for row in table["scales"]:
        presets = row.get("presets") or {}
        mine, baseline = presets.get(preset) or {}, presets.get(PREREG.values.run.comparison_preset) or {}
        labels = row.get("classifications") or {}
        n_ok, n = mine.get("n_ok"), mine.get("n")
        rows.append([row["scale"], str(row.get("status")), str(row.get("model") or "-"),
                     _span(mine.get("eta_squared_interval")), _span(mine.get("r_squared_td_interval")),
                     "-" if n is None else f"{int(n_ok or 0)} of {int(n)}",
                     _f(baseline.get("eta_squared")), str(labels.get("h2") or "undecided"),
                     str(labels.get("token_control") or "undecided"), str(labels.get("eta2_target") or "undecided")])
    return rows


def figure_rows(table: Mapping[str, Any]) -> list[list[str]]:
    """The numbers the figure draws."""
    preset = table["rule_preset"]
    rows = []
    for row in table["scales"]:
        mine = (row.get("presets") or {}).get(preset) or {}
        published = row.get("published") or {}
        rows.append([row["scale"], _f(mine.get("eta_squared")), _span(mine.get("eta_squared_interval")),
                     _f(published.get("eta_squared")), _f(mine.get("r_squared_td")),
                     _span(mine.get("r_squared_td_interval")), _f(published.get("r_squared_td"))])
    return rows


FIGURE_HEADER = ["Scale", "η²", "η² interval", "η² SR-61", "R²(TD→H)", "R² interval", "R² SR-61"]


def _headline(table: Mapping[str, Any]) -> str:
    n = len(table["scales"])
    return (f"{table['status']}: {table['complete_scales']} of {n} scales complete; the rules read "
            f"{table['rule_preset']}")


def _deviation_lines(table: Mapping[str, Any]) -> list[str]:
    out = []
    for row in table["scales"]:
        found = row.get("deviations") or []
        out.append(f"{row['scale']}: " + ("; ".join(found) if found else ("none" if "deviations" in row
                                                                           else str(row.get("problem")))))
    return out


# --------------------------------------------------------------------------- figure


def draw_figure(table: Mapping[str, Any]) -> Figure:
    """eta^2 and R^2(TD -> H) of the rule preset per scale, with their 95% intervals, the published values
    and the thresholds the rules read."""
    plt = pyplot()
    preset, thresholds = table["rule_preset"], table["thresholds"]
    scales = [row["scale"] for row in table["scales"]]
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.8))
    for ax, key, label, lines in (
            (axes[0], "eta_squared", "eta^2", (("eta2_confirm", "combined: eta^2 >= {:g}"),
                                               ("eta2_target", "target: eta^2 > {:g}"))),
            (axes[1], "r_squared_td", "R^2(TD -> H)", (("r2_token_control", "token control: R^2 < {:g}"),
                                                       ("r2_pzombie", "P-ZOMBIE above {:g}")))):
        for i, row in enumerate(table["scales"]):
            mine = (row.get("presets") or {}).get(preset) or {}
            value, iv = _number(mine.get(key)), mine.get(f"{key}_interval") or {}
            if value is not None:
                low, high = _number(iv.get("low")), _number(iv.get("high"))
                err = [[value - low], [high - value]] if low is not None and high is not None else None
                ax.errorbar([i - 0.08], [value], yerr=err, fmt="o", color="C0", capsize=4,
                            label="this group (95% interval)" if i == 0 else None)
            published = _number((row.get("published") or {}).get(key))
            if published is not None:
                ax.plot([i + 0.08], [published], marker="D", linestyle="none", markerfacecolor="none",
                        color="C3", label="SR-61 FINAL V2" if i == 0 else None)
        for (name, text), style in zip(lines, (":", "--")):
            ax.axhline(thresholds[name], color="grey", linestyle=style, linewidth=1, label=text.format(thresholds[name]))
        ax.set_xticks(range(len(scales)), scales)
        ax.set_xlim(-0.6, len(scales) - 0.4)
        ax.set_ylim(0.0, 1.02)
        ax.set_xlabel("scale")
        ax.set_ylabel(label)
        ax.set_title(f"{label} of {preset} by scale", fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.tight_layout()
    return Figure(FIGURE_STEM, "eta^2 and R^2 by scale", fig,
                  f"eta^2 (category -> H) and R^2 (TD -> H) of {preset} at each scale with their 95% intervals "
                  "(noncentral-F inversion), the published SR-61 FINAL V2 values, and the thresholds the rules read.")


# --------------------------------------------------------------------------- pages


def render_md(table: Mapping[str, Any], figures: Sequence[tuple[str, str, str, bytes]], notes: Sequence[str]) -> str:
    def grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        return (["| " + " | ".join(_md(h) for h in header) + " |", "|" + " --- |" * len(header)]
                + ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows] + [""])

    out = [f"# P-Zombie across scales: group {_md(table['group_id'])}", "", f"**{_md(_headline(table))}**", ""]
    out += [f"## {_md(table['rule_preset'])} by scale (the seed's section 8)", ""] + grid(SEED_HEADER, seed_rows(table))
    out += ["## Intervals and the other classifications", ""] + grid(DETAIL_HEADER, detail_rows(table))
    out += ["## Figure", ""]
    for stem, title, caption, _ in figures:
        out += [f"![{_md(title)}]({SCALES_FIGURES_DIR}/{quote(stem)}.svg)", "", f"*{_md(title)}*. {_md(caption)}", ""]
    out += grid(FIGURE_HEADER, figure_rows(table))
    out += [f"- {_md(note)}" for note in notes] + ([""] if notes else [])
    out += ["## Deviations per scale", ""] + [f"- {_md(line)}" for line in _deviation_lines(table)] + [""]
    out += [f"Published rows: {_md(table['published_source'])}. Each scale is a run of its own; check one with "
            "`preregbench verify RUN_DIR`.", ""]
    return "\n".join(out)


def render_html(table: Mapping[str, Any], figures: Sequence[tuple[str, str, str, bytes]], notes: Sequence[str]) -> str:
    def grid(anchor: str, heading: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        return ([f'<section id="{_e(anchor)}"><h2>{_e(heading)}</h2><table><thead><tr>'
                 + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"]
                + ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows]
                + ["</tbody></table></section>"])

    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
           "style-src 'unsafe-inline'\">",
           f"<title>P-Zombie across scales {_e(table['group_id'])}</title>", f"<style>{REPORT_CSS}</style></head><body>",
           f"<h1>P-Zombie across scales: group <span class=\"mono\">{_e(table['group_id'])}</span></h1>",
           f'<p class="verdict" data-line="status">{_e(_headline(table))}</p>']
    out += grid("seed-table", f"{table['rule_preset']} by scale (the seed's section 8)", SEED_HEADER, seed_rows(table))
    out += grid("details", "Intervals and the other classifications", DETAIL_HEADER, detail_rows(table))
    out.append('<section id="figures"><h2>Figure</h2>')
    for stem, title, caption, svg in figures:
        uri = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
        out.append(f'<figure id="figure-{_e(stem)}"><img class="figure" alt="{_e(title)}" src="{uri}">'
                   f"<figcaption><strong>{_e(title)}</strong>. {_e(caption)}</figcaption></figure>")
    out.append(f'<table class="figure-data" data-figure="{FIGURE_STEM}"><thead><tr>'
               + "".join(f"<th>{_e(h)}</th>" for h in FIGURE_HEADER) + "</tr></thead><tbody>"
               + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in figure_rows(table))
               + "</tbody></table>")
    out += [f'<p class="fail">{_e(note)}</p>' for note in notes]
    out.append("</section>")
    out.append('<section id="deviations"><h2>Deviations per scale</h2><ul>'
               + "".join(f"<li>{_e(line)}</li>" for line in _deviation_lines(table)) + "</ul></section>")
    out.append('<section id="runs"><h2>Runs</h2><ul>'
               + "".join(f'<li><a href="{_e("/".join(quote(p) for p in Path(row["run_dir"]).parts))}/report.html">'
                         f'{_e(row["scale"])}</a>: {_e(row["run_dir"])}</li>' for row in table["scales"])
               + "</ul></section>")
    out.append(f'<p class="muted">Published rows: {_e(table["published_source"])}. Rendered from the runs of the '
               "group by preregbench; re-render with <code>preregbench report GROUP_DIR</code>; check a scale with "
               "<code>preregbench verify RUN_DIR</code>.</p></body></html>")
    return "\n".join(out) + "\n"


def write_scale_report(parent: Path, runs: Mapping[str, Path] | None = None, formats: str = "both") -> list[Path]:
    """Write ``scales.json`` and, per ``formats``, ``scales.md`` (with ``scales_figures/``) and ``report.html``
    into the group directory ``parent``; returns the written paths."""
    if formats not in FORMATS:
        raise ReportError(f"format {formats!r} is not one of {', '.join(FORMATS)}")
    parent = Path(parent)
    if runs is None:
        try:
            _, runs = group_runs(parent)
        except ScaleGroupError as exc:
            raise ReportError(str(exc)) from None
    table = scale_table(parent, runs)
    notes: list[str] = []
    try:
        figures = svg_figures([draw_figure(table)], notes)
    except Exception as exc:  # a figure that cannot be drawn never stops the table
        notes.append(f"the figure could not be drawn: {type(exc).__name__}: {exc}")
        figures = []
    written = [atomic_write_json(parent / SCALES_JSON, table)]
    if formats in ("md", "both"):
        written += write_svg_figures(parent / SCALES_FIGURES_DIR, figures)
        written.append(atomic_write_text(parent / SCALES_MD, render_md(table, figures, notes)))
    if formats in ("html", "both"):
        written.append(atomic_write_text(parent / SCALES_HTML, render_html(table, figures, notes)))
    return written


def is_scale_group(folder: Path) -> bool:
    """Whether ``folder`` is a P-Zombie scale group (its ``group.json`` names P-Zombie)."""
    try:
        group = read_group(folder)
    except ScaleGroupError:
        return (Path(folder) / GROUP_FILE).exists()  # damaged: let write_scale_report say why
    return group is not None and group["protocol"] == "pzombie"


__all__ = ["SCALES_JSON", "SCALES_MD", "draw_figure", "is_scale_group", "scale_row", "scale_table",
           "write_scale_report"]
