"""The campaign grid: every unit of one rung's campaign, in a fixed order.

A unit is one episode under one oversight condition.  For each tier and campaign seed the frozen generator state
gives ``episodes_per_cell`` episodes (``fixtures.ladder``, the probe's generator); the same episodes appear under
every condition, so conditions compare on paired episodes.  The order is seed, tier, condition, episode: the
ledger condition's damage record of a unit is built from the units before it in its (seed, condition) stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.core import sha256_json
from fixtures.ladder import STATES, generate_episodes

from .spec import PREREG, CampaignError, GridSpec

__all__ = ["CampaignUnit", "campaign_units", "stream_of", "unit_id"]


@dataclass(frozen=True)
class CampaignUnit:
    unit_id: str
    seed: int
    tier: int
    condition: str
    episode_index: int
    episode: Any = None  # fixtures.ladder Episode (not compared)

    @property
    def stream(self) -> tuple[int, str]:
        """The (seed, condition) stream the unit belongs to: a ledger's damage record runs within it."""
        return (self.seed, self.condition)


def unit_id(seed: int, tier: int, condition: str, index: int) -> str:
    return f"s{seed}-t{tier}-{condition}-{index:03d}"


def stream_of(record: Any) -> tuple[int, str]:
    return (record.seed, record.condition)


def campaign_units(state_name: str | None = None, grid: GridSpec | None = None,
                   episodes_per_cell: int | None = None) -> list[CampaignUnit]:
    """Every unit of a campaign on ``state_name`` (default: the registration's state) in the fixed order; a
    reduced pass takes the first ``episodes_per_cell`` episodes of every cell."""
    grid = grid or PREREG.values.grid
    name = state_name or PREREG.values.launch.state
    if name not in STATES:
        raise CampaignError(f"generator state {name!r} is not a frozen state; states: {', '.join(STATES)}")
    state = STATES[name]
    n = grid.episodes_per_cell if episodes_per_cell is None else min(episodes_per_cell, grid.episodes_per_cell)
    units = []
    for seed in grid.seeds:
        for tier in grid.tiers:
            episodes = generate_episodes(state, tier=tier, seed=seed, n=grid.episodes_per_cell)[:n]
            for condition in grid.conditions:
                units += [CampaignUnit(unit_id(seed, tier, condition, i), seed, tier, condition, i, episode)
                          for i, episode in enumerate(episodes)]
    return units


def episode_sha256(episode: Any) -> str:
    """The hash of the worker-visible fact dictionary: the same episode under every condition."""
    return sha256_json(episode.facts)
