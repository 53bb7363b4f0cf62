"""Hand-made finished run directories of the four protocols, for the report tests.

Each directory holds what a finished run writes and a report reads: the
summary (outcomes decided by the protocol's own compiled rules from chosen
metrics), ``provenance.json``, ``report.json`` (rule and completeness tests)
and the files the protocol's figures read.  Hostile strings (markup and
script in ids, model output and deviations) are planted where a report
shows them.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

from benchmarks.core.protocol import finite
from benchmarks.core.report import find_protocol

HOSTILE = '</script><script>alert(1)</script><img src=x onerror=alert(2)>'
HOSTILE_LINK = '<a href="https://evil.example/x">click</a>'
PROTOCOLS = ("cwr", "ladder", "pzombie", "res")


def _metrics_for(protocol: Any, value: float) -> dict[str, float]:
    """Every metric a rule of the protocol reads, set to ``value``."""
    names = set()
    for block in [*protocol.classifications.values(), *protocol.breakdowns.values()]:
        for rule in block.rules:
            names.update(rule.metrics)
    return {name: value for name in sorted(names)}


def _records_res(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for condition in ("five_factor", "minimal_owner_indexed"):
        for index in range(12):
            gold = "AB"[index % 2]
            margin = rng.uniform(-3, 3)
            choice = "A" if margin >= 0 else "B"
            parsed = None if index == 5 else rng.choice("AB")
            out.append({"item_id": f"{condition}:{index:02d}", "condition": condition, "ideal": gold, "margin": margin,
                        "logit_choice": choice, "parsed": parsed, "generation": HOSTILE if parsed is None else parsed})
    return out


def _records_cwr(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for pair in ("PAIR-A-01", "PAIR-A-01~r1", "PAIR-B-02", f"PAIR-{HOSTILE}--><script>alert(3)</script>"):
        for condition in ("F", "C"):
            out.append({"item_id": f"{condition}:{pair}", "condition": condition, "pair_id": pair,
                        "correct": rng.random() < 0.6, "generation": HOSTILE})
    return out


def _versioned(protocol: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as the ledger writes them: every field of the record type and its schema version (a report draws
    figures only from a ledger the strict reader accepts)."""
    fields = {f.name: _blank(str(f.type)) for f in dataclasses.fields(protocol.record_type)}
    return [{**fields, **row, "schema_version": protocol.record_type.SCHEMA_VERSION} for row in rows]


def _blank(annotation: str) -> Any:
    """A value of the annotated type for a field the hand-made row leaves out."""
    if "None" in annotation or annotation == "Any":
        return None
    if annotation.startswith(("tuple", "list")):
        return []
    if annotation.startswith("dict"):
        return {}
    return {"str": "", "int": 0, "float": 0.0, "bool": False}[annotation]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


