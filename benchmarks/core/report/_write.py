"""Writing the reports into a run directory, the index of a results folder, and a protocol's round report."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from .. import registry
from .._canonical import atomic_write_text
from ._figures import DrawnAhead
from ._html import render_html, render_index
from ._markdown import render_md
from ._view import FIGURES_DIR, INDEX_HTML, REPORT_HTML, REPORT_MD, ReportError, find_protocol, load_run


FORMATS = ("html", "md", "both")


def write_reports(run_dir: str | Path, formats: str = "both", *, drawn_ahead: DrawnAhead | None = None) -> list[Path]:
    """Write ``report.html`` and/or ``report.md`` (with its ``report_figures/``) into a finished run directory.

    Returns the written paths.  :class:`ReportError` (one line) when the run's files cannot be read.
    """
    if formats not in FORMATS:
        raise ReportError(f"format {formats!r} is not one of {', '.join(FORMATS)}")
    run_dir = Path(run_dir)
    view = load_run(run_dir, drawn_ahead=drawn_ahead)
    written = []
    if formats in ("md", "both"):
        if view.figures:
            written += write_svg_figures(run_dir / FIGURES_DIR, view.figures)
        written.append(atomic_write_text(run_dir / REPORT_MD, render_md(view)))
    if formats in ("html", "both"):
        written.append(atomic_write_text(run_dir / REPORT_HTML, render_html(view)))
    return written


def write_svg_figures(folder: Path, figures: Sequence[tuple[str, str, str, bytes]]) -> list[Path]:
    """Write each rendered figure (stem, title, caption, SVG bytes) as ``<folder>/<stem>.svg`` for a Markdown
    report to link; ``folder`` must be a real directory (made when missing)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ReportError(f"{folder} is not a real directory; remove it and render again")
    folder.mkdir(exist_ok=True)
    return [atomic_write_text(folder / f"{stem}.svg", svg.decode("utf-8")) for stem, _, _, svg in figures]


def _index_row(run_dir: Path, results: Path) -> dict[str, str] | None:
    try:
        view = load_run(run_dir, figures=False)
    except ReportError:
        return None
    model = (view.provenance.get("model") or view.summary.get("model") or {}).get("id")
    labels = "; ".join(f"{c.name}: {c.label or 'not classifiable'}" for c in view.classifications if not c.breakdown)
    date = str(view.provenance.get("started_at") or view.summary.get("started_at") or "")
    report = run_dir / REPORT_HTML
    link = "/".join(quote(p) for p in report.relative_to(results).parts) if report.is_file() else ""
    return {"protocol": view.protocol, "run_id": view.run_id, "model": str(model), "classification": labels,
            "status": view.status, "date": date, "link": link,
            "non_preregistered": "yes" if view.model_deviation else ""}


def write_index(results_dir: str | Path) -> Path:
    """Write ``<results_dir>/index.html``: one row per run (protocol, run id, model, classification, status,
    date) linking to its ``report.html``; folders that are not finished runs are left out."""
    results = Path(results_dir)
    if results.is_symlink() or not results.is_dir():
        raise ReportError(f"{results} is not a results directory; give the folder passed as --results-dir")
    rows = []
    for protocol in sorted(p for p in results.iterdir() if p.is_dir() and not p.is_symlink()):
        for run_dir in sorted(p for p in protocol.iterdir() if p.is_dir() and not p.is_symlink()):
            row = _index_row(run_dir, results)
            if row is not None:
                rows.append(row)
    rows.sort(key=lambda r: (r["date"], r["protocol"], r["run_id"]), reverse=True)
    return atomic_write_text(results / INDEX_HTML, render_index(rows, results))


def write_round_reports(folder: str | Path, formats: str = "both") -> list[Path] | None:
    """A protocol's report over a round of its runs (:meth:`Protocol.round_report`) when ``folder`` is no run
    directory (no ``provenance.json``) and some protocol recognises it; None otherwise."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir() or (folder / "provenance.json").exists():
        return None
    for name in registry.names():
        protocol = find_protocol(name)
        written = protocol.round_report(folder, formats) if protocol is not None else None
        if written is not None:
            return written
    return None
