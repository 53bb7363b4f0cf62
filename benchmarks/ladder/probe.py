"""Capability ladder: one probe's episodes, settings, names and unit records.

Seed hygiene (campaign seeds and seeds below the tuning floor are refused),
the probe directory and unit names, the episodes of a probe from the
generator's public API, the :class:`~.spec.UnitRecord` of one answered
episode, the settings of one run (:class:`ProbeSettings`) and the parsers of
the repeatable ``--ladder-dial`` and ``--ladder-fleet`` options.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from benchmarks.core import canonical_json, sha256_bytes, sha256_json
from benchmarks.core.protocol import UsageProblem
from benchmarks.core.answers import keep_answer
from fixtures.ladder import generate_episodes

from .prompts import code_outcome, parse_decision
from .spec import PREREG, TIERS, VARIANTS, LadderError, ProbeSpec, UnitRecord

__all__ = ["ProbeSettings", "check_probe_seed", "episode_key", "make_record", "parse_dials", "parse_fleet",
           "probe_dir_name", "probe_episodes", "unit_id"]


# --------------------------------------------------------------------------- seed hygiene


def check_probe_seed(seed: int, spec: ProbeSpec | None = None) -> None:
    """Refuse campaign seeds and seeds below the tuning floor."""
    spec = spec or PREREG.values.probe
    if seed in spec.campaign_seeds:
        raise LadderError(
            f"seed {seed} is a campaign seed ({', '.join(map(str, spec.campaign_seeds))}); probes never use "
            f"campaign seeds: pass a tuning seed >= {spec.min_tuning_seed} with --ladder-seed"
        )
    if seed < spec.min_tuning_seed:
        raise LadderError(f"seed {seed} is below the tuning-seed floor; pass a seed >= {spec.min_tuning_seed} "
                          "with --ladder-seed")


# --------------------------------------------------------------------------- probes: directories, episodes, records


def probe_dir_name(variant: str, state: str, seed: int) -> str:
    """``v2-<state>-seed<seed>``; the variant prefix is added unless the state name already carries it."""
    if variant not in VARIANTS:
        raise LadderError(f"generator variant must be one of {VARIANTS}, got {variant!r}")
    stem = state if state.startswith(f"{variant}-") else f"{variant}-{state}"
    return f"{stem}-seed{seed}"


def unit_id(tier: int, index: int) -> str:
    return f"t{tier}-{index:03d}"


def episode_key(episode: Any) -> str:
    return unit_id(episode.tier, episode.index)


def probe_episodes(state: Any, seed: int, units_per_tier: int) -> list[Any]:
    """The probe's episodes, tier by tier, from the generator's public API."""
    return [episode for tier in TIERS for episode in generate_episodes(state, tier, seed, units_per_tier)]


def make_record(rung: str, revision: str, state: Any, seed: int, episode: Any, chat: Sequence[Mapping[str, str]],
                response: Any, latency: float, max_answer_chars: int) -> UnitRecord:
    """The record of one unit; an answer over ``max_answer_chars`` is kept cut and coded ``answer_too_long``."""
    kept = keep_answer(response, max_answer_chars)
    response = kept.response
    decision = None if response.error else parse_decision(response.text)
    return UnitRecord(
        unit_id=episode_key(episode),
        rung=rung,
        model_revision=revision,
        generator_variant=state.variant,
        generator_state=state.name,
        state_hash=state.state_hash,
        seed=seed,
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
        response_chars=kept.chars,
        response_sha256=kept.sha256,
        finish_reason=response.finish_reason,
        error_code=response.error,
        decision=decision,
        outcome=code_outcome(response.error, decision, episode.ground_truth),
        latency_s=round(latency, 6),
        endpoint=getattr(response, "endpoint", None),
    )


# --------------------------------------------------------------------------- the settings of one probe


@dataclass(frozen=True)
class ProbeSettings:
    """What one run asks for: the probe (all of it enters the run's identity but the batch size) and,
    for the round-directory mode, the folder of probes and the named fleet."""

    rung: str  # the model, as named on the command line
    state: Any  # a fixtures.ladder GeneratorState (name, variant, dials(), state_hash), retuned or registered
    seed: int
    units_per_tier: int
    max_tokens: int
    timeout_s: float
    batch_size: int = 1
    in_flight: int = 4  # requests in flight per served endpoint; like the batch size, not part of the identity
    retune_of: str | None = None
    round_dir: str | None = None
    fleet: tuple[tuple[str, str], ...] = ()  # (label, model) per rung named with --ladder-fleet

    @property
    def folder_name(self) -> str:
        return probe_dir_name(self.state.variant, self.state.name, self.seed)

    def record(self) -> dict[str, Any]:
        """The identity-bearing settings, as JSON reads them back (every key ``metadata.json`` also holds)."""
        return json.loads(canonical_json({
            "rung": self.rung,
            "generator_variant": self.state.variant,
            "generator_state": self.state.name,
            "state_hash": self.state.state_hash,
            "dials": self.state.dials(),
            "seed": self.seed,
            "units_per_tier": self.units_per_tier,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "retune_of": self.retune_of,
        }))


def parse_dials(items: Sequence[str]) -> dict[str, Any]:
    """``NAME=JSON_VALUE`` per item; a usage problem when an item is not of that form."""
    dials: dict[str, Any] = {}
    for text in items:
        key, sep, value = text.partition("=")
        try:
            parsed = json.loads(value) if sep else None
        except json.JSONDecodeError:
            parsed = None
        if not key or parsed is None:
            raise UsageProblem(f"--ladder-dial {text!r}: write NAME=JSON_VALUE, e.g. distractors=6")
        dials[key] = parsed
    return dials


def parse_fleet(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    fleet = []
    for item in items:
        label, sep, model = item.partition("=")
        if not sep or not label or not model:
            raise UsageProblem(f"--ladder-fleet {item!r}: write LABEL=MODEL, e.g. R0=openai:qwen3.5@http://...")
        fleet.append((label, model))
    return tuple(fleet)
