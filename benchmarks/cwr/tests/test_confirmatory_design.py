"""The confirmatory sample design frozen in ``[design.confirmatory]`` of ``prereg.toml``.

Every probability here is recomputed by ``benchmarks.cwr.design`` (seeded
simulation through the interval the protocol's rules read); none is written
into a test.  The frozen number of base pairs per family must meet both
targets (P(DEFICIT_OF_DELTA_REJECTED) >= 0.8 at a true F - C of 0,
P(RECOMBINATION_DEFICIT_SUPPORTED) >= 0.8 at 0.4) at the frozen scenario, one
base per family fewer must not, and both decisive labels must be reachable at
that size through the protocol's own ``metrics``.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from benchmarks.core.design import main as design_main
from benchmarks.core.paired import BaseCounts, tango_rao_scott_interval
from benchmarks.core.reachability import reachability, seeded
from benchmarks.cwr import design
from benchmarks.cwr.protocol import GATE, PREREG, CwrRecord, metrics
from canonical_hash import sha256_text

EMPTY = sha256_text("")  # the hash of an empty answer

SPEC = PREREG.values.design.confirmatory
#: Labels shared by every test at one size: a data set's label depends only on its deficit key.
CACHE: dict = {}
FIXED = design.GATES_OPEN


def point(bases_per_family: int) -> design.CwrDesignPoint:
    return design.cwr_design_point(bases_per_family, SPEC.replicas, c_validity=SPEC.c_validity, theta=SPEC.theta,
                                   rho=SPEC.rho, families=len(SPEC.families), simulations=SPEC.simulations,
                                   seed=SPEC.seed, cache=CACHE)


def test_the_design_covers_the_three_families_and_leaves_the_development_run_alone():
    assert tuple(SPEC.families) == design.CWR_FAMILIES == ("token_workshop", "schedule", "dataflow")
    assert (SPEC.null_difference, SPEC.effect_difference, SPEC.target) == (0.0, 0.4, 0.8)
    assert PREREG.values.measurement.pair_set == "showcase" and PREREG.values.measurement.replicas_per_pair == 3


def test_the_frozen_size_meets_both_targets_and_one_base_per_family_fewer_does_not():
    chosen = point(SPEC.bases_per_family)
    assert chosen.p_reject >= SPEC.target and chosen.p_support >= SPEC.target, chosen
    smaller = point(SPEC.bases_per_family - 1)
    assert not smaller.meets(SPEC.target), smaller
    # the frozen probabilities are the computed ones, to the four decimals they are frozen with
    assert (round(chosen.p_reject, 4), round(chosen.p_support, 4)) == (SPEC.p_reject_at_null, SPEC.p_support_at_effect)
    assert design.check_confirmatory_design(CACHE) == []


def test_the_check_fails_on_a_frozen_design_that_does_not_hold(monkeypatch):
    wrong = dataclasses.replace(SPEC, p_support_at_effect=0.99)
    monkeypatch.setattr(design, "confirmatory_design", lambda: wrong)
    assert design.check_confirmatory_design(CACHE) == [
        f"design.confirmatory.p_support_at_effect = 0.99, recomputed {SPEC.p_support_at_effect:.4f}"]
    larger = dataclasses.replace(SPEC, bases_per_family=SPEC.bases_per_family + 1)
    monkeypatch.setattr(design, "confirmatory_design", lambda: larger)
    assert any("is not the smallest" in problem for problem in design.check_confirmatory_design(CACHE))


def _records(tables: list[tuple[int, int, int, int]]) -> list[CwrRecord]:
    """F and C records of bases ``D<i>`` with replicas ``D<i>~r<k>`` realising the per-base tables."""
    out = []
    for i, table in enumerate(tables):
        sides = [(True, True)] * table[0] + [(True, False)] * table[1] + [(False, True)] * table[2] + \
                [(False, False)] * table[3]
        for k, (f, c) in enumerate(sides):
            pair = f"D{i:03d}" if k == 0 else f"D{i:03d}~r{k}"
            for condition, valid in (("F", f), ("C", c)):
                out.append(CwrRecord(
                    item_id=f"{condition}:{pair}", condition=condition, kind="synthesis", pair_id=pair,
                    world_ref=f"pair:{pair}:{condition}", family=design.CWR_FAMILIES[i % 3], prompt="",
                    prompt_sha256="", prompt_tokens=None, max_new_tokens=1, generation="", generation_chars=0,
            generation_sha256=EMPTY, generation_tokens=0,
                    finish_reason="stop", generation_error=None, parse_status="ok", parsed=None, expected=None,
                    check_status="VALID" if valid else "INVALID", check_reason=None, check_failing_step=None,
                    correct=valid, context=None))
    return out


def _draw(bases: int, replicas: int):
    def draw(rng: random.Random) -> list[tuple[int, int, int, int]]:
        scenario = design.CwrScenario(SPEC.c_validity, rng.choice((0.0, 0.4)), SPEC.theta, SPEC.rho)
        tables, weights = zip(*design.base_table_distribution(scenario, replicas))
        return rng.choices(tables, weights=weights, k=bases)
    return draw


def test_the_designs_interval_is_the_one_the_protocols_metrics_compute():
    bases = SPEC.bases_per_family * len(SPEC.families)
    for tables in seeded(_draw(bases, SPEC.replicas), seed=7, count=6):
        got = metrics(_records(tables))
        assert got["deficit.bases"] == bases
        interval = tango_rao_scott_interval([BaseCounts(i, *t) for i, t in enumerate(tables)],
                                            PREREG.values.analysis.confidence)
        assert (got["deficit.lower"], got["deficit.upper"]) == pytest.approx((interval.low, interval.high), abs=1e-12)
        # the deficit key is sufficient: the same bases in another order, relabelled, give the same interval
        shuffled = random.Random(1).sample(tables, len(tables))
        again = tango_rao_scott_interval([BaseCounts(f"x{i}", *t) for i, t in enumerate(shuffled)],
                                         PREREG.values.analysis.confidence)
        assert design.deficit_key(shuffled) == design.deficit_key(tables)
        assert (again.low, again.high) == pytest.approx((interval.low, interval.high), abs=1e-12)


def test_both_decisive_labels_are_reachable_at_the_frozen_design():
    bases = SPEC.bases_per_family * len(SPEC.families)
    size = f"{bases} base pairs x {SPEC.replicas} replicas"
    found = reachability(GATE, seeded(_draw(bases, SPEC.replicas), seed=20261201, count=200),
                         lambda tables: {**metrics(_records(tables)), **FIXED}, size=size)[GATE.name]
    # with P mastery established and no copy flag, the deficit decides; the first two labels are covered by
    # test_reachability.py on the development design
    for label in ("RECOMBINATION_DEFICIT_SUPPORTED", "DEFICIT_OF_DELTA_REJECTED", "INCONCLUSIVE"):
        assert label in found.witnesses, found.message()
        assert found.witness_metrics[label]["deficit.bases"] == bases


def test_a_scenario_outside_the_unit_interval_is_refused():
    with pytest.raises(ValueError, match="F validity 1.2 lies outside"):
        design.CwrScenario(0.8, 0.4, 0.0, 0.5)
    with pytest.raises(ValueError, match="bases per family must be at least 1"):
        design.cwr_design_point(0, 3, c_validity=0.4, theta=0.0, rho=0.5)


@pytest.mark.parametrize(("argv", "message"), [
    (["cwr", "--rho", "0.5"], "--rho needs --confirmatory, --search or --bases"),
    (["cwr", "--bases", "0"], "--bases must be a positive number"),
    (["cwr", "--search", "--bases", "3"], "give one of --confirmatory, --check, --search and --bases"),
    (["res", "--search"], "apply to cwr only"),
    (["cwr", "--check", "--rho", "0.2"], "--check recomputes the frozen design as frozen"),
    (["cwr", "--bases", "2", "--simulate"], "exclude each other"),
])
def test_command_line_refusals(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        design_main(argv)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_command_line_prints_one_design_point(capsys):
    assert design_main(["cwr", "--bases", "2", "--simulations", "40", "--rho", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "| 2 | 6 | 18 |" in out and "40 simulations per cell" in out and "rho = 0.3" in out


def test_the_search_returns_the_first_size_that_meets_both_targets():
    kwargs = dict(c_validity=SPEC.c_validity, theta=SPEC.theta, rho=0.0, simulations=150, seed=5)
    chosen, tried = design.cwr_design_search(SPEC.replicas, **kwargs)
    assert [p.bases_per_family for p in tried] == list(range(1, chosen.bases_per_family + 1))
    assert chosen.meets() and not any(p.meets() for p in tried[:-1])
    again = design.cwr_design_point(chosen.bases_per_family, SPEC.replicas, **kwargs)
    assert (again.p_reject, again.p_support) == (chosen.p_reject, chosen.p_support)  # seeded: reproducible
    with pytest.raises(ValueError, match="no design of at most 2 bases per family"):
        design.cwr_design_search(SPEC.replicas, limit=2, **kwargs)
