"""What a report shows, read from a finished run directory's own files (:func:`load_run`)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import bounded, registry
from .._canonical import FileReadError, read_json_file
from ..errors import PreregbenchError, one_line
from ..ledger import LedgerError, read_ledger
from ..rules import Classification, format_number
from ._figures import DrawnAhead, draw_figures

REPORT_HTML = "report.html"
REPORT_MD = "report.md"
FIGURES_DIR = "report_figures"
INDEX_HTML = "index.html"
#: Exit status of a usage error of ``preregbench report`` (pytest's, for one convention across the suite).

_PROTOCOL_NAME = re.compile(r"\A[a-z][a-z0-9_]*\Z")
_MODEL_DEVIATION = re.compile(r"\Amodel '(?P<used>.*)' instead of the preregistered '(?P<prereg>.*)'\Z", re.S)
_FIGURE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class ReportError(PreregbenchError, ValueError):
    """A report cannot be rendered; the message is one line naming the file and what to do."""


class RunNotFinished(ReportError):
    """The run directory holds no summary yet (a run stopped before its results were written)."""


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


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per line; a torn last line (a killed run) is left out."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return []
    out = []
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for number, line in bounded.Lines(fd, str(path)):  # one line at a time, each held to the limits
            try:
                value = bounded.loads(line.decode("utf-8"), f"{path}: line {number}")
            except bounded.OverLimitError as exc:
                raise ReportError(str(exc)) from None
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    except bounded.OverLimitError as exc:
        raise ReportError(str(exc)) from None
    finally:
        os.close(fd)
    return out


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
    """The registered protocol named ``name``, None when the registry knows none (or it cannot be loaded here)."""
    return registry.find(name) if registry.valid_name(name) else None


def summary_file(run_dir: Path, protocol: Any) -> Path:
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


def _num(value: Any) -> str:
    number = _number(value)
    if number is None:
        return "undefined" if value is None or isinstance(value, float) else str(value)
    return format_number(number)


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


def load_run(run_dir: str | Path, *, figures: bool = True, drawn_ahead: DrawnAhead | None = None) -> RunView:
    """Everything a report shows, read from ``run_dir``; :class:`ReportError` (one line) when it cannot be.

    ``drawn_ahead(protocol, run_dir, summary)`` may hand over figures another process drew for this run
    (``(figures, notes)``, or None to draw them here).
    """
    run_dir = Path(run_dir)
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a run directory; give the folder <results-dir>/<protocol>/<run-id>")
    provenance = _read(run_dir / "provenance.json", required=False) or {}
    if not isinstance(provenance, dict):
        raise ReportError(f"{run_dir / 'provenance.json'} does not hold a JSON object; the run's files are damaged")
    name = str(provenance.get("protocol") or run_dir.parent.name)
    protocol = find_protocol(name)
    summary = _read(summary_file(run_dir, protocol), required=True)
    if not isinstance(summary, dict) or "rule_order" not in summary:
        raise ReportError(f"{summary_file(run_dir, protocol)} is not a run summary (no rule_order); "
                          "give the directory of a finished run")
    report = _read(run_dir / "report.json", required=False)
    entry = _benchmark_entry(report, name)
    notes: list[str] = []
    if protocol is None:
        notes.append(f"the protocol {name} is not registered here: the rules are shown as the run's tests "
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
        problem = _ledger_problem(protocol, run_dir)
        if problem is not None:  # figures come from records the suite wrote, or not at all
            notes.append(f"the figures could not be drawn: {problem}")
        else:
            view.figures = draw_figures(protocol, run_dir, summary, notes, drawn_ahead)
    return view


def _ledger_problem(protocol: Any, run_dir: Path) -> str | None:
    """Why the run's ledger is not one the suite wrote, in one line (the strict reader of resume, verify and
    compare: blank lines, CRLF endings, a wrong schema version and repeated units are refused); None when it is
    or when the run has none."""
    ledger = protocol.find_ledger(run_dir)
    if ledger is None:
        return None
    try:
        read_ledger(ledger, protocol.record_type, protocol.record_key)
    except (LedgerError, OSError) as exc:
        return one_line(exc)
    return None
