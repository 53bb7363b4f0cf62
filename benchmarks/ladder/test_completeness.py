"""Technical completeness of a probe: every unit recorded once, coded, parsed, the metadata and analysis written."""

import json

import pytest

from benchmarks.core import read_ledger, sha256_json

from .gate import TIERS
from .probe import probe_episodes
from .protocol import PREREG, code_outcome, parse_decision
from .records import METADATA_FILE, UNITS_FILE, UnitRecord, read_metadata

pytestmark = pytest.mark.completeness


def test_every_unit_recorded_once(probe, probe_settings):
    ids = [u.unit_id for u in probe.units]
    assert len(ids) == len(set(ids)) == len(TIERS) * probe_settings.units_per_tier
    for tier in TIERS:
        assert sum(u.tier == tier for u in probe.units) == probe_settings.units_per_tier


def test_units_match_the_generator_and_its_evaluator(probe, probe_settings):
    """Every recorded unit is the episode the frozen state generates, and the evaluator confirms its verdict."""
    from fixtures.ladder import evaluate

    episodes = {(e.tier, e.index): e for e in probe_episodes(probe_settings.state, probe_settings.seed,
                                                            probe_settings.units_per_tier)}
    for unit in probe.units:
        episode = episodes[(unit.tier, unit.episode_index)]
        assert unit.episode_sha256 == sha256_json(episode.facts)
        assert unit.ground_truth == episode.ground_truth == evaluate(episode.family, episode.facts)
        assert (unit.family, unit.depth, unit.checks) == (episode.family, episode.depth, len(episode.checks))


def test_condition_is_autonomous(probe):
    assert {u.condition for u in probe.units} == {"autonomous"}
    assert {u.supervisor for u in probe.units} == {None}


def test_seed_hygiene(probe):
    spec = PREREG.values.probe
    assert probe.metadata.seed >= spec.min_tuning_seed and probe.metadata.seed not in spec.campaign_seeds
    assert {u.seed for u in probe.units} == {probe.metadata.seed}


def test_outcomes_coded_and_parsed(probe):
    for unit in probe.units:
        expected = None if unit.error_code else parse_decision(unit.response_text)
        assert unit.decision == expected
        assert unit.outcome == code_outcome(unit.error_code, unit.decision, unit.ground_truth)
        assert (unit.finish_reason == "error") == (unit.error_code is not None)


def test_metadata_written(probe, probe_settings):
    meta = read_metadata(probe.folder)
    state = probe_settings.state
    assert (meta.generator_variant, meta.generator_state, meta.state_hash) == (state.variant, state.name, state.state_hash)
    assert meta.dials == state.dials() and meta.prereg_sha256 == PREREG.sha256
    assert probe.folder.name.startswith(f"{state.variant}-")
    assert (probe.folder / METADATA_FILE).is_file()


def test_ledger_file_written(probe):
    assert tuple(read_ledger(probe.folder / UNITS_FILE, UnitRecord)) == probe.units


def test_analysis_file_written(ladder_run, probe, analysis):
    stored = json.loads((probe.folder / "analysis.json").read_text())
    assert stored == analysis == ladder_run.read_json("analysis.json")
    provenance = ladder_run.load_provenance()
    assert provenance is not None and provenance.missing() == []
