"""Technical completeness of a RES run: fixtures, scoring, generation, parsing and the three result files."""

import json
import math

import pytest

from benchmarks.core import read_ledger
from fixtures.res import CONDITIONS, res_fixture_hash

from .protocol import ResRecord, parse_answer

pytestmark = pytest.mark.completeness


def test_fixtures_built(fixture_sets):
    assert sorted(fixture_sets) == sorted(CONDITIONS)
    assert all(len(fixture_sets[c]) == 32 for c in CONDITIONS)


def test_logit_scoring_done(records):
    assert len(records) == 64
    for record in records:
        assert len(record.label_logits) == 2 and all(math.isfinite(v) for v in record.label_logits)
        assert record.logit_choice == ("A" if record.margin >= 0 else "B")


def test_greedy_generation_done(records):
    for record in records:
        assert record.finish_reason in {"stop", "length", "error"}
        assert (record.finish_reason == "error") == (record.generation_error is not None)


def test_parsing_done(records):
    for record in records:
        expected = None if record.generation_error else parse_answer(record.generation)
        assert record.parsed == expected


def test_fixtures_file_written(res_run, fixture_sets):
    stored = json.loads(res_run.path("fixtures.json").read_text())
    assert stored["sets"] == fixture_sets and stored["sha256"] == res_fixture_hash(fixture_sets)


def test_records_file_written(res_run, records):
    assert read_ledger(res_run.path("records.jsonl"), ResRecord) == records


def test_summary_file_written(res_run, summary):
    stored = json.loads(res_run.path("summary.json").read_text())
    assert stored == summary and stored["classification"] is not None
    provenance = res_run.load_provenance()
    assert provenance is not None and provenance.missing() == []
