"""Mutant certification of the dataflow checker path: every mutant is caught, by a pinned first check."""

from __future__ import annotations

import pytest

import worlds._checker as ck

from ._dataflow_mutants import CHECK_ORDER, CHECKS, MUTANTS, first_killer, run_check

#: The first check (in CHECK_ORDER, cheapest first) that catches each mutant; listed in
#: docs/worlds-and-fixtures.md, section Checker certification.
FIRST_KILLER = {
    "accept_wrong_wire_type": "examples",
    "allow_rebinding": "examples",
    "goal_first_case_only": "examples",
    "goal_ignores_type": "differential_random",
    "ignore_depth_cap": "examples",
    "depth_cap_off_by_one": "examples",
    "ignore_max_uses": "differential_random",
    "ignore_dead_wires": "examples",
    "forget_reads": "examples",
    "sub_reversed": "differential_random",
    "no_modular_wrap": "differential_random",
    "lt_as_le": "differential_random",
    "select_branches_swapped": "examples",
    "nand_as_and": "examples",
    "step_cap_off_by_one": "differential_random",
    "cost_cap_strict": "examples",
}


@pytest.mark.parametrize("check_name", sorted(CHECKS))
def test_real_checker_passes_certification(check_name):
    assert run_check(check_name) == []


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutant_is_killed_by_its_pinned_first_check(mutant):
    make, _ = MUTANTS[mutant]
    before = (ck.get_family, ck._over_step_cap, ck._over_cost_cap)
    killer = first_killer(make)
    assert (ck.get_family, ck._over_step_cap, ck._over_cost_cap) == before, "mutant not restored"
    assert killer is not None, f"mutant {mutant} survived every certification check"
    assert killer == FIRST_KILLER[mutant]


def test_kill_table_covers_every_mutant_and_is_large_enough():
    assert sorted(FIRST_KILLER) == sorted(MUTANTS)
    assert len(MUTANTS) >= 12
    assert set(FIRST_KILLER.values()) <= set(CHECK_ORDER)
