"""Prompt text: a world written out as a complete handbook, and the artifact grammar in words.

``render_world`` writes every part of W = (S, A, T, s0, G, C, B) so that a
reader with no other source can execute any candidate by hand: entities and
their types, each primitive with its typed parameters, inputs, catalysts,
outputs and cost (token_workshop) or the placement rule (schedule), the hard
constraints with their scope, the budget, the initial state and the goal.
Declaration order follows the mapping (a replica's shuffled order is kept);
a ``World`` without its mapping is written in sorted order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._errors import WorldsError
from ._loader import world_from_mapping
from ._model import World

__all__ = ["GRAMMAR_TEXT", "format_state", "raw_of_world", "render_world"]

#: The artifact grammar as shown to a solver (the same text for F and C).
GRAMMAR_TEXT = """\
Answer format: write the solution as a list of steps, one step per line, in execution order.
A step is a primitive name followed by its arguments in parentheses, separated by commas,
for example  name(arg1, arg2)  or  name()  for a primitive without parameters.
An argument is an entity name or a non-negative integer written without leading zeros.
Blank lines and lines starting with # are ignored; any other text makes the answer malformed.
The answer must contain at least one step."""


def raw_of_world(world: World) -> dict:
    """A world mapping equivalent to ``world`` (sorted declaration order, no examples)."""
    b = world.budget
    base: dict[str, Any] = {
        "schema_version": 1,
        "id": world.id,
        "family": world.family,
        "title": world.title,
        "budget": {"max_steps": b.max_steps, "max_cost": b.max_cost, **dict(b.extra)},
    }
    sp = world.spec
    if world.family == "token_workshop":
        base["token_types"] = list(world.entity_types)
        base["tokens"] = dict(world.entities)
        base["initial"] = dict(world.initial_state.inventory)
        base["recipes"] = []
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
    elif world.family == "schedule":
        base["machine_kinds"] = sorted({k for _, k, _ in sp.machines})
        base["machines"] = {m: {"kind": k, "rate": r} for m, k, r in sp.machines}
        base["tasks"] = [
            {"name": t.name, "duration": t.duration, "kind": t.kind, **({"after": list(t.after)} if t.after else {})}
            for t in sp.tasks
        ]
        base["goal"] = {"scheduled": list(sp.goal)}
        base["constraints"] = [
            {"kind": k, "tasks": list(ts), **({"by": by} if k == "deadline" else {})}
            for k, ts, by in sp.constraints
        ]
    else:
        raise WorldsError(f"no handbook renderer for family {world.family!r}")
    return base


def _counts(d: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in d.items()) if d else "nothing"


def format_state(family: str, described: Any) -> str:
    """A family state (as ``describe_state`` gives it) in words."""
    if family == "token_workshop":
        return "inventory: " + (_counts(described) if described else "empty")
    if family == "schedule":
        if not described:
            return "timetable: empty (no task placed)"
        parts = [f"{t} on {p['machine']} from time {p['start']}" for t, p in described.items()]
        return "timetable: " + "; ".join(parts)
    raise WorldsError(f"no state renderer for family {family!r}")


def _constraints_and_budget(heading: str, rules: list[str], budget: Mapping[str, Any], family_cap: str) -> list[str]:
    """The handbook's hard-constraint and budget sections (``- none`` when there are no rules)."""
    return [
        "",
        heading,
        *(rules or ["- none"]),
        "",
        "Budget:",
        f"- at most {budget['max_steps']} steps",
        f"- total cost at most {budget['max_cost']}",
        family_cap,
    ]


def _token_handbook(m: Mapping[str, Any]) -> list[str]:
    cap = m["budget"]["inventory_cap"]
    out = [
        "Kind of world: a workshop. The state is an inventory: how many units of each token are held.",
        "",
        "Token types: " + ", ".join(m["token_types"]) + ".",
        "Tokens (name: type):",
    ]
    out += [f"- {k}: {v}" for k, v in m["tokens"].items()]
    out += ["", "Primitives (recipes). A step names a recipe and binds each of its parameters to a token of the parameter's type."]
    for r in m["recipes"]:
        params = r.get("params", [])
        sig = ", ".join(f"{p['name']}: {p['type']}" for p in params)
        out.append(f"- {r['name']}({sig})")
        out.append(f"    consumes: {_counts(r.get('inputs', {}))}")
        cats = r.get("catalysts", [])
        out.append(
            "    catalysts (must be held, not consumed): " + (", ".join(cats) if cats else "none")
        )
        out.append(f"    produces: {_counts(r['outputs'])}")
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
    out += _constraints_and_budget("Hard constraints:", rules, m["budget"], f"- no token may ever exceed {cap} units")
    out += [
        "",
        "Initial " + format_state("token_workshop", {k: v for k, v in m["initial"].items() if v > 0}),
        "Goal: the final inventory holds at least " + _counts(m["goal"]["require"]) + ".",
    ]
    return out


def _schedule_handbook(m: Mapping[str, Any]) -> list[str]:
    b = m["budget"]
    out = [
        "Kind of world: a timetable. The state is the set of tasks placed so far, each on a machine at a start time.",
        "",
        "Machine kinds: " + ", ".join(m["machine_kinds"]) + ".",
        "Machines (name: kind, cost per time unit):",
    ]
    out += [f"- {k}: {v['kind']}, rate {v['rate']}" for k, v in m["machines"].items()]
    out += ["", "Tasks (name: duration, machine kind, must start after these tasks end):"]
    for t in m["tasks"]:
        after = ", ".join(t.get("after", [])) or "none"
        out.append(f"- {t['name']}: duration {t['duration']}, kind {t['kind']}, after: {after}")
    out += [
        "",
        "Primitive:",
        f"- start(task: task, machine: machine, time: integer 0..{b['horizon'] - 1})",
        "    places the task on the machine over the time interval [time, time + duration);",
        "    cost: duration times the machine's rate.",
        "",
        "Rules of execution:",
        "- A task may be placed once, only on a machine of its kind, only after every task it follows is placed",
        "  and has ended, and only while the machine is free over the whole interval.",
        "- Steps run one at a time in the order written; a placement is never undone.",
    ]
    rules = [
        f"- {c['tasks'][0]} must end by time {c['by']}" if c["kind"] == "deadline"
        else f"- {', '.join(c['tasks'])} may never run at overlapping times, on any machines"
        for c in m.get("constraints", [])
    ]
    out += _constraints_and_budget("Hard constraints (checked after every step):", rules, b,
                                   f"- every task must end by time {b['horizon']}")
    out += [
        "",
        "Initial " + format_state("schedule", {}),
        "Goal: these tasks are all placed: " + ", ".join(m["goal"]["scheduled"]) + ".",
    ]
    return out


def render_world(world_or_raw: World | Mapping[str, Any]) -> str:
    """The complete world as handbook text (validated first; raises WorldFileError on a bad mapping)."""
    if isinstance(world_or_raw, World):
        m = raw_of_world(world_or_raw)
        wid = world_or_raw.id
    else:
        world = world_from_mapping(dict(world_or_raw))
        m = dict(world_or_raw)
        wid = world.id
    head = [f"World {wid}"]
    if m["family"] == "token_workshop":
        body = _token_handbook(m)
    elif m["family"] == "schedule":
        body = _schedule_handbook(m)
    else:
        raise WorldsError(f"no handbook renderer for family {m['family']!r}")
    return "\n".join(head + body) + "\n"
