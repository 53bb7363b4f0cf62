"""Pair construction audits that must fail on bad fixtures, spec errors, rendering, the TW-001 audit."""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import worlds
from worlds import (
    PairConstructionError,
    Status,
    WorldFileError,
    build_pair,
    check,
    copy_audit,
    enumerate_solutions,
    instantiate_replica,
    isomorphism_certificate,
    load_pair_spec,
    load_world,
    motif_signature,
    production_edges,
    reference_replay,
    render_world,
)
from worlds._audit import audit_sequences

from ._worlds import raw

TW = worlds.DATA_DIR / "tw_001.toml"
BASES = sorted((worlds.DATA_DIR / "bases").glob("*.toml"))


def _spec(tmp_path: Path, body: str, base: Path = TW) -> Path:
    p = tmp_path / "pair.toml"
    p.write_text(f'pair_id = "PAIR-T"\nbase = "{base}"\nf_seed = 1\nc_seed = 2\n' + body)
    return p


GOOD_SOURCES = """
[f_source]
initial = { ingot_a = 2, forge = 1 }
goal = { require = { blade = 1 } }
[c_source]
initial = { ore_a = 1, coal = 1, forge = 1, hammer = 1 }
goal = { require = { blade = 1, ash = 1 } }
"""


def test_a_spec_builds_with_the_motif_in_f_only(tmp_path):
    pair, facts = build_pair(load_pair_spec(_spec(tmp_path, GOOD_SOURCES)))
    world = load_world(TW)
    sols = enumerate_solutions(world).solutions
    assert all(pair.motif in production_edges(world, s) for s in sols)
    assert facts["isomorphism"]["states"] > 1
    assert pair.f.demonstrations[0].motif_present and not pair.c.demonstrations[0].motif_present
    assert pair.novelty == worlds.MOTIF_REQUIRED


def test_verbatim_copy_of_a_target_solution_is_rejected(tmp_path):
    body = """
f_demo = ["smelt_a()", "bury_slag()", "smelt_a()", "forge_hammer(ingot_a)", "forge_blade(ingot_a)"]
[f_source]
initial = { ore_a = 2, ore_b = 1, coal = 2, forge = 1 }
goal = { require = { blade = 1, ash = 1 } }
[c_source]
initial = { ore_a = 1, coal = 1, forge = 1, hammer = 1 }
goal = { require = { blade = 1, ash = 1 } }
"""
    with pytest.raises(PairConstructionError, match=r"PAIR-T: F demonstration rejected: the demonstration, copied verbatim"):
        build_pair(load_pair_spec(_spec(tmp_path, body)))


def test_renamed_copy_is_rejected(tmp_path):
    # the same five-step structure on the costlier ore_b route: not executable in the target,
    # but a renaming of a target solution
    body = """
f_demo = ["smelt_b()", "bury_slag()", "smelt_b()", "forge_hammer(ingot_b)", "forge_blade(ingot_b)"]
[f_source]
initial = { ore_b = 2, coal = 2, forge = 1 }
goal = { require = { blade = 1 } }
budget = { max_cost = 9 }
[c_source]
initial = { ore_a = 1, coal = 1, forge = 1, hammer = 1 }
goal = { require = { blade = 1, ash = 1 } }
"""
    with pytest.raises(PairConstructionError, match="renamed, match"):
        build_pair(load_pair_spec(_spec(tmp_path, body)))


def test_truncated_window_copy_is_rejected(tmp_path):
    # a longer demonstration whose first five steps are a target solution
    body = """
f_demo = ["smelt_a()", "bury_slag()", "smelt_a()", "forge_hammer(ingot_a)", "forge_blade(ingot_a)", "bury_slag()"]
[f_source]
initial = { ore_a = 2, coal = 2, forge = 1 }
goal = { require = { blade = 1, ash = 2 } }
budget = { max_steps = 6, max_cost = 8 }
[c_source]
initial = { ore_a = 1, coal = 1, forge = 1, hammer = 1 }
goal = { require = { blade = 1, ash = 1 } }
"""
    with pytest.raises(PairConstructionError, match=r"its steps 1\.\.5, copied verbatim"):
        build_pair(load_pair_spec(_spec(tmp_path, body)))


