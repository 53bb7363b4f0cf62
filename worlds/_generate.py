"""Seeded generator of latent base worlds and certified F/C pairs (token_workshop, schedule).

``generate_pairs(family, seed, n, tier)`` repeats *draws* until it holds ``n``
certified pairs. Draw ``k`` uses its own random stream, named by the generator
version, family, tier, seed and ``k``, so the result is a pure function of the
arguments. One draw:

1. draws a latent base world from the tier's parameters (``_tiers``);
2. enumerates every bounded solution of it and measures its tier properties;
   a base whose measured tier is not the requested one is rejected;
3. takes as withheld motif a production edge every bounded solution holds
   (a draw with none is rejected: generated pairs are motif-required);
4. draws source variants of the base (changed start and/or goal) and collects,
   from all their bounded solutions, F demonstrations that realize the motif and
   C demonstrations that do not, each within one step of the target optimum and
   passing the copy audit (verbatim, renamed, relabelled, reordered, windowed);
   C candidates whose structure is interchangeable with the motif in the target's
   solution set (``_interchange``) are refused;
5. pairs an F with a C demonstration, preferring equal primitive exposure (the
   same recipe uses), and hands the choice, pinned, to ``build_pair``, which
   builds the F/C replicas, the isomorphism certificate, the examples and the
   prompts and re-runs every audit on the replicas;
6. writes the manifest with the generator's version, parameters, tier and
   audit results added.

Every rejected draw is counted under one reason; demonstration candidates the
audits refused are counted separately by what refused them.

Each family has its own base drawer, source-variant drawer, tier parameters,
motif preference and pair id code (the tables after the drawers). A schedule
world starts empty, so its source variants change the goal (and may loosen
the budget or drop the constraints); its tiers count distractor entities
(tasks and machines no optimal timetable uses; see ``_tiers``).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._copy_audit import copy_audit
from ._enumerate import Bounds, EnumerationLimitError, enumerate_solutions
from ._errors import PairConstructionError, WorldsError
from ._interchange import interchangeable_edges
from ._loader import world_from_mapping
from ._manifest import TokenCounts, build_manifest
from ._model import World
from ._pair_spec import PairSpec
from ._pair_types import Pair
from ._construct import build_pair
from ._signature import motif_signature
from ._structure import production_edges, subject_of
from ._tiers import (
    DATAFLOW_TIERS,
    DataflowTierParams,
    dataflow_tier_params,
    SCHEDULE_TIERS,
    TIERS,
    ScheduleTierParams,
    TierParams,
    schedule_tier_params,
    tier_of,
    tier_properties,
    token_tier_params,
)

__all__ = ["GENERATOR_VERSION", "GenerationResult", "generate_pairs", "GENERATED_FAMILIES", "GENERATED_TIERS"]

#: Version of the generator; part of every generated manifest and of every draw's random stream.
GENERATOR_VERSION = "worlds.generate/1"
#: Families the generator can draw.
GENERATED_FAMILIES = ("token_workshop", "schedule", "dataflow")
#: Tiers the generator draws for each family: those its bases can measure as (``_tiers``).
GENERATED_TIERS = {"token_workshop": TIERS, "schedule": SCHEDULE_TIERS, "dataflow": DATAFLOW_TIERS}
#: Solutions above this many make a base unusable (the audits enumerate them all).
MAX_TARGET_SOLUTIONS = 2000
#: Source variants drawn per side per draw (token_workshop; see ``_SOURCE_VARIANTS`` for each family).
SOURCE_VARIANTS = 24
#: Most demonstration candidates one draw runs the audits on.
MAX_AUDITS = 200
#: The copy audit's declared transformations (what a copied demonstration may undergo).
COPY_TRANSFORMATIONS = ("verbatim", "renamed", "relabelled", "reordered", "reordered_relabelled", "windowed")


@dataclass(frozen=True)
class GenerationResult:
    """What one ``generate_pairs`` call produced.

    pairs: the certified pairs, each with its manifest filled in.
    specs: the pinned pair spec each pair was built from (same order): rebuilding one with other replica
        seeds (``dataclasses.replace(spec, f_seed=..., c_seed=...)`` and ``build_pair``) gives a further replica.
    draws: draws made.
    rejections: reason -> number of rejected draws (one reason per draw).
    candidate_rejections: what refused demonstration candidates -> how many.
    parameters: the call's parameters (family, seed, n, tier, generator version, tier parameters).
    """

    pairs: tuple[Pair, ...]
    specs: tuple[PairSpec, ...]
    draws: int
    rejections: dict[str, int]
    candidate_rejections: dict[str, int]
    parameters: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """A JSON-able record of the call (no manifests)."""
        return {
            "parameters": self.parameters,
            "pairs": [p.pair_id for p in self.pairs],
            "draws": self.draws,
            "rejections": dict(sorted(self.rejections.items())),
            "candidate_rejections": dict(sorted(self.candidate_rejections.items())),
        }


def _jsonable(d: dict) -> dict:
    """``d`` with tuples written as lists, as JSON reads it back."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


