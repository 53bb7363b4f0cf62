"""The run summary (``summary.json``): everything the seed's Reproducibility section lists, in one file."""

from __future__ import annotations

from typing import Any, Sequence

from benchmarks.core import RuleError
from fixtures.res import heuristic_audit, res_fixture_hash

from .protocol import GATE, PREREG, ResRecord, finite

SCHEMA_VERSION = 1


def build_summary(*, run: Any, variant: str, sets: dict, records: Sequence[ResRecord], measured: dict,
                  deviations: list[str]) -> dict[str, Any]:
    provenance = run.load_provenance()
    try:
        outcome = GATE.evaluate(finite(measured)).as_dict()
        problem = None
    except RuleError as exc:
        outcome, problem = None, str(exc)
    token_ids = sorted({r.label_token_ids for r in records})
    return {
        "schema_version": SCHEMA_VERSION,
        "protocol": "res",
        "run_id": run.run_id,
        "status": "completed" if outcome is not None else "not_classifiable",
        "classification": outcome,
        "classification_problem": problem,
        "rule_order": GATE.labels,
        "thresholds": dict(PREREG.values.thresholds),
        "metrics": measured,
        "fixture_set": variant,
        "fixture_sha256": res_fixture_hash(sets),
        "heuristic_audit": heuristic_audit(sets),
        "deviations": deviations,
        "prereg_sha256": PREREG.sha256,
        "label_token_ids": [list(ids) for ids in token_ids],
        "model": dict(provenance.model) if provenance else None,
        "runner_sha256": provenance.runner_sha256 if provenance else None,
        "packages": dict(provenance.packages) if provenance else None,
        "hardware": dict(provenance.hardware) if provenance else None,
        "git": dict(provenance.git) if provenance else None,
        "started_at": provenance.started_at if provenance else None,
        "records": {"file": "records.jsonl", "count": len(records)},
    }