def test_copy_audit_checks_inner_windows():
    world = load_world(TW)
    sols = enumerate_solutions(world).solutions
    sigs = {motif_signature(world, s) for s in sols}
    padded = ("bury_slag()",) + sols[0]  # illegal first step, then a full solution
    assert "steps 2..6" in copy_audit(world, padded, world, sigs)
    assert copy_audit(world, ("forge_hammer(ingot_a)", "forge_blade(ingot_a)"), world, sigs) is None


def test_copy_audit_sees_a_consistent_relabelling():
    world = load_world(TW)
    sols = enumerate_solutions(world).solutions
    relabelled = tuple(s.replace("ingot_a", "ingot_b") for s in sols[0])
    assert check(world, "".join(s + "\n" for s in relabelled)).status is not Status.VALID
    # the signature route is switched off (no target signatures) to isolate the relabelling check
    assert "relabelled consistently" in copy_audit(world, relabelled, world, set(), sols)
    assert copy_audit(world, relabelled, world, set()) is None
    renames = worlds._copy_audit._renames_onto
    # one-to-one: two recipes cannot both become smelt_a; shared primitives keep their names
    assert not renames(("smelt_a()", "smelt_b()"), ("smelt_a()", "smelt_a()"))
    assert not renames(("smelt_b()",), ("smelt_a()",), frozenset({"smelt_a", "smelt_b"}))
    assert renames(("melt()",), ("smelt_a()",), frozenset({"smelt_a"}))


def test_witness_only_when_another_route_avoids_the_motif(tmp_path):
    base = worlds.DATA_DIR / "bases" / "tw_004.toml"
    body = """
motif = ["forge_hammer", "catalyst", "forge_blade"]
[f_source]
initial = { ingot = 2, forge = 1 }
goal = { require = { blade = 1 } }
[c_source]
initial = { ore = 1, coal = 1, forge = 1, hammer = 1 }
goal = { require = { blade = 1, ash = 1 } }
"""
    pair, _facts = build_pair(load_pair_spec(_spec(tmp_path, body, base)))
    assert pair.novelty == worlds.WITNESS_ONLY and "witness_only" in pair.flags
    world = load_world(base)
    sols = enumerate_solutions(world).solutions
    assert any(pair.motif not in production_edges(world, s) for s in sols)
    assert any(pair.motif in production_edges(world, s) for s in sols)


def test_no_demonstrable_motif_is_a_clear_error(tmp_path):
    body = """
motif = ["smelt_a", "input", "bury_slag"]
[f_source]
initial = { ingot_a = 2, forge = 1 }
goal = { require = { blade = 1 } }
[c_source]
initial = { ore_a = 1, coal = 1, forge = 1, hammer = 1 }
goal = { require = { blade = 1, ash = 1 } }
"""
    with pytest.raises(PairConstructionError, match="no withheld motif can be demonstrated in F"):
        build_pair(load_pair_spec(_spec(tmp_path, body)))


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("[f_source]\n[c_source]\n", r"field f_source: must change the start or the goal"),
        ('colour = "red"\n' + GOOD_SOURCES, r"field colour: unknown"),
        ('motif = ["a", "b"]\n' + GOOD_SOURCES, r"field motif: must be \[producer, role, consumer\]"),
        ('motif = ["smelt_b", "input", "bury_slag"]\n' + GOOD_SOURCES, r"pinned motif .* is realized by no bounded target solution"),
        (GOOD_SOURCES.replace("initial = { ingot_a = 2, forge = 1 }", "initial = { mithril = 2 }"), r"f_source is not a valid world: .*initial\.mithril"),
        (GOOD_SOURCES.replace("[f_source]", "[f_source]\ntasks = []"), r"field f_source\.tasks: a source variant may override only"),
        ('f_demo = ["forge_blade(ingot_a)"]\n' + GOOD_SOURCES, r"pinned F source demonstration is not a valid solution"),
    ],
)
def test_bad_specs_get_errors_naming_field_and_fix(tmp_path, body, match):
    with pytest.raises(PairConstructionError, match=match):
        build_pair(load_pair_spec(_spec(tmp_path, body)))


