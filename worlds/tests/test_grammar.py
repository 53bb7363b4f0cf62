"""The artifact grammar: accepted forms, malformed positions, never raising, round trip."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worlds import CheckerUsageError, Step, format_steps, parse_candidate


def test_parses_steps_with_spacing_comments_and_crlf():
    text = "# plan\r\n  smelt_a( )\r\n\r\nforge( ingot_a ,3 )\t\n"
    r = parse_candidate(text)
    assert r.ok
    assert r.steps == (Step("smelt_a", (), 2), Step("forge", ("ingot_a", 3), 4))


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("", 1, 1),
        ("   \n# only a comment\n", 1, 1),
        ("smelt_a(\n", 1, 9),
        ("smelt_a\n", 1, 8),
        ("1abc()\n", 1, 1),
        ("a()\nb(x,)\n", 2, 5),
        ("a(x y)\n", 1, 5),
        ("a(x) b()\n", 1, 6),
        ("a(007)\n", 1, 3),
        ("a(-1)\n", 1, 3),
        ("a(x)\n  ä()\n", 2, 3),
        ("a(x)) \n", 1, 5),
    ],
)
def test_malformed_text_reports_first_position(text, line, column):
    r = parse_candidate(text)
    assert not r.ok
    assert (r.line, r.column) == (line, column)
    assert r.message


def test_steps_before_the_error_are_kept():
    r = parse_candidate("a()\nb(c)\n???\n")
    assert not r.ok and [s.name for s in r.steps] == ["a", "b"] and r.line == 3


def test_non_string_is_a_usage_error():
    with pytest.raises(CheckerUsageError, match="must be str"):
        parse_candidate(b"a()")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises_on_any_text(text):
    r = parse_candidate(text)
    assert r.ok or (r.line is not None and r.column is not None and r.message)


_names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,6}\Z")
_args = st.one_of(_names, st.integers(min_value=0, max_value=10**6))
_steps = st.lists(
    st.tuples(_names, st.lists(_args, max_size=4)), min_size=1, max_size=8
)


@settings(max_examples=150, deadline=None)
@given(_steps)
def test_format_then_parse_round_trips(raw_steps):
    steps = [Step(n, tuple(a), i + 1) for i, (n, a) in enumerate(raw_steps)]
    r = parse_candidate(format_steps(steps))
    assert r.ok and r.steps == tuple(steps)
