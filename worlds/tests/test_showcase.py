"""The eight showcase F/C pairs: construction audits, manifests, prompts, frozen hashes.

Collection reads only the pair spec files.  The pairs, with the token counts
of the bundled tokenizers (``models.bundled_token_counters()``), are built by
module fixtures when the first test asks for them.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

import worlds
from worlds import (
    MOTIF_REQUIRED,
    WITNESS_ONLY,
    Status,
    build_showcase_pairs,
    check,
    copy_audit,
    enumerate_solutions,
    isomorphism_certificate,
    load_pair_spec,
    motif_signature,
    pair_spec_paths,
    production_edges,
)


def _jsonschema():
    return pytest.importorskip("jsonschema", reason="manifest schema validation needs the jsonschema package")


IDS = sorted(load_pair_spec(path).pair_id for path in pair_spec_paths())


@pytest.fixture(scope="module")
def token_counters():
    """The bundled tokenizers' counters (loading a tokenizer converts its GGUF first when the cache lacks it)."""
    from models import bundled_token_counters

    return bundled_token_counters()


@pytest.fixture(scope="module")
def pairs(token_counters):
    """The showcase pairs with their token counts filled in."""
    return build_showcase_pairs(token_counts=token_counters)


@pytest.fixture(scope="module")
def by_id(pairs):
    return {p.pair_id: p for p in pairs}


def _labels(world) -> set[str]:
    names = {e for e, _ in world.entities} | {p.name for p in world.primitives} | set(world.entity_types)
    return names - {"start", "machine", "task"}


def _side_motif(p, side):
    """The pair's motif (base labels) written in one side's labels."""
    names = {**side.replica.entities, **side.replica.primitives}  # a motif joins recipes or tasks
    return (names[p.motif[0]], p.motif[1], names[p.motif[2]])


def test_eight_deterministic_pairs_over_both_families(pairs):
    assert [p.pair_id for p in pairs] == IDS
    assert len(pairs) == 8
    fams = [p.family for p in pairs]
    assert fams.count("token_workshop") >= 4 and fams.count("schedule") >= 2
    build_showcase_pairs.cache_clear()
    again = build_showcase_pairs(token_counts=False)
    for a, b in zip(pairs, again):
        assert a.f.prompt_text == b.f.prompt_text and a.c.prompt_text == b.c.prompt_text
        assert worlds.manifest_digest(a.manifest, without_token_counts=True) == worlds.manifest_digest(
            b.manifest, without_token_counts=True
        )
    # both novelty labels occur, each computed (see test_novelty_label_follows_the_enumeration)
    assert {p.novelty for p in pairs} == {MOTIF_REQUIRED, WITNESS_ONLY}


@pytest.mark.parametrize("pid", IDS)
def test_manifest_matches_the_published_schema(pid, by_id):
    jsonschema = _jsonschema()
    schema = json.loads(worlds.MANIFEST_SCHEMA_PATH.read_text())
    jsonschema.validate(by_id[pid].manifest, schema)


def test_schema_refuses_a_manifest_claiming_a_copy_solvable_demo(pairs):
    jsonschema = _jsonschema()
    bad = json.loads(json.dumps(pairs[0].manifest))
    bad["exact_or_renamed_demo_solves_target"] = True
    with pytest.raises(jsonschema.ValidationError):
        worlds.validate_manifest(bad)
    bad = json.loads(json.dumps(pairs[0].manifest))
    del bad["residual_mismatches"]
    with pytest.raises(jsonschema.ValidationError):
        worlds.validate_manifest(bad)


@pytest.mark.parametrize("pid", IDS)
def test_targets_are_independent_isomorphic_replicas(pid, by_id):
    p = by_id[pid]
    assert p.f.target.id != p.c.target.id
    assert not _labels(p.f.target) & _labels(p.c.target)
    assert p.f.target_raw != p.c.target_raw
    cert = isomorphism_certificate(p.f.replica, p.c.replica)
    assert cert["states"] == p.manifest["world"]["reachable_states"]
    assert p.f.optimum_length == p.c.optimum_length == p.manifest["optimal_lengths"]["F"]
    assert p.f.target.budget == p.c.target.budget
    assert len(p.f.target.spec.constraints) == len(p.c.target.spec.constraints)


