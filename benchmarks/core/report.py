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

import base64
import html
import importlib
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from ._canonical import FileReadError, atomic_write_text, read_json_file
from .rules import Classification, format_number

REPORT_HTML = "report.html"
REPORT_MD = "report.md"
FIGURES_DIR = "report_figures"
INDEX_HTML = "index.html"
#: Exit status of a usage error of ``preregbench report`` (pytest's, for one convention across the suite).
USAGE_EXIT = 4

_PROTOCOL_NAME = re.compile(r"\A[a-z][a-z0-9_]*\Z")
_MODEL_DEVIATION = re.compile(r"\Amodel '(?P<used>.*)' instead of the preregistered '(?P<prereg>.*)'\Z", re.S)
_FIGURE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class ReportError(ValueError):
    """A report cannot be rendered; the message is one line naming the file and what to do."""


class RunNotFinished(ReportError):
    """The run directory holds no summary yet (a run stopped before its results were written)."""


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


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per line; a torn last line (a killed run) is left out."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


# --------------------------------------------------------------------------- what a report shows


@dataclass
class Condition:
    metric: str
    measured: float | None
    op: str
    threshold: float
    threshold_name: str | None
    holds: bool | None
    interval: Mapping[str, Any] | None = None  # the summary's interval of the metric, when it has one


@dataclass
class RuleRow:
    index: int
    label: str
    role: str  # fired, did_not_fire, preempted, undecided
    passes: bool
    otherwise: bool
    conditions: list[Condition]
    any_conditions: list[Condition]
    test_outcome: str | None
    detail: str


@dataclass
class ClassificationView:
    name: str
    label: str | None
    passed: bool | None
    reason: str
    breakdown: bool
    rules: list[RuleRow]
    passing_state: str | None
    problem: str | None


@dataclass
class RunView:
    run_dir: Path
    protocol: str
    title: str
    run_id: str
    summary: dict[str, Any]
    provenance: dict[str, Any]
    status: str  # complete / broken / unchecked / unknown
    summary_status: str
    classifications: list[ClassificationView]
    completeness: list[tuple[str, str]]
    problems: list[str]
    deviations: list[str]
    model_deviation: tuple[str, str] | None
    intervals: list[tuple[str, Any, Any, Any]]
    notes: list[str] = field(default_factory=list)
    proportions: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)  # name, the summary's interval
    figures: list[tuple[str, str, str, bytes]] = field(default_factory=list)  # name, title, caption, svg

    @property
    def headline(self) -> str:
        decided = [c for c in self.classifications if not c.breakdown]
        return ", ".join(f"{c.label or 'not classifiable'}" for c in decided) or "no classification"


def _read(path: Path, required: bool) -> Any:
    if not path.exists() and not path.is_symlink():
        if required:
            raise RunNotFinished(f"{path} is missing; a report needs a finished run (run the protocol to its end first)")
        return None
    try:
        return read_json_file(path)
    except FileReadError as exc:
        raise ReportError(str(exc)) from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def find_protocol(name: str) -> Any:
    """The protocol instance named ``name`` (``benchmarks.<name>.protocol.PROTOCOL``), None when there is none."""
    if not _PROTOCOL_NAME.match(name or ""):
        return None
    from .protocol import Protocol

    try:
        module = importlib.import_module(f"benchmarks.{name}.protocol")
    except Exception:  # an unknown or broken protocol: the report shows what the files hold
        return None
    found = getattr(module, "PROTOCOL", None)
    if isinstance(found, Protocol):
        return found
    return next((v for v in vars(module).values() if isinstance(v, Protocol) and v.name == name), None)


def _summary_file(run_dir: Path, protocol: Any) -> Path:
    if protocol is not None:
        return run_dir / protocol.summary_file
    for name in ("summary.json", "stats.json"):
        if (run_dir / name).is_file():
            return run_dir / name
    return run_dir / "summary.json"


def _benchmark_entry(report: Any, protocol: str) -> dict[str, Any] | None:
    if not isinstance(report, dict):
        return None
    entry = ((report.get("benchmark") or {}).get("protocols") or {}).get(protocol)
    return entry if isinstance(entry, dict) else None


