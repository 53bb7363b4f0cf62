"""Self-checks of the answer parser and the prompt layout (no model)."""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.res.prompts import build_chat, check_label_tokens, parse_answer
from benchmarks.res.spec import HERE
from fixtures.res import CONDITIONS, build_res_fixtures, factor_states
from models import ModelDescription, ModelError

_spec = importlib.util.spec_from_file_location("res_rescore", HERE / "rescore.py")
rescore = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore)


@pytest.mark.parametrize(("text", "expected"), [
    ("A", "A"), ("B", "B"), (" b\n", "B"), ("a.", "A"), ("Answer: B", "B"), ("(A)", "A"), ("A<|im_end|>", "A"),
    ("AB", None), ("A or B", None), ("A. A", None), ("", None), ("Both", None), ("BABA", None),
    ("The answer is B", "B"), ("It is a B", None),  # upper-cased, the article "a" is a standalone A
    ("I choose: b", "B"), ("ÅB", "B"),
])
def test_parser_examples(text: str, expected: str | None) -> None:
    assert parse_answer(text) == expected


@given(st.text(alphabet=st.sampled_from(list("ABab .:\n()-xyzXYZ1é")), max_size=12))
def test_parser_agrees_with_the_independent_rescorer(text: str) -> None:
    assert parse_answer(text) == rescore.decision_letter(text)


@given(st.text(max_size=20))
def test_parser_accepts_only_a_single_standalone_letter(text: str) -> None:
    parsed = parse_answer(text)
    assert parsed in {None, "A", "B"}
    if parsed is not None:
        assert parsed in text.upper()


@pytest.mark.parametrize("variant", ["preregistered", "balanced"])
def test_prompt_layout(variant: str) -> None:
    sets = build_res_fixtures(variant)
    for condition in CONDITIONS:
        for row in sets[condition]:
            system, user = build_chat(row)
            assert system["role"] == "system" and user["role"] == "user"
            assert "reply with exactly one letter, A or B" in system["content"]
            lines = user["content"].splitlines()
            assert lines[0] == f"TASK: {row['task']}" and lines[1] == f"PERSONA: {row['persona']}"
            states = factor_states(row)
            k = len(states)
            assert lines[2] == "CURRENT EXECUTOR:" and lines[3 + k] == "PEER:"
            for offset, (name, own, peer) in enumerate(states):
                assert lines[3 + offset] == f"- {name}: {'SUPPORTS' if own else 'BLOCKS'}"
                assert lines[4 + k + offset] == f"- {name}: {'SUPPORTS' if peer else 'BLOCKS'}"
            codes = [line for line in lines if line.startswith("ACTION CODES")]
            if condition == "minimal_owner_indexed":
                assert codes == [f"ACTION CODES: {row['allow_code']} = permitted, {row['block_code']} = blocked"]
            else:
                assert codes == []


class _Vocabulary:
    """A stand-in tokenizer with a fixed table: only the guard's own logic is under test here."""

    def __init__(self, table):
        self.table = table

    def encode(self, text):
        return self.table[text]

    def describe(self):
        return ModelDescription(id="table-tokenizer", revision="0" * 40, backend="test")


@pytest.mark.parametrize("table", [{"A": [5, 9], "B": [6]}, {"A": [5], "B": [5]}, {"A": [], "B": [6]}])
def test_labels_must_be_single_distinct_tokens(table) -> None:
    with pytest.raises(ModelError, match="single distinct tokens"):
        check_label_tokens(_Vocabulary(table), ("A", "B"))
    assert check_label_tokens(_Vocabulary({"A": [5], "B": [6]}), ("A", "B")) == {"A": 5, "B": 6}
