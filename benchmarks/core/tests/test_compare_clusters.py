"""``preregbench compare`` on clustered units: the paired-difference interval respects the clusters.

A measure whose units the protocol puts in clusters (:meth:`Protocol.paired_clusters`) gets Tango's score
interval on the pooled table divided by its Rao-Scott design effect; independent units keep Newcombe's.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.core.compare import paired_table
from benchmarks.core.paired import tango_interval
from benchmarks.core.stats import paired_difference_interval


def replicated(outcomes: list[tuple[bool, bool]], replicas: int) -> tuple[dict, dict, dict]:
    """Per-unit outcomes of runs A and B where every replica of a base repeats its base's (A, B) outcome."""
    a, b, clusters = {}, {}, {}
    for base, (first, second) in enumerate(outcomes):
        for r in range(replicas):
            unit = f"base-{base:02d}~r{r}"
            a[unit], b[unit], clusters[unit] = first, second, f"base-{base:02d}"
    return a, b, clusters


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=16), st.integers(2, 4))
def test_perfectly_correlated_replicas_give_the_interval_of_the_bases_alone(outcomes, replicas) -> None:
    a, b, clusters = replicated(outcomes, replicas)
    row = paired_table("F.accuracy", a, b, clusters).as_dict()
    bases = len(outcomes)
    a_only = sum(first and not second for first, second in outcomes)
    b_only = sum(second and not first for first, second in outcomes)
    expected = tango_interval(a_only, b_only, bases)
    assert row["interval"]["method"] == "tango-score-rao-scott"
    assert row["interval"]["clusters"] == bases and row["units"] == bases * replicas
    assert (row["interval"]["low"], row["interval"]["high"]) == pytest.approx((expected.low, expected.high), abs=1e-9)
    assert row["interval"]["high"] - row["interval"]["low"] > 0  # concordant tables too: never a point


def test_the_clustered_interval_is_wider_than_treating_replicas_as_independent() -> None:
    outcomes = [(True, False)] * 3 + [(True, True)] * 3 + [(False, False)] * 2
    a, b, clusters = replicated(outcomes, 3)
    clustered = paired_table("F.accuracy", a, b, clusters).as_dict()["interval"]
    independent = paired_table("F.accuracy", a, b).as_dict()["interval"]
    assert independent["method"] == paired_difference_interval(9, 9, 0, 6).method
    assert clustered["design_effect"] == pytest.approx(3.0)
    assert clustered["high"] - clustered["low"] > independent["high"] - independent["low"]


def test_the_concordant_table_that_collapses_newcombe_keeps_a_positive_width_when_clustered() -> None:
    a, b, clusters = replicated([(True, True)] * 4 + [(False, False)] * 4, 3)  # (12, 0, 0, 12) over 8 bases
    independent = paired_table("C.accuracy", a, b).as_dict()["interval"]
    clustered = paired_table("C.accuracy", a, b, clusters).as_dict()["interval"]
    assert independent["low"] == independent["high"] == 0.0
    assert clustered["low"] < 0.0 < clustered["high"]


def test_units_without_a_cluster_are_clusters_of_their_own() -> None:
    a = {"x~r0": True, "x~r1": True, "solo": False}
    b = {"x~r0": False, "x~r1": False, "solo": False}
    row = paired_table("m", a, b, {"x~r0": "x", "x~r1": "x"}).as_dict()
    assert row["interval"]["clusters"] == 2
    assert "clusters" not in paired_table("m", a, b, {"other": "y"}).as_dict()["interval"]
