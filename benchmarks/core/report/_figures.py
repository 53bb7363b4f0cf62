"""The figures of a report: a protocol's matplotlib figures rendered to deterministic SVG."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import one_line

_FIGURE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")

#: ``drawn_ahead(protocol, run_dir, summary)``: figures and notes drawn elsewhere for a run, or None.
DrawnAhead = Callable[[Any, Path, Mapping[str, Any]], "tuple[list, list[str]] | None"]


@dataclass
class Figure:
    """One figure of a report: a matplotlib figure, rendered to SVG and closed by the renderer."""

    name: str  # file name stem of the figure in report_figures/ (letters, digits, - _ .)
    title: str
    figure: Any  # a matplotlib.figure.Figure
    caption: str = ""


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display), for a protocol's figure code."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def draw_figures(protocol: Any, run_dir: Path, summary: Mapping[str, Any], notes: list[str],
                 drawn_ahead: DrawnAhead | None = None) -> list[tuple[str, str, str, bytes]]:
    """The run's figures: those ``drawn_ahead`` hands over when it has them, else drawn here."""
    ahead = drawn_ahead(protocol, run_dir, summary) if drawn_ahead is not None else None
    if ahead is not None:
        notes.extend(ahead[1])
        return ahead[0]
    return render_figures(protocol, run_dir, summary, notes)


def warm_figures() -> None:
    """Import matplotlib and draw one throwaway figure as the report does (fonts, glyph paths, SVG writer)."""
    import matplotlib

    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(4.0, 3.0))
    for ax in axes:
        ax.scatter([0.0, 1.0], [1.0, 0.0], s=4, label="warm")
        ax.bar(["a", "b"], [1, 2])
        ax.axhline(0.5, linestyle="--")
        ax.set_title("warm-up 0123456789")
        ax.legend(fontsize=8)
    figure.suptitle("warm-up")
    figure.tight_layout()
    with matplotlib.rc_context({"svg.hashsalt": "preregbench", "svg.fonttype": "path"}):
        figure.savefig(io.BytesIO(), format="svg", metadata={"Date": None, "Creator": None})
    plt.close(figure)


def render_figures(protocol: Any, run_dir: Path, summary: Mapping[str, Any],
                   notes: list[str]) -> list[tuple[str, str, str, bytes]]:
    """The protocol's report figures as (file stem, title, caption, SVG bytes); a failure is a note."""
    try:
        drawn = list(protocol.report_figures(run_dir, summary))
    except Exception as exc:  # a figure that cannot be drawn never stops the report
        notes.append(f"the figures could not be drawn: {type(exc).__name__}: {one_line(exc)}")
        return []
    return svg_figures(drawn, notes)


def svg_figures(drawn: list[Figure], notes: list[str]) -> list[tuple[str, str, str, bytes]]:
    """Each :class:`Figure` as (file stem, title, caption, SVG bytes), closed; one that fails is a note."""
    plt = pyplot() if drawn else None
    out, seen = [], set()
    for item in drawn:
        try:
            import matplotlib

            buffer = io.BytesIO()
            with matplotlib.rc_context({"svg.hashsalt": "preregbench", "svg.fonttype": "path"}):
                item.figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
            stem = _FIGURE_NAME.sub("_", item.name).strip("._") or "figure"
            while stem in seen:
                stem += "_"
            seen.add(stem)
            out.append((stem, item.title, item.caption, buffer.getvalue()))
        except Exception as exc:
            notes.append(f"figure {item.title!r} could not be rendered: {type(exc).__name__}: {one_line(exc)}")
        finally:
            plt.close(item.figure)
    return out

