"""The F/C synthesis prompt: one template per family, filled from a side's target, examples and demonstration.

``render_prompt`` asks the target's family; ``render_step_prompt`` is the
template of step-sequence families (``StepFamily``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._loader import world_from_mapping
from ._pair_types import Demonstration, PrimitiveExample
from ._registry import get_family
from ._render import GRAMMAR_TEXT, check_rendering, render_world

__all__ = ["render_prompt", "render_step_prompt"]


def render_prompt(target_raw: Mapping[str, Any], demos: Sequence[Demonstration], examples: Sequence[PrimitiveExample],
                  rendering: str = "prose") -> str:
    """The F/C synthesis prompt body of a side, by its target's family (same template for F and C), with the
    handbook in ``rendering`` (``worlds.RENDERINGS``)."""
    check_rendering(rendering)
    return get_family(target_raw["family"]).render_prompt(target_raw, demos, examples, rendering)


def render_step_prompt(target_raw: Mapping[str, Any], demos: Sequence[Demonstration],
                       examples: Sequence[PrimitiveExample], rendering: str = "prose") -> str:
    """The step-sequence prompt body: handbook, examples, demonstrations, goal, grammar."""
    fam = target_raw["family"]
    family = get_family(fam)
    world = world_from_mapping(dict(target_raw))
    lines = [
        "You are given a complete, closed world. Everything that exists and every rule is stated below;",
        "no other entities, actions or effects exist. Find a sequence of steps that reaches the goal.",
        "",
        "=== HANDBOOK ===",
        render_world(target_raw, rendering).rstrip("\n"),
        "",
        "=== ONE-STEP EXAMPLES ===",
        "Each example applies one step to the state shown (these states are illustrations, not your start).",
    ]
    lines += [f"{i}. {ex.text(fam)}" for i, ex in enumerate(examples, 1)]
    lines += ["", "=== WORKED DEMONSTRATION ==="]
    for d in demos:
        src = d.source_raw
        lines.append("A valid solution of a different situation in this same world (other start and/or goal):")
        lines += family.situation_lines(src)
        b, tb = src["budget"], target_raw["budget"]
        if b != tb:
            lines.append("Its budget: " + ", ".join(f"{k} {v}" for k, v in b.items()))
        if src.get("constraints", []) != target_raw.get("constraints", []):
            lines.append("Its hard constraints differ from the handbook's: " + json.dumps(src.get("constraints", [])))
        lines.append("Its solution:")
        lines += [f"    {s}" for s in d.steps]
    lines += [
        "",
        "=== YOUR TASK ===",
        f"Start from the initial state of world {world.id} in the handbook and reach its goal within its budget and constraints.",
        "Goal: " + family.goal_words(world),
        "",
        GRAMMAR_TEXT,
        "",
        "Write your solution now.",
    ]
    return "\n".join(lines) + "\n"

