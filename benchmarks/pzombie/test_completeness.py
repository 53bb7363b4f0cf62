"""Technical completeness of a P-Zombie run: prompts, calibration, one record per prompt and preset, files."""

import json
import math

import pytest

from benchmarks.core import read_ledger
from fixtures.pzombie import PZOMBIE_PROMPTS_SHA256

from .figures import FIGURES
from .protocol import (
    PREREG,
    PRESET_PREFIX,
    PzRecord,
    finite,
    metrics,
    token_diversity,
    unit_id,
    zone_entropy_bits,
)

pytestmark = pytest.mark.completeness
SPEC = PREREG.values.run


def test_prompts_built(pz_run, prompts):
    assert sum(row["phase"] == "calibration" for row in prompts) == SPEC.calibration_prompts
    assert sum(row["phase"] == "measured" for row in prompts) == SPEC.measured_prompts
    stored = json.loads(pz_run.path("prompts.json").read_text())
    assert stored["prompts"] == prompts and stored["sha256"] == PZOMBIE_PROMPTS_SHA256


def test_calibration_done(pz_run, prompts, records):
    """Each preset calibrated once on the calibration prompts before measuring, and kept the frozen state."""
    calibration_ids = [row["prompt_id"] for row in prompts if row["phase"] == "calibration"]
    for preset in SPEC.presets:
        stored = json.loads(pz_run.path(f"calibration-{preset}.json").read_text())
        assert stored["preset"] == preset
        assert stored["calibration_prompt_ids"] == calibration_ids
        assert stored["frozen_state"] and stored["frozen_state_sha256"]


def test_every_prompt_recorded(records, prompts):
    measured = [row for row in prompts if row["phase"] == "measured"]
    expected = sorted(unit_id(preset, row["prompt_id"]) for preset in SPEC.presets for row in measured)
    assert sorted(r.unit_id for r in records) == expected
    by_id = {row["prompt_id"]: row for row in measured}
    for record in records:
        assert record.category == by_id[record.prompt_id]["category"]
        assert record.prompt == by_id[record.prompt_id]["text"]


def test_generation_and_routing_done(records, run_settings):
    for record in records:
        assert record.finish_reason in {"stop", "length", "none", "error"}, record.unit_id
        assert (record.error is None) == (record.finish_reason != "error"), record.unit_id
        assert record.new_tokens == len(record.completion_token_ids) <= run_settings.max_new_tokens
        assert record.input_token_ids, f"{record.unit_id}: no input token ids recorded"
        assert math.isclose(record.token_diversity, token_diversity(record.input_token_ids), abs_tol=1e-12)
        if record.error is None:
            assert len(record.zone_weights) == len(record.zones) == len(PREREG.values.engine["zones"])
            assert math.isclose(sum(record.zone_weights), 1.0, abs_tol=1e-9)
            assert math.isclose(record.zone_entropy, zone_entropy_bits(record.zone_weights), abs_tol=1e-9)
            assert 0.0 <= record.zone_entropy <= math.log2(len(record.zones)) + 1e-12


def test_no_prompt_failed(records):
    """A timed-out or crashed prompt is counted and left out of the statistics, and makes the run incomplete."""
    failed = [f"{r.unit_id}: {r.error} ({r.error_detail})" for r in records if r.error is not None]
    assert failed == []


def test_same_inputs_under_every_preset(records):
    inputs: dict[str, tuple[int, ...]] = {}
    for record in records:
        assert inputs.setdefault(record.prompt_id, record.input_token_ids) == record.input_token_ids, record.unit_id


def test_records_file_written(pz_run, records):
    assert read_ledger(pz_run.path("records.jsonl"), PzRecord) == records


def test_aggregate_written(pz_run, aggregate, records):
    stored = json.loads(pz_run.path("aggregate.json").read_text())
    assert stored == aggregate
    for preset in PRESET_PREFIX:
        assert len(stored["presets"][preset]["prompts"]) == sum(r.preset == preset for r in records)


def test_stats_written(pz_run, stats, records):
    stored = json.loads(pz_run.path("stats.json").read_text())
    assert stored == stats
    recomputed = finite(metrics(records))
    assert {k: v for k, v in stored["metrics"].items() if v is not None} == pytest.approx(recomputed)
    assert set(stored["classifications"]) == {"token_control", "combined", "eta2_target", "h2"}


def test_figures_written(pz_run, figures):
    for name in FIGURES:
        data = pz_run.path(name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, name


def test_provenance_written(pz_run, run_settings):
    provenance = pz_run.load_provenance()
    assert provenance is not None and provenance.missing() == []
    assert provenance.extra["max_new_tokens"] == run_settings.max_new_tokens
    assert provenance.extra["scale"] == run_settings.scale
    assert isinstance(provenance.extra["deviations"], list)
