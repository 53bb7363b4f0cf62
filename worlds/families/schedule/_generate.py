"""The pair generator's hooks of family ``schedule``: tier parameters, base and source drawers."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._errors import WorldsError
from ..._model import FamilyGenerator
from ..._tiers import TIERS

__all__ = ["GENERATOR", "SCHEDULE_TIERS", "ScheduleTierParams", "schedule_tier_params"]


@dataclass(frozen=True)
class ScheduleTierParams:
    """Draw parameters of a generated schedule base.

    chain: range of the main chain's length (``job1 .. jobL``, each after the previous; the goal is the last).
    prep_probability: chance of a ``prep`` task, with no predecessor, that one chain task also waits for.
    kinds: range of the number of machine kinds.
    dear_probability: chance that a kind has a second, dearer machine beside its rate-1 machine.
    dear_rate: rate range of a second machine.
    duration: duration range of the chain and ``prep`` tasks.
    decoy_duration: duration range of the decoy tasks (a short decoy is a cheap step that wastes the step cap).
    decoys: range of the number of decoy tasks (in no goal's closure: work a source variant may ask for).
    decoy_after_probability: chance that a decoy task waits for a chain task.
    horizon_slack: horizon above the makespan of the reference timetable (earliest starts on rate-1 machines).
    cost_slack: cost cap above the reference timetable's cost.
    step_slack: step cap above the optimum.
    constraints: hard constraints: a deadline on a chain task at its reference end, then ``no_overlap`` on two
        tasks the reference keeps apart in time.
    """

    chain: tuple[int, int]
    prep_probability: float
    kinds: tuple[int, int]
    dear_probability: float
    dear_rate: tuple[int, int]
    duration: tuple[int, int]
    decoy_duration: tuple[int, int]
    decoys: tuple[int, int]
    decoy_after_probability: float
    horizon_slack: tuple[int, int]
    cost_slack: int
    step_slack: int
    constraints: int


#: Tiers a schedule base is drawn for (each measures as it through ``distractor_entities``).
SCHEDULE_TIERS = TIERS

#: Optimum: T1 3 (a chain of 3), T2 4 (a chain of 3 and ``prep``), T3 5 (a chain of 4 and ``prep``). Distractor
#: entities: the decoy tasks (2 / 2 / 3; none fits in an optimal timetable, whose length is the closure's) plus
#: every machine no optimal timetable uses, so each tier's draws measure as it. T3 durations are 1 and its
#: horizon is the reference makespan: a longer horizon multiplies the start times to enumerate.
_SCHEDULE = {
    "T1": ScheduleTierParams((3, 3), 0.0, (2, 2), 0.35, (2, 3), (1, 2), (1, 1), (2, 2), 0.25, (0, 1), 1, 0, 1),
    "T2": ScheduleTierParams((3, 3), 1.0, (2, 2), 0.35, (2, 3), (1, 2), (1, 1), (2, 2), 0.25, (0, 1), 1, 0, 1),
    "T3": ScheduleTierParams((4, 4), 1.0, (2, 2), 0.35, (2, 3), (1, 1), (1, 1), (3, 3), 0.25, (0, 0), 1, 0, 1),
}


def schedule_tier_params(tier: str) -> ScheduleTierParams:
    """The schedule draw parameters of ``tier``."""
    if tier not in _SCHEDULE:
        raise WorldsError(f"unknown tier {tier!r}; schedule tiers are {', '.join(SCHEDULE_TIERS)}")
    return _SCHEDULE[tier]


def _reference_timetable(tasks: Sequence[Mapping[str, Any]], cheap: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """Task -> (start, end) when ``tasks`` (in a topological order) each start as early as their predecessors
    and their kind's rate-1 machine allow (tasks on one machine in the given order)."""
    free: dict[str, int] = {}
    out: dict[str, tuple[int, int]] = {}
    for t in tasks:
        m = cheap[t["kind"]]
        start = max([free.get(m, 0)] + [out[a][1] for a in t.get("after", [])])
        out[t["name"]] = (start, start + t["duration"])
        free[m] = start + t["duration"]
    return out


def _draw_world(rng: random.Random, tp: ScheduleTierParams, wid: str) -> tuple[dict, None]:
    """A schedule base: a chain of jobs (each after the previous; the goal is the last), sometimes a ``prep``
    task one job also waits for, machine kinds with a rate-1 machine and sometimes a dearer second one, and
    decoy tasks no goal needs. The horizon, a deadline and the cost cap are set from the reference timetable
    (earliest starts on the rate-1 machines): it is a bounded solution, and the caps are tight around it.
    No draw context."""
    length = rng.randint(*tp.chain)
    kinds = [f"kind{i}" for i in range(rng.randint(*tp.kinds))]
    machines: dict[str, dict] = {}
    cheap: dict[str, str] = {}
    for i, k in enumerate(kinds):
        cheap[k] = f"mach{i}a"
        machines[f"mach{i}a"] = {"kind": k, "rate": 1}
        if rng.random() < tp.dear_probability:
            machines[f"mach{i}b"] = {"kind": k, "rate": rng.randint(*tp.dear_rate)}
    chain: list[dict] = []
    for i in range(1, length + 1):
        t: dict[str, Any] = {"name": f"job{i}", "duration": rng.randint(*tp.duration), "kind": rng.choice(kinds)}
        if i > 1:
            t["after"] = [f"job{i - 1}"]
        chain.append(t)
    closure = list(chain)
    if rng.random() < tp.prep_probability:
        prep = {"name": "prep", "duration": rng.randint(*tp.duration), "kind": rng.choice(kinds)}
        joins = rng.randint(2, length)
        chain[joins - 1]["after"] = sorted(chain[joins - 1]["after"] + ["prep"])
        closure = [prep] + chain
    ref = _reference_timetable(closure, cheap)
    decoys: list[dict] = []
    for k in range(rng.randint(*tp.decoys)):
        d: dict[str, Any] = {"name": f"side{k}", "duration": rng.randint(*tp.decoy_duration),
                             "kind": rng.choice(kinds)}
        if rng.random() < tp.decoy_after_probability:
            d["after"] = [f"job{rng.randint(1, length)}"]
        decoys.append(d)
    makespan = max(end for _, end in ref.values())
    horizon = makespan + rng.randint(*tp.horizon_slack)
    constraints: list[dict] = []
    if tp.constraints >= 1 and length > 1:
        j = rng.randint(1, length - 1)
        constraints.append({"kind": "deadline", "tasks": [f"job{j}"], "by": ref[f"job{j}"][1]})
    apart = [(a, b) for a in sorted(ref) for b in sorted(ref)
             if a < b and "prep" in (a, b) and (ref[a][1] <= ref[b][0] or ref[b][1] <= ref[a][0])]
    for a, b in rng.sample(apart, min(len(apart), max(0, tp.constraints - 1))):
        constraints.append({"kind": "no_overlap", "tasks": [a, b]})
    raw = {
        "schema_version": 1,
        "id": wid,
        "family": "schedule",
        "title": "generated timetable",
        "machine_kinds": kinds,
        "budget": {"max_steps": len(closure) + tp.step_slack, "max_cost": sum(t["duration"] for t in closure)
                   + tp.cost_slack, "horizon": horizon},
        "machines": machines,
        "tasks": closure + decoys,
        "goal": {"scheduled": [f"job{length}"]},
        "constraints": constraints,
    }
    return raw, None


def _draw_source(base_raw: Mapping[str, Any], context: None, rng: random.Random) -> dict:
    """One random source variant of a generated schedule base. A schedule starts empty, so a variant always
    changes the goal (a decoy task added, or an earlier job instead of the last) and may also loosen the
    budget (one more step, a higher cost cap, a later horizon) or drop the constraints."""
    goal = list(base_raw["goal"]["scheduled"])
    budget = dict(base_raw["budget"])
    tasks = {t["name"]: t for t in base_raw["tasks"]}
    jobs = sorted((t for t in tasks if t.startswith("job")), key=lambda t: int(t[3:]))
    decoys = sorted(t for t in tasks if t.startswith("side"))
    out: dict[str, Any] = {}
    goal_moves = ["goal_decoy", "short_goal"]
    moves = [rng.choice(goal_moves)]
    moves += rng.sample(["more_steps", "loose_cost", "late_horizon", "drop_constraints", "goal_decoy"],
                        rng.randint(0, 2))
    for move in moves:
        if move == "goal_decoy" and decoys:
            d = rng.choice(decoys)
            if d not in goal:
                goal.append(d)
                budget["max_steps"] += 1
                budget["max_cost"] += tasks[d]["duration"]
        elif move == "short_goal" and len(jobs) > 1:
            goal = [g for g in goal if g != jobs[-1]] + [rng.choice(jobs[:-1])]
        elif move == "more_steps":
            budget["max_steps"] += 1
        elif move == "loose_cost":
            budget["max_cost"] += rng.randint(1, 3)
        elif move == "late_horizon":
            budget["horizon"] += 1
        elif move == "drop_constraints" and base_raw.get("constraints"):
            out["constraints"] = []
    out["goal"] = {"scheduled": sorted(set(goal))}
    if budget != base_raw["budget"]:
        out["budget"] = budget
    return out


def _job_depth(task: str) -> int:
    """Position of a generated schedule task in its chain (``jobN`` -> N; ``prep`` and decoys 0)."""
    return int(task[3:]) if task.startswith("job") and task[3:].isdigit() else 0


#: The generator's hooks.  Motif preference: the edge into the deepest job (a source whose goal stops before it
#: can leave it out at a comparable length), same machine before cross machine, then by name.  A schedule
#: source variant is dearer to enumerate (every start time of every task is a step) and its variant space is
#: small, so fewer are drawn, each enumerated only up to the longest demonstration kept (optimum + 1 steps): the
#: same candidates, found faster, and a variant is refused as too large only for its short solutions.
GENERATOR = FamilyGenerator(
    tiers=SCHEDULE_TIERS,
    tier_params=schedule_tier_params,
    pair_code="SCH",
    source_variants=12,
    source_steps_bounded=True,
    draw_base=_draw_world,
    draw_source=_draw_source,
    motif_key=lambda context: lambda e: (-_job_depth(e[2]), e[1] != "same_machine", e),
)
