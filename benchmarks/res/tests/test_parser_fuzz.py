"""Hostile generations: the answer parser never raises, agrees with the rescorer, and runs in linear time."""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from benchmarks.core.selfcheck import check_linear_time
from benchmarks.res.prompts import parse_answer
from benchmarks.res.spec import HERE

_spec = importlib.util.spec_from_file_location("res_rescore_fuzz", HERE / "rescore.py")
rescore = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore)

_PIECES = ["A", "B", "a", "b", "AB", " ", "\n", ".", ":", "Answer", "ß", "ﬀ", "ǅ", "İ", "ı", "\u212a", "é", "Å",
           "\ud800", "\udfff", "9" * 30, "<|im_end|>", "(", ")", "Z", "@", "[", "`"]
#: Any Python string, lone surrogates included.
_ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=80)


@settings(max_examples=500)
@given(st.one_of(st.lists(st.sampled_from(_PIECES), max_size=16).map("".join), _ANY_TEXT))
@example("\ud800A\udfff")
@example("ßA")  # upper-casing lengthens the text before the letter is found
@example("@A[")
def test_answer_parser_never_raises_and_agrees_with_the_rescorer(text: str) -> None:
    got = parse_answer(text)
    assert got in (None, "A", "B")
    assert rescore.decision_letter(text) == got


SHAPES = {
    "standalone letters": lambda n: "A " * (n // 2),
    "letters in words": lambda n: "AB" * (n // 2),
    "lower-case letters": lambda n: "a" * n,
    "lone surrogates": lambda n: "\ud800" * n,
    "prose then a letter": lambda n: "x" * n + " B",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("parse", [parse_answer, rescore.decision_letter], ids=["suite", "rescorer"])
def test_parsing_time_is_linear_in_the_generation_length(shape: str, parse) -> None:
    """64 generations of 1 KB and one of 64 KB take about the same time (best of 3; a quadratic parser: 64 x)."""
    check_linear_time(parse, SHAPES[shape], shape)
