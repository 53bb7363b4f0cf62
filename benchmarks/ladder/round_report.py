"""The round report: ``round_report.html`` and ``round_report.md`` of a folder of probe directories.

A round directory is the folder ``--ladder-round-dir`` takes: every probe directory (one holding
``metadata.json``) under it is read (v1 and v2 never together).  The report shows what the ladder already
computes over such a folder (:func:`benchmarks.ladder.report.fleet_report`: the gate table, the v2
instrument verdict, per round the feasibility arithmetic and the Spearman correlations;
:func:`benchmarks.ladder.instrument.retune_violations`) and, per round (generator state), the seed report's
four figures:

1. error by tier per rung (the gate rows' ``tier<t>.error``), with the band and the tier floor;
2. the failure signature against rung: error on approvable and on non-approvable episodes
   (:func:`benchmarks.ladder.analysis.probe_analysis`, the numbers of each probe's ``analysis.json``);
3. approve rate against the generated approvable share per tier (the same analysis), with the state's design
   share;
4. the feasibility windows of required depth per rung (``round_feasibility``), with the round's mean depth
   and the windows' intersection.

Each figure's numbers are also printed as a table beneath it.  ``preregbench report ROUND_DIR`` renders
the report with the simulated fleet (when every probe is one of its workers);
``python -m benchmarks.ladder.round_report ROUND_DIR --fleet R0=MODEL ...`` names any other fleet.
"""

from __future__ import annotations

import argparse
import base64
import io
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from benchmarks.core import LedgerError, atomic_write_text
from benchmarks.core.report import FORMATS, REPORT_CSS, Figure, ReportError, pyplot, write_svg_figures
from benchmarks.core.report import escape_html as _e
from benchmarks.core.report import escape_md as _md
from fixtures.ladder import REGISTERED_DIALS, STATES

from .analysis import probe_analysis
from .instrument import retune_violations
from .records import Probe, find_probes, read_probes
from .report import default_fleet, fleet_report
from .spec import PREREG, TIERS, LadderError

ROUND_HTML = "round_report.html"
ROUND_MD = "round_report.md"
ROUND_FIGURES_DIR = "round_report_figures"

_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def _design_share(probe: Probe) -> float | None:
    state = STATES.get(probe.metadata.generator_state)
    share = getattr(state, "approve_share", None) if state is not None else probe.metadata.dials.get("approve_share")
    return float(share) if isinstance(share, (int, float)) else None


def round_data(probes: Sequence[Probe], fleet: Mapping[str, str]) -> dict[str, Any]:
    """The fleet report of ``probes`` and, per round, the numbers the four figures draw."""
    report = fleet_report(probes, fleet)
    report["fleet"] = dict(fleet)
    report["retune_violations"] = retune_violations(list(probes), REGISTERED_DIALS)
    label_of = {model: label for label, model in fleet.items()}
    unmatched = list(probes)
    figures: dict[str, Any] = {}
    for row in report["gate_table"]:  # fleet_report's order: state, then fleet label
        state = row["state"]
        label = label_of.get(row["rung"], row["rung"])
        entry = figures.setdefault(state, {"rungs": [], "tier_error": {}, "overall_error": {},
                                           "error_on_approvable": {}, "error_on_rejectable": {},
                                           "refusal_share_of_errors": {}, "approve_rate": {},
                                           "generated_approvable_share": {}, "design_approvable_share": None})
        if label in entry["rungs"]:
            label = f"{label} ({row['probe']})"
        probe = next((p for p in unmatched if (p.folder.name, p.metadata.rung, p.metadata.generator_state,
                                                p.metadata.seed) == (row["probe"], row["rung"], state, row["seed"])),
                     None)
        if probe is not None:
            unmatched.remove(probe)
        entry["rungs"].append(label)
        entry["tier_error"][label] = list(row["tier_error"])
        entry["overall_error"][label] = row["overall_error"]
        if probe is None:
            continue
        share = _design_share(probe)
        analysis = probe_analysis(probe.units, {t: share for t in TIERS} if share is not None else {})
        for key in ("error_on_approvable", "error_on_rejectable", "refusal_share_of_errors"):
            entry[key][label] = analysis.get(key)
        tiers = analysis.get("tiers") or {}
        entry["approve_rate"][label] = [(tiers.get(str(t)) or {}).get("approve_rate") for t in TIERS]
        entry["generated_approvable_share"][label] = [
            (tiers.get(str(t)) or {}).get("generated_approvable_share") for t in TIERS]
        entry["design_approvable_share"] = share
    for state, entry in figures.items():
        entry["feasibility"] = (report["rounds"].get(state) or {}).get("feasibility")
    report["figures"] = figures
    return report


