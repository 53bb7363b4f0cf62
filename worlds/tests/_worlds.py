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

#: A schedule world small enough for exhaustive checks (three unit tasks, two machines).
TINY_SCHEDULE = {
    "schema_version": 1,
    "id": "SCH-T01",
    "family": "schedule",
    "title": "three unit tasks on two machines",
    "machine_kinds": ["bench"],
    "budget": {"max_steps": 3, "max_cost": 4, "horizon": 3},
    "machines": {
        "m1": {"kind": "bench", "rate": 1},
        "m2": {"kind": "bench", "rate": 2},
    },
    "tasks": [
        {"name": "p", "duration": 1, "kind": "bench"},
        {"name": "q", "duration": 1, "kind": "bench", "after": ["p"]},
        {"name": "r", "duration": 1, "kind": "bench"},
    ],
    "goal": {"scheduled": ["p", "q", "r"]},
    "constraints": [{"kind": "no_overlap", "tasks": ["p", "r"]}],
}
