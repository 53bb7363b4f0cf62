"""The run summary (``summary.json``): classification, metrics, sensitivity grid, baselines and provenance in one file."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from benchmarks.core import RuleError

from fixtures.cwr import E_CONTEXTS

from .protocol import CONDITIONS, GATE, PREREG, CwrRecord, Unit, finite, sensitivity_grid

SCHEMA_VERSION = 1


def build_summary(*, run: Any, records: Sequence[CwrRecord], measured: dict, baselines: dict, units: Sequence[Unit],
                  max_new_tokens: dict[str, int], deviations: list[str], pairs: Sequence[Any] = ()) -> dict[str, Any]:
    provenance = run.load_provenance()
    try:
        outcome = GATE.evaluate(finite(measured)).as_dict()
        problem = None
    except RuleError as exc:
        outcome, problem = None, str(exc)
    parse_counts = {c: dict(sorted(Counter(r.parse_status for r in records if r.condition == c).items()))
                    for c in CONDITIONS}
    check_counts = {c: dict(sorted(Counter(f"{r.check_status}:{r.check_reason}" for r in records
                                           if r.condition == c).items())) for c in ("F", "C")}
    return {
        "schema_version": SCHEMA_VERSION,
        "protocol": "cwr",
        "run_id": run.run_id,
        "status": "completed" if outcome is not None else "not_classifiable",
        "classification": outcome,
        "classification_problem": problem,
        "rule_order": GATE.labels,
        "thresholds": dict(PREREG.values.thresholds),
        "sensitivity": sensitivity_grid(measured),
        "metrics": measured,
        "execution_by_context": {
            f"E_{c}": {"units": measured.get(f"E_{c}.units"), "correct": measured.get(f"E_{c}.correct"),
                       "accuracy": measured.get(f"E_{c}.accuracy")} for c in E_CONTEXTS},
        "parse_statuses": parse_counts,
        "synthesis_checks": check_counts,
        "units": {c: sum(u.condition == c for u in units) for c in CONDITIONS},
        "max_new_tokens": dict(max_new_tokens),
        "baselines": baselines,
        "pairs": {p.pair_id: {"family": p.family, "novelty": p.novelty, "flags": list(p.flags),
                              "f_target": p.f.target.id, "c_target": p.c.target.id} for p in pairs},
        "token_counts": {c: {"prompt": sum(r.prompt_tokens or 0 for r in records if r.condition == c),
                             "generated": sum(r.generation_tokens for r in records if r.condition == c)}
                         for c in CONDITIONS},
        "deviations": deviations,
        "prereg_sha256": PREREG.sha256,
        "model": dict(provenance.model) if provenance else None,
        "runner_sha256": provenance.runner_sha256 if provenance else None,
        "packages": dict(provenance.packages) if provenance else None,
        "hardware": dict(provenance.hardware) if provenance else None,
        "git": dict(provenance.git) if provenance else None,
        "started_at": provenance.started_at if provenance else None,
        "records": {"file": "records.jsonl", "count": len(records)},
    }