class _Reject(Exception):
    """A draw is rejected; ``reason`` is the counted code, ``detail`` says more."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


# ---------------------------------------------------------------- base worlds


def _draw_token_world(rng: random.Random, tp: TierParams, wid: str) -> dict:
    """A token_workshop base: a production chain with a tool made on the side and used as a catalyst,
    plus parameterised decoy recipes that burn raw material into junk."""
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
    return {
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


def _token_source_overrides(base_raw: Mapping[str, Any], rng: random.Random) -> dict:
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


def _draw_schedule_world(rng: random.Random, tp: ScheduleTierParams, wid: str) -> dict:
    """A schedule base: a chain of jobs (each after the previous; the goal is the last), sometimes a ``prep``
    task one job also waits for, machine kinds with a rate-1 machine and sometimes a dearer second one, and
    decoy tasks no goal needs. The horizon, a deadline and the cost cap are set from the reference timetable
    (earliest starts on the rate-1 machines): it is a bounded solution, and the caps are tight around it."""
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
    return {
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


def _schedule_source_overrides(base_raw: Mapping[str, Any], rng: random.Random) -> dict:
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


_DRAW_WORLD = {"token_workshop": _draw_token_world, "schedule": _draw_schedule_world}
_DRAW_SOURCE = {"token_workshop": _token_source_overrides, "schedule": _schedule_source_overrides}
_TIER_PARAMS = {"token_workshop": token_tier_params, "schedule": schedule_tier_params,
                "dataflow": dataflow_tier_params}
#: Source variants drawn per draw, per family: a schedule source variant is dearer to enumerate (every start
#: time of every task is a step), and its variant space is small, so fewer are drawn.
_SOURCE_VARIANTS = {"token_workshop": SOURCE_VARIANTS, "schedule": 12, "dataflow": 8}
#: Families whose source variants are enumerated only up to the longest demonstration kept (optimum + 1 steps):
#: the same candidates, found faster, and a variant is refused as too large only for its short solutions.
#: (token_workshop enumerates its variants whole, as its frozen pairs were drawn.)
_SOURCE_STEPS_BOUNDED = frozenset({"schedule"})
#: Pair id code of each family (``GEN-<code>-<tier>-<seed>-<draw>``).
_PAIR_CODE = {"token_workshop": "TW", "schedule": "SCH", "dataflow": "DF"}


def _job_depth(task: str) -> int:
    """Position of a generated schedule task in its chain (``jobN`` -> N; ``prep`` and decoys 0)."""
    return int(task[3:]) if task.startswith("job") and task[3:].isdigit() else 0


#: Preference order of the motif among the edges every bounded solution holds (least key first).
#: token_workshop: a catalyst edge, then by name. schedule: the edge into the deepest job (a source whose goal
#: stops before it can leave it out at a comparable length), same machine before cross machine, then by name.
_MOTIF_KEY = {
    "token_workshop": lambda e: (e[1] != "catalyst", e),
    "schedule": lambda e: (-_job_depth(e[2]), e[1] != "same_machine", e),
}


# ---------------------------------------------------------------- demonstrations


def _source_world(base_raw: Mapping[str, Any], overrides: Mapping[str, Any], vid: str) -> World | None:
    m = copy.deepcopy(dict(base_raw))
    m.update(copy.deepcopy(dict(overrides)))
    m["id"], m["title"] = vid, f"source instance {vid}"
    if m.get("initial") == base_raw.get("initial") and m.get("goal") == base_raw.get("goal"):
        return None
    try:
        return world_from_mapping(m, source=f"<generated source {vid}>")
    except WorldsError:
        return None


def _copy_kind(why: str) -> str:
    for key, words in (("reordered_relabelled", "reordered and relabelled"), ("reordered", "reordered,"),
                       ("relabelled", "relabelled"), ("renamed", "renamed"), ("verbatim", "verbatim")):
        if words in why:
            windowed = "its steps" in why
            return f"copy_audit:{key}" + (":window" if windowed else "")
    return "copy_audit:other"


@dataclass
class _Candidates:
    f: list = field(default_factory=list)  # (steps, overrides, source world), motif realized
    c: list = field(default_factory=list)  # the same, motif not realized
    refused: Counter = field(default_factory=Counter)


def _collect(base_raw: dict, motif, optimum: int, rng: random.Random, family: str) -> _Candidates:
    """Demonstration candidates from drawn source variants: every bounded source solution of length
    ``optimum`` or ``optimum + 1`` (so a copy, or a window of one, could be a target solution)."""
    out = _Candidates()
    seen: set = set()
    for _ in range(_SOURCE_VARIANTS[family]):
        ov = _DRAW_SOURCE[family](base_raw, rng)
        key = repr(ov)
        if key in seen:
            continue
        seen.add(key)
        src = _source_world(base_raw, ov, "D-000000")
        if src is None:
            out.refused["source:invalid_or_unchanged"] += 1
            continue
        try:
            sols = enumerate_solutions(src, Bounds(max_steps=optimum + 1 if family in _SOURCE_STEPS_BOUNDED else None,
                                                   max_solutions=MAX_TARGET_SOLUTIONS)).solutions
        except EnumerationLimitError:
            out.refused["source:too_many_solutions"] += 1
            continue
        if not sols:
            out.refused["source:no_solution"] += 1
            continue
        for sol in sols:
            if not optimum <= len(sol) <= optimum + 1:
                out.refused["demo:length_not_optimum_or_one_more"] += 1
                continue
            (out.f if motif in production_edges(src, sol) else out.c).append((sol, ov, src))
    return out


def _freq(world: World, sol: Sequence[str]) -> Counter:
    return Counter(subject_of(world, s) for s in sol)


def _pick(base: World, cands: _Candidates, audit, limit: int = MAX_AUDITS):
    """The (F, C) candidate pair: equal exposure first, then smallest exposure distance, length gap, text.

    ``audit(candidate, side)`` gives the reason a candidate is refused, or None; it is called lazily, in
    preference order, on at most ``limit`` distinct candidates. Returns ((F steps, F overrides),
    (C steps, C overrides), exposure distance) or None.
    """
    def groups(items):
        out: dict = {}
        for k, (steps, ov, _) in enumerate(items):
            key = tuple(sorted(_freq(base, steps).items()))
            out.setdefault(key, []).append(((len(steps), steps, repr(ov)), k))
        return {key: [k for _, k in sorted(v)] for key, v in out.items()}

    gf, gc = groups(cands.f), groups(cands.c)
    options = []
    for kf in gf:
        ff, nf = dict(kf), sum(n for _, n in kf)
        for kc in gc:
            cf, nc = dict(kc), sum(n for _, n in kc)
            if abs(nc - nf) > 1 or abs(len(cf) - len(ff)) > 1:
                continue
            dist = sum(abs(ff.get(x, 0) - cf.get(x, 0)) for x in set(ff) | set(cf))
            options.append((dist, abs(nc - nf), nf, kf, kc))
    options.sort()
    verdict: dict = {}
    for dist, _, _, kf, kc in options:
        for i in gf[kf]:
            for j in gc[kc]:
                if cands.f[i][1] == cands.c[j][1]:
                    continue
                for side, k in (("F", i), ("C", j)):
                    if (side, k) not in verdict:
                        if len(verdict) >= limit:
                            return None
                        verdict[side, k] = audit((cands.f if side == "F" else cands.c)[k], side)
                if verdict["F", i] is not None:
                    break
                if verdict["C", j] is None:
                    return (cands.f[i][0], cands.f[i][1]), (cands.c[j][0], cands.c[j][1]), dist
    return None


# ---------------------------------------------------------------- one draw


def _audited_spec(base: World, enum, motif, cands: _Candidates, rng: random.Random, refused: Counter, pair_id: str,
                  stream: str, base_raw: dict) -> tuple[PairSpec, Counter, int]:
    """Audit the demonstration candidates lazily (``_pick``: the copy audit on every candidate met, the
    interchangeable-edge audit on C candidates), pin the chosen F and C in a ``PairSpec`` with replica seeds
    drawn from ``rng``; returns (spec, audit counts, exposure distance). Every family's draw ends here."""
    sigs = {motif_signature(base, s) for s in enum.solutions}
    refused.update(cands.refused)
    audited: Counter = Counter()

    def audit(cand, side):
        steps, _, src = cand
        why = copy_audit(src, steps, base, sigs, enum.solutions)
        if why is not None:
            audited[_copy_kind(why)] += 1
            return why
        if side == "C" and interchangeable_edges(base, enum.solutions, motif, src, steps):
            audited["demo:c_interchangeable_with_motif"] += 1
            return "interchangeable"
        audited["passed"] += 1
        return None

    if not cands.f:
        raise _Reject("demo:no_f_candidate_of_comparable_length")
    if not cands.c:
        raise _Reject("demo:no_c_candidate_of_comparable_length")
    picked = _pick(base, cands, audit)
    refused.update(audited)
    if picked is None:
        raise _Reject("demo:no_f_c_pair_passes_the_audits")
    (fs, fov), (cs, cov), exposure_distance = picked
    spec = PairSpec(
        pair_id=pair_id, base=Path(f"<generated:{stream}>"), f_seed=rng.randrange(2**31),
        c_seed=rng.randrange(2**31), f_source=fov, c_source=cov, f_demo=tuple(fs), c_demo=tuple(cs),
        motif=motif, source=f"<generated:{stream}>", base_raw=base_raw,
    )
    return spec, audited, exposure_distance



