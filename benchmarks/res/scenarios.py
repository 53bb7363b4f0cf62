"""Scripted RES models for the self-checks, one per classification the built-in scripted models do not reach,
and the oracle with a tokenizer (for the label token ids in provenance).

A run names them with ``-p benchmarks.res.scenarios``; importing the module registers them once per process,
so runs in a subprocess and runs in the test's own process see the same classes.
"""

from __future__ import annotations

from dataclasses import dataclass

import models
from models import Opposite, Oracle, Prose, ScriptedModel


@dataclass(frozen=True)
class ByCondition(models.Policy):
    five: models.Policy
    minimal: models.Policy

    def __call__(self, prompt):
        return (self.minimal if "ACTION CODES" in prompt else self.five)(prompt)

    def describe(self):
        return {"policy": "ByCondition", "five": self.five.describe(), "minimal": self.minimal.describe()}


def right(gold):
    return Oracle(gold)


def wrong(gold):
    return Opposite(Oracle(gold), ("A", "B"))


def scenario(name, scorer, writer):
    if models.model_kind(name) is None:  # once per process
        models.register_model(name, "scripted", name, lambda gold, **_: ScriptedModel(name, scorer(gold), writer(gold)))


scenario("scripted-res-mismatch", wrong, right)
scenario("scripted-res-prose", right, lambda gold: Prose("I would need more context before deciding."))
scenario("scripted-res-five-factor", lambda g: ByCondition(wrong(g), right(g)), lambda g: ByCondition(wrong(g), right(g)))
scenario("scripted-res-mixed", right, lambda g: ByCondition(right(g), wrong(g)))


class WithTokenizer(ScriptedModel):
    """The oracle with a tokenizer: each label is one token (A -> 330, B -> 426)."""

    def encode(self, text):
        return [{"A": 330, "B": 426}[text]] if text in ("A", "B") else [1, 2]


if models.model_kind("scripted-res-tokenizer") is None:
    models.register_model("scripted-res-tokenizer", "scripted", "oracle with a tokenizer",
                          lambda gold, **_: WithTokenizer("scripted-res-tokenizer", right(gold)))
