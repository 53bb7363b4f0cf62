"""Hostile replies: the CWR parsers never raise, agree with the rescorer and a regex definition, and run in linear time."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import worlds
from benchmarks.core.selfcheck import check_linear_time
from benchmarks.cwr.protocol import (
    HERE,
    MAX_NUMBER_DIGITS,
    PARSE_STATUSES,
    extract_artifact,
    parse_control,
)

_spec = importlib.util.spec_from_file_location("cwr_rescore_fuzz", HERE / "rescore.py")
rescore = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore)

#: (condition, kind, family) of every reply format the controls read.
FORMATS = [("P", "verdict", "token_workshop"), ("P", "effect", "token_workshop"), ("P", "effect", "schedule"),
           ("R", "retrieval", "token_workshop"), ("E", "goal", "token_workshop"), ("E", "goal", "schedule"),
           ("P", "effect", "dataflow"), ("E", "goal", "dataflow")]

# --------------------------------------------------------------------------- the language, written as regexes
# The reply formats as backtracking regular expressions: the plainest statement of what the parsers accept, and
# super-linear on long lines (the answer line is cubic in a run of spaces), so they only ever see short texts.

_REF_ANSWER = re.compile(r"^\s*[*_`]*\s*ANSWER\s*[*_`]*\s*:\s*[*_`]*\s*(.*?)\s*[*_`.]*\s*$", re.IGNORECASE)
_REF_STATE = re.compile(r"^\s*[*_`]*\s*STATE\s*[*_`]*\s*:\s*[*_`]*\s*(.*?)\s*$", re.IGNORECASE)
_REF_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*$")
_REF_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+)")
_REF_PLACEMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([A-Za-z_][A-Za-z0-9_]*)\s*@\s*(\d+)")
_REF_WIRE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\[?\s*((?:[0-9]+\s*,\s*)*[0-9]+)\s*\]?")


def _ref_number(digits: str) -> int | None:
    return int(digits) if len(digits) <= MAX_NUMBER_DIGITS else None


def _ref_state(family: str, text: str) -> tuple[str, Any]:
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if _REF_STATE.match(line)]
    if len(heads) != 1:
        return "no_state_block", None
    first = _REF_STATE.match(lines[heads[0]]).group(1)
    block = [first] if first else []
    for line in lines[heads[0] + 1:]:
        if not line.strip() or line.strip().startswith("```"):
            if block:
                break
            continue
        block.append(line)
    body = [line.strip().strip("`").strip() for line in block]
    body = [line.lstrip("-* ").strip() for line in body if line]
    if not block:
        return "bad_state_block", None
    if body in (["(empty)"], ["empty"]):
        return "ok", {}
    pattern, value, keep = _REF_LINES[family]
    state, too_long = {}, False
    for line in body:
        m = pattern.fullmatch(line)
        if m is None or m.group(1) in state:
            return "bad_state_block", None
        numerals = re.findall(r"\d+", m.groups()[-1])  # one, or a wire's value per case
        number = _ref_number(numerals[-1])
        too_long |= any(_ref_number(n) is None for n in numerals)
        state[m.group(1)] = value(m, number)
    if too_long:
        return "number_too_large", None
    return "ok", {k: v for k, v in state.items() if keep(v)}


# The reference's own line formats, per family: (line pattern, the value a line gives, whether it is kept).
_REF_LINES = {
    "schedule": (_REF_PLACEMENT, lambda m, number: {"machine": m.group(2), "start": number}, lambda v: True),
    "token_workshop": (_REF_TOKEN, lambda m, number: number, lambda v: v is None or v > 0),
    "dataflow": (_REF_WIRE, lambda m, number: [int(n) for n in re.findall("[0-9]+", m.group(2))], lambda v: True),
}


def reference_parse(condition: str, kind: str, family: str, text: str) -> tuple[str, Any]:
    if condition == "P" and kind == "effect":
        status, state = _ref_state(family, text)
        return status, None if state is None else {"state": state}
    found = [m.group(1) for line in text.splitlines() if (m := _REF_ANSWER.match(line))]
    if len(found) != 1:
        return ("no_answer_line" if not found else "several_answer_lines"), None
    value = " ".join(found[0].upper().replace(",", " , ").split())
    if condition == "P":
        return ("ok", {"verdict": value}) if value in ("LEGAL", "ILLEGAL") else ("bad_answer_value", None)
    if condition == "R":
        m = re.fullmatch(r"\[?(H-[0-9A-F]{4})\]?", value)
        return ("ok", {"artifact": m.group(1)}) if m else ("bad_answer_value", None)
    if m := re.fullmatch(r"ILLEGAL AT STEP (\d+)", value):
        step = _ref_number(m.group(1))
        return ("number_too_large", None) if step is None else ("ok", {"verdict": "ILLEGAL", "step": step})
    if not (m := re.fullmatch(r"LEGAL , GOAL (MET|NOT MET)", value)):
        return "bad_answer_value", None
    status, state = _ref_state(family, text)
    return (status, None) if state is None else ("ok", {"verdict": "LEGAL", "goal": m.group(1) == "MET", "state": state})


_REF_STEP = re.compile(r"[ \t]*[A-Za-z_]\w*[ \t]*(=[ \t]*[A-Za-z_]\w*[ \t]*)?\(.*\)[ \t]*", re.ASCII | re.DOTALL)
_REF_FILLER = re.compile(r"[ \t]*(#.*)?", re.DOTALL)


def reference_artifact(text: str) -> tuple[str, str | None]:
    """The extraction rule written as a line-kind string and one regular expression over it: each line is a
    fence (f), step-shaped (s), blank or comment (b) or prose (p); blocks are found first, then runs of
    s(b*s)* outside them."""
    lines = text.splitlines()
    kinds = "".join("f" if _REF_FENCE.match(line) else "s" if _REF_STEP.fullmatch(line)
                    else "b" if _REF_FILLER.fullmatch(line) else "p" for line in lines)
    if kinds.count("f") % 2:
        return "unclosed_code_block", None
    found: list[tuple[int, int]] = []
    outside = list(kinds)
    for m in re.finditer(r"f([^f]*)f", kinds):
        outside[m.start():m.end()] = "x" * (m.end() - m.start())
        if "s" in m.group(1):
            found.append((m.start(1), m.end(1)))
    found += [(m.start(), m.end()) for m in re.finditer(r"s(?:b*s)*", "".join(outside))]
    if len(found) != 1:
        return ("no_artifact" if not found else "several_artifacts"), None
    start, end = found[0]
    return "ok", "\n".join(lines[start:end]) + "\n"


# --------------------------------------------------------------------------- hostile replies

_PIECES = [
    "ANSWER", "answer", "Answer", "ANſWER", "ANSWEß", "STATE", "state", "ſtate", "STATES", ":", "::", " ", "  ", "\t",
    "\u00a0", "\u2003", "\u3000", "\n", "\n", "\r\n", "\r", "\u2028", "\x0b", "\x1c", "\x85", "*", "**", "_", "`",
    "```", "```py", "```c++", "````", ".", "..", ",", "LEGAL", "legal", "ILLEGAL", "ILLEGAL AT STEP", "GOAL",
    "MET", "NOT", "NOT MET", "AT", "STEP", "0", "3", "07", "\u0663", "\uff17", "9" * (MAX_NUMBER_DIGITS + 1),
    "1" * MAX_NUMBER_DIGITS, "H-0A1F", "h-0a1f", "[", "]", "ore", "coal", "=", "@", "lathe1", "cut", "(empty)",
    "empty", "EMPTY", "-", "- ", "* ", "\ud800", "\udfff", "ß", "ı", "İ", "\u212a", "é", "#", "a()", "x",
]
_HOSTILE = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)
#: Any Python string, lone surrogates included.
_ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=80)
_PAD = st.lists(st.sampled_from(["", " ", "\t", "\u00a0", "*", "**", "_", "`", ".", "\ud800"]), max_size=4).map("".join)
_VALUE = st.sampled_from(["LEGAL", "illegal", "ILLEGAL AT STEP 2", "illegal at  step 0", "LEGAL, GOAL MET",
                          "legal ,goal not met", "H-0A1F", "[H-0A1F]", "ore = 2", "cut = lathe1 @ 3", "(empty)",
                          "ILLEGAL AT STEP " + "9" * (MAX_NUMBER_DIGITS + 1), "", "x", "LEGAL ILLEGAL",
                          "w1 = 1, 2", "w1 = [0 ,3]"])
_KEY = st.sampled_from(["ANSWER", "answer", "ANſWER", "STATE", "State", "ſtate", "ANSWERS", "STAT"])
#: A keyed line: padding, key, padding, colon, padding, value, padding (each part may be odd).
_KEYED_LINE = st.tuples(_PAD, _KEY, _PAD, st.sampled_from([":", ": ", "", "=", "::"]), _PAD, _VALUE, _PAD).map(
    "".join)
_BLOCK_LINE = st.one_of(_KEYED_LINE, st.sampled_from(["", " ", "```", "```text", "ore = 1", "coal = 0", "ore=1",
                                                      "- cut = lathe1 @ 0", "* t = m @ 1", "`ore = 3`", "-", "EMPTY",
                                                      "(empty)", "ore = " + "5" * 30, "prose", "w1 = 1, 2",
                                                      "w2 = [0, 4]", "w3=[1", "w1 = 2 ]", "w1 = 1,,2", "w1 = 1 2",
                                                      "w1 = [[1]", "w1 = [1, 2]]", "w1 = \u0663", "w1 = 1,\u00a02",
                                                      "w1 = 0, " + "7" * 19, "w1 = ,1", "w1 = 1,"]), _HOSTILE)
_LINES = st.tuples(st.lists(_BLOCK_LINE, max_size=8), st.sampled_from(["\n", "\r\n", "\u2028"])).map(
    lambda parts: parts[1].join(parts[0]))
#: Lines of a synthesis answer: steps and bindings (well formed, odd and near misses), blanks, comments, fences
#: and prose, so that answers with one, several or no candidate artifacts are all drawn.
_ANSWER_LINE = st.sampled_from([
    "a()", "move(ore, 2)", "  b(x)  ", "\tc( y ,1 )", "w1 = f(a)", "goal=g( w1 )", "w = f(a) ", "a() b()", "a)(",
    "a(", "(a)", "1a()", "_x()", "a ()", "a\u00a0()", "\u00a0a()", "a()\u00a0", "é()", "w1 == f(a)", "w1 = = f(a)",
    "= f(a)", "w1 = f", "a(\ud800)", "\ud800", "", " ", "\t", "#", "# a()", "  # note", "```", "```text", "``` py",
    "````", "Here is the plan:", "prose", "Step 1: a()", "- a()", "1. a()", "`a()`", "**a()**"])
_ANSWER = st.tuples(st.lists(_ANSWER_LINE, max_size=12), st.sampled_from(["\n", "\r\n", "\u2028"])).map(
    lambda parts: parts[1].join(parts[0]))
_TEXT = st.one_of(_LINES, _HOSTILE, _ANY_TEXT)

_LEGAL_STATE = "ANSWER: LEGAL, GOAL MET\nSTATE:\n"


def _suite(condition: str, kind: str, family: str, text: str) -> tuple[str, Any]:
    return parse_control({"condition": condition, "kind": kind}, family, text)


@settings(max_examples=400)
@given(text=_TEXT, form=st.sampled_from(FORMATS))
@example(text="ANSWER: LEGAL* .", form=FORMATS[0])
@example(text="ANSWER **: ILLEGAL", form=FORMATS[0])
@example(text="STATE:\n(empty)\n``", form=FORMATS[1])
@example(text="STATE:\nEMPTY", form=FORMATS[1])
@example(text="\ud800ANSWER: ILLEGAL AT STEP 3\ud800", form=FORMATS[4])
def test_control_parsers_never_raise_and_agree_with_the_rescorer_and_the_regex_language(text, form) -> None:
    status, parsed = got = _suite(*form, text)
    assert status in PARSE_STATUSES and (parsed is None) == (status != "ok")
    assert rescore.parse_text(*form, text) == got
    assert reference_parse(*form, text) == got


@settings(max_examples=200)
@given(body=st.one_of(_LINES, _HOSTILE), family=st.sampled_from(["token_workshop", "schedule", "dataflow"]))
def test_state_blocks_agree(body: str, family: str) -> None:
    """State blocks behind a legal answer: the state reader is reached on every reply."""
    text = _LEGAL_STATE + body
    for form in (("E", "goal", family), ("P", "effect", family)):
        got = _suite(*form, text)
        assert got[0] in PARSE_STATUSES
        assert rescore.parse_text(*form, text) == got == reference_parse(*form, text)


@settings(max_examples=200)
@given(text=_TEXT)
@example(text="```\n```")
@example(text="``` py\na()\n```")
@example(text="\ud800```\na()\n```")
def test_artifact_extraction_never_raises_and_agrees(text: str) -> None:
    got = extract_artifact(text)
    assert got[0] in PARSE_STATUSES
    assert rescore.artifact(text) == got == reference_artifact(text)


@settings(max_examples=600)
@given(text=_ANSWER)
def test_artifact_extraction_agrees_on_answer_shaped_text(text: str) -> None:
    """Answers drawn from step, blank, comment, fence and prose lines: the three readings of the one rule agree,
    and an extracted artifact holds a step-shaped line and no fence."""
    got = extract_artifact(text)
    assert rescore.artifact(text) == got == reference_artifact(text)
    if got[0] == "ok":
        assert got[1] is not None and any(rescore.step_shaped(line) for line in got[1].splitlines())


# --------------------------------------------------------------------------- numbers and odd text


@pytest.mark.parametrize(("text", "form", "expected"), [
    ("ANSWER: ILLEGAL AT STEP " + "9" * 5000, FORMATS[4], ("number_too_large", None)),
    ("ANSWER: ILLEGAL AT STEP " + "0" * 5000 + "1", FORMATS[4], ("number_too_large", None)),
    ("ANSWER: ILLEGAL AT STEP " + "9" * MAX_NUMBER_DIGITS, FORMATS[4],
     ("ok", {"verdict": "ILLEGAL", "step": int("9" * MAX_NUMBER_DIGITS)})),
    ("ANSWER: ILLEGAL AT STEP " + "1" * (MAX_NUMBER_DIGITS + 1), FORMATS[4], ("number_too_large", None)),
    ("STATE:\nore = " + "7" * 5000, FORMATS[1], ("number_too_large", None)),
    ("STATE:\nore = " + "7" * 5000 + "\nore = 1", FORMATS[1], ("bad_state_block", None)),
    ("STATE:\nore = " + "7" * 5000 + "\ncoal = x", FORMATS[1], ("bad_state_block", None)),
    ("STATE:\ncut = lathe1 @ " + "3" * 5000, FORMATS[2], ("number_too_large", None)),
    (_LEGAL_STATE + "ore = " + "4" * 4301, FORMATS[4], ("number_too_large", None)),
    ("ANSWER: ILLEGAL AT STEP \u0663", FORMATS[4], ("ok", {"verdict": "ILLEGAL", "step": 3})),
    ("\ud800", FORMATS[0], ("no_answer_line", None)),
    ("ANSWER: \ud800LEGAL", FORMATS[0], ("bad_answer_value", None)),
    ("ANSWER: LEGAL\ud800\nANSWER:\udfff", FORMATS[0], ("several_answer_lines", None)),
    ("STATE:\n\ud800 = 1", FORMATS[1], ("bad_state_block", None)),
    ("**ANſWER:** legal.", FORMATS[0], ("ok", {"verdict": "LEGAL"})),
])
def test_huge_numbers_and_odd_text_are_coded(text: str, form, expected) -> None:
    assert _suite(*form, text) == expected
    assert rescore.parse_text(*form, text) == expected


def test_an_artifact_with_lone_surrogates_or_huge_numbers_is_graded_not_raised() -> None:
    world = worlds.load_world(worlds.shipped_worlds()[0])
    assert extract_artifact("```\n\ud800a()\n```") == ("no_artifact", None) == rescore.artifact("```\n\ud800a()\n```")
    for text in ("```\nmove(" + "9" * 5000 + ")\n```", "a(" + "1" * 4301 + ")",
                 "```\n\ud800\na()\n```"):
        status, artifact = extract_artifact(text)
        assert status == "ok" and rescore.artifact(text) == (status, artifact)
        assert worlds.check(world, artifact).status is worlds.Status.MALFORMED


# --------------------------------------------------------------------------- linear time

#: Replies of adversarial shape for a reply of about ``n`` characters.
SHAPES = {
    "answer value then spaces": lambda n: "ANSWER: x" + " " * n + "x",
    "spaces only": lambda n: " " * n,
    "padding runs": lambda n: "ANSWER" + " *" * (n // 2) + ":",
    "marks and periods after the value": lambda n: "ANSWER: LEGAL" + " .*" * (n // 3) + "x",
    "state value then spaces": lambda n: "STATE: x" + " " * n + "x",
    "many answer lines": lambda n: "ANSWER: LEGAL\n" * (n // 14),
    "many state lines": lambda n: "STATE:\n" * (n // 7),
    "a long state block": lambda n: _LEGAL_STATE + "".join(f"t{i} = {i}\n" for i in range(n // 12)),
    "a long numeral": lambda n: "ANSWER: ILLEGAL AT STEP " + "9" * n,
    "a long state numeral": lambda n: _LEGAL_STATE + "ore =" + " " * (n // 2) + "7" * (n // 2),
    "a long wire value": lambda n: _LEGAL_STATE + "w1 = [" + "1 , " * (n // 4) + "x",
    "a wire value of spaced numerals": lambda n: _LEGAL_STATE + "w1 = " + "1 " * (n // 2) + "]",
    "a long name": lambda n: _LEGAL_STATE + "a" * n + " = ",
    "many fences": lambda n: "```\n" * (n // 4),
    "an open fence": lambda n: "```" + "a" * n,
    "many step runs": lambda n: "a()\nprose\n" * (n // 10),
    "one long run with comments": lambda n: "a(x)\n# c\n\n" * (n // 10),
    "a long step name": lambda n: "a" * n + "(",
    "a long binding": lambda n: "w" + " " * (n // 2) + "=" + " " * (n // 2) + "f(",
    "many blocks": lambda n: "```\na()\n```\n" * (n // 12),
    "keywords without colon": lambda n: "ANSWER " * (n // 7),
}


def _every_parser(text: str) -> None:
    for form in FORMATS:
        _suite(*form, text)
    extract_artifact(text)


def _every_rescorer_parser(text: str) -> None:
    for form in FORMATS:
        rescore.parse_text(*form, text)
    rescore.artifact(text)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("parse", [_every_parser, _every_rescorer_parser], ids=["suite", "rescorer"])
def test_parsing_time_is_linear_in_the_reply_length(shape: str, parse) -> None:
    """64 replies of 1 KB and one reply of 64 KB take about the same time (best of 3; a quadratic parser: 64 x)."""
    check_linear_time(parse, SHAPES[shape], shape)
