"""Technical completeness of a CWR run: every unit recorded once, every answer parsed and graded, result files written."""

import json

import pytest

from benchmarks.core import read_ledger

from .protocol import CONDITIONS, PARSE_STATUSES, CwrRecord, extract_artifact, grade_control, parse_control

pytestmark = pytest.mark.completeness


def test_every_condition_has_units(units):
    unit_list, targets = units
    counts = {c: sum(u.condition == c for u in unit_list) for c in CONDITIONS}
    assert all(counts[c] > 0 for c in CONDITIONS), counts
    assert counts["F"] == counts["C"] == len(targets) // 2
    assert len({u.item_id for u in unit_list}) == len(unit_list)


def test_every_unit_recorded_once(units, records):
    assert sorted(r.item_id for r in records) == sorted(u.item_id for u in units[0])


def test_generation_done(records):
    for record in records:
        assert record.finish_reason in {"stop", "length", "error"}, record.item_id
        assert (record.finish_reason == "error") == (record.generation_error is not None), record.item_id


def test_parsing_and_grading_done(records, units):
    by_id = {u.item_id: u for u in units[0]}
    for record in records:
        assert record.parse_status in PARSE_STATUSES, record.item_id
        if record.generation_error is not None:
            assert record.parse_status == "generation_error" and not record.correct
            continue
        unit = by_id[record.item_id]
        if record.condition in ("F", "C"):
            status, artifact = extract_artifact(record.generation)
            assert (status, artifact) == (record.parse_status, record.parsed), record.item_id
            assert record.correct == (record.check_status == "VALID"), record.item_id
            assert (record.check_status is None) == (status != "ok"), record.item_id
        else:
            status, parsed = parse_control({"condition": unit.condition, "kind": unit.kind}, unit.family,
                                           record.generation)
            assert (status, parsed) == (record.parse_status, record.parsed), record.item_id
            assert record.correct == grade_control({"expected": unit.expected}, parsed), record.item_id


def test_error_coded_units_are_counted(records, measured):
    for condition in CONDITIONS:
        rows = [r for r in records if r.condition == condition]
        assert measured[f"{condition}.units"] == len(rows)
        assert measured[f"{condition}.generation_errors"] == sum(r.generation_error is not None for r in rows)
        assert measured[f"{condition}.correct"] == sum(r.correct for r in rows)
    assert measured["pairs.n"] + measured["pairs.unpaired"] == measured["F.units"]


def test_baselines_done(baselines, pairs):
    assert sorted(baselines["pairs"]) == sorted(p.pair_id for p in pairs)


def test_fixtures_file_written(cwr_run, control_items):
    stored = json.loads(cwr_run.path("fixtures.json").read_text())
    assert stored["items"] == control_items


def test_records_file_written(cwr_run, records):
    assert read_ledger(cwr_run.path("records.jsonl"), CwrRecord) == records


def test_summary_file_written(cwr_run, summary):
    stored = json.loads(cwr_run.path("summary.json").read_text())
    assert stored == summary and stored["classification"] is not None
    provenance = cwr_run.load_provenance()
    assert provenance is not None and provenance.missing() == []
