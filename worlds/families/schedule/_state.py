"""The records of family ``schedule``: the timetable state, a task, the spec."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PRIMITIVE", "ScheduleSpec", "ScheduleState", "Task"]

#: The family's one primitive.
PRIMITIVE = "start"


@dataclass(frozen=True, order=True)
class ScheduleState:
    """Placements: (task, machine, start) triples sorted by task (canonical, hashable)."""

    placements: tuple[tuple[str, str, int], ...]

    def placed(self, task: str) -> tuple[str, str, int] | None:
        for p in self.placements:
            if p[0] == task:
                return p
        return None


@dataclass(frozen=True)
class Task:
    """A task: name, duration (time units), machine kind it needs, predecessors (must end before it starts)."""

    name: str
    duration: int
    kind: str
    after: tuple[str, ...]


@dataclass(frozen=True)
class ScheduleSpec:
    """schedule semantics.

    machines: sorted (machine, kind, rate); a placement costs duration * rate.
    tasks: tasks sorted by name.
    goal: tasks that must all be placed.
    constraints: sorted (kind, tasks, by): ``deadline`` (tasks[0] ends by ``by``) or
        ``no_overlap`` (the named tasks never run at overlapping times, on any machines);
        both are checked on every committed state.
    horizon: every task ends by this time (budget).
    """

    machines: tuple[tuple[str, str, int], ...]
    tasks: tuple[Task, ...]
    goal: tuple[str, ...]
    constraints: tuple[tuple[str, tuple[str, ...], int], ...]
    horizon: int