# --------------------------------------------------------------------------- the four figures


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _band(ax: Any, thresholds: Mapping[str, Any]) -> None:
    low, high = thresholds.get("band_low"), thresholds.get("band_high")
    if _num(low) and _num(high):
        ax.axhspan(low, high, color="#55a868", alpha=0.15, label=f"band {low:g} to {high:g}")


def draw_figures(state: str, data: Mapping[str, Any]) -> list[Figure]:
    """The seed's four figures of one round."""
    plt = pyplot()
    thresholds = PREREG.values.thresholds
    rungs = list(data["rungs"])
    n = max(len(rungs), 1)
    colour = {r: _COLOURS[i % len(_COLOURS)] for i, r in enumerate(rungs)}
    out = []

    # 1. error by tier per rung
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    _band(ax, thresholds)
    floor = thresholds.get("tier_floor")
    if _num(floor):
        ax.axhline(floor, color="#a4161a", linestyle=":", linewidth=1, label=f"tier floor {floor:g}")
    width = 0.8 / n
    for i, rung in enumerate(rungs):
        values = [v if _num(v) else 0.0 for v in data["tier_error"][rung]]
        ax.bar([t - 0.4 + width * (i + 0.5) for t in TIERS], values, width=width, color=colour[rung], label=rung)
    tops = [v for r in rungs for v in data["tier_error"][r] if _num(v)] + [thresholds.get("band_high") or 0.0]
    ax.set_ylim(0, max(tops + [0.1]) * 1.35)
    ax.set_xticks(TIERS, [f"tier {t}" for t in TIERS])
    ax.set_ylabel("error rate")
    ax.set_title(f"Round {state}: error by tier per rung")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    out.append(Figure(f"{state}_error_by_tier", f"Round {state}: error by tier per rung", fig,
                      "Share of scored units decided wrongly per tier and rung (errored units excluded); the "
                      "preregistered band shaded, the tier floor dotted."))

    # 2. failure signature against rung
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    xs = list(range(len(rungs)))
    approve_side = [data["error_on_approvable"].get(r) for r in rungs]
    reject_side = [data["error_on_rejectable"].get(r) for r in rungs]
    ax.bar([x - 0.2 for x in xs], [v if _num(v) else 0.0 for v in approve_side], width=0.4, color="#c44e52",
           label="error on approvable episodes (wrong refusals)")
    ax.bar([x + 0.2 for x in xs], [v if _num(v) else 0.0 for v in reject_side], width=0.4, color="#4c72b0",
           label="error on non-approvable episodes (wrong approvals)")
    ax.set_ylim(0, max([v for v in approve_side + reject_side if _num(v)] + [0.1]) * 1.35)
    ax.set_xticks(xs, rungs, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("error rate")
    ax.set_title(f"Round {state}: failure signature by rung")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    out.append(Figure(f"{state}_failure_signature", f"Round {state}: failure signature by rung", fig,
                      "Approve-side error (approvable episodes refused or left undecided) against reject-side error "
                      "(non-approvable episodes approved or left undecided), per rung."))

    # 3. approve rate against the generated approvable share, per tier
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for rung in rungs:
        rates = data["approve_rate"].get(rung)
        if rates:
            ax.plot(TIERS, [v if _num(v) else float("nan") for v in rates], marker="o", color=colour[rung],
                    label=f"approve rate {rung}")
    generated = next((data["generated_approvable_share"][r] for r in rungs if r in data["generated_approvable_share"]),
                     None)
    if generated:
        ax.plot(TIERS, [v if _num(v) else float("nan") for v in generated], color="black", linestyle="--",
                marker="s", label="generated approvable share")
    design = data.get("design_approvable_share")
    if _num(design):
        ax.axhline(design, color="#666", linestyle=":", linewidth=1, label=f"design share {design:g}")
    ax.set_xticks(TIERS, [f"tier {t}" for t in TIERS])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of the tier's units")
    ax.set_title(f"Round {state}: approve rate against approvable share")
    ax.legend(fontsize=7, loc="lower left", ncol=2)
    fig.tight_layout()
    out.append(Figure(f"{state}_approve_rate", f"Round {state}: approve rate against the approvable share", fig,
                      "Per tier, the share of units each rung approved, against the share of generated episodes "
                      "that are approvable (dashed) and the state's design share (dotted)."))

    # 4. feasibility windows of required depth per rung
    feas = data.get("feasibility") or {}
    windows = feas.get("rungs") or {}
    fig, ax = plt.subplots(figsize=(7.5, 1.6 + 0.5 * n))
    finite_edges = [e for w in windows.values() for e in (w.get("required_depth_window") or []) if _num(e)]
    depth = feas.get("depth")
    right = max(finite_edges + ([depth] if _num(depth) else []) + [1.0]) * 1.1
    for i, rung in enumerate(rungs):
        w = windows.get(rung) or {}
        window = w.get("required_depth_window")
        if window and all(_num(e) for e in window):
            lo, hi = window
            if w.get("bound"):  # a zero-error rung: its accuracy is a bound, so the window only opens from lo
                ax.barh(i, right - lo, left=lo, height=0.5, color=colour[rung], alpha=0.35, hatch="//")
                ax.text(right, i, f"from {lo:.1f} (bound) ", fontsize=7, va="center", ha="right")
            else:
                ax.barh(i, hi - lo, left=lo, height=0.5, color=colour[rung])
                ax.text(hi, i, f" {lo:.1f} to {hi:.1f}", fontsize=7, va="center")
        else:
            ax.text(0.5, i, "no window (no approvable unit right)", fontsize=7, va="center")
    if _num(depth):
        ax.axvline(depth, color="black", linestyle="--", linewidth=1, label=f"mean depth {depth:.1f}")
    common = feas.get("intersection")
    if common:
        ax.axvspan(common[0], min(common[1], right), color="#55a868", alpha=0.2, label="intersection")
    ax.set_yticks(range(len(rungs)), rungs, fontsize=8)
    ax.set_xlim(0, right)
    ax.set_ylim(-0.6, len(rungs) + 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("composition depth k")
    ax.set_title(f"Round {state}: required depth window per rung" + ("" if common else " (no common depth)"))
    if _num(depth) or common:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.append(Figure(f"{state}_depth_windows", f"Round {state}: feasibility windows of required depth", fig,
                      "Per rung, the depths k at which its per-check accuracy a puts episode error in the band, "
                      "[ln 0.90 / ln a, ln 0.65 / ln a]; hatched and open-ended for a zero-error rung (a is a "
                      "rule-of-three bound); the round's mean declared depth dashed."))
    return out


def _svg(figure: Any) -> bytes:
    import matplotlib  # reason: matplotlib loads only when a report draws its figures

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "preregbench", "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return buffer.getvalue()


def render_figures(report: Mapping[str, Any]) -> list[tuple[str, str, str, bytes]]:
    """(stem, title, caption, svg) of every round's four figures."""
    plt = pyplot()
    out = []
    for index, (state, data) in enumerate(report["figures"].items()):
        for item in draw_figures(state, data):
            try:
                stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.name).strip("._")
                out.append((f"r{index}_{stem}", item.title, item.caption, _svg(item.figure)))
            finally:
                plt.close(item.figure)
    return out


# --------------------------------------------------------------------------- the pages


def _f(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if _num(value) else "n/a"


def _tables(report: Mapping[str, Any]) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(anchor, heading, header, rows) of the round's tables, shared by both pages."""
    labels = {m: l for l, m in report["fleet"].items()}
    gate = [[labels.get(r["rung"], ""), r["rung"], r["state"], str(r["seed"]),
             *[_f(v) for v in r["tier_error"]], _f(r["overall_error"]),
             " ".join(f"{c}:{v}" for c, v in sorted(r["clauses"].items())), r["gate"]] for r in report["gate_table"]]
    out = [("gate-table", "Gate table",
            ["label", "rung", "state", "seed", *[f"tier {t}" for t in TIERS], "overall", "clauses", "gate"], gate)]
    for state, entry in report["rounds"].items():
        feas = entry.get("feasibility")
        if not feas:
            continue
        rows = []
        for rung, r in feas["rungs"].items():
            lo, hi = r["required_depth_window"] or (None, None)
            rows.append([rung, (">= " if r["bound"] else "") + _f(r["approvable_accuracy"]),
                         (">= " if r["bound"] else "") + _f(r["per_check_accuracy"], 4),
                         f"{_f(lo, 1)} to {_f(hi, 1)}" if lo is not None else "none",
                         _f(feas["log_inaccuracy_ratios"].get(rung), 2)])
        out.append((f"feasibility-{state}", f"Round {state}: feasibility (mean depth {_f(feas['depth'], 1)}; window at "
                    f"that depth {_f(feas['feasibility_window_at_depth'][0], 4)} to "
                    f"{_f(feas['feasibility_window_at_depth'][1], 4)}; intersection "
                    f"{'none' if not feas['intersection'] else ' to '.join(_f(v, 1) for v in feas['intersection'])}; "
                    f"max log-inaccuracy ratio {_f(feas['max_ratio'], 2)} against the limit "
                    f"{_f(feas['ratio_limit'], 2)}; Spearman of error with parameters: total "
                    f"{_f(entry.get('spearman_total'), 2)}, active {_f(entry.get('spearman_active'), 2)})",
                    ["rung", "approvable accuracy", "per-check accuracy a", "required depth window",
                     f"log-inaccuracy ratio to {feas['strongest']}"], rows))
    return out


def _figure_tables(state: str, data: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The numbers each figure draws, as (stem suffix, header, rows)."""
    rungs = data["rungs"]
    feas = (data.get("feasibility") or {}).get("rungs") or {}
    window = {r: (feas.get(r) or {}).get("required_depth_window") for r in rungs}
    return [
        ("error_by_tier", ["rung", *[f"tier {t}" for t in TIERS], "overall"],
         [[r, *[_f(v) for v in data["tier_error"][r]], _f(data["overall_error"][r])] for r in rungs]),
        ("failure_signature", ["rung", "error on approvable", "error on non-approvable", "refusal share of errors"],
         [[r, _f(data["error_on_approvable"].get(r)), _f(data["error_on_rejectable"].get(r)),
           _f(data["refusal_share_of_errors"].get(r))] for r in rungs]),
        ("approve_rate", ["rung", *[f"tier {t}" for t in TIERS]],
         [[f"{r} approve rate", *[_f(v) for v in data["approve_rate"].get(r) or [None] * len(TIERS)]] for r in rungs]
         + [["generated approvable share",
             *[_f(v) for v in next(iter(data["generated_approvable_share"].values()), [None] * len(TIERS))]]]),
        ("depth_windows", ["rung", "from k", "to k", "bound"],
         [[r, _f((window[r] or [None, None])[0], 1), _f((window[r] or [None, None])[1], 1),
           "yes" if (feas.get(r) or {}).get("bound") else "no"] for r in rungs]),
    ]


def _verdict_lines(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    if "instrument" in report:
        out.append(("Instrument verdict", f"{report['instrument']['label']}: {report['instrument']['reason']}"))
    else:
        out.append(("Instrument verdict", "none: the instrument verdict belongs to the v2 registration (v1 probes)"))
    violations = report["retune_violations"]
    out.append(("Retune rule", "held" if not violations else "broken: " + "; ".join(str(v) for v in violations)))
    out.append(("Fleet", ", ".join(f"{label} = {model}" for label, model in report["fleet"].items())))
    return out


def render_round_html(title: str, report: Mapping[str, Any], figures: Sequence[tuple[str, str, str, bytes]]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
           "style-src 'unsafe-inline'\">",
           f"<title>Capability ladder round {_e(title)}</title>", f"<style>{REPORT_CSS}</style></head><body>",
           f"<h1>Capability ladder: round report of <span class=\"mono\">{_e(title)}</span></h1>",
           '<section id="verdict">']
    for name, text in _verdict_lines(report):
        out.append(f'<p class="verdict" data-line="{_e(name)}">{_e(name)}: {_e(text)}</p>')
    out.append("</section>")
    for anchor, heading, header, rows in _tables(report):
        out.append(f'<section id="{_e(anchor)}"><h2>{_e(heading)}</h2><table><thead><tr>'
                   + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>")
        for row in rows:
            out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
        out.append("</tbody></table></section>")
    out.append('<section id="figures"><h2>Figures</h2>')
    data_tables = {f"r{i}_{state}_{suffix}": (header, rows) for i, (state, data) in enumerate(report["figures"].items())
                   for suffix, header, rows in _figure_tables(state, data)}
    for stem, title_, caption, svg in figures:
        uri = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
        out.append(f'<figure id="figure-{_e(stem)}"><img class="figure" alt="{_e(title_)}" src="{uri}">'
                   f"<figcaption><strong>{_e(title_)}</strong>. {_e(caption)}</figcaption></figure>")
        header, rows = data_tables.get(stem, ([], []))
        if header:
            out.append(f'<table class="figure-data" data-figure="{_e(stem)}"><thead><tr>'
                       + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
                       + "</tbody></table>")
    out.append("</section>")
    out.append(f'<p class="muted">Rendered from the probe directories under {_e(title)} by preregbench; re-render '
               "with <code>preregbench report ROUND_DIR</code>.</p></body></html>")
    return "\n".join(out) + "\n"


def render_round_md(title: str, report: Mapping[str, Any], figures: Sequence[tuple[str, str, str, bytes]]) -> str:
    def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        return (["| " + " | ".join(_md(h) for h in header) + " |", "|" + " --- |" * len(header)]
                + ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows] + [""])

    out = [f"# Capability ladder: round report of {_md(title)}", ""]
    out += [f"**{_md(name)}: {_md(text)}**\n" for name, text in _verdict_lines(report)]
    for _, heading, header, rows in _tables(report):
        out += [f"## {_md(heading)}", ""] + table(header, rows)
    out += ["## Figures", ""]
    data_tables = {f"r{i}_{state}_{suffix}": (header, rows) for i, (state, data) in enumerate(report["figures"].items())
                   for suffix, header, rows in _figure_tables(state, data)}
    for stem, title_, caption, _ in figures:
        out += [f"![{_md(title_)}]({ROUND_FIGURES_DIR}/{quote(stem)}.svg)", "", f"*{_md(title_)}*. {_md(caption)}", ""]
        header, rows = data_tables.get(stem, ([], []))
        if header:
            out += table(header, rows)
    return "\n".join(out) + "\n"


def write_round_reports(folder: str | Path, formats: str = "both", fleet: Mapping[str, str] | None = None,
                        probes: Sequence[Probe] | None = None) -> list[Path]:
    """Write ``round_report.html`` and/or ``round_report.md`` (with ``round_report_figures/``) into ``folder``.

    :class:`ReportError` (one line) when the folder holds no probe, its probes cannot be read together, or
    the fleet is not named and the probes are not the simulated fleet's.
    """
    if formats not in FORMATS:
        raise ReportError(f"format {formats!r} is not one of {', '.join(FORMATS)}")
    folder = Path(folder)
    if probes is None:
        found = find_probes(folder)
        if not found:
            raise ReportError(f"{folder}: no probe directory (with metadata.json) under it; give the folder "
                              "of probe directories passed as --ladder-round-dir")
        try:
            probes = read_probes(found)
        except (ValueError, LedgerError) as exc:  # LadderError, a damaged ledger: one line naming the file
            raise ReportError(f"{folder}: {exc}") from None
    if not fleet:
        try:
            fleet = default_fleet(probes)
        except LadderError as exc:
            raise ReportError(f"{folder}: {exc} (python -m benchmarks.ladder.round_report ROUND_DIR --fleet "
                              "LABEL=MODEL ... names them)") from None
    try:
        report = round_data(probes, dict(fleet))
    except ValueError as exc:
        raise ReportError(f"{folder}: {exc}") from None
    figures = render_figures(report)
    title = folder.resolve().name
    written = []
    if formats in ("md", "both"):
        written += write_svg_figures(folder / ROUND_FIGURES_DIR, figures)
        written.append(atomic_write_text(folder / ROUND_MD, render_round_md(title, report, figures)))
    if formats in ("html", "both"):
        written.append(atomic_write_text(folder / ROUND_HTML, render_round_html(title, report, figures)))
    return written


def is_round_dir(folder: Path) -> bool:
    """A folder that is no run directory itself and holds at least one probe directory."""
    folder = Path(folder)
    return (folder.is_dir() and not folder.is_symlink() and not (folder / "provenance.json").exists()
            and bool(find_probes(folder)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write round_report.html/.md over a folder of probe directories.")
    parser.add_argument("round_dir", type=Path)
    parser.add_argument("--fleet", action="append", default=[], metavar="LABEL=MODEL",
                        help="rung label (R0 = anchor) and the model name its probes carry")
    parser.add_argument("--format", default="both", choices=FORMATS)
    args = parser.parse_args(argv)
    if any("=" not in item for item in args.fleet):
        parser.error("--fleet takes LABEL=MODEL, e.g. R0=openai:qwen3.5@http://127.0.0.1:11434/v1")
    try:
        for path in write_round_reports(args.round_dir, args.format, dict(i.split("=", 1) for i in args.fleet)):
            print(path)
    except (ReportError, OSError) as exc:
        print(f"round_report: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 4 if isinstance(exc, ReportError) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
