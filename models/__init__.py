"""Model backends behind one contract: transformers (local, hub, bundled), OpenAI-compatible HTTP, scripted.

This package stands alone: it imports nothing from ``benchmarks``, ``fixtures`` or ``worlds``.
Heavy dependencies (torch, transformers) are imported only by the backends that need them.
"""

from __future__ import annotations

from typing import Any

from ._base import (
    ACTIVATION_TAPS,
    CAPABILITIES,
    CHAT,
    ERROR_CODES,
    LABEL_LOGITS,
    TEXT,
    CapabilityError,
    ChoiceScores,
    GenerationSettings,
    LanguageModel,
    Message,
    ModelDescription,
    ModelError,
    ModelUnavailableError,
    Prompt,
    Response,
    TapEvent,
    UnknownModelError,
)
from ._bundled import (
    BUNDLED,
    GEMMA3_CHAT_TEMPLATE,
    bundled_folder,
    bundled_tokenizer_folder,
    bundled_token_counters,
    cache_root,
    load_bundled,
    load_gguf,
)
from ._http import OpenAIChatModel
from ._hf import load_tokenizer
from ._hub import folder_hash, resolve_revision
from ._registry import (
    available_models,
    backends_with,
    check_model_name,
    kind_name,
    load_model,
    model_capabilities,
    model_kind,
    register_model,
)
from ._scripted import Constant, NoisyChecks, Opposite, Oracle, Policy, Prose, RandomChoice, ScriptedModel
from ._serve import serve_locally

__all__ = [
    "ACTIVATION_TAPS",
    "BUNDLED",
    "CAPABILITIES",
    "CHAT",
    "CapabilityError",
    "ChoiceScores",
    "Constant",
    "ERROR_CODES",
    "GEMMA3_CHAT_TEMPLATE",
    "GenerationSettings",
    "LABEL_LOGITS",
    "LanguageModel",
    "Message",
    "ModelDescription",
    "ModelError",
    "ModelUnavailableError",
    "NoisyChecks",
    "OpenAIChatModel",
    "Opposite",
    "Oracle",
    "Policy",
    "Prompt",
    "Prose",
    "RandomChoice",
    "Response",
    "ScriptedModel",
    "TEXT",
    "TapEvent",
    "UnknownModelError",
    "available_models",
    "backends_with",
    "bundled_folder",
    "bundled_tokenizer_folder",
    "bundled_token_counters",
    "check_model_name",
    "cache_root",
    "folder_hash",
    "kind_name",
    "load_bundled",
    "load_gguf",
    "load_model",
    "load_tokenizer",
    "model_capabilities",
    "model_kind",
    "register_model",
    "resolve_revision",
    "serve_locally",
]


def _register_defaults() -> None:
    for name, entry in BUNDLED.items():
        register_model(name, "bundled", entry.summary, lambda _name=name, **options: load_bundled(_name, **options))

    def oracle(*, gold: Any = None, **_: Any) -> ScriptedModel:
        if gold is None:
            raise ModelError("scripted-oracle needs gold=<callable from prompt text to the gold label>")
        return ScriptedModel("scripted-oracle", Oracle(gold))

    def constant(*, answer: str = "A", **_: Any) -> ScriptedModel:
        return ScriptedModel(f"scripted-constant-{answer}", Constant(answer))

    def random_choice(*, labels: tuple[str, ...] = ("A", "B"), seed: int = 0, **_: Any) -> ScriptedModel:
        return ScriptedModel("scripted-random", RandomChoice(tuple(labels), seed))

    def noisy(*, checks: Any = None, decide: Any = None, accuracy: float | None = None, seed: int = 0, **_: Any) -> ScriptedModel:
        if checks is None or decide is None or accuracy is None:
            raise ModelError("scripted-noisy-checks needs checks=, decide= and accuracy=")
        return ScriptedModel(f"scripted-noisy-checks-{accuracy}", NoisyChecks(checks, decide, accuracy, seed))

    register_model("scripted-oracle", "scripted", "answers the gold label (needs gold=)", oracle)
    register_model("scripted-constant", "scripted", "always the same label (answer=, default A)", constant)
    register_model("scripted-random", "scripted", "seeded uniform choice per prompt (labels=, seed=)", random_choice)
    register_model("scripted-noisy-checks", "scripted",
                   "reads each check right with probability accuracy= (checks=, decide=, seed=)", noisy)


_register_defaults()
