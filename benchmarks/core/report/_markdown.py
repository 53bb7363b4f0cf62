"""``report.md``: the same content as the HTML report, its figures as files beside it."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

from ._html import _text
from ._view import FIGURES_DIR, RunView, _method, format_proportion
from ._wording import ROLE_WORDS, _completeness_line, _model_banner, _num, _provenance_rows, _rule_conditions


def _md(value: Any) -> str:
    """Text safe inside a Markdown table cell or paragraph: HTML escaped, Markdown punctuation neutralised."""
    text = html.escape(" ".join(_text(value).split()), quote=False)  # no raw tag survives: & < > become entities
    return re.sub(r"([\\`*_\[\]|!~])", r"\\\1", text)


#: The Markdown escaping of the reports, for a protocol's report over several runs (:meth:`Protocol.round_report`).
escape_md = _md


def render_md(view: RunView) -> str:
    out = [f"# {_md(view.title)}: run {_md(view.run_id)}", ""]
    banner = _model_banner(view)
    if banner:
        out += [f"> **{_md(banner)}**", ""]
    out += ["## Classification", ""]
    for c in view.classifications:
        kind = " (breakdown)" if c.breakdown else ""
        out.append(f"**{_md(c.name)}{kind}: {_md(c.label or 'not classifiable')}**")
        out.append("")
        if c.reason:
            out += [f"Decided because {_md(c.reason)}.", ""]
        if c.problem:
            out += [f"Not classifiable: {_md(c.problem)}", ""]
        out += ["| # | rule | conditions (measured, operator, threshold) | role | test |", "| --- | --- | --- | --- | --- |"]
        for row in c.rules:
            state = " (a passing state)" if row.passes else ""
            conds = "; ".join(_md(t) for t in _rule_conditions(row))
            out.append(f"| {row.index + 1} | {_md(row.label)}{state} | {conds} | {ROLE_WORDS.get(row.role, row.role)} | "
                       f"{_md(row.test_outcome or 'unknown')} |")
        if c.passing_state:
            reached = "reached" if c.label == c.passing_state else "not reached"
            out.append(f"|  | {_md(c.passing_state)} (passing state) | reached when no rule above fires | {reached} |  |")
        out.append("")
    out += ["## Deviations from the preregistration", ""]
    out += [f"- {_md(d)}" for d in view.deviations] or ["None: the run follows the preregistration."]
    out += ["", "## Technical completeness", "", f"{_md(_completeness_line(view))}; summary status {_md(view.summary_status)}.", ""]
    if view.completeness:
        out += ["| check | outcome |", "| --- | --- |"] + [f"| {_md(n)} | {_md(o)} |" for n, o in view.completeness] + [""]
    out += [f"Problem: {_md(p)}" for p in view.problems]
    out += [f"Note: {_md(n)}" for n in view.notes]
    if view.problems or view.notes:
        out.append("")
    if view.intervals:
        out += ["## Intervals", "", "| quantity | estimate | lower | upper |", "| --- | --- | --- | --- |"]
        out += [f"| {_md(n)} | {_md(_num(e))} | {_md(_num(lo))} | {_md(_num(hi))} |" for n, e, lo, hi in view.intervals]
        out.append("")
    if view.proportions:
        out += ["## Shares with 95% intervals", "", "| quantity | estimate [interval], n | k | method |",
                "| --- | --- | --- | --- |"]
        out += [f"| {_md(n)} | {_md(format_proportion(i))} | {_md(_num(i.get('k')))} | {_md(_method(i))} |"
                for n, i in view.proportions]
        out.append("")
    if view.figures:
        out += ["## Figures", ""]
        for stem, title, caption, _ in view.figures:
            out += [f"![{_md(title)}]({FIGURES_DIR}/{quote(stem)}.svg)", "", f"*{_md(title)}*{'. ' + _md(caption) if caption else ''}", ""]
    out += ["## Provenance", "", "| | |", "| --- | --- |"]
    out += [f"| {_md(k)} | {_md(v)} |" for k, v in _provenance_rows(view)]
    return "\n".join(out) + "\n"
