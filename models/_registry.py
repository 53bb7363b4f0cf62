"""Model registry: names to factories, and ``load_model`` for names, hub ids, local paths and URLs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ._base import LanguageModel, ModelError, UnknownModelError
from ._hf import TransformersModel
from ._http import OpenAIChatModel


@dataclass(frozen=True)
class ModelEntry:
    name: str
    kind: str  # "bundled", "hub", "openai-http", "scripted"
    summary: str
    factory: Callable[..., LanguageModel]


_ENTRIES: dict[str, ModelEntry] = {}


def register_model(name: str, kind: str, summary: str, factory: Callable[..., LanguageModel]) -> None:
    """Add a named model; a name can be registered once."""
    if name in _ENTRIES:
        raise ModelError(f"model name {name!r} is already registered ({_ENTRIES[name].summary}); choose another name")
    if "/" in name or ":" in name:
        raise ModelError(f"model name {name!r} must not contain '/' or ':' (those mark hub ids and URLs)")
    _ENTRIES[name] = ModelEntry(name, kind, summary, factory)


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
