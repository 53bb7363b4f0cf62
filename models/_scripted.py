"""Scripted reference models: deterministic stand-ins that make instruments testable without a language model.

A scripted model is two policies, one for choice scoring and one for the
generated text, each a function of the prompt text.  Randomness comes from a
hash of (seed, prompt), so an answer depends neither on batch composition nor
on order.
"""

from __future__ import annotations

import abc
import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ._base import (
    CHAT,
    LABEL_LOGITS,
    TEXT,
    ChoiceScores,
    GenerationSettings,
    LanguageModel,
    Message,
    ModelDescription,
    ModelError,
    Prompt,
    Response,
)


def _rng(seed: int, *parts: str) -> random.Random:
    digest = hashlib.sha256(json.dumps([seed, *parts]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class Policy(abc.ABC):
    """Maps a prompt text to an answer text.  ``describe`` names it for the model's revision hash."""

    @abc.abstractmethod
    def __call__(self, prompt: str) -> str:
        """The answer for ``prompt``."""

    def describe(self) -> dict[str, Any]:
        return {"policy": type(self).__name__}


@dataclass(frozen=True)
class Oracle(Policy):
    """Answers the gold label that ``gold`` returns for the prompt."""

    gold: Callable[[str], str]

    def __call__(self, prompt: str) -> str:
        return self.gold(prompt)


@dataclass(frozen=True)
class Constant(Policy):
    """Always the same answer."""

    answer: str

    def __call__(self, prompt: str) -> str:
        return self.answer

    def describe(self) -> dict[str, Any]:
        return {"policy": "Constant", "answer": self.answer}


@dataclass(frozen=True)
class Opposite(Policy):
    """The other label of a two-label task: wrong wherever ``inner`` is right."""

    inner: Policy
    labels: tuple[str, str]

    def __call__(self, prompt: str) -> str:
        answer = self.inner(prompt)
        if answer not in self.labels:
            raise ModelError(f"Opposite needs one of {self.labels}, the inner policy answered {answer!r}")
        return self.labels[1] if answer == self.labels[0] else self.labels[0]

    def describe(self) -> dict[str, Any]:
        return {"policy": "Opposite", "inner": self.inner.describe(), "labels": list(self.labels)}


@dataclass(frozen=True)
class RandomChoice(Policy):
    """A seeded uniform choice among ``labels``, fixed per prompt."""

    labels: tuple[str, ...]
    seed: int = 0

    def __call__(self, prompt: str) -> str:
        return _rng(self.seed, "random", prompt).choice(self.labels)

    def describe(self) -> dict[str, Any]:
        return {"policy": "RandomChoice", "labels": list(self.labels), "seed": self.seed}


@dataclass(frozen=True)
class NoisyChecks(Policy):
    """A worker that reads each check of an item correctly with probability ``accuracy``.

    ``checks(prompt)`` returns the item's true check outcomes; each is flipped
    with probability 1 - accuracy (independently, seeded per prompt and check)
    and ``decide`` turns the checks as read into the answer.
    """

    checks: Callable[[str], Sequence[bool]]
    decide: Callable[[Sequence[bool]], str]
    accuracy: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ModelError(f"accuracy must lie in [0, 1], got {self.accuracy}")

    def __call__(self, prompt: str) -> str:
        rng = _rng(self.seed, "checks", prompt)
        read = [truth if rng.random() < self.accuracy else not truth for truth in self.checks(prompt)]
        return self.decide(read)

    def describe(self) -> dict[str, Any]:
        return {"policy": "NoisyChecks", "accuracy": self.accuracy, "seed": self.seed}


@dataclass(frozen=True)
class Prose(Policy):
    """Wraps another policy's answer in text, e.g. to answer in prose that a strict parser rejects."""

    template: str  # with "{answer}" where the inner answer goes (or none at all)
    inner: Policy = field(default_factory=lambda: Constant(""))

    def __call__(self, prompt: str) -> str:
        return self.template.format(answer=self.inner(prompt))

    def describe(self) -> dict[str, Any]:
        return {"policy": "Prose", "template": self.template, "inner": self.inner.describe()}


class ScriptedModel(LanguageModel):
    """A model whose choice scores follow ``scorer`` and whose generations follow ``writer``.

    Scores give the policy's label logit 1 and every other label 0.  A
    generation is the policy's text whole (scripted text has no tokens to
    bound); ``max_new_tokens = 0`` means no generation.
    """

    capabilities = frozenset({LABEL_LOGITS, CHAT, TEXT})  # no taps: there are no layers

    def __init__(self, name: str, scorer: Policy, writer: Policy | None = None):
        self.name = name
        self.scorer = scorer
        self.writer = writer or scorer

    def describe(self) -> ModelDescription:
        spec = {"scorer": self.scorer.describe(), "writer": self.writer.describe()}
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
        return ModelDescription(id=self.name, revision=f"sha256:{digest}", backend="scripted", extra=spec)

    def render_chat(self, chat: Sequence[Message]) -> str:
        return "".join(f"<{m['role']}>\n{m['content']}\n" for m in chat) + "<assistant>\n"

    def score_and_generate(
        self,
        prompts: Sequence[Prompt],
        choices: Sequence[str] | None = None,
        settings: GenerationSettings = GenerationSettings(),
    ) -> list[Response]:
        if choices is not None and len(choices) < 2:
            raise ModelError(f"choice scoring needs at least two labels, got {list(choices)}")
        responses = []
        for index, prompt in enumerate(prompts):
            text = prompt if isinstance(prompt, str) else self.render_chat(prompt)
            scores = None
            if choices:
                picked = self.scorer(text)
                if picked not in choices:
                    raise ModelError(f"{self.name}: the scoring policy answered {picked!r}, not one of {list(choices)}")
                scores = ChoiceScores(tuple(choices), tuple(range(len(choices))),
                                      tuple(1.0 if label == picked else 0.0 for label in choices))
            answer = self.writer(text) if settings.max_new_tokens > 0 else ""
            responses.append(Response(index=index, scores=scores, text=answer,
                                      finish_reason="stop" if settings.max_new_tokens > 0 else "none"))
        return responses
