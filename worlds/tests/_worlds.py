"""Shared helpers for the worlds tests: shipped worlds and a small mapping builder."""

from __future__ import annotations

import copy
import tomllib

import worlds

SHIPPED = worlds.shipped_worlds()
SHIPPED_IDS = [p.stem for p in SHIPPED]


def raw(stem: str) -> dict:
    """A fresh, mutable copy of a shipped world file's mapping."""
    with open(worlds.DATA_DIR / f"{stem}.toml", "rb") as fh:
        return copy.deepcopy(tomllib.load(fh))


def example_cases() -> list[tuple[str, str]]:
    """(world stem, example name) for every shipped example, sorted."""
    out = []
    for p in SHIPPED:
        w = worlds.load_world(p)
        out.extend((p.stem, e.name) for e in w.examples)
    return sorted(out)
