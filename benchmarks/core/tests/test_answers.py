"""What a record keeps of an answer: whole up to the limit, else its start, with the whole one's length and hash."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import models
from benchmarks.core.answers import ANSWER_TOO_LONG, EXCERPT_CHARS, keep_answer


def response(text: str, error: str | None = None) -> models.Response:
    return models.Response(index=3, text=text, token_ids=(1, 2), finish_reason="error" if error else "length",
                           error=error, prompt_tokens=7)


@given(text=st.text(st.characters(codec=None), max_size=40), limit=st.integers(1, 30))
def test_an_answer_is_kept_whole_up_to_the_limit_and_cut_after_it(text: str, limit: int) -> None:
    kept = keep_answer(response(text), limit)
    assert kept.chars == len(text)
    assert kept.sha256 == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if len(text) <= limit:
        assert kept.response == response(text) and not kept.cut
    else:
        assert kept.cut and kept.response.text == text[:min(limit, EXCERPT_CHARS)]
        assert kept.response.finish_reason == "error"
        assert kept.response.error == ANSWER_TOO_LONG and str(len(text)) in kept.response.error_detail
        assert (kept.response.index, kept.response.token_ids, kept.response.prompt_tokens) == (3, (1, 2), 7)


def test_the_limit_itself_is_kept_whole_and_one_more_is_cut() -> None:
    assert not keep_answer(response("abcd"), 4).cut
    cut = keep_answer(response("abcde"), 4)
    assert cut.cut and cut.response.text == "abcd" and cut.chars == 5
    assert cut.sha256 in cut.response.error_detail and "max_answer_chars of 4" in cut.response.error_detail


def test_a_cut_answer_keeps_an_excerpt_whatever_the_limit() -> None:
    text = "y" * 5000
    for limit in (EXCERPT_CHARS - 1, EXCERPT_CHARS, EXCERPT_CHARS + 1, 4999):
        kept = keep_answer(response(text), limit)
        assert kept.cut and kept.response.text == "y" * min(limit, EXCERPT_CHARS) and kept.chars == 5000
    assert not keep_answer(response(text), 5000).cut


def test_a_backend_error_keeps_its_code_and_text() -> None:
    failed = response("x" * 50, error="http_error")
    kept = keep_answer(failed, 4)
    assert kept.response is failed and not kept.cut and kept.chars == 50


def test_a_lone_surrogate_is_hashed_not_refused() -> None:
    kept = keep_answer(response("a\ud800b"), 2)
    assert kept.cut and kept.response.text == "a\ud800" and kept.chars == 3
    assert kept.sha256 == hashlib.sha256("a\ud800b".encode("utf-8", "surrogatepass")).hexdigest()


@pytest.mark.parametrize("limit", [0, -1, 2.5, True, "8"])
def test_a_limit_that_is_not_a_positive_int_is_refused(limit: object) -> None:
    with pytest.raises(ValueError, match="max_answer_chars must be a positive integer"):
        keep_answer(response("abc"), limit)  # type: ignore[arg-type]
