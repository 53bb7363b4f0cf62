"""Prompts and strict parsers: every item's expected reply parses back to its expected answer; malformed replies are coded."""

from __future__ import annotations

import functools

import pytest

import worlds
from benchmarks.cwr.protocol import (
    CONDITIONS,
    PARSE_STATUSES,
    build_units,
    chat,
    control_prompt,
    expected_answer_text,
    extract_artifact,
    grade_control,
    parse_control,
    parse_state,
    run_pairs,
    state_lines,
)
from fixtures.cwr import build_cwr_items, condition_context_text, resolve_world


@functools.lru_cache(maxsize=1)
def items() -> dict:
    """The registered P, R and E items, built on first use (a protocol run collects this module without running
    it)."""
    return build_cwr_items()


def control() -> list:
    return [item for condition in ("P", "R", "E") for item in items()[condition]]


def _family(item):
    return resolve_world(item["world_ref"])[0].family


def test_every_expected_reply_parses_to_the_expected_answer():
    for item in control():
        status, parsed = parse_control(item, _family(item), expected_answer_text(item, _family(item)))
        assert status == "ok", item["item_id"]
        assert grade_control(item, parsed), item["item_id"]


def test_prose_around_the_answer_is_unscored():
    item = next(i for i in items()["E"] if i["kind"] == "non_goal")
    family = _family(item)
    reply = "Let me trace it.\nStep 1 is fine.\n" + expected_answer_text(item, family) + "\n\nThat is my answer."
    assert grade_control(item, parse_control(item, family, reply)[1])
    decorated = expected_answer_text(item, family).replace("ANSWER:", "**Answer:**")
    assert grade_control(item, parse_control(item, family, decorated)[1])


@pytest.mark.parametrize(("reply", "status"), [
    ("", "no_answer_line"),
    ("I think it is legal.", "no_answer_line"),
    ("ANSWER: LEGAL\nANSWER: ILLEGAL", "several_answer_lines"),
    ("ANSWER: maybe", "bad_answer_value"),
    ("ANSWER: LEGAL ILLEGAL", "bad_answer_value"),
])
def test_malformed_verdicts_are_coded(reply, status):
    item = next(i for i in items()["P"] if i["kind"] == "verdict")
    assert parse_control(item, _family(item), reply) == (status, None)
    assert status in PARSE_STATUSES and not grade_control(item, None)


def test_malformed_states_and_execution_answers_are_coded():
    effect = next(i for i in items()["P"] if i["kind"] == "effect" and _family(i) == "token_workshop")
    assert parse_control(effect, "token_workshop", "the inventory grows") == ("no_state_block", None)
    assert parse_control(effect, "token_workshop", "STATE:\nore = many") == ("bad_state_block", None)
    assert parse_control(effect, "token_workshop", "STATE:\nore = 1\nore = 2") == ("bad_state_block", None)
    legal = next(i for i in items()["E"] if i["kind"] == "goal")
    assert parse_control(legal, _family(legal), "ANSWER: LEGAL, GOAL MET") == ("no_state_block", None)
    assert parse_control(legal, _family(legal), "ANSWER: ILLEGAL AT STEP two")[0] == "bad_answer_value"
    retrieval = items()["R"][0]
    assert parse_control(retrieval, _family(retrieval), "ANSWER: the second one") == ("bad_answer_value", None)


def test_state_text_round_trips():
    assert parse_state("token_workshop", state_lines("token_workshop", {"ore": 2, "coal": 1})) == {"ore": 2, "coal": 1}
    assert parse_state("token_workshop", ["ore = 2", "coal = 0"]) == {"ore": 2}
    placed = {"cut": {"machine": "lathe1", "start": 0}}
    assert parse_state("schedule", state_lines("schedule", placed)) == placed
    assert parse_state("schedule", state_lines("schedule", {})) == {}
    assert parse_state("schedule", ["cut = lathe1"]) is None


@pytest.mark.parametrize(("reply", "expected"), [
    ("a()\nb(x)\n", ("ok", "a()\nb(x)\n")),
    ("```\na()\nb(x)\n```", ("ok", "a()\nb(x)\n")),
    ("```text\na()\n```\n", ("ok", "a()\n")),
    # prose around the one artifact is not read
    ("Here it is:\n```\na()\n```\nIt uses a() once.", ("ok", "a()\n")),
    ("My plan:\n\na()\n# then\n\nb(x, 2)\n\nThat reaches the goal.", ("ok", "a()\n# then\n\nb(x, 2)\n")),
    ("  w1 = f(a)\n\tgoal=g( w1 )  \nDone.", ("ok", "  w1 = f(a)\n\tgoal=g( w1 )  \n")),
    # a block is read whole: prose inside it goes to the checker
    ("```\nFirst:\na()\n```", ("ok", "First:\na()\n")),
    # a block without a step-shaped line is prose
    ("```text\nthinking...\n```\na()", ("ok", "a()\n")),
    # two candidates, none, an open fence
    ("```\na()\n```\n```\nb()\n```", ("several_artifacts", None)),
    ("a()\nthen\nb()", ("several_artifacts", None)),
    ("The steps:\na()\nIn code:\n```\na()\n```", ("several_artifacts", None)),
    ("I cannot solve this.", ("no_artifact", None)),
    ("", ("no_artifact", None)),
    ("1. a()\n2. b()", ("no_artifact", None)),
    ("```\n```", ("no_artifact", None)),
    ("```\na()\n", ("unclosed_code_block", None)),
    ("a()\n```\nb()\n```\n```", ("unclosed_code_block", None)),
])
def test_artifact_extraction(reply, expected):
    assert extract_artifact(reply) == expected


