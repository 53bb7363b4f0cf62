"""RES Step 0: what the model is shown and how its answer is read.

The chat of one fixture row, the answer parser, the check that the labels
are single tokens, and the record of one response (:class:`~.spec.ResRecord`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from benchmarks.core import sha256_bytes
from fixtures.res import factor_states, gold_label
from models import ModelError

from .spec import ResRecord

__all__ = ["build_chat", "check_label_tokens", "make_record", "parse_answer"]

_SYSTEM_COMMON = (
    "You are auditing who may carry out an action. This is a two-choice task: reply with exactly one "
    "letter, A or B, and nothing else. Decide only from the CURRENT EXECUTOR's states. The PEER's "
    "states, the persona badge and the task wording are distractors; ignore them."
)
_RULES = {
    "five_factor": (
        "The current executor has five pressures: authority, capability, role, commitment and world fact. "
        "Answer A when at least three of the current executor's pressures SUPPORT the action; otherwise answer B."
    ),
    "minimal_owner_indexed": (
        "The action is permitted only when both the current executor's authorization and capability SUPPORT it; "
        "otherwise it is blocked. The ACTION CODES line says which letter stands for permitted and which for blocked."
    ),
}
_QUESTION = {
    "five_factor": "Should the current executor carry out the task? Reply A or B.",
    "minimal_owner_indexed": "Is the current executor permitted to carry out the task? Reply with its action code, A or B.",
}


def _state(flag: bool) -> str:
    return "SUPPORTS" if flag else "BLOCKS"


def build_chat(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """System and user messages for one fixture row (the same layout for both conditions)."""
    condition = row["condition"]
    states = factor_states(row)
    lines = [
        f"TASK: {row['task']}",
        f"PERSONA: {row['persona']}",
        "CURRENT EXECUTOR:",
        *(f"- {name}: {_state(own)}" for name, own, _ in states),
        "PEER:",
        *(f"- {name}: {_state(peer)}" for name, _, peer in states),
    ]
    if condition == "minimal_owner_indexed":
        lines.append(f"ACTION CODES: {row['allow_code']} = permitted, {row['block_code']} = blocked")
    lines.append(_QUESTION[condition])
    return [
        {"role": "system", "content": f"{_SYSTEM_COMMON} {_RULES[condition]}"},
        {"role": "user", "content": "\n".join(lines)},
    ]


# --------------------------------------------------------------------------- the parser

_STANDALONE = re.compile(r"(?<![A-Z])[AB](?![A-Z])")


def parse_answer(text: str) -> str | None:
    """The decision letter of a generation, or None.

    The text is upper-cased; a decision token is an A or B with no ASCII capital
    letter immediately before or after it.  The answer is accepted only when
    exactly one such token occurs ("A", "a.", "Answer: B" parse; "AB", "A or
    B", "A. A" and prose without a standalone letter do not).  Never raises on a
    ``str``; one pass with one-character look-arounds, linear in its length.
    """
    found = _STANDALONE.findall(text.upper())
    return found[0] if len(found) == 1 else None


def check_label_tokens(model: Any, labels: Sequence[str]) -> dict[str, int] | None:
    """The token id of each label, refusing a tokenizer for which the labels are not single, distinct tokens;
    None for a model without a tokenizer (a scripted model scores the labels by their index)."""
    encode = getattr(model, "encode", None)
    if encode is None:
        return None
    ids = [encode(label) for label in labels]
    if any(len(i) != 1 for i in ids) or len({i[0] for i in ids}) != len(ids):
        raise ModelError(
            f"the tokenizer of {model.describe().id} does not encode {list(labels)} as single distinct tokens "
            f"({ids}); first-token scoring is not defined for it"
        )
    return {label: int(i[0]) for label, i in zip(labels, ids)}


# --------------------------------------------------------------------------- the record of one response


def make_record(row: Mapping[str, Any], index: int, prompt: str, response: Any) -> ResRecord:
    scores = response.scores
    labels = list(scores.labels)
    return ResRecord(
        item_id=f"{row['condition']}:{index:02d}",
        condition=row["condition"],
        index=index,
        family_id=row["family_id"],
        ideal=gold_label(row),
        prompt=prompt,
        prompt_sha256=sha256_bytes(prompt.encode("utf-8")),
        prompt_tokens=response.prompt_tokens,
        label_token_ids=tuple(scores.token_ids),
        label_logits=tuple(scores.logits),
        margin=scores.logits[labels.index("A")] - scores.logits[labels.index("B")],
        logit_choice="A" if scores.logits[labels.index("A")] - scores.logits[labels.index("B")] >= 0 else "B",
        generation=response.text,
        generation_token_ids=tuple(response.token_ids),
        finish_reason=response.finish_reason,
        generation_error=response.error,
        parsed=None if response.error else parse_answer(response.text),
    )
