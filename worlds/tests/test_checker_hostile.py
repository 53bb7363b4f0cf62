"""Hostile candidate text: the checker never raises, codes huge integers as malformed, and reads text in linear time."""

from __future__ import annotations

import gc
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from worlds import Reason, Status, check, load_world, parse_candidate
from worlds._grammar import MAX_INT_DIGITS

from ._worlds import SHIPPED

WORLDS = {p.stem: load_world(p) for p in SHIPPED}
TW = WORLDS["tw_001"]

_PIECES = ["a", "smelt_a", "forge", "(", ")", ",", " ", "\t", "\n", "\r\n", "#", "0", "7", "01", "9" * 30,
           "9" * (MAX_INT_DIGITS + 1), "ingot_a", "\ud800", "\udfff", "é", "\u0663", "\u00a0", "```", "x"]


@settings(max_examples=300)
@given(st.sampled_from(sorted(WORLDS)), st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=20).map("".join),
    st.text(alphabet=st.characters(codec=None, categories=None), max_size=60)))
@example("tw_001", "forge(ingot_a, " + "9" * 5000 + ")")
@example("tw_001", "\ud800smelt_a()")
def test_checker_never_raises_on_hostile_text(stem: str, text: str) -> None:
    result = check(WORLDS[stem], text)
    assert result.status in (Status.VALID, Status.INVALID, Status.MALFORMED)
    assert result.status is not Status.MALFORMED or (result.line is not None and result.message)


def test_an_integer_literal_past_the_digit_bound_is_malformed_and_within_it_out_of_range() -> None:
    within = check(TW, "forge(ingot_a, " + "9" * MAX_INT_DIGITS + ")\n")
    assert within.status is Status.INVALID and within.reason is not Reason.SCHEMA
    for digits in (MAX_INT_DIGITS + 1, 4301, 100_000):
        past = check(TW, "smelt_a()\nforge(ingot_a, " + "9" * digits + ")\n")
        assert past.status is Status.MALFORMED and (past.line, past.column) == (2, 16)
        assert f"longer than {MAX_INT_DIGITS} digits" in past.message


SHAPES = {
    "one long name": lambda n: "a" * n + "()",
    "spaces inside a step": lambda n: "a(" + " " * n + ")",
    "many arguments": lambda n: "a(" + "x," * (n // 2) + "x)",
    "many steps": lambda n: "smelt_a()\n" * (n // 10),
    "many comments": lambda n: "# c\n" * (n // 4),
    "a long integer": lambda n: "a(" + "9" * n + ")",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_parsing_time_is_linear_in_the_text_length(shape: str) -> None:
    """64 candidates of 1 KB and one of 64 KB take about the same time (best of 3; a quadratic parser: 64 x)."""
    times = []
    for text, repeat in ((SHAPES[shape](1024), 64), (SHAPES[shape](65536), 1)):
        best = float("inf")
        gc.disable()  # the collector's pauses are noise here
        try:
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(repeat):
                    parse_candidate(text)
                    check(TW, text)
                best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
        times.append(best)
    assert times[1] < 1.0 and times[1] <= 8 * times[0] + 0.005, (shape, times)