def _props(test: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prop in test.get("user_properties") or ():
        if isinstance(prop, dict):
            out.update(prop)
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _condition(cond: Any, metrics: Mapping[str, Any], intervals: Mapping[str, Any] | None = None) -> Condition:
    value = _number(metrics.get(cond.metric))
    holds = None if value is None else cond.holds({cond.metric: value})
    interval = (intervals or {}).get(cond.metric)
    return Condition(cond.metric, value, cond.op, cond.threshold, cond.threshold_name, holds,
                     interval if _is_proportion(interval) else None)


def _classification_views(summary: Mapping[str, Any], protocol: Any, entry: Mapping[str, Any] | None,
                          notes: list[str]) -> list[ClassificationView]:
    """Every classification of the summary, its rules in preregistered order with their roles."""
    compiled: dict[str, tuple[Classification, bool]] = {}
    if protocol is not None:
        if protocol.prereg.sha256 == summary.get("prereg_sha256"):
            compiled.update({c.name: (c, False) for c in protocol.classifications.values()})
            compiled.update({c.name: (c, True) for c in protocol.breakdowns.values()})
        else:
            notes.append(f"the preregistration of {protocol.name} has changed since this run (sha256 "
                         f"{str(summary.get('prereg_sha256'))[:12]} then, {protocol.prereg.sha256[:12]} now); rule "
                         "conditions are shown as the run's tests recorded them")
    tested = {name: {r.get("rule"): r for r in (c.get("rules") or [])}
              for name, c in ((entry or {}).get("classifications") or {}).items() if isinstance(c, dict)}
    metrics = summary.get("metrics") or {}
    intervals = summary.get("intervals") if isinstance(summary.get("intervals"), dict) else {}
    outcomes = summary.get("outcomes") or {}
    problems = summary.get("classification_problems") or {}
    order = summary.get("rule_order") or {}
    names = [n for n in compiled if n in order] + sorted(n for n in order if n not in compiled)
    views = []
    for name in names:
        outcome = outcomes.get(name) if isinstance(outcomes.get(name), dict) else None
        decided = outcome.get("decided_by_rule") if outcome else None
        block, breakdown = compiled.get(name, (None, False))
        rows = []
        labels = block.labels if block is not None else list(order.get(name) or [])
        for index, label in enumerate(labels):
            test = tested.get(name, {}).get(label) or {}
            if decided is None:
                role = "undecided"
            elif index < decided:
                role = "did_not_fire"
            elif index == decided:
                role = "fired"
            else:
                role = "preempted"
            if block is not None:
                rule = block.rules[index]
                rows.append(RuleRow(index, label, role, rule.passes, rule.otherwise,
                                    [_condition(c, metrics, intervals) for c in rule.all],
                                    [_condition(c, metrics, intervals) for c in rule.any],
                                    test.get("outcome"), str(test.get("detail") or "")))
            else:
                rows.append(RuleRow(index, label, role, False, False, [], [], test.get("outcome"),
                                    str(test.get("detail") or "")))
        views.append(ClassificationView(
            name=name,
            label=outcome.get("label") if outcome else None,
            passed=outcome.get("passed") if outcome else None,
            reason=str(outcome.get("reason") or "") if outcome else "",
            breakdown=breakdown,
            rules=rows,
            passing_state=block.passing if block is not None else None,
            problem=str(problems[name]) if name in problems else None,
        ))
    return views


def _intervals(summary: Mapping[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """(name, estimate, lower, upper) for every ``<name>.lower`` / ``<name>.upper`` pair of metrics."""
    metrics = summary.get("metrics") or {}
    out = []
    for key in sorted(metrics):
        if key.endswith(".lower") and key[:-6] + ".upper" in metrics:
            base = key[:-6]
            out.append((base, metrics.get(base + ".estimate"), metrics[key], metrics[base + ".upper"]))
    return out


def _is_proportion(value: Any) -> bool:
    return isinstance(value, dict) and {"value", "low", "high", "n"} <= set(value)


def _proportions(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, interval) for every share in the summary's ``intervals`` map, by name."""
    intervals = summary.get("intervals")
    if not isinstance(intervals, dict):
        return []
    return [(str(name), value) for name, value in sorted(intervals.items()) if _is_proportion(value)]


def format_proportion(interval: Mapping[str, Any]) -> str:
    """``{"value", "low", "high", "n"}`` as "0.75 [0.58, 0.87], n = 32" ("undefined, n = 0" without a value)."""
    n = _num(interval.get("n"))
    if _number(interval.get("value")) is None:
        return f"undefined, n = {n}"
    return f"{_num(interval['value'])} [{_num(interval.get('low'))}, {_num(interval.get('high'))}], n = {n}"


def _method(interval: Mapping[str, Any]) -> str:
    method = str(interval.get("method") or "")
    if interval.get("design_effect") is not None:
        method += f" (design effect {_num(interval['design_effect'])}, {_num(interval.get('clusters'))} clusters)"
    return method


def load_run(run_dir: str | Path, *, figures: bool = True) -> RunView:
    """Everything a report shows, read from ``run_dir``; :class:`ReportError` (one line) when it cannot be."""
    run_dir = Path(run_dir)
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a run directory; give the folder <results-dir>/<protocol>/<run-id>")
    provenance = _read(run_dir / "provenance.json", required=False) or {}
    if not isinstance(provenance, dict):
        raise ReportError(f"{run_dir / 'provenance.json'} does not hold a JSON object; the run's files are damaged")
    name = str(provenance.get("protocol") or run_dir.parent.name)
    protocol = find_protocol(name)
    summary = _read(_summary_file(run_dir, protocol), required=True)
    if not isinstance(summary, dict) or "rule_order" not in summary:
        raise ReportError(f"{_summary_file(run_dir, protocol)} is not a run summary (no rule_order); "
                          "give the directory of a finished run")
    report = _read(run_dir / "report.json", required=False)
    entry = _benchmark_entry(report, name)
    notes: list[str] = []
    if protocol is None:
        notes.append(f"the protocol benchmarks.{name} cannot be imported here: the rules are shown as the run's tests "
                     "recorded them, without figures")
    if report is None:
        notes.append("report.json is missing: the outcomes of the tests (completeness among them) are unknown")
    completeness = []
    for test in (report or {}).get("tests") or []:
        if isinstance(test, dict) and _props(test).get("benchmark.kind") == "completeness":
            completeness.append((str(test.get("nodeid", "")).split("::")[-1], str(test.get("outcome", ""))))
    deviations = [str(d) for d in summary.get("deviations") or []]
    model_deviation = None
    for text in deviations:
        match = _MODEL_DEVIATION.match(text)
        if match:
            model_deviation = (match["used"], match["prereg"])
    if "finished_at" not in provenance and entry and isinstance(entry.get("provenance"), dict):
        provenance = {**provenance, "finished_at": entry["provenance"].get("finished_at")}
    view = RunView(
        run_dir=run_dir,
        protocol=name,
        title=protocol.label if protocol is not None else name,
        run_id=str(summary.get("run_id") or run_dir.name),
        summary=summary,
        provenance=provenance,
        status=str(entry.get("status")) if entry else "unknown",
        summary_status=str(summary.get("status", "")),
        classifications=_classification_views(summary, protocol, entry, notes),
        completeness=completeness,
        problems=[str(p) for p in (entry or {}).get("problems") or []],
        deviations=deviations,
        model_deviation=model_deviation,
        intervals=_intervals(summary),
        notes=notes,
        proportions=_proportions(summary),
    )
    if figures and protocol is not None:
        view.figures = _draw(protocol, run_dir, summary, notes)
    return view


def _draw(protocol: Any, run_dir: Path, summary: Mapping[str, Any], notes: list[str]) -> list[tuple[str, str, str, bytes]]:
    from . import _figures_ahead

    ahead = _figures_ahead.draw(protocol.name, run_dir, summary)  # drawn by a copy forked before the model loaded
    if isinstance(ahead, tuple) and len(ahead) == 2 and isinstance(ahead[0], list) and isinstance(ahead[1], list):
        notes.extend(ahead[1])
        return ahead[0]
    return render_figures(protocol, run_dir, summary, notes)


def draw_figures_ahead(protocol: Any, run_dir: Path) -> bool:
    """Fork a copy of this process that readies matplotlib now and draws ``run_dir``'s figures when its report
    is written (see ``_figures_ahead``); False when none was made (not Linux, torch already imported, another
    thread running)."""
    from . import _figures_ahead

    def render(name: str, folder: Path, summary: Mapping[str, Any]) -> tuple[list, list[str]]:
        notes: list[str] = []
        return render_figures(find_protocol(name), folder, summary, notes), notes

    return _figures_ahead.start(run_dir, _warm_figures, render)


def _warm_figures() -> None:
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
        notes.append(f"the figures could not be drawn: {type(exc).__name__}: {_one_line(exc)}")
        return []
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
            notes.append(f"figure {item.title!r} could not be rendered: {type(exc).__name__}: {_one_line(exc)}")
        finally:
            plt.close(item.figure)
    return out


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


# --------------------------------------------------------------------------- shared wording

ROLE_WORDS = {"fired": "fired", "did_not_fire": "did not fire", "preempted": "preempted", "undecided": "not decided"}


def _num(value: Any) -> str:
    number = _number(value)
    if number is None:
        return "undefined" if value is None or isinstance(value, float) else str(value)
    return format_number(number)


def _threshold(cond: Condition) -> str:
    return f"{format_number(cond.threshold)} ({cond.threshold_name})" if cond.threshold_name else format_number(cond.threshold)


def _condition_text(cond: Condition) -> str:
    measured = format_proportion(cond.interval) if cond.interval is not None else _num(cond.measured)
    return f"{cond.metric} = {measured} {cond.op} {_threshold(cond)}"


def _rule_conditions(row: RuleRow) -> list[str]:
    """The conditions of a rule, one line each (``any`` conditions marked)."""
    if row.otherwise:
        return ["otherwise (fires when no earlier rule fired)"]
    lines = [_condition_text(c) + _holds(c) for c in row.conditions]
    lines += ["any of: " + _condition_text(c) + _holds(c) for c in row.any_conditions]
    return lines or ([row.detail] if row.detail else [])


def _holds(cond: Condition) -> str:
    return "" if cond.holds is None else (" (holds)" if cond.holds else " (does not hold)")


def _completeness_line(view: RunView) -> str:
    passed = sum(1 for _, o in view.completeness if o == "passed")
    return f"{passed} of {len(view.completeness)} completeness checks passed; run status {view.status}"


def _model_banner(view: RunView) -> str | None:
    if view.model_deviation is None:
        return None
    used, prereg = view.model_deviation
    return (f"Non-preregistered model: this run used {used}, not the preregistered {prereg}. "
            "Its classification is not a result of the preregistered protocol.")


def _provenance_rows(view: RunView) -> list[tuple[str, str]]:
    prov, summary = view.provenance, view.summary
    model = prov.get("model") or summary.get("model") or {}
    git = prov.get("git") or summary.get("git") or {}
    rows = [
        ("model id", str(model.get("id"))),
        ("model revision", str(model.get("revision"))),
        ("backend", str(model.get("backend"))),
        ("prereg sha256", str(prov.get("prereg_sha256") or summary.get("prereg_sha256"))),
        ("prereg file", str(prov.get("prereg_path"))),
        ("runner sha256", f"{prov.get('runner_sha256') or summary.get('runner_sha256')} ({prov.get('runner_files')} files)"),
    ]
    for name, digest in sorted((prov.get("fixtures_sha256") or summary.get("fixtures_sha256") or {}).items()):
        rows.append((f"fixtures {name} sha256", str(digest)))
    rows.append(("git commit", f"{git.get('commit')}{' (dirty: uncommitted changes)' if git.get('dirty') else ' (clean)'}"))
    rows.append(("seeds", ", ".join(f"{k}={v}" for k, v in sorted((prov.get("seeds") or {}).items())) or "none"))
    rows.append(("started", str(prov.get("started_at") or summary.get("started_at"))))
    rows.append(("finished", str(prov.get("finished_at"))))
    if prov.get("resumed_at"):
        rows.append(("resumed", ", ".join(map(str, prov["resumed_at"]))))
    hardware = prov.get("hardware") or summary.get("hardware") or {}
    rows.append(("hardware", "; ".join(f"{k} {json.dumps(v, sort_keys=True)}" for k, v in sorted(hardware.items()))))
    packages = prov.get("packages") or summary.get("packages") or {}
    rows.append(("packages", ", ".join(f"{k} {v}" for k, v in sorted(packages.items()))))
    return rows


# --------------------------------------------------------------------------- HTML

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


# --------------------------------------------------------------------------- Markdown


def _md(value: Any) -> str:
    """Text safe inside a Markdown table cell or paragraph: HTML escaped, Markdown punctuation neutralised."""
    text = html.escape(" ".join(_text(value).split()), quote=False)  # no raw tag survives: & < > become entities
    return re.sub(r"([\\`*_\[\]|!~])", r"\\\1", text)


#: The style sheet, HTML escaping and Markdown escaping of the reports, for a protocol's report over several runs
#: (:meth:`Protocol.round_report`) to look and escape the same.
REPORT_CSS, escape_html, escape_md = _CSS, _e, _md


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


# --------------------------------------------------------------------------- writing


FORMATS = ("html", "md", "both")


def write_reports(run_dir: str | Path, formats: str = "both") -> list[Path]:
    """Write ``report.html`` and/or ``report.md`` (with its ``report_figures/``) into a finished run directory.

    Returns the written paths.  :class:`ReportError` (one line) when the run's files cannot be read.
    """
    if formats not in FORMATS:
        raise ReportError(f"format {formats!r} is not one of {', '.join(FORMATS)}")
    run_dir = Path(run_dir)
    view = load_run(run_dir)
    written = []
    if formats in ("md", "both"):
        folder = run_dir / FIGURES_DIR
        if view.figures:
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                raise ReportError(f"{folder} is not a real directory; remove it and render again")
            folder.mkdir(exist_ok=True)
            for stem, _, _, svg in view.figures:
                written.append(atomic_write_text(folder / f"{stem}.svg", svg.decode("utf-8")))
        written.append(atomic_write_text(run_dir / REPORT_MD, render_md(view)))
    if formats in ("html", "both"):
        written.append(atomic_write_text(run_dir / REPORT_HTML, render_html(view)))
    return written


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
    from .runcmd import protocols

    for name in protocols():
        protocol = find_protocol(name)
        written = protocol.round_report(folder, formats) if protocol is not None else None
        if written is not None:
            return written
    return None


# --------------------------------------------------------------------------- preregbench report

USAGE = ("usage: preregbench report RUN_DIR|ROUND_DIR [--format html|md|both]\n"
         "       preregbench report --index RESULTS_DIR")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    fmt, index, target = "both", False, None
    rest = iter(args)
    for arg in rest:
        if arg == "--index":
            index = True
        elif arg == "--format" or arg.startswith("--format="):
            fmt = arg.split("=", 1)[1] if "=" in arg else next(rest, "")
            if fmt not in FORMATS:
                print(f"preregbench report: --format {fmt!r} is not valid; choose one of: {', '.join(FORMATS)}",
                      file=sys.stderr)
                return USAGE_EXIT
        elif arg.startswith("-"):
            print(f"preregbench report: unknown option {arg!r}; see preregbench report --help", file=sys.stderr)
            return USAGE_EXIT
        elif target is None:
            target = arg
        else:
            print(f"preregbench report: one directory only, got {target!r} and {arg!r}", file=sys.stderr)
            return USAGE_EXIT
    if target is None:
        what = "RESULTS_DIR" if index else "RUN_DIR"
        print(f"preregbench report: give the {what} to render (see preregbench report --help)", file=sys.stderr)
        return USAGE_EXIT
    try:
        if index:
            print(write_index(target))
        else:
            for path in write_round_reports(target, fmt) or write_reports(target, fmt):
                print(path)
    except (ReportError, OSError) as exc:
        print(f"preregbench report: {_one_line(exc)}", file=sys.stderr)
        return USAGE_EXIT if isinstance(exc, ReportError) else 1
    return 0


__all__ = ["FIGURES_DIR", "FORMATS", "Figure", "INDEX_HTML", "REPORT_CSS", "REPORT_HTML", "REPORT_MD", "ReportError", "RunNotFinished", "RunView", "load_run",
           "main", "pyplot", "read_jsonl", "escape_html", "escape_md", "format_proportion", "render_html", "render_md", "write_index", "write_reports",
           "write_round_reports"]

if __name__ == "__main__":  # through the imported module, so that its ReportError is the one protocols raise
    from benchmarks.core.report import main as _main

    raise SystemExit(_main())
