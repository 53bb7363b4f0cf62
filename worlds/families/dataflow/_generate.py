"""The pair generator's hooks of family ``dataflow``: tier parameters, the pipeline drawer, source variants.

One template: a typed pipeline with a tap (``draw_world``).  The draw context
is the reference program and the tap stage ``j``: the motif prefers the tap
edge ``stage_j -arg1-> stage_{j+1}``, source variants are moves on the
reference program, and the manifest records the program.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._errors import WorldsError
from ..._model import FamilyGenerator
from ..._tiers import TIERS
from ._state import evaluate

__all__ = ["DATAFLOW_TIERS", "DataflowTierParams", "GENERATOR", "dataflow_tier_params", "draw_world"]


@dataclass(frozen=True)
class DataflowTierParams:
    """Draw parameters of a generated dataflow base (a typed pipeline with a tap; see ``draw_world``).

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


#: Operations of the pipeline's stage and decoy primitives (the tap stage is always ``sub``: swapping its
#: arguments changes the program, so the argument position of the tap edge is a real choice).
_DF_STAGE_OPS = ("add", "sub", "mul", "max", "min")


def _df_run(raw: Mapping[str, Any], program: Sequence[tuple[str, str, tuple[str, ...]]]) -> list[int]:
    """The goal wire's value on every case of ``raw`` when ``program`` (target, primitive, args) runs."""
    prims = {p["name"]: p for p in raw["primitives"]}
    out = []
    for case in raw["goal"]["cases"]:
        val = dict(case["inputs"])
        for target, name, args in program:
            p = prims[name]
            val[target] = evaluate(p["op"], tuple(val[a] for a in args), raw["types"][p["result"]], p.get("value", 0))
        out.append(val[program[-1][0]])
    return out


def draw_world(rng: random.Random, tp: DataflowTierParams, wid: str):
    """A dataflow base: a typed pipeline ``s0 -> s1 -> ... -> sL`` of stage primitives over inputs ``a``, ``b``
    (type ``s0``) and a tap input ``c`` of a middle type ``sj``, whose stage ``j + 1`` subtracts ``c`` from the
    pipeline's wire; decoy primitives loop on a middle stage type (``s_i`` and an input to ``s_i``), so every
    program that uses one is a binding longer than the pipeline. The goal is
    stated by the reference program's values on drawn input vectors. Returns (mapping, reference program,
    tap stage index j)."""
    length = rng.randint(*tp.chain)
    types = {f"s{i}": rng.randint(*tp.moduli) for i in range(length + 1)}
    j = rng.randint(1, length - 1)
    inputs = {"a": "s0", "b": "s0", "c": f"s{j}"}
    prims: list[dict] = []
    program: list[tuple[str, str, tuple[str, ...]]] = []
    prev = ""
    for i in range(1, length + 1):
        name = f"stage{i}"
        if i == 1:
            params, op, args = ["s0", "s0"], rng.choice(_DF_STAGE_OPS), ("a", "b")
        elif i == j + 1:
            params, op, args = [f"s{j}", f"s{j}"], "sub", (prev, "c")
        else:
            params, op, args = [f"s{i - 1}", "s0"], rng.choice(_DF_STAGE_OPS), (prev, rng.choice("ab"))
        prims.append({"name": name, "op": op, "params": params, "result": f"s{i}", "cost": rng.randint(1, 2)})
        prev = "out" if i == length else f"w{i}"
        program.append((prev, name, args))
    for k in range(tp.decoys):
        i = rng.randint(1, length - 1)
        prims.append({"name": f"aux{k}", "op": rng.choice(_DF_STAGE_OPS), "params": [f"s{i}", "s0"],
                      "result": f"s{i}", "cost": 1})
    space = [(x, y, z) for x in range(types["s0"]) for y in range(types["s0"]) for z in range(types[f"s{j}"])]
    cases = [{"inputs": {"a": x, "b": y, "c": z}, "expect": 0} for x, y, z in rng.sample(space, tp.cases)]
    raw: dict[str, Any] = {
        "schema_version": 1, "id": wid, "family": "dataflow", "title": "generated pipeline",
        "budget": {"max_steps": length + tp.step_slack,
                   "max_cost": sum(p["cost"] for p in prims[:length]) + tp.cost_slack,
                   "max_depth": length + tp.depth_slack},
        "types": types, "inputs": inputs, "primitives": prims,
        "goal": {"wire": "out", "type": f"s{length}", "cases": cases},
        "constraints": [{"kind": "no_dead_wires"}]
                       + ([{"kind": "max_uses", "primitive": p["name"], "limit": 1} for p in prims]
                          if tp.stage_caps else []),
    }
    for case, v in zip(cases, _df_run(raw, program)):
        case["expect"] = v
    return raw, program, j


