"""Difficulty tiers of generated targets, defined by measured properties.

A tier is decided from what a base world measurably is, never from how it
was drawn: ``tier_properties`` measures the optimum length, the solution
counts, the distractor primitives (primitives in no optimal bounded
solution; for schedule also the distractor entities, see below), the
constraint count, the grounded alphabet and the branching (legal steps at
the start; mean over the reachable states within the step cap), and
``tier_of`` maps them to a tier:

* ``T3`` (top): optimum at least 5 steps and at least 3 distractors;
* ``T2``: optimum at least 4 steps and at least 2 distractors;
* ``T1``: everything else.

Each tier also has draw parameters (``token_tier_params``,
``schedule_tier_params``) chosen so that a draw usually measures as the tier it
was drawn for; the generator rejects a draw that does not (reason
``base:measured_tier_differs``).

A schedule world has one primitive, ``start``, which every solution uses, so
its ``distractor_primitives`` is always 0 and says nothing. For schedule,
``tier_properties`` also measures ``distractor_entities``: the world's
choosable entities (those of a type some primitive parameter takes: tasks
and machines) that are an argument of no step of any optimal bounded
solution -- decoy tasks no optimal timetable places and machines no optimal
timetable uses. Where a property set has ``distractor_entities``, ``tier_of``
counts it as the distractors; otherwise (token_workshop, whose properties are
unchanged) it counts ``distractor_primitives``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._enumerate import Enumeration, grounded_steps
from ._errors import WorldsError
from ._graph import reachable_graph
from ._model import World
from ._structure import one_step

__all__ = [
    "ENTITY_DISTRACTOR_FAMILIES",
    "SCHEDULE_TIERS",
    "ScheduleTierParams",
    "TIERS",
    "TierParams",
    "distractor_entities",
    "schedule_tier_params",
    "DATAFLOW_TIERS",
    "DataflowTierParams",
    "dataflow_tier_params",
    "tier_of",
    "tier_properties",
    "token_tier_params",
]

#: Tier names, easiest first.
TIERS = ("T1", "T2", "T3")


@dataclass(frozen=True)
class TierParams:
    """Draw parameters of a generated token_workshop base.

    chain: range of the production chain's length (the optimum is one more: the tool).
    decoys: parameterised decoy recipes (raw material -> junk).
    decoy_cost, real_cost: cost ranges of decoy and chain recipes.
    spare_probability: chance of one spare raw unit in the start.
    step_slack, cost_slack: budget above the optimum's length and cost.
    constraints: hard constraints (``at_most`` one of each junk, then a final-scope tool cap).
    """

    chain: tuple[int, int]
    decoys: int
    decoy_cost: tuple[int, int]
    real_cost: tuple[int, int]
    spare_probability: float
    step_slack: int
    cost_slack: int
    constraints: int


_TOKEN = {
    "T1": TierParams((2, 3), 1, (4, 5), (2, 3), 0.5, 1, 2, 1),
    "T2": TierParams((3, 4), 2, (1, 2), (2, 3), 0.5, 1, 2, 2),
    "T3": TierParams((4, 5), 3, (1, 1), (2, 3), 0.25, 1, 2, 4),
}


def token_tier_params(tier: str) -> TierParams:
    """The token_workshop draw parameters of ``tier``."""
    return _TOKEN[tier]


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


@dataclass(frozen=True)
class DataflowTierParams:
    """Draw parameters of a generated dataflow base (a typed pipeline with a tap; see ``_generate``).

    chain: range of the pipeline's length (stage primitives; the optimum).
    moduli: range of each value type's modulus.
    decoys: decoy primitives (loops on a middle stage type).
    cases: input vectors the goal is stated on.
    step_slack, cost_slack, depth_slack: budget above the reference program's length, cost and depth.
    stage_caps: whether ``max_uses`` rules cap every primitive (stages and decoys) at one use (the pipeline is then
        a chain, and the enumeration does not branch into parallel copies of a stage).
    """

    chain: tuple[int, int]
    moduli: tuple[int, int]
    decoys: int
    cases: int
    step_slack: int
    cost_slack: int
    depth_slack: int
    stage_caps: bool


#: Tiers a dataflow base is drawn for: optimum 3 / 4 / 5 (the pipeline) with 1 / 2 / 3 decoy primitives, which no
#: optimal program uses, so each tier's draws measure as it through ``distractor_primitives``.
DATAFLOW_TIERS = TIERS

_DATAFLOW = {
    "T1": DataflowTierParams((3, 3), (5, 7), 1, 6, 0, 1, 0, True),
    "T2": DataflowTierParams((4, 4), (5, 7), 2, 6, 0, 1, 0, True),
    "T3": DataflowTierParams((5, 5), (5, 7), 3, 6, 0, 1, 0, True),
}


def dataflow_tier_params(tier: str) -> DataflowTierParams:
    """The dataflow draw parameters of ``tier``."""
    if tier not in _DATAFLOW:
        raise WorldsError(f"unknown tier {tier!r}; dataflow tiers are {', '.join(DATAFLOW_TIERS)}")
    return _DATAFLOW[tier]


#: Families whose tier counts distractor entities rather than distractor primitives (see the module docstring).
ENTITY_DISTRACTOR_FAMILIES = frozenset({"schedule"})


def distractor_entities(world: World, optimal: Sequence[Sequence[str]]) -> int:
    """Choosable entities of ``world`` (of a type some primitive parameter takes) that are an argument of no
    step of any solution in ``optimal``."""
    choosable = {p.type for prim in world.primitives for p in prim.params}
    used = {a for sol in optimal for x in sol for a in one_step(x).args if isinstance(a, str)}
    return sum(1 for name, kind in world.entities if kind in choosable and name not in used)


def tier_properties(world: World, enum: Enumeration) -> dict[str, Any]:
    """The measured properties a tier is decided on (see the module docstring)."""
    sols = enum.solutions
    opt = enum.optimal_length
    optimal = [s for s in sols if len(s) == opt]
    used = {one_step(x).name for s in optimal for x in s}
    g = reachable_graph(world)
    out_deg = Counter(s for s, _, _, _ in g["edges"])
    expanded = [s for s in g["nodes"] if g["depth"][s] < world.budget.max_steps]
    props = {
        "optimum_length": opt,
        "solutions": len(sols),
        "optimal_solutions": len(optimal),
        "distractor_primitives": sum(1 for p in world.primitives if p.name not in used),
        "constraints": len(world.spec.constraints),
        "grounded_steps": len(grounded_steps(world)),
        "branching_at_start": out_deg[g["initial"]],
        "mean_branching": round(sum(out_deg[s] for s in expanded) / len(expanded), 4) if expanded else 0.0,
    }
    if world.family in ENTITY_DISTRACTOR_FAMILIES:
        props["distractor_entities"] = distractor_entities(world, optimal)
    return props


def tier_of(props: dict[str, Any]) -> str:
    """The tier measured properties put a target in (distractors: ``distractor_entities`` where measured, else
    ``distractor_primitives``)."""
    opt = props["optimum_length"]
    distract = props["distractor_entities"] if "distractor_entities" in props else props["distractor_primitives"]
    if opt >= 5 and distract >= 3:
        return "T3"
    if opt >= 4 and distract >= 2:
        return "T2"
    return "T1"
