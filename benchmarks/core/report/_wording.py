"""Wording shared by the HTML and the Markdown report."""

from __future__ import annotations

import json

from ..rules import format_number
from ._view import Condition, RuleRow, RunView, _num, format_proportion

ROLE_WORDS = {"fired": "fired", "did_not_fire": "did not fire", "preempted": "preempted", "undecided": "not decided"}


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