def make_run(results: Path, name: str, *, value: float = 0.5, run_id: str = "hand-made",
             model: str = "scripted-oracle", hostile: bool = True) -> Path:
    """A finished run of protocol ``name`` under ``results``; every rule metric set to ``value``."""
    protocol = find_protocol(name)
    run_dir = results / name / run_id
    run_dir.mkdir(parents=True)
    rng = random.Random(7)
    metrics: dict[str, Any] = _metrics_for(protocol, value)
    extra: dict[str, Any] = {}
    if name == "res":
        metrics.update({"five_factor.agreement": 0.75, "five_factor.parser_coverage": 0.9,
                        "minimal_owner_indexed.parser_coverage": 1.0})
        _write_jsonl(run_dir / "records.jsonl", _versioned(protocol, _records_res(rng)))
    elif name == "cwr":
        metrics.update({"F.units": 3, "C.units": 3, "F.validity": 0.66, "C.validity": 0.33, "P.accuracy": 0.9,
                        "deficit.estimate": 0.33, "deficit.lower": -0.1, "deficit.upper": 0.7})
        _write_jsonl(run_dir / "records.jsonl", _versioned(protocol, _records_cwr(rng)))
        sides = [{"condition": c, "copy_solves": [], "random_valid_rate": 0.1, "greedy_status": "VALID"} for c in "FC"]
        (run_dir / "baselines.json").write_text(json.dumps({"pairs": {"PAIR-A-01": {"sides": sides}}}), encoding="utf-8")
    elif name == "ladder":
        probe = run_dir / "v2-r1-seed7"
        probe.mkdir()
        tiers = {f"tier{t}.error": 0.05 * t for t in range(1, 6)}
        (probe / "analysis.json").write_text(json.dumps({"probe": "v2-r1-seed7", "metrics": {**tiers, "overall_error": 0.15}}),
                                             encoding="utf-8")
        extra["analysis_files"] = ["analysis.json", "v2-r1-seed7/analysis.json"]
        metrics.update(tiers)
    elif name == "pzombie":
        from benchmarks.pzombie.protocol import PzRecord
        from benchmarks.pzombie.scenarios import synthetic_records

        rows = [{**dataclasses.asdict(r), "schema_version": PzRecord.SCHEMA_VERSION} for r in synthetic_records("confirmed")]
        _write_jsonl(run_dir / "records.jsonl", rows)
        extra["settings"] = {"scale": "270M"}
    blocks = {**protocol.classifications, **protocol.breakdowns}
    outcomes = {b.name: b.evaluate(finite(metrics)) for b in blocks.values()}
    deviations = [f"model {model!r} instead of the preregistered {protocol.preregistered_model(None).id!r}"]
    if hostile:
        deviations.append(f"a deviation naming {HOSTILE} and {HOSTILE_LINK}")
    summary = {
        "schema_version": 1, "protocol": name, "run_id": run_id, "status": "completed",
        "classifications": {n: o.label for n, o in outcomes.items()},
        "outcomes": {n: o.as_dict() for n, o in outcomes.items()},
        "classification_problems": {},
        "rule_order": {b.name: b.labels for b in blocks.values()},
        "thresholds": dict(getattr(protocol.spec, "thresholds", {}) or {}),
        "metrics": metrics, "deviations": deviations, "prereg_sha256": protocol.prereg.sha256,
        "fixtures_sha256": {"hand-made": "0" * 64}, "records": {"file": "records.jsonl", "count": 0},
        "started_at": f"2026-12-01T10:00:0{PROTOCOLS.index(name)}+00:00",
        **extra,
    }
    (run_dir / protocol.summary_file).write_text(json.dumps(summary, sort_keys=True), encoding="utf-8")
    provenance = {
        "protocol": name, "run_id": run_id, "started_at": summary["started_at"],
        "finished_at": "2026-12-01T10:05:00+00:00",
        "model": {"id": model + (HOSTILE if hostile else ""), "revision": "sha256:" + "a" * 64, "backend": "scripted"},
        "seeds": {"numpy": 1}, "prereg_path": f"benchmarks/{name}/prereg.toml", "prereg_sha256": protocol.prereg.sha256,
        "runner_sha256": "b" * 64, "runner_files": 12, "fixtures_sha256": {"hand-made": "0" * 64},
        "packages": {"python": "3.11"}, "hardware": {"cpu_cores": 2}, "git": {"commit": "c" * 40, "dirty": True},
    }
    (run_dir / "provenance.json").write_text(json.dumps(provenance), encoding="utf-8")
    tests, classifications = [], {}
    for block in blocks.values():
        outcome = outcomes[block.name]
        rules = []
        for index, label in enumerate(block.labels):
            role = "did_not_fire" if index < outcome.index else "fired" if index == outcome.index else "preempted"
            result = "skipped" if role == "preempted" else ("failed" if role == "fired" and not block.rules[index].passes
                                                            else "passed")
            rules.append({"rule": label, "index": index, "role": role, "outcome": result, "detail": ""})
            tests.append({"nodeid": f"benchmarks/{name}/prereg.toml::test_{block.name}[{label}]", "outcome": result,
                          "user_properties": [{"benchmark.kind": "rule"}, {"benchmark.protocol": name}]})
        classifications[block.name] = {"outcome": outcome.as_dict(), "rules": rules}
    for check, result in (("test_records_file_written", "passed"), ("test_summary_file_written", "passed"),
                          (f"test_odd[{HOSTILE if hostile else 'x'}]", "failed")):
        tests.append({"nodeid": f"benchmarks/{name}/test_completeness.py::{check}", "outcome": result,
                      "user_properties": [{"benchmark.kind": "completeness"}, {"benchmark.protocol": name}]})
    entry = {"status": "broken", "problems": [f"a problem naming {HOSTILE}"], "classifications": classifications,
             "completeness": {"tests": 3, "passed": 2, "failed": 1}}
    report = {"tests": tests, "benchmark": {"protocols": {name: entry}}}
    (run_dir / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return run_dir
