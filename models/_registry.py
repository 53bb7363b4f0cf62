"""Model registry: names to factories, and ``load_model`` for names, hub ids, local paths and URLs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ._base import CAPABILITIES, LanguageModel, ModelError, UnknownModelError
from ._hf import TransformersModel
from ._http import OpenAIChatModel
from ._scripted import ScriptedModel


@dataclass(frozen=True)
class ModelEntry:
    name: str
    kind: str  # "bundled", "hub", "openai-http", "scripted"
    summary: str
    factory: Callable[..., LanguageModel]
    capabilities: frozenset[str]  # what the models the factory builds can do (names of CAPABILITIES)


#: What a model of each kind can do, from its backend's class: the kinds of ``check_model_name`` and of entries.
_KIND_CAPABILITIES: dict[str, frozenset[str]] = {
    "bundled": TransformersModel.capabilities,
    "hub": TransformersModel.capabilities,
    "local": TransformersModel.capabilities,
    "openai-http": OpenAIChatModel.capabilities,
    "scripted": ScriptedModel.capabilities,
}
#: How a message names a model of each kind.
_KIND_NAMES = {
    "bundled": "a bundled transformers model",
    "hub": "a transformers model from the hub",
    "local": "a local transformers model",
    "openai-http": "a served model",
    "scripted": "a scripted model",
}
#: The backends a user can name a model for, as a message suggests them, and what each can do.
_BACKENDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("a local transformers model (a bundled name, a hub id or a path)", TransformersModel.capabilities),
    ("a served model (openai:MODEL@BASE_URL)", OpenAIChatModel.capabilities),
)

_ENTRIES: dict[str, ModelEntry] = {}


def register_model(name: str, kind: str, summary: str, factory: Callable[..., LanguageModel], *,
                   capabilities: Iterable[str] | None = None) -> None:
    """Add a named model; a name can be registered once.

    ``capabilities`` (names of ``CAPABILITIES``) says what the models ``factory`` builds can do, so that a run can
    be refused before anything is built; default: those of the kind's backend (bundled and hub: transformers,
    openai-http: served, scripted: ``ScriptedModel``), for another kind the contract's (``LanguageModel``).
    """
    if name in _ENTRIES:
        raise ModelError(f"model name {name!r} is already registered ({_ENTRIES[name].summary}); choose another name")
    if "/" in name or ":" in name:
        raise ModelError(f"model name {name!r} must not contain '/' or ':' (those mark hub ids and URLs)")
    if capabilities is None:
        declared = _KIND_CAPABILITIES.get(kind, LanguageModel.capabilities)
    else:
        declared = frozenset(capabilities)
    unknown = sorted(declared - CAPABILITIES.keys())
    if unknown:
        raise ModelError(f"model {name!r}: {unknown} are not capabilities; choose from {', '.join(CAPABILITIES)}")
    _ENTRIES[name] = ModelEntry(name, kind, summary, factory, declared)


def available_models() -> dict[str, str]:
    """Registered names and what each one is."""
    return {name: f"[{entry.kind}] {entry.summary}" for name, entry in sorted(_ENTRIES.items())}


def model_kind(name: str) -> str | None:
    """The registry kind of ``name`` ("bundled", "scripted", ...), or None for unregistered names."""
    entry = _ENTRIES.get(name)
    return entry.kind if entry else None


def unknown_model(name: str) -> UnknownModelError:
    close = difflib.get_close_matches(name, list(_ENTRIES), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    return UnknownModelError(
        f"unknown model {name!r}; {hint}available: {', '.join(sorted(_ENTRIES))}; "
        "a hub id (org/name), a local model folder, or openai:MODEL@BASE_URL also work"
    )


def check_model_name(name: str) -> str:
    """What ``name`` names, without loading anything: a registry kind, "openai-http", "local" or "hub".

    An unknown name raises :class:`UnknownModelError` with close matches, as ``load_model`` would.
    """
    if name in _ENTRIES:
        return _ENTRIES[name].kind
    if name.startswith("openai:"):
        return "openai-http"
    if Path(name).is_dir():
        return "local"
    parts = name.split("/")
    if len(parts) == 2 and all(parts) and not name.startswith((".", "/")):
        return "hub"
    raise unknown_model(name)


def model_capabilities(name: str) -> frozenset[str]:
    """What the model ``name`` names can do (names of ``CAPABILITIES``), from its registry entry or its backend's
    class: no weights are read and no server is contacted.  An unknown name raises :class:`UnknownModelError`."""
    kind = check_model_name(name)
    if name in _ENTRIES:
        return _ENTRIES[name].capabilities
    return _KIND_CAPABILITIES[kind]


def kind_name(kind: str) -> str:
    """How a message names a model of ``kind`` (a kind of ``check_model_name``): "a served model", ..."""
    return _KIND_NAMES.get(kind, f"a {kind} model")


def backends_with(needed: Iterable[str]) -> tuple[str, ...]:
    """The backends whose models have every capability in ``needed``, as a message suggests them."""
    wanted = frozenset(needed)
    return tuple(phrase for phrase, has in _BACKENDS if wanted <= has)


def load_model(name: str, **options: Any) -> LanguageModel:
    """Build a model from a registry name, ``openai:MODEL@BASE_URL``, a local folder or a hub id.

    ``options`` (revision, device, dtype, batch_size, seed, ...) go to the backend.
    """
    if name in _ENTRIES:
        return _ENTRIES[name].factory(**options)
    if name.startswith("openai:"):
        return OpenAIChatModel.from_spec(name, **options)
    if Path(name).is_dir():
        return TransformersModel.from_local(Path(name), **options)
    parts = name.split("/")
    if len(parts) == 2 and all(parts) and not name.startswith((".", "/")):
        return TransformersModel.from_hub(name, **options)
    raise unknown_model(name)
