"""The strict checker: shipped examples, result fields, family rules, fuzzing."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import worlds
from worlds import (
    CheckerUsageError,
    Reason,
    Status,
    Step,
    TokenState,
    check,
    check_steps,
    format_steps,
    load_world,
    parse_candidate,
    world_from_mapping,
)

from ._worlds import SHIPPED, example_cases

WORLDS = {p.stem: load_world(p) for p in SHIPPED}
TW = WORLDS["tw_001"]
SCH = WORLDS["sch_001"]


def _example(stem, name):
    return next(e for e in WORLDS[stem].examples if e.name == name)


@pytest.mark.parametrize(("stem", "name"), example_cases())
def test_shipped_example_gets_its_declared_verdict(stem, name):
    world = WORLDS[stem]
    ex = _example(stem, name)
    r = check(world, ex.text)
    assert r.status.value == ex.expect, r.message
    assert (None if r.reason is None else r.reason.value) == ex.reason, r.message
    if ex.step is not None:
        assert r.failing_step == ex.step
    if r.status is Status.VALID:
        assert r.ok and r.message == "" and r.failing_step is None
        assert r.executed == len(parse_candidate(ex.text).steps)
        assert r.cost <= world.budget.max_cost
        assert worlds.get_family(world.family).goal(world, r.final_state)
    else:
        assert not r.ok and r.message


def test_result_fields_after_a_failure_are_the_committed_prefix():
    r = check(TW, _example("tw_001", "invalid_over_cost").text)
    assert (r.status, r.reason, r.failing_step, r.executed, r.cost) == (
        Status.INVALID,
        Reason.OVER_BUDGET,
        4,
        4,
        7,
    )
    assert r.final_state == TokenState.of(
        {"ash": 1, "forge": 1, "hammer": 1, "ingot_b": 1, "ore_a": 1, "slag": 1}
    )
    assert [t.step for t in r.trace] == [
        "smelt_a()",
        "bury_slag()",
        "smelt_b()",
        "forge_hammer(ingot_a)",
    ]
    assert r.line == 5


def test_valid_result_and_summary_are_deterministic():
    text = _example("tw_001", "valid_smelt_twice_first").text
    a, b = check(TW, text), check(TW, text)
    assert a == b and a.digest() == b.digest()
    assert a.summary() == {
        "status": "VALID",
        "reason": None,
        "failing_step": None,
        "final_state": {
            "inventory": [
                ["ash", 1],
                ["blade", 1],
                ["forge", 1],
                ["hammer", 1],
                ["ore_b", 1],
                ["slag", 1],
            ]
        },
        "cost": 7,
        "executed": 5,
    }


def test_malformed_result_keeps_initial_state_and_position():
    r = check(SCH, "start(cut, lathe1, 0)\nstart(bake oven1, 2)\n")
    assert (r.status, r.reason, r.failing_step, r.executed, r.cost) == (
        Status.MALFORMED,
        Reason.SCHEMA,
        None,
        0,
        0,
    )
    assert r.final_state == SCH.initial_state and (r.line, r.column) == (2, 12)


def test_every_valid_reordering_of_a_valid_solution_is_accepted():
    """No witness matching: any order that executes legally is VALID."""
    steps = parse_candidate(_example("sch_001", "valid_drill_late").text).steps
    verdicts = {}
    for perm in itertools.permutations(steps):
        verdicts[tuple(s.render() for s in perm)] = check_steps(SCH, perm).status
    valid = [k for k, v in verdicts.items() if v is Status.VALID]
    # cut before bake, bake and drill before finish: 3 legal orders of 24.
    assert len(valid) == 3


def test_equal_inventories_reached_differently_are_one_state():
    a = check(TW, "smelt_a()\nforge_hammer(ingot_a)\nbury_slag()\n").final_state
    b = check(TW, "smelt_a()\nbury_slag()\nforge_hammer(ingot_a)\n").final_state
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1


def test_misuse_raises_usage_errors():
    with pytest.raises(CheckerUsageError, match="needs a World"):
        check("TW-001", "smelt_a()")  # type: ignore[arg-type]
    with pytest.raises(CheckerUsageError, match="must be str"):
        check(TW, None)  # type: ignore[arg-type]


# ---- family rules on small in-test worlds ----------------------------------


def _mini(**over):
    d = {
        "schema_version": 1,
        "id": "TW-T01",
        "family": "token_workshop",
        "title": "test world",
        "token_types": ["a", "b"],
        "budget": {"max_steps": 6, "max_cost": 10, "inventory_cap": 2},
        "tokens": {"x": "a", "y": "a", "k": "b", "z": "b"},
        "initial": {"x": 2, "k": 1},
        "recipes": [
            {
                "name": "use",
                "params": [{"name": "p", "type": "a"}],
                "inputs": {"p": 1},
                "catalysts": ["p"],
                "outputs": {"z": 1},
                "cost": 1,
            },
            {
                "name": "grow",
                "inputs": {"k": 1},
                "catalysts": ["k"],
                "outputs": {"y": 1},
                "cost": 1,
            },
            {"name": "spawn", "outputs": {"y": 1}, "cost": 1},
        ],
        "goal": {"require": {"z": 1}},
    }
    d.update(over)
    return world_from_mapping(d)


def test_parameter_catalyst_needs_one_more_than_it_consumes():
    w = _mini()
    assert check(w, "use(x)").ok  # x=2: one consumed, one present as catalyst
    r = check(w, "use(x)\nuse(x)")
    assert (r.reason, r.failing_step) == (Reason.INAPPLICABLE, 1)
    r = check(w, "grow()")  # k=1 both consumed and catalyst
    assert (r.reason, r.failing_step) == (Reason.INAPPLICABLE, 0)


def test_inventory_cap_is_a_budget():
    r = check(_mini(), "spawn()\nspawn()\nspawn()")
    assert (r.status, r.reason, r.failing_step, r.executed) == (
        Status.INVALID,
        Reason.OVER_BUDGET,
        2,
        2,
    )


def test_never_together_and_final_scope():
    w = _mini(
        constraints=[
            {"kind": "never_together", "scope": "every_state", "tokens": ["y", "z"]}
        ]
    )
    r = check(w, "use(x)\nspawn()")
    assert (r.reason, r.failing_step) == (Reason.CONSTRAINT_VIOLATION, 1)
    w = _mini(
        constraints=[{"kind": "at_most", "scope": "final", "tokens": ["y"], "limit": 0}]
    )
    assert check(w, "spawn()\nuse(x)").reason is Reason.CONSTRAINT_VIOLATION
    assert check(w, "spawn()\nuse(x)").failing_step is None
    assert check(w, "use(x)").ok


def test_integer_where_entity_expected_is_a_bad_argument():
    r = check(_mini(), "use(3)")
    assert (r.reason, r.failing_step) == (Reason.BAD_ARGUMENT, 0)
    r = check(SCH, "start(cut, lathe1, lathe2)")
    assert r.reason is Reason.BAD_ARGUMENT


# ---- fuzzing: the checker never raises and its results are coherent ---------


def _coherent(world, r):
    assert r.status in (Status.VALID, Status.INVALID, Status.MALFORMED)
    hash(r.final_state)
    assert 0 <= r.cost <= world.budget.max_cost
    assert 0 <= r.executed <= world.budget.max_steps
    assert len(r.trace) == r.executed
    if r.status is Status.VALID:
        assert r.reason is None and r.failing_step is None
    elif r.status is Status.MALFORMED:
        assert r.reason is Reason.SCHEMA and r.executed == 0 and r.line is not None
    else:
        assert r.reason not in (None, Reason.SCHEMA)
        if r.failing_step is not None:
            assert r.executed == r.failing_step
        else:
            assert r.reason in (Reason.GOAL_NOT_MET, Reason.CONSTRAINT_VIOLATION)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(WORLDS)), st.text())
def test_checker_never_raises_on_arbitrary_text(stem, text):
    _coherent(WORLDS[stem], check(WORLDS[stem], text))


def _vocab(world):
    names = [p.name for p in world.primitives] + ["nope"]
    args = [e for e, _ in world.entities] + [0, 1, 2, 5, 9, "nope"]
    return names, args


@st.composite
def _mutated(draw):
    stem = draw(st.sampled_from(sorted(WORLDS)))
    world = WORLDS[stem]
    valid = [e for e in world.examples if e.expect == "VALID"]
    steps = list(parse_candidate(draw(st.sampled_from(valid)).text).steps)
    names, args = _vocab(world)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["drop", "dup", "swap", "arg", "name", "insert"]))
        if not steps:
            break
        i = draw(st.integers(0, len(steps) - 1))
        s = steps[i]
        if op == "drop":
            del steps[i]
        elif op == "dup":
            steps.insert(i, s)
        elif op == "swap":
            j = draw(st.integers(0, len(steps) - 1))
            steps[i], steps[j] = steps[j], steps[i]
        elif op == "arg":
            new = list(s.args) + [draw(st.sampled_from(args))] * draw(st.integers(0, 1))
            if new:
                new[draw(st.integers(0, len(new) - 1))] = draw(st.sampled_from(args))
            steps[i] = Step(s.name, tuple(new), s.line)
        elif op == "name":
            steps[i] = Step(draw(st.sampled_from(names)), s.args, s.line)
        else:
            steps.insert(
                i,
                Step(
                    draw(st.sampled_from(names)),
                    tuple(draw(st.lists(st.sampled_from(args), max_size=3))),
                    0,
                ),
            )
    return stem, format_steps(steps)


@settings(max_examples=200, deadline=None)
@given(_mutated())
def test_checker_is_coherent_on_mutated_valid_solutions(case):
    stem, text = case
    world = WORLDS[stem]
    r = check(world, text)
    _coherent(world, r)
    if r.status is Status.INVALID and r.failing_step is not None:
        # The committed prefix replays to the same state, cost and count.
        prefix = parse_candidate(text).steps[: r.failing_step]
        if prefix:
            p = check_steps(world, prefix)
            assert p.reason in (None, Reason.GOAL_NOT_MET, Reason.CONSTRAINT_VIOLATION)
            assert (p.final_state, p.cost, p.executed) == (
                r.final_state,
                r.cost,
                r.executed,
            )


def test_shipped_examples_cover_every_reason_and_status():
    for stem, world in sorted(WORLDS.items()):
        reasons = {e.reason for e in world.examples if e.reason is not None}
        assert reasons == {r.value for r in Reason}, stem