def _draw(family: str, seed: int, tier: str, index: int, token_counts: TokenCounts,
          refused: Counter) -> tuple[Pair, PairSpec]:
    stream = f"{GENERATOR_VERSION}/{family}/{tier}/{seed}/{index}"
    rng = random.Random(stream)
    tp = _TIER_PARAMS[family](tier)
    pair_id = f"GEN-{_PAIR_CODE[family]}-{tier}-{seed}-{index:04d}"
    if family == "dataflow":
        return _draw_dataflow(seed, tier, index, stream, rng, tp, pair_id, token_counts, refused)
    base_raw = _DRAW_WORLD[family](rng, tp, f"B-{rng.randrange(16**6):06x}")
    try:
        base = world_from_mapping(base_raw, source=f"<generated base of {pair_id}>")
    except WorldsError as exc:
        raise _Reject("base:invalid_world", str(exc)) from None
    try:
        enum = enumerate_solutions(base, Bounds(max_solutions=MAX_TARGET_SOLUTIONS))
    except EnumerationLimitError:
        raise _Reject("base:too_many_solutions") from None
    if not enum.solutions:
        raise _Reject("base:no_bounded_solution")
    props = tier_properties(base, enum)
    got = tier_of(props)
    if got != tier:
        raise _Reject("base:measured_tier_differs", f"measured {got}")
    edges = [production_edges(base, s) for s in enum.solutions]
    required = sorted(frozenset.intersection(*edges))
    if not required:
        raise _Reject("base:no_motif_held_by_every_solution")
    motif = min(required, key=_MOTIF_KEY[family])
    cands = _collect(base_raw, motif, enum.optimal_length, rng, family)
    spec, audited, exposure_distance = _audited_spec(base, enum, motif, cands, rng, refused, pair_id, stream,
                                                     base_raw)
    fs, cs = spec.f_demo, spec.c_demo
    try:
        pair, facts = build_pair(spec)
    except PairConstructionError as exc:
        raise _Reject("construction:build_pair_refused", str(exc)) from None
    manifest = build_manifest(pair, facts, token_counts=token_counts)
    c_demo = pair.c.demonstrations[0]
    inter = interchangeable_edges(base, enum.solutions, motif, facts["source_worlds"]["C"], c_demo.base_steps)
    ff, cf = _freq(base, fs), _freq(base, cs)
    residual = {k: ff[k] - cf[k] for k in sorted(set(ff) | set(cf)) if ff[k] != cf[k]}
    _generator_fields(manifest, family=family, seed=seed, tier=tier, index=index, stream=stream, tp=tp,
                      props=props, optimum=enum.optimal_length, lengths=(len(fs), len(cs)), audited=audited,
                      inter=inter, residual=residual, exposure_distance=exposure_distance)
    return dataclasses.replace(pair, manifest=manifest), spec