@pytest.mark.parametrize("pid", IDS)
def test_f_demonstrates_the_motif_and_c_does_not(pid, by_id):
    p = by_id[pid]
    for side, present in ((p.f, True), (p.c, False)):
        (d,) = side.demonstrations
        assert check(d.source, d.text).status is Status.VALID
        assert check(side.target, d.text).status is not Status.VALID
        assert (_side_motif(p, side) in production_edges(d.source, d.steps)) is present
        sols = enumerate_solutions(side.target).solutions
        sigs = {motif_signature(side.target, s) for s in sols}
        assert copy_audit(d.source, d.steps, side.target, sigs, sols) is None
        assert d.source.id != side.target.id
        assert any(d.source_raw.get(k) != side.target_raw.get(k) for k in ("initial", "goal"))
    fd, cd = p.f.demonstrations[0], p.c.demonstrations[0]
    assert abs(len(fd.steps) - len(cd.steps)) <= 1
    assert fd.steps != cd.steps


@pytest.mark.parametrize("pid", IDS)
def test_novelty_label_follows_the_enumeration(pid, by_id):
    p = by_id[pid]
    for side in (p.f, p.c):
        sols = enumerate_solutions(side.target).solutions
        held = [_side_motif(p, side) in production_edges(side.target, s) for s in sols]
        assert any(held)
        assert (p.novelty == MOTIF_REQUIRED) == all(held)
        assert p.manifest["all_bounded_solutions_require_holdout"] == all(held)
        assert p.manifest["motif_signatures"]["holdout_edge_in_target_solutions"] == {
            "with": sum(held),
            "of": len(held),
        }
    assert ("witness_only" in p.flags) == (p.novelty == WITNESS_ONLY)


@pytest.mark.parametrize("pid", IDS)
def test_primitive_examples_are_common_and_certified(pid, by_id):
    p = by_id[pid]
    fx, cx = p.f.primitive_examples, p.c.primitive_examples
    assert [(e.subject, e.status, e.reason, e.cost) for e in fx] == [(e.subject, e.status, e.reason, e.cost) for e in cx]
    subjects = {e.subject for e in fx}
    assert {e.subject for e in fx if e.status == "VALID"} == subjects
    assert {e.subject for e in fx if e.status == "INVALID"} == subjects
    for side in (p.f, p.c):
        for e in side.primitive_examples:
            step = worlds.parse_candidate(e.step).steps[0]
            assert side.target.primitive(step.name) is not None
            assert all(isinstance(a, int) or side.target.entity_type(a) for a in step.args)
    assert not worlds.examples_chain_to_goal(p.f.target, fx) and not worlds.examples_chain_to_goal(p.c.target, cx)
    assert p.manifest["primitive_examples"]["chain_to_goal"] is False
    # exposure: examples identical; residual demonstration differences are recorded
    freq = p.manifest["primitive_frequencies"]
    for subj in subjects:
        for k in ("example_valid", "example_invalid"):
            assert freq["F"][subj][k] == freq["C"][subj][k] == 1
    demo_diff = any(freq["F"].get(s, {}).get("demonstration", 0) != freq["C"].get(s, {}).get("demonstration", 0)
                    for s in set(freq["F"]) | set(freq["C"]))
    assert p.manifest["primitive_exposure_matched"] is (not demo_diff)
    assert demo_diff == any(r.startswith("exposure of") for r in p.manifest["residual_mismatches"])


@pytest.mark.parametrize("pid", IDS)
def test_prompts_hold_the_whole_world_and_nothing_of_the_other_side(pid, by_id):
    p = by_id[pid]
    for side, other in ((p.f, p.c), (p.c, p.f)):
        text = side.prompt_text
        assert worlds.render_world(side.target_raw) in text
        assert worlds.GRAMMAR_TEXT in text
        for e in side.primitive_examples:
            assert e.step in text
        for s in side.demonstrations[0].steps:
            assert s in text
        words = set(text.replace("(", " ").replace(")", " ").replace(",", " ").replace(":", " ").split())
        assert not (_labels(other.target) & words), "a label of the other side leaks into the prompt"
        for sol in enumerate_solutions(side.target).solutions:
            assert "\n    ".join(sol) not in text
    strip = [ln.split(":")[0] for ln in p.f.prompt_text.splitlines() if ln.startswith("===")]
    assert strip == [ln.split(":")[0] for ln in p.c.prompt_text.splitlines() if ln.startswith("===")]
    assert p.manifest["prompt_sha256"]["F"] != p.manifest["prompt_sha256"]["C"]


