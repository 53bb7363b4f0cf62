"""Difficulty tiers of generated targets, defined by measured properties.

A tier is decided from what a base world measurably is, never from how it
was drawn: ``tier_properties`` measures the optimum length, the solution
counts, the distractor primitives (primitives in no optimal bounded
solution), the constraint count, the grounded alphabet and the branching
(legal steps at the start; mean over the reachable states within the step
cap), and ``tier_of`` maps them to a tier:

* ``T3`` (top): optimum at least 5 steps and at least 3 distractor primitives;
* ``T2``: optimum at least 4 steps and at least 2 distractor primitives;
* ``T1``: everything else.

Each tier also has draw parameters (``token_tier_params``) chosen so that a
draw usually measures as the tier it was drawn for; the generator rejects a
draw that does not (reason ``base:measured_tier_differs``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ._enumerate import Enumeration, grounded_steps
from ._graph import reachable_graph
from ._model import World
from ._structure import one_step

__all__ = ["TIERS", "TierParams", "tier_of", "tier_properties", "token_tier_params"]

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


def tier_properties(world: World, enum: Enumeration) -> dict[str, Any]:
    """The measured properties a tier is decided on (see the module docstring)."""
    sols = enum.solutions
    opt = enum.optimal_length
    optimal = [s for s in sols if len(s) == opt]
    used = {one_step(x).name for s in optimal for x in s}
    g = reachable_graph(world)
    out_deg = Counter(s for s, _, _, _ in g["edges"])
    expanded = [s for s in g["nodes"] if g["depth"][s] < world.budget.max_steps]
    return {
        "optimum_length": opt,
        "solutions": len(sols),
        "optimal_solutions": len(optimal),
        "distractor_primitives": sum(1 for p in world.primitives if p.name not in used),
        "constraints": len(world.spec.constraints),
        "grounded_steps": len(grounded_steps(world)),
        "branching_at_start": out_deg[g["initial"]],
        "mean_branching": round(sum(out_deg[s] for s in expanded) / len(expanded), 4) if expanded else 0.0,
    }


def tier_of(props: dict[str, Any]) -> str:
    """The tier measured properties put a target in."""
    opt, distract = props["optimum_length"], props["distractor_primitives"]
    if opt >= 5 and distract >= 3:
        return "T3"
    if opt >= 4 and distract >= 2:
        return "T2"
    return "T1"