def test_equal_seeds_are_refused(tmp_path):
    path = _spec(tmp_path, GOOD_SOURCES)
    path.write_text(path.read_text().replace("c_seed = 2", "c_seed = 1"))
    with pytest.raises(PairConstructionError, match="same id; use other seeds"):
        build_pair(load_pair_spec(path))


def test_unchanged_source_and_missing_base_are_refused(tmp_path):
    same = raw("tw_001")
    body = f"""
[f_source]
budget = {{ max_cost = 8 }}
initial = {{ ore_a = {same["initial"]["ore_a"]}, ore_b = 1, coal = 2, forge = 1 }}
[c_source]
initial = {{ ore_a = 1, coal = 1, forge = 1, hammer = 1 }}
"""
    with pytest.raises(PairConstructionError, match="keeps the base's start and goal"):
        build_pair(load_pair_spec(_spec(tmp_path, body)))
    with pytest.raises(PairConstructionError, match="field base: .* is not a file"):
        load_pair_spec(_spec(tmp_path, GOOD_SOURCES, tmp_path / "nowhere.toml"))


def test_isomorphism_certificate_sees_a_changed_twin():
    base = raw("tw_001")
    base.pop("examples")
    a = instantiate_replica(base, 1, "W")
    b = instantiate_replica(base, 2, "W")
    assert isomorphism_certificate(a, b)["states"] > 1
    changed = copy.deepcopy(b.raw)
    recipe = next(r for r in changed["recipes"] if r["name"] == b.primitives["bury_slag"])
    recipe["cost"] = 2
    twisted = worlds.Replica(changed, worlds.world_from_mapping(changed), b.entities, b.primitives, b.types)
    with pytest.raises(PairConstructionError, match="differ under the label bijection"):
        isomorphism_certificate(a, twisted)


def test_production_edges_are_type_level_dependencies():
    world = load_world(TW)
    sol = ("smelt_a()", "forge_hammer(ingot_a)", "bury_slag()", "smelt_a()", "forge_blade(ingot_a)")
    assert production_edges(world, sol) == {
        ("smelt_a", "input", "forge_hammer"),
        ("smelt_a", "input", "bury_slag"),
        ("smelt_a", "input", "forge_blade"),
        ("forge_hammer", "catalyst", "forge_blade"),
    }
    sch = load_world(worlds.DATA_DIR / "sch_001.toml")
    edges = production_edges(sch, ("start(cut, lathe1, 0)", "start(bake, oven1, 2)"))
    assert edges == {("cut", "cross_machine", "bake")}


# ---------------------------------------------------------------- handbook rendering


@pytest.mark.parametrize("stem", ["tw_001", "sch_001"])
def test_handbook_states_every_part_of_the_world(stem):
    w = load_world(worlds.DATA_DIR / f"{stem}.toml")
    text = render_world(raw(stem))
    for name, _ in w.entities:
        assert name in text
    for p in w.primitives:
        assert f"{p.name}(" in text
    for t in w.entity_types:
        assert t in text
    assert f"at most {w.budget.max_steps} steps" in text and f"total cost at most {w.budget.max_cost}" in text
    assert "Initial" in text and "Goal:" in text and "Hard constraints" in text
    if stem == "tw_001":
        assert "catalysts (must be held, not consumed): forge, hammer" in text
        assert "at most 1 slag may be held in every state" in text
        assert "Initial inventory: 2 ore_a, 1 ore_b, 2 coal, 1 forge" in text
    else:
        assert "bake must end by time 5" in text and "finish: duration 1, kind lathe, after: bake, drill" in text
    # a World renders the same facts (declaration order sorted)
    from_world = render_world(w)
    assert sorted(from_world.splitlines()) == sorted(render_world(worlds.raw_of_world(w)).splitlines())


def test_handbook_of_a_bad_mapping_names_the_field():
    bad = raw("tw_001")
    bad["tokens"]["coal"] = "fule"
    with pytest.raises(WorldFileError, match="tokens.coal"):
        render_world(bad)


# ---------------------------------------------------------------- base worlds of the pairs


