"""Family ``schedule``: place typed tasks on machines at explicit start times.

The solution shape is a timeline rather than a production chain: each step
``start(task, machine, time)`` fixes one task on one machine over
``[time, time + duration)``.  State: the canonical sorted tuple of
placements (task, machine, start).

This module holds the world file and the semantics; ``_state`` the state and
spec records, ``_structure`` the pair hooks (production edges, independence,
relabelling), ``_text`` the handbook and prompt text, ``_generate`` the
generator's drawers and tier parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import _reference
from ..._model import INT_TYPE, Failure, Param, Primitive, Reason, World
from ..._steps import StepFamily
from ..._tiers import distractor_entities
from ..._validate import V
from . import _generate, _structure, _text
from ._state import PRIMITIVE, ScheduleSpec, ScheduleState, Task

__all__ = ["Schedule"]


_KINDS = ("deadline", "no_overlap")


class Schedule(StepFamily):
    """The ``schedule`` family (see the module docstring and docs/worlds-and-fixtures.md)."""

    name = "schedule"
    fields = ("machine_kinds", "machines", "tasks", "goal", "constraints")
    budget_fields = ("horizon",)
    #: the one primitive ``start`` is part of the grammar: a replica keeps its name.
    relabels_primitives = False
    reference_sources = (Path(_reference.__file__).resolve(),)
    shuffled_tables = ("machines",)
    shuffled_lists = ("tasks", "constraints")
    state_lines = _text.STATE_LINES
    generator = _generate.GENERATOR

    def validate(self, raw: Mapping[str, Any], err) -> None:
        v = V(err)
        horizon = v.int_range(
            v.table(raw["budget"], "horizon", "budget.horizon"),
            "budget.horizon",
            1,
            1000,
        )
        kinds = v.typed(
            v.table(raw, "machine_kinds", "machine_kinds"), list, "machine_kinds"
        )
        if not kinds:
            err("machine_kinds", "must list at least one machine kind")
        for i, k in enumerate(kinds):
            v.name(k, f"machine_kinds[{i}]")
        if len(set(kinds)) != len(kinds):
            err("machine_kinds", "lists a kind twice; list each once")
        machines = v.typed(v.table(raw, "machines", "machines"), dict, "machines")
        if not machines:
            err("machines", "must declare at least one machine")
        for m in sorted(machines):
            p = f"machines.{m}"
            v.name(m, p)
            if m == PRIMITIVE:
                err(p, f"{m!r} is the primitive's name; rename the machine")
            v.typed(machines[m], dict, p)
            v.only(machines[m], {"kind", "rate"}, p)
            kd = v.typed(v.table(machines[m], "kind", f"{p}.kind"), str, f"{p}.kind")
            if kd not in kinds:
                err(f"{p}.kind", f"kind {kd!r} is not in machine_kinds {sorted(kinds)}")
            v.int_range(
                v.table(machines[m], "rate", f"{p}.rate"), f"{p}.rate", 0, 10**6
            )
        tasks = v.typed(v.table(raw, "tasks", "tasks"), list, "tasks")
        if not tasks:
            err("tasks", "must declare at least one task")
        names: list[str] = []
        for i, t in enumerate(tasks):
            p = f"tasks[{i}]"
            v.typed(t, dict, p)
            v.only(t, {"name", "duration", "kind", "after"}, p)
            nm = v.name(v.table(t, "name", f"{p}.name"), f"{p}.name")
            if nm in names or nm in machines or nm == PRIMITIVE:
                err(
                    f"{p}.name",
                    f"{nm!r} repeats a task, machine or primitive name; names must be unique",
                )
            names.append(nm)
            v.int_range(
                v.table(t, "duration", f"{p}.duration"), f"{p}.duration", 1, horizon
            )
            kd = v.typed(v.table(t, "kind", f"{p}.kind"), str, f"{p}.kind")
            if kd not in kinds:
                err(f"{p}.kind", f"kind {kd!r} is not in machine_kinds {sorted(kinds)}")
        for i, t in enumerate(tasks):
            after = v.typed(t.get("after", []), list, f"tasks[{i}].after")
            for j, a in enumerate(after):
                v.typed(a, str, f"tasks[{i}].after[{j}]")
                if a not in names or a == t["name"]:
                    err(f"tasks[{i}].after[{j}]", f"{a!r} is not another declared task")
        # precedence must be acyclic
        deps = {t["name"]: set(t.get("after", [])) for t in tasks}
        done: set[str] = set()
        while len(done) < len(deps):
            ready = [n for n in sorted(deps) if n not in done and deps[n] <= done]
            if not ready:
                err(
                    "tasks",
                    "the 'after' relation has a cycle; precedence must be acyclic",
                )
            done.update(ready)
        goal = v.typed(v.table(raw, "goal", "goal"), dict, "goal")
        v.only(goal, {"scheduled"}, "goal")
        sch = v.typed(
            v.table(goal, "scheduled", "goal.scheduled"), list, "goal.scheduled"
        )
        if not sch:
            err("goal.scheduled", "must name at least one task")
        for j, a in enumerate(sch):
            v.typed(a, str, f"goal.scheduled[{j}]")
            if a not in names:
                err(f"goal.scheduled[{j}]", f"{a!r} is not a declared task")
        cons = v.typed(raw.get("constraints", []), list, "constraints")
        for i, c in enumerate(cons):
            p = f"constraints[{i}]"
            v.typed(c, dict, p)
            v.only(c, {"kind", "tasks", "by"}, p)
            kind = v.choice(c, "kind", f"{p}.kind", _KINDS, "constraint kind")
            ts = v.refs(c, "tasks", f"{p}.tasks", names, "task")
            if kind == "deadline":
                if len(ts) != 1:
                    err(f"{p}.tasks", "a deadline constraint names exactly one task")
                v.int_range(v.table(c, "by", f"{p}.by"), f"{p}.by", 1, horizon)
            else:
                if len(ts) < 2 or len(set(ts)) != len(ts):
                    err(
                        f"{p}.tasks",
                        "a no_overlap constraint names two or more distinct tasks",
                    )
                if "by" in c:
                    err(f"{p}.by", "a no_overlap constraint takes no 'by'; remove it")

    def build(self, raw: Mapping[str, Any]):
        horizon = raw["budget"]["horizon"]
        machines = tuple(
            sorted((m, d["kind"], d["rate"]) for m, d in raw["machines"].items())
        )
        tasks = tuple(
            sorted(
                (
                    Task(
                        t["name"],
                        t["duration"],
                        t["kind"],
                        tuple(sorted(t.get("after", []))),
                    )
                    for t in raw["tasks"]
                ),
                key=lambda t: t.name,
            )
        )
        cons = tuple(
            sorted(
                (c["kind"], tuple(c["tasks"]), int(c.get("by", 0)))
                for c in raw.get("constraints", [])
            )
        )
        spec = ScheduleSpec(
            machines, tasks, tuple(sorted(raw["goal"]["scheduled"])), cons, horizon
        )
        entities = tuple(
            sorted(
                [(m, "machine") for m, _, _ in machines]
                + [(t.name, "task") for t in tasks]
            )
        )
        prim = Primitive(
            PRIMITIVE,
            (
                Param("task", "task"),
                Param("machine", "machine"),
                Param("time", INT_TYPE, 0, horizon - 1),
            ),
        )
        return (
            entities,
            (prim,),
            spec,
            ScheduleState(()),
            (("horizon", horizon),),
            ("machine", "task"),
        )

    def _task(self, world: World, name: str) -> Task:
        for t in world.spec.tasks:
            if t.name == name:
                return t
        raise KeyError(name)  # unreachable: the checker resolved the entity

    def _end(self, world: World, placement: tuple[str, str, int]) -> int:
        return placement[2] + self._task(world, placement[0]).duration

    def apply(self, world: World, state: ScheduleState, name: str, args: tuple):
        task_name, machine, time = args
        task = self._task(world, task_name)
        if state.placed(task_name) is not None:
            return Failure(Reason.INAPPLICABLE, f"task {task_name} is already placed")
        kind, rate = next((k, r) for m, k, r in world.spec.machines if m == machine)
        if kind != task.kind:
            return Failure(
                Reason.INAPPLICABLE,
                f"task {task_name} needs a machine of kind {task.kind}; {machine} is of kind {kind}",
            )
        for pred in task.after:
            pp = state.placed(pred)
            if pp is None:
                return Failure(
                    Reason.INAPPLICABLE,
                    f"task {task_name} comes after {pred}, which is not placed yet",
                )
            if self._end(world, pp) > time:
                return Failure(
                    Reason.INAPPLICABLE,
                    f"task {task_name} at {time} starts before {pred} ends at {self._end(world, pp)}",
                )
        end = time + task.duration
        for p in state.placements:
            if p[1] == machine and p[2] < end and time < self._end(world, p):
                return Failure(
                    Reason.INAPPLICABLE,
                    f"machine {machine} is busy with {p[0]} over [{p[2]}, {self._end(world, p)})",
                )
        new = ScheduleState(
            tuple(sorted(state.placements + ((task_name, machine, time),)))
        )
        return new, task.duration * rate

    def limits(self, world: World, state: ScheduleState):
        for p in state.placements:
            if self._end(world, p) > world.spec.horizon:
                return Failure(
                    Reason.OVER_BUDGET,
                    f"task {p[0]} ends at {self._end(world, p)}, past the horizon {world.spec.horizon}",
                )
        return None

    def constraints(self, world: World, state: ScheduleState, final: bool):
        for kind, ts, by in world.spec.constraints:
            if kind == "deadline":
                p = state.placed(ts[0])
                if p is not None and self._end(world, p) > by:
                    return Failure(
                        Reason.CONSTRAINT_VIOLATION,
                        f"deadline: {ts[0]} ends at {self._end(world, p)} > {by}",
                    )
            else:
                placed = [p for p in (state.placed(t) for t in ts) if p is not None]
                for i, a in enumerate(placed):
                    for b in placed[i + 1 :]:
                        if a[2] < self._end(world, b) and b[2] < self._end(world, a):
                            return Failure(
                                Reason.CONSTRAINT_VIOLATION,
                                f"no_overlap: {a[0]} and {b[0]} overlap in time",
                            )
        return None

    def goal(self, world: World, state: ScheduleState) -> bool:
        return all(state.placed(t) is not None for t in world.spec.goal)

    def describe_state(self, state: ScheduleState):
        return {t: {"machine": m, "start": s} for t, m, s in state.placements}

    def state_from_described(self, world: World, described: Mapping[str, Any]) -> ScheduleState:
        return ScheduleState(tuple(sorted((t, p["machine"], p["start"]) for t, p in described.items())))

    def reference_replay(self, raw: Mapping[str, Any], text: str):
        return _reference.replay(raw, text)

    def replay_state(self, state: ScheduleState) -> tuple:
        return tuple(state.placements)

    def goal_progress(self, world: World, state: ScheduleState) -> int:
        return sum(state.placed(task) is not None for task in world.spec.goal)

    # ---- pairs, tiers, text and generation (the family's other modules) ---------

    sort_declarations = staticmethod(_structure.sort_declarations)
    relabel = staticmethod(_structure.relabel)
    production_edges = staticmethod(_structure.production_edges)
    dependency = staticmethod(_structure.dependency)
    state_space_bound = staticmethod(_structure.state_space_bound)

    def subject(self, world: World, step) -> str:
        """The task a ``start`` step places."""
        return f"start:{step.args[0]}"

    def state_map(self, state: ScheduleState, ent: Mapping[str, str]) -> ScheduleState:
        return ScheduleState(tuple(sorted((ent[t], ent[m], s) for t, m, s in state.placements)))

    def type_labels(self, raw: Mapping[str, Any]) -> list[str]:
        return list(raw["machine_kinds"])

    def extra_tier_properties(self, world: World, optimal: Sequence[Sequence[str]]) -> dict[str, Any]:
        """``distractor_entities``: ``start`` is the only primitive, so the distractors are tasks and machines."""
        return {"distractor_entities": distractor_entities(world, optimal)}

    raw_of_world = staticmethod(_text.raw_of_world)
    handbook_lines = staticmethod(_text.handbook_lines)
    format_state = staticmethod(_text.format_state)
    situation_lines = staticmethod(_text.situation_lines)
    goal_words = staticmethod(_text.goal_words)