# ---------------------------------------------------------------- dataflow


#: Operations of the pipeline's stage and decoy primitives (the tap stage is always ``sub``: swapping its
#: arguments changes the program, so the argument position of the tap edge is a real choice).
_DF_STAGE_OPS = ("add", "sub", "mul", "max", "min")


def _df_run(raw: Mapping[str, Any], program: Sequence[tuple[str, str, tuple[str, ...]]]) -> list[int]:
    """The goal wire's value on every case of ``raw`` when ``program`` (target, primitive, args) runs."""
    from ._dataflow import evaluate

    prims = {p["name"]: p for p in raw["primitives"]}
    out = []
    for case in raw["goal"]["cases"]:
        val = dict(case["inputs"])
        for target, name, args in program:
            p = prims[name]
            val[target] = evaluate(p["op"], tuple(val[a] for a in args), raw["types"][p["result"]], p.get("value", 0))
        out.append(val[program[-1][0]])
    return out


def _draw_dataflow_world(rng: random.Random, tp: DataflowTierParams, wid: str):
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


def _df_source_overrides(base_raw: Mapping[str, Any], program, j: int, rng: random.Random) -> dict | None:
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


def _draw_dataflow(seed: int, tier: str, index: int, stream: str, rng: random.Random, tp: DataflowTierParams,
                   pair_id: str, token_counts: TokenCounts, refused: Counter) -> tuple[Pair, PairSpec]:
    """One dataflow draw (the steps of the module docstring, with the program machinery of ``_dataflow_pairs``)."""
    from ._dataflow_pairs import dataflow_manifest, dataflow_tier_properties, program_edges, solutions_of

    base_raw, program, j = _draw_dataflow_world(rng, tp, f"B-{rng.randrange(16**6):06x}")
    try:
        base = world_from_mapping(base_raw, source=f"<generated base of {pair_id}>")
    except WorldsError as exc:
        raise _Reject("base:invalid_world", str(exc)) from None
    try:
        enum = solutions_of(base, Bounds(max_solutions=MAX_TARGET_SOLUTIONS))
    except EnumerationLimitError:
        raise _Reject("base:too_many_solutions") from None
    if not enum.solutions:
        raise _Reject("base:no_bounded_solution")
    props = dataflow_tier_properties(base, enum)
    got = tier_of(props)
    if got != tier:
        raise _Reject("base:measured_tier_differs", f"measured {got}")
    edges = [program_edges(base, s) for s in enum.solutions]
    required = sorted(frozenset.intersection(*edges))
    if not required:
        raise _Reject("base:no_motif_held_by_every_solution")
    tap = (f"stage{j}", "arg1", f"stage{j + 1}")
    motif = min(required, key=lambda e: (e != tap, e))
    cands = _Candidates()
    seen: set = set()
    for _ in range(_SOURCE_VARIANTS["dataflow"]):
        ov = _df_source_overrides(base_raw, program, j, rng)
        if ov is None:
            cands.refused["source:invalid_or_unchanged"] += 1
            continue
        if repr(ov) in seen:
            continue
        seen.add(repr(ov))
        src_raw = copy.deepcopy(base_raw)
        src_raw.update(copy.deepcopy(ov))
        src_raw["id"], src_raw["title"] = "D-000000", "source instance D-000000"
        src = world_from_mapping(src_raw, source=f"<generated source of {pair_id}>")
        try:
            sols = solutions_of(src, Bounds(max_steps=enum.optimal_length + 1,
                                            max_solutions=MAX_TARGET_SOLUTIONS)).solutions
        except EnumerationLimitError:
            cands.refused["source:too_many_solutions"] += 1
            continue
        if not sols:
            cands.refused["source:no_solution"] += 1
            continue
        for sol in sols:
            if not enum.optimal_length <= len(sol) <= enum.optimal_length + 1:
                cands.refused["demo:length_not_optimum_or_one_more"] += 1
                continue
            (cands.f if motif in program_edges(src, sol) else cands.c).append((sol, ov, src))
    spec, audited, exposure_distance = _audited_spec(base, enum, motif, cands, rng, refused, pair_id, stream,
                                                     base_raw)
    fs, cs = spec.f_demo, spec.c_demo
    try:
        pair, facts = build_pair(spec)
    except PairConstructionError as exc:
        raise _Reject("construction:build_pair_refused", str(exc)) from None
    manifest = dataflow_manifest(pair, facts, token_counts=token_counts)
    ff, cf = _freq(base, fs), _freq(base, cs)
    residual = {k: ff[k] - cf[k] for k in sorted(set(ff) | set(cf)) if ff[k] != cf[k]}
    _generator_fields(manifest, family="dataflow", seed=seed, tier=tier, index=index, stream=stream, tp=tp,
                      props=props, optimum=enum.optimal_length, lengths=(len(fs), len(cs)), audited=audited,
                      inter=[], residual=residual, exposure_distance=exposure_distance)
    manifest["generator"]["reference_program"] = [f"{t} = {n}({', '.join(a)})" for t, n, a in program]
    return dataclasses.replace(pair, manifest=manifest), spec


