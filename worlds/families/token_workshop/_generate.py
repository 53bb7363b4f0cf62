"""The pair generator's hooks of family ``token_workshop``: tier parameters, base and source drawers."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._errors import WorldsError
from ..._model import FamilyGenerator
from ..._tiers import TIERS

__all__ = ["GENERATOR", "TierParams", "token_tier_params"]


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
    if tier not in _TOKEN:
        raise WorldsError(f"unknown tier {tier!r}; token_workshop tiers are {', '.join(TIERS)}")
    return _TOKEN[tier]


def _draw_world(rng: random.Random, tp: TierParams, wid: str) -> tuple[dict, None]:
    """A token_workshop base: a production chain with a tool made on the side and used as a catalyst,
    plus parameterised decoy recipes that burn raw material into junk; no draw context."""
    length = rng.randint(*tp.chain)
    n_raw = 2 if length <= 3 else 3
    raws = [f"raw{i}" for i in range(n_raw)]
    uses: Counter = Counter()
    tool_raw = rng.choice(raws)
    uses[tool_raw] += 1
    recipes: list[dict] = [{"name": "make_tool", "inputs": {tool_raw: 1}, "outputs": {"tool": 1},
                            "cost": rng.randint(*tp.real_cost)}]
    tool_at = rng.randint(1, length)
    for i in range(1, length + 1):
        r = rng.choice(raws)
        uses[r] += 1
        inputs = {r: 1}
        if i > 1:
            inputs[f"part{i - 1}"] = 1
        rec: dict[str, Any] = {"name": f"step{i}", "inputs": inputs, "outputs": {f"part{i}": 1},
                               "cost": rng.randint(*tp.real_cost)}
        if i == tool_at:
            rec["catalysts"] = ["tool"]
        recipes.append(rec)
    for k in range(tp.decoys):
        recipes.append({"name": f"scrap{k}", "params": [{"name": "x", "type": "raw"}], "inputs": {"x": 1},
                        "outputs": {f"junk{k}": 1}, "cost": rng.randint(*tp.decoy_cost)})
    initial = {r: uses[r] for r in raws if uses[r]}
    if rng.random() < tp.spare_probability:
        spare = rng.choice(raws)
        initial[spare] = initial.get(spare, 0) + 1
    tokens = {r: "raw" for r in raws}
    tokens.update({f"part{i}": "part" for i in range(1, length + 1)})
    tokens["tool"] = "tool"
    tokens.update({f"junk{k}": "junk" for k in range(tp.decoys)})
    constraints: list[dict] = []
    for k in range(min(tp.constraints, tp.decoys)):
        constraints.append({"kind": "at_most", "scope": "every_state", "tokens": [f"junk{k}"], "limit": 1})
    if tp.constraints > tp.decoys:
        constraints.append({"kind": "at_most", "scope": "final", "tokens": ["tool"], "limit": 2})
    opt_cost = sum(r["cost"] for r in recipes if not r["name"].startswith("scrap"))
    cap = max(3, *initial.values())
    raw = {
        "schema_version": 1,
        "id": wid,
        "family": "token_workshop",
        "title": "generated workshop",
        "token_types": ["raw", "part", "tool", "junk"],
        "budget": {"max_steps": length + 1 + tp.step_slack, "max_cost": opt_cost + tp.cost_slack,
                   "inventory_cap": cap},
        "tokens": tokens,
        "initial": initial,
        "recipes": recipes,
        "goal": {"require": {f"part{length}": 1}},
        "constraints": constraints,
    }
    return raw, None


def _draw_source(base_raw: Mapping[str, Any], context: None, rng: random.Random) -> dict:
    """One random source variant of a generated token_workshop base: 1-3 changes of start and goal."""
    initial = dict(base_raw["initial"])
    goal = dict(base_raw["goal"]["require"])
    recipes = {r["name"]: r for r in base_raw["recipes"]}
    length = sum(1 for r in recipes if r.startswith("step"))
    decoys = sorted(r for r in recipes if r.startswith("scrap"))
    moves = ["start_mid", "goal_junk", "short_goal", "tool_given", "spare_raw", "extra_tool"]
    for move in rng.sample(moves, rng.randint(1, 3)):
        if move == "start_mid" and length > 1:
            i = rng.randint(1, length - 1)
            for j in range(1, i + 1):
                for tok in recipes[f"step{j}"]["inputs"]:
                    if tok.startswith("raw") and initial.get(tok, 0) > 0:
                        initial[tok] -= 1
            initial[f"part{i}"] = initial.get(f"part{i}", 0) + 1
        elif move == "goal_junk" and decoys:
            goal[next(iter(recipes[rng.choice(decoys)]["outputs"]))] = 1
        elif move == "short_goal" and length > 1:
            j = rng.randint(1, length - 1)
            goal.pop(f"part{length}", None)
            goal[f"part{j}"] = 1
        elif move == "tool_given":
            initial["tool"] = initial.get("tool", 0) + 1
        elif move == "spare_raw":
            r = rng.choice(sorted(t for t in base_raw["tokens"] if t.startswith("raw")))
            initial[r] = initial.get(r, 0) + 1
        elif move == "extra_tool":
            goal["tool"] = initial.get("tool", 0) + 1
            tool_raw = next(iter(recipes["make_tool"]["inputs"]))
            initial[tool_raw] = initial.get(tool_raw, 0) + 1
    cap = base_raw["budget"]["inventory_cap"]
    initial = {k: min(v, cap) for k, v in sorted(initial.items()) if v > 0}
    return {"initial": initial, "goal": {"require": dict(sorted(goal.items()))}}


#: The generator's hooks: a catalyst edge is the preferred motif, then by name.  Source variants are
#: enumerated whole (``source_steps_bounded`` off), as the frozen token_workshop pairs were drawn.
GENERATOR = FamilyGenerator(
    tiers=TIERS,
    tier_params=token_tier_params,
    pair_code="TW",
    source_variants=24,
    source_steps_bounded=False,
    draw_base=_draw_world,
    draw_source=_draw_source,
    motif_key=lambda context: lambda e: (e[1] != "catalyst", e),
)
