"""Reports people read: ``report.html`` and ``report.md`` of a finished run, and ``index.html`` of a results folder.

Both reports are rendered from the run directory's own files only
(the summary, ``provenance.json``, ``report.json`` and the ledger the protocol's
figures read), so a run can be re-rendered at any time with
``preregbench report RUN_DIR``.  They show, in this order:

* the classification(s), and how each was reached: every rule in its
  preregistered order with its conditions (measured value, operator,
  threshold) and its role (fired, did not fire, preempted), beside the
  outcome of the rule's test;
* the deviations from the preregistration, a non-preregistered model stated
  plainly at the top of the page;
* technical completeness (the outcome of every completeness test);
* the intervals the summary holds (``<name>.lower`` / ``<name>.upper`` metrics,
  with ``<name>.estimate`` when present), and every share of the summary's
  ``intervals`` map (metric name -> ``{"k", "n", "value", "low", "high",
  "method"}``) as "0.75 [0.58, 0.87], n = 32", also beside the measured value
  in the rule conditions;
* the figures the protocol draws (:meth:`Protocol.report_figures`, matplotlib
  with the Agg backend, rendered to SVG);
* provenance: model id and revision, hashes, git commit and dirty flag,
  packages, hardware.

``report.html`` is one self-contained static file: no script, no external
request; figures are SVG ``data:`` URIs.  Every string taken from the run is
escaped (model output and ids are hostile input).  ``report.md`` links the
same figures, written as ``report_figures/<name>.svg`` beside it.
"""

from __future__ import annotations

from ._cli import USAGE, main
from ._figures import DrawnAhead, Figure, draw_figures, pyplot, render_figures, svg_figures, warm_figures
from ._html import REPORT_CSS, escape_html, render_html, render_index
from ._markdown import escape_md, render_md
from ._view import (
    FIGURES_DIR,
    INDEX_HTML,
    REPORT_HTML,
    REPORT_MD,
    Condition,
    ReportError,
    RuleRow,
    RunNotFinished,
    RunView,
    ClassificationView,
    find_protocol,
    format_proportion,
    load_run,
    read_jsonl,
    summary_file,
)
from ._write import FORMATS, write_index, write_reports, write_round_reports, write_svg_figures

__all__ = ["FIGURES_DIR", "FORMATS", "ClassificationView", "Condition", "DrawnAhead", "Figure", "INDEX_HTML", "REPORT_CSS",
           "REPORT_HTML", "REPORT_MD", "ReportError", "RuleRow", "RunNotFinished", "RunView", "USAGE", "draw_figures",
           "escape_html", "escape_md", "find_protocol", "format_proportion", "load_run", "main", "pyplot", "read_jsonl",
           "render_figures", "render_html", "render_index", "render_md", "summary_file", "svg_figures", "warm_figures", "write_index",
           "write_reports", "write_round_reports", "write_svg_figures"]
