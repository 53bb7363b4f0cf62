"""The dataflow enumerator: certified against brute force through the checker on small bounds."""

from __future__ import annotations

import copy
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import worlds
from worlds import (
    Binding,
    Bounds,
    EnumerationLimitError,
    Status,
    WorldsError,
    check,
    check_bindings,
    dataflow_reference_replay,
    enumerate_programs,
    parse_program,
    world_from_mapping,
)
from worlds.families.dataflow import canonical_wire

from ._dataflow_mutants import CERT_BIT, CERT_NUM, all_sequences, brute_force, cert, shipped

ALL = {**shipped(), **cert()}


@functools.cache
def _enum(wid, max_steps=None):
    return enumerate_programs(ALL[wid][0], Bounds(max_steps=max_steps))


#: (world, enumeration depth) pairs where brute force through the checker runs in about a second.
SMALL = [("DF-001", 2), ("DF-002", 3), ("DF-C01", 2), ("DF-C02", 3)]


@pytest.mark.parametrize(("wid", "depth"), SMALL)
def test_enumerator_equals_brute_force_through_the_checker(wid, depth):
    w = ALL[wid][0]
    assert _enum(wid, depth).solutions == brute_force(w, depth)


def test_the_pruned_brute_force_equals_checking_every_sequence():
    w = cert()["DF-C01"][0]
    every = tuple(sorted(tuple(b.render() for b in seq) for seq in all_sequences(w, 2)
                         if check_bindings(w, seq).status is Status.VALID))
    assert every == brute_force(w, 2) and len(every) == 54


#: Pinned solution counts and optimal lengths at each world's own budget.
COUNTS = {"DF-001": (2, 2), "DF-002": (32, 4), "DF-C01": (54, 1), "DF-C02": (16, 3)}


@pytest.mark.parametrize("wid", sorted(COUNTS))
def test_every_enumerated_program_is_valid_for_checker_and_reference_and_counts_are_pinned(wid):
    w, raw = ALL[wid]
    e = _enum(wid)
    assert (len(e.solutions), e.optimal_length) == COUNTS[wid]
    for text in e.texts():
        assert check(w, text).ok, text
        assert dataflow_reference_replay(raw, text).status == "VALID", text
    for sol in e.solutions:  # canonical form: binding i binds the goal wire or w<i+1>
        assert all(s.split(" = ")[0] in (w.spec.goal_wire, canonical_wire(i)) for i, s in enumerate(sol))


def test_shipped_worlds_solutions_are_the_intended_circuits():
    assert _enum("DF-001").solutions == (
        ("w1 = gauge(a, b)", "out = sway(w1, b, a)"),
        ("w1 = gauge(b, a)", "out = sway(w1, a, b)"),
    )
    # every DF-002 solution is the four-gate exclusive-or (argument orders and the order of the middle gates)
    for sol in _enum("DF-002").solutions:
        assert [s.split(" = ")[1].split("(")[0] for s in sol] == ["knot"] * 4


def _canonical(w, bindings):
    names = {}
    for i, b in enumerate(bindings):
        if b.target != w.spec.goal_wire:
            names[b.target] = canonical_wire(i)
    return tuple(Binding(names.get(b.target, b.target), b.name, tuple(names.get(a, a) for a in b.args)).render()
                 for b in bindings)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_valid_program_with_any_wire_names_is_listed_once_in_canonical_form(data):
    wid = data.draw(st.sampled_from(sorted(COUNTS)))
    w = ALL[wid][0]
    sol = data.draw(st.sampled_from(_enum(wid).solutions))
    inter = [s.split(" = ")[0] for s in sol if s.split(" = ")[0] != w.spec.goal_wire]
    taken = {n for n, _ in w.entities} | {w.spec.goal_wire}
    fresh = data.draw(st.lists(st.sampled_from(["t", "u", "mid", "w9", "w1", "w2", "k_0", "z"]).filter(
        lambda n: n not in taken), min_size=len(inter), max_size=len(inter), unique=True))
    m = dict(zip(inter, fresh))
    renamed = [Binding(m.get(b.target, b.target), b.name, tuple(m.get(a, a) for a in b.args))
               for b in parse_program("\n".join(sol)).steps]
    assert check_bindings(w, renamed).ok
    assert _enum(wid).solutions.count(_canonical(w, renamed)) == 1


def test_bounds_tighten_and_the_limit_refuses():
    assert enumerate_programs(ALL["DF-001"][0], Bounds(max_cost=2)).solutions == ()
    assert len(enumerate_programs(ALL["DF-C01"][0], Bounds(max_steps=1)).solutions) == 2
    with pytest.raises(EnumerationLimitError, match="more than 10 programs"):
        enumerate_programs(ALL["DF-002"][0], Bounds(max_solutions=10))
    with pytest.raises(WorldsError, match="dataflow World"):
        enumerate_programs(worlds.load_world(worlds.shipped_worlds()[0]))
    with pytest.raises(WorldsError, match="enumerate_programs"):
        worlds.enumerate_solutions(ALL["DF-001"][0])
    with pytest.raises(WorldsError, match="no handbook renderer"):
        worlds.render_world(ALL["DF-001"][0])


def test_the_dead_wire_pruning_is_sound_in_corner_worlds():
    """Constant-only primitives (nothing can be read) and unary ones (one read per binding)."""
    const_only = copy.deepcopy(CERT_BIT)
    const_only.update(id="DF-K1", primitives=[
        {"name": "hi", "op": "const", "result": "bit", "value": 1, "cost": 0},
        {"name": "lo", "op": "const", "result": "bit", "value": 0, "cost": 0}])
    const_only["goal"]["cases"] = [{"inputs": {"p": 0, "q": 0}, "expect": 1}]
    unary = copy.deepcopy(CERT_BIT)
    unary.update(id="DF-K2", primitives=[{"name": "flip", "op": "not", "params": ["bit"], "result": "bit", "cost": 1}])
    unary["goal"]["cases"] = [{"inputs": {"p": 0, "q": 1}, "expect": 0}]
    for raw, count in ((const_only, 1), (unary, 2)):
        w = world_from_mapping(raw)
        e = enumerate_programs(w)
        assert e.solutions == brute_force(w, w.budget.max_steps) and len(e.solutions) == count, raw["id"]
    # without no_dead_wires, runs continue past the goal and may leave wires unread
    loose = copy.deepcopy(CERT_NUM)
    w = world_from_mapping(loose)
    assert ("out = join(a, b)", "w2 = one()") in enumerate_programs(w).solutions