@pytest.mark.parametrize("path", BASES, ids=[p.stem for p in BASES])
def test_pair_base_worlds_load_and_their_examples_hold(path):
    w = load_world(path)
    assert enumerate_solutions(w).solutions
    with open(path, "rb") as fh:
        mapping = tomllib.load(fh)
    assert w.examples
    for ex in w.examples:
        r = check(w, ex.text)
        assert r.status.value == ex.expect, ex.name
        if ex.reason is not None:
            assert r.reason.value == ex.reason, ex.name
        if ex.step is not None:
            assert r.failing_step == ex.step, ex.name
        ref = reference_replay(mapping, ex.text)
        assert (ref.status, ref.failing_step, ref.cost) == (r.status.value, r.failing_step, r.cost)


# ---------------------------------------------------------------- TW-001 complete audit


def test_tw001_every_bounded_sequence_is_classified_and_frozen(snapshot):
    a = audit_sequences(raw("tw_001"))
    assert a.disagreements == ()
    assert a.product_total == sum(7**k for k in range(1, 6)) == sum(a.product_counts.values())
    assert a.valid == a.enumerated and len(a.valid) == 3
    assert a.tree_total == sum(a.tree_counts.values())
    valid_texts = {"".join(s + "\n" for s in v) for v in a.valid}
    assert all(check(load_world(TW), t).status is Status.VALID for t in valid_texts)
    assert a.summary() == snapshot


def test_example_chain_detector_sees_a_leaked_witness():
    world = load_world(TW)
    fam = worlds.get_family(world.family)
    sol = enumerate_solutions(world).solutions[0]
    trail = []
    s = world.initial_state
    for text in sol:
        st = worlds.parse_candidate(text).steps[0]
        nxt, cost = fam.apply(world, s, st.name, st.args)
        trail.append(
            worlds.PrimitiveExample(st.name, fam.describe_state(s), text, "VALID", None, fam.describe_state(nxt), cost, "")
        )
        s = nxt
    assert worlds.examples_chain_to_goal(world, trail)
    assert not worlds.examples_chain_to_goal(world, trail[:-1])
    assert worlds.example_states_on_solution_paths(world, trail, [sol]) == len(sol)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(worlds.pair_spec_paths())), st.integers(0, 2**31), st.integers(0, 2**31))
def test_construction_does_not_depend_on_the_replica_seeds(path, f_seed, c_seed):
    """Other seeds give other labels, order and ids, but the same motif, novelty and matched structure."""
    spec = load_pair_spec(path)
    assume(f_seed != c_seed)
    ref, _ = build_pair(spec)
    other, facts = build_pair(dataclasses.replace(spec, f_seed=f_seed, c_seed=c_seed))
    assert (other.motif, other.novelty) == (ref.motif, ref.novelty)
    assert other.f.demonstrations[0].base_steps == ref.f.demonstrations[0].base_steps
    assert other.c.demonstrations[0].base_steps == ref.c.demonstrations[0].base_steps
    assert other.f.optimum_length == other.c.optimum_length == ref.f.optimum_length
    assert facts["isomorphism"]["transitions"] == isomorphism_certificate(ref.f.replica, ref.c.replica)["transitions"]
    assert not _labels(other.f.target) & _labels(other.c.target)
    ex = [(e.subject, e.status, e.reason) for e in other.f.primitive_examples]
    assert ex == [(e.subject, e.status, e.reason) for e in ref.c.primitive_examples]


def _labels(world) -> set[str]:
    names = {e for e, _ in world.entities} | {p.name for p in world.primitives} | set(world.entity_types)
    return names - {"start", "machine", "task"}


def test_tree_only_audit_finds_the_same_valid_sequences():
    full = audit_sequences(raw("tw_001"))
    tree = audit_sequences(raw("tw_001"), product=False)
    assert tree.valid == full.valid == tree.enumerated
    assert tree.tree_counts == full.tree_counts and tree.product_total == 0 and tree.product_counts == {}


def test_a_pair_spec_that_is_not_utf8_is_named_with_its_byte(tmp_path):
    path = _spec(tmp_path, GOOD_SOURCES)
    data = path.read_bytes()
    path.write_bytes(data[:10] + b"\xfe" + data[10:])
    with pytest.raises(PairConstructionError, match=r"not UTF-8 text at byte 10; save the pair spec as UTF-8"):
        load_pair_spec(path)
