"""Mutant certification: each deliberately broken checker is caught by a named certification check."""

from __future__ import annotations

import pytest

import worlds._checker as ck

from ._mutants import CHECKS, MUTANTS, run_check


@pytest.mark.parametrize("check_name", sorted(CHECKS))
def test_real_checker_passes_certification(check_name):
    assert run_check(check_name) == []


@pytest.mark.parametrize(
    ("mutant", "killer"),
    sorted((name, killer) for name, (_, killer, _) in MUTANTS.items()),
)
def test_mutant_is_killed(mutant, killer):
    make, _, _ = MUTANTS[mutant]
    before = (ck.check_steps, ck.get_family, ck._over_step_cap, ck._over_cost_cap)
    with make():
        found = run_check(killer)
    assert (ck.check_steps, ck.get_family, ck._over_step_cap, ck._over_cost_cap) == before, "mutant not restored"
    assert found, f"mutant {mutant} survived certification check {killer}"


def test_mutant_table_is_large_enough():
    assert len(MUTANTS) >= 8
    assert {killer for _, killer, _ in MUTANTS.values()} <= set(CHECKS)


#: which certification checks catch each mutant (x = kills, . = survives); the table in
#: docs/worlds-and-fixtures.md, section Checker certification
KILL_MATRIX = {
    # mutant:                          examples, random, exhaustive, enumeration
    "accept_goal_mid_way": "xxxx",
    "accept_wrong_entity_type": "xx..",
    "commit_failing_step": ".xx.",
    "cost_cap_lenient": "xx.x",
    "cost_cap_strict": "xxxx",
    "ignore_every_state_constraints": "xxxx",
    "ignore_final_scope_constraints": ".xxx",
    "ignore_no_overlap": "xxxx",
    "ignore_precedence": "xxxx",
    "machine_never_busy": "xxxx",
    "prune_after_goal": ".xxx",
    "skip_catalyst_check": "xx..",
    "skip_inventory_cap": ".xx.",
    "skip_schedule_horizon": "xx..",
    "step_cap_off_by_one": ".xx.",
}
MATRIX_ORDER = ("examples", "differential_random", "differential_exhaustive", "enumeration")


def test_kill_matrix_is_pinned():
    got = {}
    for name, (make, _, _) in MUTANTS.items():
        row = ""
        for check in MATRIX_ORDER:
            with make():
                row += "x" if run_check(check) else "."
        got[name] = row
    assert got == KILL_MATRIX
    for name, (_, killer, _) in MUTANTS.items():
        assert got[name][MATRIX_ORDER.index(killer)] == "x", name