def test_prose_around_a_demonstration_is_not_graded():
    pair = run_pairs()[0]
    steps = "".join(pair.f.demonstrations[0].text)
    status, artifact = extract_artifact("Here it is:\n```\n" + steps + "```\nI copied the demonstration.")
    assert (status, artifact) == ("ok", steps)
    assert worlds.check(pair.f.demonstrations[0].source, artifact).status is worlds.Status.VALID


def test_control_prompts_hold_the_world_and_the_question():
    for item in control():
        world, raw = resolve_world(item["world_ref"])
        text = control_prompt(item, world, raw)
        assert worlds.render_world(raw) in text
        if item["condition"] == "P":
            assert item["probe"] in text
        elif item["condition"] == "R":
            assert all(entry["id"] in text for entry in item["handbook"])
        else:
            assert all(f"{i}. {step}" in text for i, step in enumerate(item["candidate"], start=1))


def test_no_witness_or_example_text_leaks_into_control_prompts():
    for item in control():
        world, raw = resolve_world(item["world_ref"])
        assert "examples" not in raw
        if item["world_ref"].startswith("shipped:"):
            for example in worlds.load_world(world.source).examples:
                if example.expect == "VALID" and item["condition"] != "R":
                    assert example.text.strip() not in control_prompt(item, world, raw)


def test_synthesis_prompts_are_the_pair_bodies_verbatim_in_fresh_sessions():
    pairs = run_pairs()
    units = build_units(items(), pairs, None)
    by_id = {u.item_id: u for u in units}
    for pair in pairs:
        f, c = by_id[f"F:{pair.pair_id}"], by_id[f"C:{pair.pair_id}"]
        assert f.prompt_text == pair.f.prompt_text and c.prompt_text == pair.c.prompt_text
        assert chat(f.prompt_text) == [{"role": "user", "content": pair.f.prompt_text}]
        assert f.target is pair.f.target and c.target is pair.c.target
        # Nothing of one side reaches the other: no F demonstration step appears in the C prompt, and no F label.
        for demo in pair.f.demonstrations:
            assert demo.text.strip() not in c.prompt_text
        f_labels = {name for name, _ in pair.f.target.entities} - {name for name, _ in pair.c.target.entities}
        assert not any(f" {label}" in c.prompt_text for label in f_labels)
    assert {u.condition for u in units} == set(CONDITIONS)


def test_e_prompts_show_their_condition_context_and_no_synthesis_task():
    """E_C shows the C context, E_F the F context, shipped-world E none; no prompt carries the synthesis task."""
    sides = {f"pair:{p.pair_id}:{s.condition}": (p, s) for p in worlds.build_showcase_pairs(token_counts=False)
             for s in (p.f, p.c)}
    seen = set()
    for item in items()["E"]:
        world, raw = resolve_world(item["world_ref"])
        text = control_prompt(item, world, raw)
        assert "=== YOUR TASK ===" not in text and worlds.GRAMMAR_TEXT not in text, item["item_id"]
        if item["context"] == "none":
            assert "=== ONE-STEP EXAMPLES ===" not in text and "WORKED DEMONSTRATION" not in text
            continue
        pair, side = sides[item["world_ref"]]
        other = pair.side("F" if side.condition == "C" else "C")
        seen.add(side.condition)
        context = condition_context_text(item["world_ref"])
        head = text.split("CANDIDATE (executed", 1)[0]
        assert head.rstrip("\n").endswith(context) and worlds.render_world(raw) in head
        assert all(example.text(pair.family) in head for example in side.primitive_examples)
        assert all(demo.text.strip() not in text for demo in other.demonstrations)
        assert condition_context_text(f"pair:{pair.pair_id}:{other.condition}") not in text
    assert seen == {"C", "F"}


@pytest.mark.parametrize(("change", "message"), [
    ({"context": None}, "has context None"),
    ({"context": "X"}, "has context 'X'"),
    ({"context": "none"}, "does not belong to world"),
])
def test_e_item_with_a_wrong_context_is_refused(change, message):
    item = next(i for i in items()["E"] if i["context"] == "C")
    world, raw = resolve_world(item["world_ref"])
    with pytest.raises(ValueError, match=message):
        control_prompt({**item, **change}, world, raw)