def _generator_fields(manifest: dict, *, family, seed, tier, index, stream, tp, props, optimum, lengths, audited,
                      inter, residual, exposure_distance) -> None:
    """The generator's additions to a pair manifest (version, parameters, tier, audits, exposure residual)."""
    manifest["eligibility"] = "development_generated"
    manifest["generator"] = {
        "version": GENERATOR_VERSION,
        "family": family,
        "seed": seed,
        "tier": tier,
        "draw": index,
        "stream": stream,
        "parameters": _jsonable(dataclasses.asdict(tp)),
        "source_variants_per_side": _SOURCE_VARIANTS[family],
        "max_target_solutions": MAX_TARGET_SOLUTIONS,
    }
    manifest["tier"] = {"name": tier, "properties": props}
    manifest["copy_audit"] = {
        "transformations": list(COPY_TRANSFORMATIONS),
        "optimum": optimum,
        "demonstration_lengths": {"F": lengths[0], "C": lengths[1]},
        "copies_are_candidates": min(lengths) >= optimum,
        "candidates_audited": dict(sorted(audited.items())),
    }
    manifest["interchangeable_edges"] = [f"{a} -{b}-> {c}" for a, b, c in inter]
    manifest["exposure_residual"] = {"demonstration_uses_f_minus_c": residual, "l1": exposure_distance}


