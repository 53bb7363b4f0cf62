"""Running one probe: episodes per tier from a frozen generator state, the worker alone, one ledger line per unit.

The probe is resumable: units already in ``units.jsonl`` are skipped, a torn
last line is moved aside by the core ledger, and a resumed probe must carry
the same metadata (rung, model revision, state, seed, limits).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import models
from benchmarks.core import Ledger, canonical_json, sha256_bytes, sha256_json

from .gate import TIERS
from .protocol import (
    PREREG,
    LadderError,
    build_chat,
    check_probe_seed,
    code_outcome,
    parse_decision,
)
from .records import (
    METADATA_FILE,
    UNITS_FILE,
    ProbeMetadata,
    UnitRecord,
    probe_dir_name,
    read_metadata,
    write_metadata,
)


@dataclass(frozen=True)
class ProbeSettings:
    """What one probe runs; the defaults are the preregistered ones."""

    rung: str
    state: Any  # a fixtures.ladder generator state (name, variant, dials(), state_hash)
    seed: int
    units_per_tier: int = PREREG.values.probe.units_per_tier
    max_tokens: int = PREREG.values.probe.max_tokens
    timeout_s: float = PREREG.values.probe.timeout_s
    batch_size: int = 1
    retune_of: str | None = None
    deviations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_probe_seed(self.seed)
        if self.units_per_tier < 1 or self.max_tokens < 1 or self.timeout_s <= 0 or self.batch_size < 1:
            raise LadderError("units per tier, max tokens and batch size must be >= 1 and the timeout > 0")

    @property
    def folder_name(self) -> str:
        return probe_dir_name(self.state.variant, self.state.name, self.seed)


def unit_id(tier: int, index: int) -> str:
    return f"t{tier}-{index:03d}"


def probe_episodes(state: Any, seed: int, units_per_tier: int) -> list[Any]:
    """The probe's episodes, tier by tier, from the generator's public API."""
    from fixtures.ladder import generate_episodes

    episodes = []
    for tier in TIERS:
        episodes.extend(generate_episodes(state, tier, seed, units_per_tier))
    return episodes


def episode_key(episode: Any) -> str:
    return unit_id(episode.tier, episode.index)


def make_record(settings: ProbeSettings, revision: str, episode: Any, chat: Sequence[dict[str, str]],
                response: models.Response, latency: float) -> UnitRecord:
    decision = None if response.error else parse_decision(response.text)
    return UnitRecord(
        unit_id=episode_key(episode),
        rung=settings.rung,
        model_revision=revision,
        generator_variant=settings.state.variant,
        generator_state=settings.state.name,
        state_hash=settings.state.state_hash,
        seed=settings.seed,
        condition="autonomous",
        supervisor=None,
        tier=episode.tier,
        family=episode.family,
        episode_index=episode.index,
        depth=episode.depth,
        checks=len(episode.checks),
        episode_sha256=sha256_json(episode.facts),
        ground_truth=episode.ground_truth,
        prompt_sha256=sha256_bytes(canonical_json(list(chat)).encode("utf-8")),
        response_text=response.text,
        finish_reason=response.finish_reason,
        error_code=response.error,
        decision=decision,
        outcome=code_outcome(response.error, decision, episode.ground_truth),
        latency_s=round(latency, 6),
    )


def load_rung(settings: ProbeSettings, episodes: Sequence[Any], device: str) -> models.LanguageModel:
    """Load the rung; a scripted worker gets each episode's true check outcomes, looked up by rendered prompt."""
    from .worker import ensure_worker

    name = settings.rung
    if ensure_worker(name) or models.model_kind(name) == "scripted":
        truth: dict[str, list[bool]] = {}
        model = models.load_model(name, checks=lambda prompt: truth[prompt])
        for episode in episodes:
            truth[model.render_chat(build_chat(episode.case_text))] = [bool(c.passes) for c in episode.checks]
        return model
    if name.startswith("openai:"):
        return models.load_model(name, timeout=settings.timeout_s)
    return models.load_model(name, device=device)


def check_resume(folder: Path, settings: ProbeSettings) -> None:
    """A probe directory that already has metadata is resumed (or re-read) only with the same settings."""
    if not (folder / METADATA_FILE).exists():
        return
    meta = read_metadata(folder)
    asked = {"rung": settings.rung, "generator_state": settings.state.name, "state_hash": settings.state.state_hash,
             "seed": settings.seed, "units_per_tier": settings.units_per_tier, "max_tokens": settings.max_tokens,
             "timeout_s": settings.timeout_s, "retune_of": settings.retune_of}
    differ = {k: (getattr(meta, k), v) for k, v in asked.items() if getattr(meta, k) != v}
    if differ:
        raise LadderError(f"{folder} was started with other settings ("
                          + ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in differ.items())
                          + "); resume it with the same options or start a new run")


def run_probe(folder: Path, settings: ProbeSettings, device: str, prereg_sha256: str,
              on_model: Callable[[models.LanguageModel], None] | None = None) -> Path:
    """Run (or resume) the probe into ``folder``; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    check_resume(folder, settings)
    episodes = probe_episodes(settings.state, settings.seed, settings.units_per_tier)
    with Ledger(folder / UNITS_FILE, UnitRecord, key="unit_id") as ledger:
        todo = [e for e in episodes if episode_key(e) not in ledger]
        if not todo:
            return folder
        model = load_rung(settings, episodes, device)
        try:
            revision = model.describe().revision
            write_metadata(folder, ProbeMetadata(
                probe=folder.name, rung=settings.rung, model_revision=revision,
                generator_variant=settings.state.variant, generator_state=settings.state.name,
                state_hash=settings.state.state_hash, dials=settings.state.dials(), seed=settings.seed,
                condition="autonomous", units_per_tier=settings.units_per_tier, tiers=TIERS,
                max_tokens=settings.max_tokens, timeout_s=settings.timeout_s, prereg_sha256=prereg_sha256,
                retune_of=settings.retune_of, deviations=settings.deviations,
            ))
            if on_model is not None:
                on_model(model)
            generation = models.GenerationSettings(max_new_tokens=settings.max_tokens)
            for start in range(0, len(todo), settings.batch_size):
                chunk = todo[start:start + settings.batch_size]
                chats = [build_chat(e.case_text) for e in chunk]
                began = time.perf_counter()
                try:
                    responses = model.generate(chats, generation)
                except models.ModelError as exc:
                    responses = [models.Response(index=i, finish_reason="error", error="backend_error",
                                                 error_detail=str(exc)) for i in range(len(chunk))]
                latency = time.perf_counter() - began
                for episode, chat, response in zip(chunk, chats, responses):
                    ledger.append(make_record(settings, revision, episode, chat, response, latency))
        finally:
            model.close()
    return folder
