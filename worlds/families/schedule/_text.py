"""Text of family ``schedule``: the handbook, states in words, prompt lines, state answer lines."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..._model import StateLineFormat, World
from ..._render import constraints_and_budget, markdown_table

__all__ = ["STATE_LINES", "format_state", "goal_words", "handbook_lines", "raw_of_world", "situation_lines"]


def raw_of_world(world: World) -> dict[str, Any]:
    """The family fields of a mapping equivalent to ``world`` (sorted declaration order)."""
    sp = world.spec
    return {
        "machine_kinds": sorted({k for _, k, _ in sp.machines}),
        "machines": {m: {"kind": k, "rate": r} for m, k, r in sp.machines},
        "tasks": [
            {"name": t.name, "duration": t.duration, "kind": t.kind, **({"after": list(t.after)} if t.after else {})}
            for t in sp.tasks
        ],
        "goal": {"scheduled": list(sp.goal)},
        "constraints": [
            {"kind": k, "tasks": list(ts), **({"by": by} if k == "deadline" else {})}
            for k, ts, by in sp.constraints
        ],
    }


def format_state(described: Mapping[str, Any]) -> str:
    """A timetable in words."""
    if not described:
        return "timetable: empty (no task placed)"
    parts = [f"{t} on {p['machine']} from time {p['start']}" for t, p in described.items()]
    return "timetable: " + "; ".join(parts)


def handbook_lines(m: Mapping[str, Any], rendering: str = "prose") -> list[str]:
    """The handbook's lines after its heading: machines, tasks, the primitive, rules, constraints, budget, goal
    (the machines and tasks as lines of words, or as tables for ``rendering="tables"``)."""
    b = m["budget"]
    out = [
        "Kind of world: a timetable. The state is the set of tasks placed so far, each on a machine at a start time.",
        "",
        "Machine kinds: " + ", ".join(m["machine_kinds"]) + ".",
    ]
    if rendering == "tables":
        out += ["Machines:", ""] + markdown_table(["machine", "kind", "cost per time unit"],
                                                  [[k, v["kind"], v["rate"]] for k, v in m["machines"].items()])
        out += ["", "Tasks (a task must start after the tasks in its 'after' column end):", ""]
        out += markdown_table(["task", "duration", "machine kind", "after"],
                              [[t["name"], t["duration"], t["kind"], ", ".join(t.get("after", [])) or "none"]
                               for t in m["tasks"]])
    else:
        out += ["Machines (name: kind, cost per time unit):"]
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
    out += constraints_and_budget("Hard constraints (checked after every step):", rules, b,
                                  f"- every task must end by time {b['horizon']}")
    out += [
        "",
        "Initial " + format_state({}),
        "Goal: these tasks are all placed: " + ", ".join(m["goal"]["scheduled"]) + ".",
    ]
    return out


def situation_lines(src: Mapping[str, Any]) -> list[str]:
    """A demonstration's start and goal, as the prompt states them."""
    return ["Its start " + format_state({}), "Its goal: place " + ", ".join(src["goal"]["scheduled"])]


def goal_words(world: World) -> str:
    """The goal as the prompt's task states it."""
    return "place " + ", ".join(world.spec.goal) + "."


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"

#: A timetable as ``task = machine @ start`` lines.  The parts of a line are runs of character classes that
#: cannot overlap their neighbours (name characters, whitespace, "=", "@", digits), so a failed match gives
#: each run back once: linear time.
STATE_LINES = StateLineFormat(
    words="one line per placed task, written  task = machine @ start  (write (empty) when no task is placed)",
    pattern=re.compile(rf"({_NAME})\s*=\s*({_NAME})\s*@\s*(\d+)"),
    write=lambda task, p: f"{task} = {p['machine']} @ {p['start']}",
    read=lambda matches: {name: {"machine": m.group(2), "start": int(m.group(3))} for name, m in matches.items()},
    neighbour=lambda state: ({k: {**v, "start": v["start"] + 1} for k, v in state.items()}
                             or {"nothing": {"machine": "m", "start": 0}}),
)
