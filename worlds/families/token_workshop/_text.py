"""Text of family ``token_workshop``: the handbook, states in words, prompt lines, state answer lines."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..._model import StateLineFormat, World
from ..._render import constraints_and_budget, counts_text, markdown_table

__all__ = ["STATE_LINES", "format_state", "goal_words", "handbook_lines", "raw_of_world", "situation_lines"]


def raw_of_world(world: World) -> dict[str, Any]:
    """The family fields of a mapping equivalent to ``world`` (sorted declaration order)."""
    sp = world.spec
    base: dict[str, Any] = {
        "token_types": list(world.entity_types),
        "tokens": dict(world.entities),
        "initial": dict(world.initial_state.inventory),
        "recipes": [],
    }
    for r in sp.recipes:
        d: dict[str, Any] = {"name": r.name}
        if r.params:
            d["params"] = [{"name": p.name, "type": p.type} for p in r.params]
        if r.inputs:
            d["inputs"] = dict(r.inputs)
        if r.catalysts:
            d["catalysts"] = [c for c, _ in r.catalysts]
        d["outputs"] = dict(r.outputs)
        d["cost"] = r.cost
        base["recipes"].append(d)
    base["goal"] = {"require": dict(sp.goal)}
    base["constraints"] = [
        {"kind": k, "scope": sc, "tokens": list(t), **({"limit": lim} if k == "at_most" else {})}
        for k, sc, t, lim in sp.constraints
    ]
    return base


def format_state(described: Mapping[str, int]) -> str:
    """An inventory in words."""
    return "inventory: " + (counts_text(described) if described else "empty")


def _signature(r: Mapping[str, Any]) -> str:
    return f"{r['name']}(" + ", ".join(f"{p['name']}: {p['type']}" for p in r.get("params", [])) + ")"


def handbook_lines(m: Mapping[str, Any], rendering: str = "prose") -> list[str]:
    """The handbook's lines after its heading: tokens, recipes, rules, constraints, budget, start and goal (the
    tokens and recipes as lines of words, or as tables for ``rendering="tables"``)."""
    cap = m["budget"]["inventory_cap"]
    out = [
        "Kind of world: a workshop. The state is an inventory: how many units of each token are held.",
        "",
        "Token types: " + ", ".join(m["token_types"]) + ".",
    ]
    recipes_head = "Primitives (recipes). A step names a recipe and binds each of its parameters to a token of the parameter's type."
    if rendering == "tables":
        out += ["Tokens:", ""] + markdown_table(["token", "type"], [[k, v] for k, v in m["tokens"].items()])
        out += ["", recipes_head, ""]
        out += markdown_table(
            ["recipe(parameter: type)", "consumes", "catalysts (must be held, not consumed)", "produces", "cost"],
            [[_signature(r), counts_text(r.get("inputs", {})), ", ".join(r.get("catalysts", [])) or "none",
              counts_text(r["outputs"]), r["cost"]] for r in m["recipes"]])
    else:
        out += ["Tokens (name: type):"]
        out += [f"- {k}: {v}" for k, v in m["tokens"].items()]
        out += ["", recipes_head]
        for r in m["recipes"]:
            out.append(f"- {_signature(r)}")
            out.append(f"    consumes: {counts_text(r.get('inputs', {}))}")
            cats = r.get("catalysts", [])
            out.append(
                "    catalysts (must be held, not consumed): " + (", ".join(cats) if cats else "none")
            )
            out.append(f"    produces: {counts_text(r['outputs'])}")
            out.append(f"    cost: {r['cost']}")
    out += [
        "",
        "Rules of execution:",
        "- A step is applicable when the inventory holds every unit it consumes and at least one unit of each catalyst",
        "  beyond the units the same step consumes. Applying it removes the consumed units and adds the produced ones.",
        "- Recipes are irreversible; nothing undoes a step. Steps run one at a time in the order written.",
        "- A parameter name in 'consumes' or 'catalysts' stands for the token bound to it by the step.",
    ]
    rules = []
    for c in m.get("constraints", []):
        when = "in every state (the initial one and after every step)" if c["scope"] == "every_state" else "in the final state"
        if c["kind"] == "at_most":
            rules.append(f"- at most {c['limit']} {c['tokens'][0]} may be held {when}")
        else:
            rules.append(f"- {', '.join(c['tokens'])} may never all be held at once {when}")
    out += constraints_and_budget("Hard constraints:", rules, m["budget"], f"- no token may ever exceed {cap} units")
    out += [
        "",
        "Initial " + format_state({k: v for k, v in m["initial"].items() if v > 0}),
        "Goal: the final inventory holds at least " + counts_text(m["goal"]["require"]) + ".",
    ]
    return out


def situation_lines(src: Mapping[str, Any]) -> list[str]:
    """A demonstration's start and goal, as the prompt states them."""
    return [
        "Its start " + format_state({k: v for k, v in src["initial"].items() if v > 0}),
        "Its goal: hold at least " + ", ".join(f"{n} {k}" for k, n in src["goal"]["require"].items()),
    ]


def goal_words(world: World) -> str:
    """The goal as the prompt's task states it."""
    return "hold at least " + ", ".join(f"{n} {t}" for t, n in world.spec.goal) + "."


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"

#: An inventory as ``token = count`` lines.  The parts of a line are runs of character classes that cannot
#: overlap their neighbours (name characters, whitespace, "=", digits), so a failed match gives each run back
#: once: linear time.
STATE_LINES = StateLineFormat(
    words="one line per token held, written  name = count  (tokens with count 0 are left out; "
          "write (empty) when nothing is held)",
    pattern=re.compile(rf"({_NAME})\s*=\s*(\d+)"),
    write=lambda token, count: f"{token} = {count}",
    read=lambda matches: {name: count for name, count in
                          ((name, int(m.group(2))) for name, m in matches.items()) if count > 0},
    neighbour=lambda state: {**state, "phantom": state.get("phantom", 0) + 1},
)