def test_prompt_token_counts_count_the_prompt_text(pairs):
    counts = pairs[0].manifest["prompt_token_counts"]
    missing = [n for n, d in counts.items() if "unavailable" in d]
    if missing:
        pytest.skip(f"bundled tokenizers not loadable here ({missing}): {counts[missing[0]]['unavailable']}")
    # counted independently through transformers' AutoTokenizer on the model's cache folder
    # (SmolLM2 only: loading Gemma's 33 MB tokenizer that way takes seconds more for the same check)
    transformers = pytest.importorskip("transformers", reason="the cross-count needs transformers")
    from models import bundled_tokenizer_folder

    name = worlds.TOKENIZERS[0]
    toks = {name: transformers.AutoTokenizer.from_pretrained(str(bundled_tokenizer_folder(name)[0]))}
    for p in pairs[:2]:
        for name, tok in toks.items():
            for cond, side in (("F", p.f), ("C", p.c)):
                n = len(tok(side.prompt_text, add_special_tokens=False)["input_ids"])
                assert p.manifest["prompt_token_counts"][name][cond] == n
                assert n > 200


def test_token_counts_come_from_the_counters_passed_in():
    words = (lambda text: len(text.split()), "whitespace-v1")
    pair = build_showcase_pairs(token_counts={"smollm2-135m-instruct": words, "gemma-3-270m": (None, "not here")})[0]
    counts = pair.manifest["prompt_token_counts"]
    assert counts["smollm2-135m-instruct"] == {
        "revision": "whitespace-v1", "F": len(pair.f.prompt_text.split()), "C": len(pair.c.prompt_text.split()),
    }
    assert counts["gemma-3-270m"] == {"unavailable": "not here"}
    assert set(pair.manifest["output_token_counts"]["smollm2-135m-instruct"]) == {"revision", "F", "C"}
    if importlib.util.find_spec("jsonschema") is not None:
        worlds.validate_manifest(pair.manifest)
    empty = build_showcase_pairs(token_counts={})[0].manifest["prompt_token_counts"]
    assert empty == {name: {"unavailable": "no counter given"} for name in worlds.TOKENIZERS}
    for none in (None, False):
        counts = build_showcase_pairs(token_counts=none)[0].manifest["prompt_token_counts"]
        assert counts == {name: {"unavailable": "not requested"} for name in worlds.TOKENIZERS}
    with pytest.raises(worlds.WorldsError, match="bundled_token_counters"):
        build_showcase_pairs(token_counts=True)
    with pytest.raises(worlds.WorldsError, match="does not record"):
        build_showcase_pairs(token_counts={"gpt-2": words})


@pytest.mark.parametrize("pid", IDS)
def test_manifest_is_frozen(pid, by_id, snapshot):
    m = dict(by_id[pid].manifest)
    m.pop("prompt_token_counts")
    m.pop("output_token_counts")
    m["residual_mismatches"] = [r for r in m["residual_mismatches"] if " tokens (" not in r]
    assert {"manifest": m, "sha256": worlds.manifest_digest(by_id[pid].manifest, without_token_counts=True)} == snapshot


def test_prompt_token_counts_are_frozen(pairs, by_id, snapshot):
    counts = {p.pair_id: {"prompt": p.manifest["prompt_token_counts"], "output": p.manifest["output_token_counts"]} for p in pairs}
    if any("unavailable" in d for c in counts.values() for kind in c.values() for d in kind.values()):
        pytest.skip("bundled tokenizers not loadable here; token counts cannot be compared with the frozen ones")
    assert {pid: {"counts": c, "manifest_sha256": worlds.manifest_digest(by_id[pid].manifest)} for pid, c in counts.items()} == snapshot


def test_manifest_records_the_copy_audit_it_ran():
    """``exact_or_renamed_demo_solves_target`` is the copy audit's answer: False for the built pair, True once its
    F demonstration is replaced by a valid solution of the F target itself."""
    import dataclasses

    pair, facts = worlds.build_pair(load_pair_spec(pair_spec_paths()[0]))
    assert worlds.build_manifest(pair, facts)["exact_or_renamed_demo_solves_target"] is False
    solution = enumerate_solutions(pair.f.target).solutions[0]
    (demo,) = pair.f.demonstrations
    copied = dataclasses.replace(demo, source=pair.f.target, source_raw=pair.f.target_raw, steps=tuple(solution),
                                 text="".join(s + "\n" for s in solution))
    tampered = dataclasses.replace(pair, f=dataclasses.replace(pair.f, demonstrations=(copied,)))
    assert worlds.build_manifest(tampered, facts)["exact_or_renamed_demo_solves_target"] is True
