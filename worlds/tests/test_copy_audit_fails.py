"""The copy audit and the interchangeable-edge audit fail on constructed bad pairs and pass on generated ones."""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import worlds
from worlds._pair_spec import PairSpec


@functools.cache
def _generated(tier: str = "T2"):
    """A generated pair, its base mapping (from the stream the generator used) and the base's solutions."""
    pair = worlds.generate_pairs("token_workshop", 5, 1, tier).pairs[0]
    return pair


def _target(pair):
    side = pair.f
    enum = worlds.enumerate_solutions(side.target)
    sigs = {worlds.motif_signature(side.target, s) for s in enum.solutions}
    return side, enum, sigs


def _audit(side, enum, sigs, demo):
    return worlds.copy_audit(side.demonstrations[0].source, tuple(demo), side.target, sigs, enum.solutions)


def test_the_generated_demonstrations_pass():
    for tier in ("T1", "T2", "T3"):
        pair = _generated(tier)
        for side in (pair.f, pair.c):
            enum = worlds.enumerate_solutions(side.target)
            sigs = {worlds.motif_signature(side.target, s) for s in enum.solutions}
            assert _audit(side, enum, sigs, side.demonstrations[0].steps) is None


def test_a_verbatim_copy_of_a_target_solution_is_refused():
    side, enum, sigs = _target(_generated())
    assert "verbatim" in _audit(side, enum, sigs, enum.solutions[0])


def test_a_longer_demonstration_holding_a_solution_as_a_window_is_refused():
    side, enum, sigs = _target(_generated())
    sol = min(enum.solutions, key=len)
    extra = side.demonstrations[0].steps[0]
    why = _audit(side, enum, sigs, (extra, *sol))
    assert why is not None and "its steps 2.." in why


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_reordering_of_a_target_solution_is_refused(data):
    side, enum, sigs = _target(_generated())
    sol = data.draw(st.sampled_from(enum.solutions))
    order = data.draw(st.permutations(list(sol)))
    assert _audit(side, enum, sigs, order) is not None


def test_a_reordered_copy_that_is_not_itself_valid_is_refused_as_reordered():
    side, enum, sigs = _target(_generated())
    for sol in enum.solutions:
        for order in itertools.permutations(sol):
            text = "".join(s + "\n" for s in order)
            if worlds.check(side.target, text).status is not worlds.Status.VALID:
                why = _audit(side, enum, sigs, order)
                assert why is not None and "reordered" in why, why
                return
    pytest.fail("every order of every solution is valid; the test needs a world with a dependency")


def test_a_relabelled_and_reordered_copy_is_refused():
    # the first T2 pair of seed 1 has bounded solutions with a decoy step, whose argument is an entity
    pair = worlds.generate_pairs("token_workshop", 1, 1, "T2").pairs[0]
    side, enum, sigs = _target(pair)
    one = worlds._structure.one_step
    sol = next(s for s in enum.solutions if any(isinstance(a, str) for x in s for a in one(x).args))
    names = sorted({a for x in sol for a in one(x).args if isinstance(a, str)})
    ren = dict(zip(names, names[1:] + names[:1])) if len(names) > 1 else {names[0]: "zz_" + names[0]}
    moved = tuple(
        f"{st_.name}({', '.join(ren.get(a, a) if isinstance(a, str) else str(a) for a in st_.args)})"
        for st_ in map(one, reversed(sol))
    )
    from worlds._copy_audit import _reorders_onto

    shared = frozenset(p.name for p in side.target.primitives)
    assert _reorders_onto(moved, sol, shared, True)
    assert _audit(side, enum, sigs, moved) is not None


def test_build_pair_rejects_a_pinned_demonstration_a_copy_solves():
    pair = _generated()
    raw = pair.f.replica.raw
    w = pair.f.target
    sols = worlds.enumerate_solutions(w).solutions
    required = frozenset.intersection(*(worlds.production_edges(w, s) for s in sols))
    motif = sorted(e for e in required if e[1] == "catalyst")[0]
    cap = raw["budget"]["inventory_cap"]
    tok = sorted(t for t, n in raw["initial"].items() if n < cap)[0]
    # the source has one more unit of a start token and the target's goal: the target's own solution, reversed
    # where that is still valid in the source, is a valid demonstration there, and a copy of a target solution
    initial = {**raw["initial"], tok: raw["initial"][tok] + 1}
    spec = PairSpec(pair_id="PAIR-COPY", base=worlds.DATA_DIR, f_seed=1, c_seed=2,
                    f_source={"initial": initial}, c_source={"initial": initial},
                    f_demo=tuple(sols[0]), motif=motif, base_raw=raw)
    with pytest.raises(worlds.PairConstructionError, match=r"PAIR-COPY: F demonstration rejected: .*verbatim"):
        worlds.build_pair(spec)


def test_interchangeable_audit_flags_the_witness_only_showcase_pairs():
    flagged = {}
    for path in worlds.pair_spec_paths():
        pair, facts = worlds.build_pair(worlds.load_pair_spec(path))
        c = pair.c.demonstrations[0]
        got = worlds.interchangeable_edges(facts["base"], facts["target_enum"].solutions, facts["motif"],
                                           facts["source_worlds"]["C"], c.base_steps)
        if got:
            flagged[pair.pair_id] = got
    assert flagged == {
        "PAIR-SCH-03": [("prep", "cross_machine", "mix_b")],
        "PAIR-TW-04": [("smelt", "input", "forge_blade")],
    }


def test_interchangeable_audit_is_silent_when_the_motif_is_required():
    pair, facts = worlds.build_pair(worlds.load_pair_spec(worlds.pair_spec_paths()[3]))
    assert pair.pair_id == "PAIR-TW-01" and pair.novelty == "motif-required"
    base, sols, motif = facts["base"], facts["target_enum"].solutions, facts["motif"]
    c = pair.c.demonstrations[0]
    src = facts["source_worlds"]["C"]
    assert worlds.interchangeable_edges(base, sols, motif, src, c.base_steps) == []
    # every solution holds the C demonstration's edges too: co-requisites of the target, not substitutes
    assert all(production_edges_hold(base, sols, e) for e in worlds.production_edges(src, c.base_steps))


def production_edges_hold(base, sols, edge):
    return all(edge in worlds.production_edges(base, s) for s in sols)