def generate_pairs(family: str, seed: int, n: int, tier: str, *, max_draws: int | None = None,
                   token_counts: TokenCounts = None) -> GenerationResult:
    """``n`` certified pairs of ``family`` in ``tier``, deterministic in ``seed`` (see the module docstring).

    ``max_draws`` (default ``40 * n``) bounds the draws; fewer than ``n`` pairs after it raises
    PairConstructionError with the rejection counts. ``token_counts`` as in ``build_manifest``.
    """
    if family not in GENERATED_FAMILIES:
        raise WorldsError(f"the generator has no family {family!r}; it draws: {', '.join(GENERATED_FAMILIES)}")
    if tier not in TIERS:
        raise WorldsError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise WorldsError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise WorldsError(f"n must be a positive int, got {n!r}")
    _TIER_PARAMS[family](tier)  # refuses a tier the family has no draw parameters for
    limit = 40 * n if max_draws is None else max_draws
    pairs: list[Pair] = []
    specs: list[PairSpec] = []
    rejections: Counter = Counter()
    refused: Counter = Counter()
    draws = 0
    while len(pairs) < n and draws < limit:
        try:
            pair, spec = _draw(family, seed, tier, draws, token_counts, refused)
            pairs.append(pair)
            specs.append(spec)
        except _Reject as rej:
            rejections[rej.reason] += 1
        draws += 1
    params = {"family": family, "seed": seed, "n": n, "tier": tier, "generator_version": GENERATOR_VERSION,
              "max_draws": limit, "tier_parameters": _jsonable(dataclasses.asdict(_TIER_PARAMS[family](tier)))}
    if len(pairs) < n:
        raise PairConstructionError(
            f"generator {family}/{tier}/seed {seed}: {len(pairs)} of {n} pairs after {draws} draws; "
            f"rejections: {dict(sorted(rejections.items()))}; raise max_draws or use another tier"
        )
    return GenerationResult(tuple(pairs), tuple(specs), draws, dict(rejections), dict(refused), params)
