"""The CWR rules read a clustered F - C interval: the protocol's and the rescorer's own code agree, and it never
collapses on a concordant table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.core.paired import tango_rao_scott_interval
from benchmarks.cwr.protocol import INTERVAL_METHOD, PREREG, base_pair

RESCORER = Path(__file__).resolve().parents[1] / "rescore.py"


@pytest.fixture(scope="module")
def rescorer():
    spec = importlib.util.spec_from_file_location("cwr_rescorer_for_interval_tests", RESCORER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_prereg_names_the_interval_the_protocol_computes() -> None:
    assert PREREG.values.analysis.interval == INTERVAL_METHOD == "tango-score-rao-scott"
    assert base_pair("PAIR-SCH-03~r2") == "PAIR-SCH-03" and base_pair("PAIR-SCH-03") == "PAIR-SCH-03"


sides = st.tuples(st.booleans(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(sides, min_size=1, max_size=3), min_size=1, max_size=16))
def test_the_rescorers_own_interval_equals_the_suites(rescorer, bases: list[list[tuple[bool, bool]]]) -> None:
    by_pair, units = {}, []
    for b, replicas in enumerate(bases):
        for r, (f, c) in enumerate(replicas):
            by_pair[f"B{b}" if r == 0 else f"B{b}~r{r}"] = {"F": f, "C": c}
            units.append((f"B{b}", f, c))
    suite = tango_rao_scott_interval(units, 0.95)
    estimate, low, high, count = rescorer.clustered_deficit(by_pair, 0.95)
    assert count == len(bases)
    assert estimate == pytest.approx(suite.estimate, abs=1e-12)
    assert low == pytest.approx(suite.low, abs=1e-10) and high == pytest.approx(suite.high, abs=1e-10)
    assert low < high  # never a point, concordant tables included


def test_a_concordant_half_and_half_table_does_not_reject_delta_at_8_bases(rescorer) -> None:
    """(4,0,0,4) per replica: the old per-replica interval was [0, 0]; the clustered one keeps a width a
    reader can trust, so 8 concordant bases do not reject a 0.2 deficit."""
    by_pair = {(f"P{i}" if r == 0 else f"P{i}~r{r}"): {"F": i < 4, "C": i < 4} for i in range(8) for r in range(3)}
    estimate, low, high, _ = rescorer.clustered_deficit(by_pair, 0.95)
    assert estimate == 0.0 and low < -0.3 and high > PREREG.values.thresholds["delta"]