def _source_overrides(base_raw: Mapping[str, Any], program, j: int, rng: random.Random) -> dict | None:
    """One source variant: the reference program changed by 1-2 moves (the tap stage's arguments swapped,
    ``a`` and ``b`` exchanged in a stage, a loop decoy inserted after a stage), its values on the base's cases
    as the new expected values. None when the moves change nothing."""
    prog = [list(x) for x in program]
    prims = {p["name"]: p for p in base_raw["primitives"]}
    loops = [p for p in base_raw["primitives"] if p["name"].startswith("aux") and p["params"][0] != "s0"]
    for move in rng.sample(["swap_tap", "swap_input", "loop"], rng.randint(1, 2)):
        if move == "swap_tap":
            x, y = prog[j][2]
            prog[j][2] = (y, x)
        elif move == "swap_input":
            k = rng.randrange(len(prog))
            prog[k][2] = tuple({"a": "b", "b": "a"}.get(a, a) for a in prog[k][2])
        elif move == "loop" and loops:
            p = rng.choice(loops)
            at = next((i for i, (_, nm, _) in enumerate(prog) if prims[nm]["result"] == p["params"][0]), None)
            if at is not None:
                wire = prog[at][0]
                new = f"{wire}x"
                prog.insert(at + 1, [new, p["name"], (wire, rng.choice("ab"))])
                for later in prog[at + 2:]:
                    later[2] = tuple(new if a == wire else a for a in later[2])
    values = _df_run(base_raw, [tuple(x) for x in prog])
    goal = copy.deepcopy(dict(base_raw["goal"]))
    for case, v in zip(goal["cases"], values):
        case["expect"] = v
    if goal == base_raw["goal"]:
        return None
    return {"goal": goal}


def _draw_base(rng: random.Random, tp: DataflowTierParams, wid: str) -> tuple[dict, tuple]:
    """``draw_world`` with its context: (reference program, tap stage index)."""
    raw, program, j = draw_world(rng, tp, wid)
    return raw, (program, j)


def _draw_source(base_raw: Mapping[str, Any], context: tuple, rng: random.Random) -> dict | None:
    program, j = context
    return _source_overrides(base_raw, program, j, rng)


def _motif_key(context: tuple):
    """The tap edge first, then by name."""
    _, j = context
    tap = (f"stage{j}", "arg1", f"stage{j + 1}")
    return lambda e: (e != tap, e)


def _notes(context: tuple) -> dict:
    """The manifest's ``generator.reference_program``: the drawn program."""
    program, _ = context
    return {"reference_program": [f"{t} = {n}({', '.join(a)})" for t, n, a in program]}


#: The generator's hooks.  Source variants (8 per draw) are enumerated up to the optimum + 1 bindings.
GENERATOR = FamilyGenerator(
    tiers=DATAFLOW_TIERS,
    tier_params=dataflow_tier_params,
    pair_code="DF",
    source_variants=8,
    source_steps_bounded=True,
    draw_base=_draw_base,
    draw_source=_draw_source,
    motif_key=_motif_key,
    notes=_notes,
)
