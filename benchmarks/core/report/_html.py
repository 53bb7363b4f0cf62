"""``report.html`` and the results folder's ``index.html``: static, self-contained, every string escaped."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Mapping, Sequence

from ._view import RunView, _method, format_proportion
from ._wording import ROLE_WORDS, _completeness_line, _model_banner, _num, _provenance_rows, _rule_conditions

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1b1b1b;line-height:1.4}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5rem 0;width:100%}th,td{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
.banner{background:#fff3cd;border:2px solid #c99700;padding:.6rem 1rem;font-weight:600;margin:1rem 0}
.verdict{font-size:1.3rem;font-weight:700}.pass{color:#146c2e}.fail{color:#a4161a}.muted{color:#666}
tr.fired td{background:#fde7e9}tr.fired.passes td{background:#e4f4e8}tr.preempted td{color:#777}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #ddd}figcaption{color:#444}
ul.conds{margin:0;padding-left:1.1rem}
"""


def _text(value: Any) -> str:
    """``str(value)`` with lone surrogates (which UTF-8 cannot hold) spelled as ``\\udXXX`` escapes."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _e(value: Any) -> str:
    return html.escape(_text(value), quote=True)


#: The style sheet and HTML escaping of the reports, for a protocol's report over several runs
#: (:meth:`Protocol.round_report`) to look and escape the same.
REPORT_CSS, escape_html = _CSS, _e


def render_html(view: RunView) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           # no script, no request anywhere: the page is static and self-contained
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
           "style-src 'unsafe-inline'\">",
           f"<title>{_e(view.title)} run {_e(view.run_id)}: {_e(view.headline)}</title>",
           f"<style>{_CSS}</style></head><body>"]
    out.append(f"<h1>{_e(view.title)}: run <span class=\"mono\">{_e(view.run_id)}</span></h1>")
    banner = _model_banner(view)
    if banner:
        out.append(f'<p class="banner" id="non-preregistered-model">{_e(banner)}</p>')
    out.append('<section id="classification"><h2>Classification</h2>')
    for c in view.classifications:
        kind = " (breakdown)" if c.breakdown else ""
        css = "pass" if c.passed else "fail"
        label = c.label or "not classifiable"
        out.append(f'<p class="verdict">{_e(c.name)}{_e(kind)}: <span class="{css}" data-classification="{_e(c.name)}">'
                   f"{_e(label)}</span></p>")
        if c.reason:
            out.append(f"<p>Decided because {_e(c.reason)}.</p>")
        if c.problem:
            out.append(f"<p class=\"fail\">Not classifiable: {_e(c.problem)}</p>")
        out.append("<table><thead><tr><th>#</th><th>rule</th><th>conditions (measured, operator, threshold)</th>"
                   "<th>role</th><th>test</th></tr></thead><tbody>")
        for row in c.rules:
            classes = f"rule {row.role}{' passes' if row.passes else ''}"
            conds = "".join(f"<li>{_e(t)}</li>" for t in _rule_conditions(row))
            state = " (a passing state)" if row.passes else ""
            out.append(f'<tr class="{classes}" data-rule="{_e(row.label)}"><td>{row.index + 1}</td>'
                       f"<td class=\"mono\">{_e(row.label)}{_e(state)}</td><td><ul class=\"conds\">{conds}</ul></td>"
                       f"<td>{_e(ROLE_WORDS.get(row.role, row.role))}</td><td>{_e(row.test_outcome or 'unknown')}</td></tr>")
        if c.passing_state:
            reached = c.label == c.passing_state
            out.append(f'<tr class="rule passing{" fired passes" if reached else ""}" data-rule="{_e(c.passing_state)}">'
                       f"<td></td><td class=\"mono\">{_e(c.passing_state)} (passing state)</td>"
                       f"<td>reached when no rule above fires</td><td>{'reached' if reached else 'not reached'}</td><td></td></tr>")
        out.append("</tbody></table>")
    out.append("</section>")
    out.append('<section id="deviations"><h2>Deviations from the preregistration</h2>')
    if view.deviations:
        out.append("<ul>" + "".join(f"<li>{_e(d)}</li>" for d in view.deviations) + "</ul>")
    else:
        out.append("<p>None: the run follows the preregistration.</p>")
    out.append("</section>")
    out.append(f'<section id="completeness"><h2>Technical completeness</h2><p>{_e(_completeness_line(view))}; '
               f"summary status {_e(view.summary_status)}.</p>")
    if view.completeness:
        out.append("<table><thead><tr><th>check</th><th>outcome</th></tr></thead><tbody>")
        for name, outcome in view.completeness:
            css = "pass" if outcome == "passed" else "fail"
            out.append(f'<tr><td class="mono">{_e(name)}</td><td class="{css}">{_e(outcome)}</td></tr>')
        out.append("</tbody></table>")
    for problem in view.problems:
        out.append(f'<p class="fail">Problem: {_e(problem)}</p>')
    for note in view.notes:
        out.append(f'<p class="muted">Note: {_e(note)}</p>')
    out.append("</section>")
    if view.intervals:
        out.append('<section id="intervals"><h2>Intervals</h2><table><thead><tr><th>quantity</th><th>estimate</th>'
                   "<th>lower</th><th>upper</th></tr></thead><tbody>")
        for name, estimate, low, high in view.intervals:
            out.append(f'<tr><td class="mono">{_e(name)}</td><td>{_e(_num(estimate))}</td><td>{_e(_num(low))}</td>'
                       f"<td>{_e(_num(high))}</td></tr>")
        out.append("</tbody></table></section>")
    if view.proportions:
        out.append('<section id="proportions"><h2>Shares with 95% intervals</h2><table><thead><tr><th>quantity</th>'
                   "<th>estimate [interval], n</th><th>k</th><th>method</th></tr></thead><tbody>")
        for name, interval in view.proportions:
            out.append(f'<tr><td class="mono">{_e(name)}</td><td>{_e(format_proportion(interval))}</td>'
                       f"<td>{_e(_num(interval.get('k')))}</td><td>{_e(_method(interval))}</td></tr>")
        out.append("</tbody></table></section>")
    if view.figures:
        out.append('<section id="figures"><h2>Figures</h2>')
        for stem, title, caption, svg in view.figures:
            uri = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
            out.append(f'<figure id="figure-{_e(stem)}"><img class="figure" alt="{_e(title)}" src="{uri}">'
                       f"<figcaption><strong>{_e(title)}</strong>{'. ' + _e(caption) if caption else ''}</figcaption></figure>")
        out.append("</section>")
    out.append('<section id="provenance"><h2>Provenance</h2><table><tbody>')
    for key, value in _provenance_rows(view):
        out.append(f'<tr><th>{_e(key)}</th><td class="mono">{_e(value)}</td></tr>')
    out.append("</tbody></table></section>")
    out.append(f'<p class="muted">Rendered from the files of {_e(view.run_dir.name)} by preregbench; '
               "re-render with <code>preregbench report RUN_DIR</code>.</p></body></html>")
    return "\n".join(out) + "\n"



def render_index(rows: Sequence[Mapping[str, str]], results: Path) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
           "<title>preregbench results</title>", f"<style>{_CSS}</style></head><body>",
           f"<h1>Runs under <span class=\"mono\">{_e(results.name)}</span></h1>",
           f"<p>{len(rows)} run(s); newest first.</p>",
           "<table><thead><tr><th>protocol</th><th>run id</th><th>model</th><th>classification</th><th>status</th>"
           "<th>date</th><th>report</th></tr></thead><tbody>"]
    for row in rows:
        link = f'<a href="{_e(row["link"])}">report</a>' if row["link"] else '<span class="muted">none</span>'
        flag = ' <span class="fail">(non-preregistered model)</span>' if row["non_preregistered"] else ""
        out.append(f'<tr class="run"><td>{_e(row["protocol"])}</td><td class="mono">{_e(row["run_id"])}</td>'
                   f'<td class="mono">{_e(row["model"])}{flag}</td><td>{_e(row["classification"])}</td>'
                   f'<td>{_e(row["status"])}</td><td>{_e(row["date"])}</td><td>{link}</td></tr>')
    out.append("</tbody></table></body></html>")
    return "\n".join(out) + "\n"
