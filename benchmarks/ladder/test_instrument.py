"""Across the probes of a round directory: the v2 instrument verdict and the retune rule, as preregistered.

Collected only with ``--ladder-round-dir=DIR`` (every probe directory under DIR is read; v1 and v2 are
never pooled); selected with ``-m cpu`` like every test of a run.  ``--ladder-fleet LABEL=MODEL`` names
the rungs, R0 the anchor.
"""

import pytest

from .gate import TIERS
from .protocol import INSTRUMENT, RETUNE_RULE
from .rounds import INSTRUMENT_FILE


@pytest.mark.parametrize("rule", INSTRUMENT.labels)
def test_instrument_rule(rule, instrument_metrics, verdict):
    verdict.check(INSTRUMENT, rule, instrument_metrics)


@pytest.mark.parametrize("rule", RETUNE_RULE.labels)
def test_retune_rule(rule, retune_metrics, verdict):
    verdict.check(RETUNE_RULE, rule, retune_metrics)


@pytest.mark.completeness
def test_round_probes_complete(round_probes):
    for probe in round_probes:
        expected = len(TIERS) * probe.metadata.units_per_tier
        assert len(probe.units) == expected, f"{probe.folder}: {len(probe.units)} of {expected} units recorded"


@pytest.mark.completeness
def test_round_report_written(run, round_report, round_probes):
    assert run.read_json(INSTRUMENT_FILE) == round_report
    assert len(round_report["gate_table"]) == len(round_probes)
