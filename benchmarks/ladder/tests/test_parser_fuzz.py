"""Hostile replies: the decision parser never raises, agrees with the rescorer and a regex definition, in linear time."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from benchmarks.core.selfcheck import check_linear_time
from benchmarks.ladder.prompts import parse_decision
from benchmarks.ladder.spec import HERE

_spec = importlib.util.spec_from_file_location("ladder_rescore_fuzz", HERE / "rescore.py")
rescore = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore)

# The reply format as backtracking regular expressions: the plainest statement of what the parser accepts, and
# super-linear (quadratic in a run of spaces after a marker, in the number of unclosed <think> tags), so they only
# ever see short texts.
_REF_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_REF_MARKER = re.compile(r"decision\s*[:=\-]\s*\**\s*(approve|reject)(?:d|ed)?\b", re.IGNORECASE)
_REF_BARE = re.compile(r"^[\s\W]*(approve|reject)(?:d|ed)?[\s\W]*$", re.IGNORECASE)


def reference_decision(text: str) -> str | None:
    visible = _REF_THINK.sub(" ", text)
    if "<think>" in visible.lower():
        return None
    marks = _REF_MARKER.findall(visible)
    if marks:
        return marks[-1].lower()
    bare = _REF_BARE.match(visible)
    return bare.group(1).lower() if bare else None


_PIECES = ["DECISION", "decision", "Decision", "DECıSION", "DECİSION", "deciſion", "DECISIONS", ":", "=", "-", "–",
           " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2028", "**", "*", "APPROVE", "approve", "Approved", "approveed",
           "APPROVEDX", "REJECT", "rejected", "rejectd", "<think>", "</think>", "<THINK>", "</Think>", "<thınk>",
           "<thİnk>", "<thin\u212a>", "</thin\u212a>", "<think", "maybe", ".", "!", "_", "x", "Approve", "é",
           "\u0663", "\ud800", "\udfff", "ß", "9" * 30]
_HOSTILE = st.lists(st.sampled_from(_PIECES), max_size=16).map("".join)
#: Any Python string, lone surrogates included.
_ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=80)


@settings(max_examples=500)
@given(st.one_of(_HOSTILE, _ANY_TEXT))
@example("<thınk>DECISION: APPROVE")  # a dotless-i tag is dropped when closed, yet is no open tag by str.lower()
@example("<thınk>x</THINK>decision=rejected")
@example("<thin\u212a>DECISION: APPROVE")  # the Kelvin sign lower-cases to k: an open tag
@example("DECİSION: reject")
@example("DECISION: APPROVEDecision: reject")
@example("decision:approveed\ud800")
@example("Approved_")
@example("<think>" * 3 + "</think>DECISION: REJECT")
def test_decision_parser_never_raises_and_agrees_with_the_rescorer_and_the_regex_language(text: str) -> None:
    got = parse_decision(text)
    assert got in (None, "approve", "reject")
    assert rescore.decision_of(text) == got
    assert reference_decision(text) == got


def test_the_rescorer_folds_letters_as_re_ignorecase_does() -> None:
    """Every character that re.IGNORECASE takes for a letter of the parser's words, and no other, folds to it."""
    letters = sorted(set("thinkdecisionapprovereject"))
    candidates = re.compile("[" + "".join(letters) + "]", re.IGNORECASE)
    found = [chr(cp) for cp in range(sys.maxunicode + 1) if candidates.fullmatch(chr(cp))]
    for letter in letters:
        same = {c for c in found if re.fullmatch(letter, c, re.IGNORECASE)}
        assert same == {c for c in found if rescore.folded(c) == letter}, letter


@pytest.mark.parametrize(("text", "expected"), [
    ("\ud800", None),
    ("DECISION: \ud800APPROVE", None),
    ("\ud800DECISION: APPROVE\udfff", "approve"),
    ("DECISION: REJECT " + "9" * 5000, "reject"),
    ("decision:" + " " * 5000 + "**" + " " * 5000 + "approve", "approve"),
    ("<think>" * 1000 + "DECISION: APPROVE", None),
    ("<think>" + "</think>" * 1000 + "DECISION: APPROVE", "approve"),
])
def test_odd_and_long_replies_are_read(text: str, expected: str | None) -> None:
    assert parse_decision(text) == expected
    assert rescore.decision_of(text) == expected


#: Replies of adversarial shape for a reply of about ``n`` characters.
SHAPES = {
    "spaces after a marker": lambda n: "decision:" + " " * n,
    "spaces and stars after a marker": lambda n: "decision: " + " " * (n // 2) + "*" * (n // 2) + " x",
    "many markers": lambda n: "decision: " * (n // 10),
    "many decisions": lambda n: "DECISION: APPROVE\n" * (n // 18),
    "many open think tags": lambda n: "<think>" * (n // 7),
    "many close think tags": lambda n: "</think>" * (n // 8) + "DECISION: REJECT",
    "many closed think blocks": lambda n: "<think>x</think>" * (n // 16) + "reject",
    "one open think block": lambda n: "<think>" + "x" * n,
    "punctuation before a bare word": lambda n: "." * n + "approve",
    "words": lambda n: "approve " * (n // 8),
    "spaces": lambda n: " " * n,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("parse", [parse_decision, rescore.decision_of], ids=["suite", "rescorer"])
def test_parsing_time_is_linear_in_the_reply_length(shape: str, parse) -> None:
    """64 replies of 1 KB and one reply of 64 KB take about the same time (best of 3; a quadratic parser: 64 x)."""
    check_linear_time(parse, SHAPES[shape], shape)
