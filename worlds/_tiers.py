"""Difficulty tiers of generated targets, defined by measured properties.

A tier is decided from what a base world measurably is, never from how it
was drawn: ``tier_properties`` asks the world's family to measure the optimum
length, the solution counts, the distractor primitives (primitives in no
optimal bounded solution; a family may add distractor entities, see below),
the constraint count, the grounded alphabet and the branching (legal steps at
the start; mean over the reachable states within the step cap), and
``tier_of`` maps them to a tier:

* ``T3`` (top): optimum at least 5 steps and at least 3 distractors;
* ``T2``: optimum at least 4 steps and at least 2 distractors;
* ``T1``: everything else.

Each family's generator also has draw parameters per tier
(``FamilyGenerator.tier_params``), chosen so that a draw usually measures as
the tier it was drawn for; the generator rejects a draw that does not
(reason ``base:measured_tier_differs``).

A schedule world has one primitive, ``start``, which every solution uses, so
its ``distractor_primitives`` is always 0 and says nothing; its family also
measures ``distractor_entities`` (``distractor_entities`` below): the
world's choosable entities (those of a type some primitive parameter takes:
tasks and machines) that are an argument of no step of any optimal bounded
solution -- decoy tasks no optimal timetable places and machines no optimal
timetable uses. Where a property set has ``distractor_entities``,
``tier_of`` counts it as the distractors; otherwise it counts
``distractor_primitives``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._enumerate import Enumeration, grounded_steps
from ._graph import reachable_graph
from ._model import World
from ._registry import get_family
from ._structure import one_step

__all__ = [
    "TIERS",
    "distractor_entities",
    "step_tier_properties",
    "tier_of",
    "tier_properties",
]

#: Tier names, easiest first.
TIERS = ("T1", "T2", "T3")


def distractor_entities(world: World, optimal: Sequence[Sequence[str]]) -> int:
    """Choosable entities of ``world`` (of a type some primitive parameter takes) that are an argument of no
    step of any solution in ``optimal``."""
    choosable = {p.type for prim in world.primitives for p in prim.params}
    used = {a for sol in optimal for x in sol for a in one_step(x).args if isinstance(a, str)}
    return sum(1 for name, kind in world.entities if kind in choosable and name not in used)


def tier_properties(world: World, enum: Enumeration) -> dict[str, Any]:
    """The measured properties a tier is decided on (see the module docstring), by the world's family."""
    return get_family(world.family).tier_properties(world, enum)


def step_tier_properties(world: World, enum: Enumeration, extra) -> dict[str, Any]:
    """The tier properties of a step-sequence world, measured on its reachable state graph; ``extra(optimal)``
    gives the family's further properties from the optimal solutions."""
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
        "constraints": get_family(world.family).constraint_count(world),
        "grounded_steps": len(grounded_steps(world)),
        "branching_at_start": out_deg[g["initial"]],
        "mean_branching": round(sum(out_deg[s] for s in expanded) / len(expanded), 4) if expanded else 0.0,
    }
    props.update(extra(optimal))
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
