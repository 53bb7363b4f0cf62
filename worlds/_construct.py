"""F/C pair construction from a latent base world, with every audit computed.

A pair spec (``worlds/data/pairs/*.toml``) names a latent base world file,
two replica seeds and two *source variants* of the base (the base with a
changed initial state and/or goal, and optionally budget or constraints).
``build_pair`` then:

1. instantiates independent F and C target replicas of the base (fresh labels
   for entities, primitives and types, shuffled declaration order, fresh ids);
2. proves the two targets isomorphic: the base -> replica label maps give an
   explicit bijection, and the reachable state graphs (states within the step
   cap, legal transitions with their costs, goal and final-rule flags) are
   compared under it edge for edge; the mappings are compared structurally;
3. enumerates every bounded target solution and computes *production edges*
   (type-level dependencies: which primitive's output a later step consumes or
   holds as a catalyst; for schedules, which predecessor a task follows on the
   same or another machine) for each;
4. takes the withheld motif, a production edge, from the spec or, unpinned,
   the edge held by the most bounded target solutions that can be
   demonstrated; when every bounded target solution holds it the pair is
   "motif-required", otherwise "witness-only demonstration-relative novelty";
5. picks the F demonstration, a solution of the F source variant that realizes
   the motif, and the C demonstration, a solution of the C source variant that
   does not, of comparable length (within one step) and primitive coverage
   (within one primitive), closest in primitive frequencies;
6. rejects the fixture when a demonstration, copied verbatim, renamed, or cut
   to any contiguous window, solves its target;
7. derives one-step primitive examples (a valid and an invalid exposure of
   every primitive or schedule task, on isolated minimal inventories or
   off-path timetables) once on the base and translates them to both sides,
   re-deriving each outcome on the replica;
8. renders both prompts and the manifest.

Everything is deterministic in the spec. Demonstration selection happens on
the base's labels and is translated afterwards, so F and C never see each
other's labels and no text of one side enters the other side's prompt.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import tomllib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._checker import Status, check
from ._enumerate import Enumeration, enumerate_solutions, grounded_steps
from ._errors import WorldsError
from ._grammar import Step, parse_candidate
from ._loader import world_from_mapping
from ._model import Failure, World
from ._pairs import Replica, instantiate_replica, rename_mapping
from ._registry import get_family
from ._render import GRAMMAR_TEXT, format_state, render_world
from ._signature import motif_signature

__all__ = [
    "MOTIF_REQUIRED",
    "WITNESS_ONLY",
    "Demonstration",
    "Pair",
    "PairConstructionError",
    "PairSide",
    "PairSpec",
    "PrimitiveExample",
    "build_pair",
    "copy_audit",
    "load_pair_spec",
    "production_edges",
    "reachable_graph",
]

MOTIF_REQUIRED = "motif-required"
WITNESS_ONLY = "witness-only demonstration-relative novelty"

#: Keys of the base world a source variant may override.
SOURCE_KEYS = ("initial", "goal", "budget", "constraints")


class PairConstructionError(WorldsError):
    """A pair spec cannot give a valid fixture; the message names the pair and what to change."""


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class PairSpec:
    """A pair spec as read from its file.

    pair_id: the private base id of the pair.
    base: path of the latent base world file.
    f_seed, c_seed: replica seeds of the F and C targets.
    f_source, c_source: overrides of the base for the two source variants.
    f_demo, c_demo: optional pinned demonstrations (steps in the base's labels);
        when absent the demonstration is chosen by ``build_pair``.
    motif: optional pinned withheld motif, a production edge on the base's
        labels; when absent the builder picks one.
    source: file the spec came from.
    """

    pair_id: str
    base: Path
    f_seed: int
    c_seed: int
    f_source: dict
    c_source: dict
    f_demo: tuple[str, ...] | None = None
    c_demo: tuple[str, ...] | None = None
    motif: tuple[str, str, str] | None = None
    source: str = "<spec>"


@dataclass(frozen=True)
class Demonstration:
    """A worked solution of a source instance, in the side's labels.

    source_id: id of the source world.  source: the source world (a replica of a
    variant of the base).  source_raw: its mapping.  steps: rendered steps.
    text: the steps as artifact text.  base_steps: the same in the base's labels.
    motif_present: whether the demonstration realizes the pair's motif.
    signature: its canonical motif signature.
    """

    source_id: str
    source: World
    source_raw: dict
    steps: tuple[str, ...]
    text: str
    base_steps: tuple[str, ...]
    motif_present: bool
    signature: tuple


@dataclass(frozen=True)
class PrimitiveExample:
    """A one-step exposure of a primitive, in the side's labels.

    subject: what is exposed (a recipe, or a task for the schedule primitive),
    in the base's labels (equal on both sides).  state: the described state the
    step is applied in.  step: the rendered step.  status: ``VALID`` or
    ``INVALID``.  reason: the failure reason value for INVALID.  result: the
    described next state for VALID.  cost: the step's cost for VALID.
    message: the semantics' explanation for INVALID.
    """

    subject: str
    state: Any
    step: str
    status: str
    reason: str | None
    result: Any
    cost: int | None
    message: str

    def text(self, family: str) -> str:
        head = f"In the {format_state(family, self.state)}: {self.step}"
        if self.status == "VALID":
            return f"{head} -> valid, cost {self.cost}; {format_state(family, self.result)}."
        return f"{head} -> invalid ({self.reason}): {self.message}."


@dataclass(frozen=True)
class PairSide:
    """One condition of a pair: its target, its evidence and its prompt.

    condition: ``"F"`` or ``"C"``.  target: the target world (grade with
    ``worlds.check(side.target, text)``).  target_raw: its mapping.
    demonstrations: the worked solution(s) shown.  primitive_examples: the
    one-step examples (abstractly the same on both sides).  optimum_length:
    shortest valid target solution.  prompt_text: the complete prompt body.
    replica: the replica (label maps from the base).
    """

    condition: str
    target: World
    target_raw: dict
    demonstrations: tuple[Demonstration, ...]
    primitive_examples: tuple[PrimitiveExample, ...]
    optimum_length: int
    prompt_text: str
    replica: Replica = field(repr=False, compare=False)


@dataclass(frozen=True)
class Pair:
    """An F/C pair: two matched targets, their evidence, its novelty label and manifest."""

    pair_id: str
    family: str
    f: PairSide
    c: PairSide
    novelty: str
    flags: tuple[str, ...]
    manifest: dict = field(compare=False)
    motif: tuple = ()

    def side(self, condition: str) -> PairSide:
        if condition not in ("F", "C"):
            raise WorldsError(f"condition must be 'F' or 'C', got {condition!r}")
        return self.f if condition == "F" else self.c


# --------------------------------------------------------------------------- spec


def load_pair_spec(path: str | Path) -> PairSpec:
    """Read a pair spec file (TOML); errors name the file and the field."""
    p = Path(path)
    src = str(p)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PairConstructionError(f"{src}: cannot read the pair spec ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PairConstructionError(f"{src}: not valid TOML ({exc})") from None

    def need(key: str, typ: type) -> Any:
        if key not in raw:
            raise PairConstructionError(f"{src}: field {key}: missing; add it")
        if not isinstance(raw[key], typ) or isinstance(raw[key], bool):
            raise PairConstructionError(f"{src}: field {key}: must be {typ.__name__}")
        return raw[key]

    allowed = {"pair_id", "base", "f_seed", "c_seed", "f_source", "c_source", "f_demo", "c_demo", "motif"}
    for k in sorted(set(raw) - allowed):
        raise PairConstructionError(f"{src}: field {k}: unknown; allowed fields are {sorted(allowed)}")
    for side in ("f_source", "c_source"):
        tbl = need(side, dict)
        for k in sorted(set(tbl) - set(SOURCE_KEYS)):
            raise PairConstructionError(
                f"{src}: field {side}.{k}: a source variant may override only {list(SOURCE_KEYS)}"
            )
        if not tbl:
            raise PairConstructionError(f"{src}: field {side}: must change the start or the goal of the base")
    demos = {}
    for side in ("f_demo", "c_demo"):
        if side in raw:
            d = raw[side]
            if not isinstance(d, list) or not d or not all(isinstance(s, str) for s in d):
                raise PairConstructionError(f"{src}: field {side}: must be a non-empty list of step strings")
            demos[side] = tuple(d)
    motif = None
    if "motif" in raw:
        mo = raw["motif"]
        if not (isinstance(mo, list) and len(mo) == 3 and all(isinstance(x, str) for x in mo)):
            raise PairConstructionError(
                f"{src}: field motif: must be [producer, role, consumer], e.g. [\"make_tool\", \"catalyst\", \"use_tool\"]"
            )
        motif = tuple(mo)
    base = p.parent / need("base", str)
    if not base.is_file():
        raise PairConstructionError(f"{src}: field base: {base} is not a file; name a world file next to the spec")
    return PairSpec(
        need("pair_id", str),
        base,
        need("f_seed", int),
        need("c_seed", int),
        raw["f_source"],
        raw["c_source"],
        demos.get("f_demo"),
        demos.get("c_demo"),
        motif,
        src,
    )


# --------------------------------------------------------------------------- structure


def production_edges(world: World, solution: Sequence[str]) -> frozenset[tuple[str, str, str]]:
    """Type-level production dependencies realized by a solution of ``world``.

    token_workshop: (producer recipe, "input" | "catalyst", consumer recipe)
    whenever a step consumes or holds as catalyst a token that an earlier step
    of the solution produced.  schedule: (predecessor task, "same_machine" |
    "cross_machine", task) for each precedence the solution realizes.
    """
    steps = [_one_step(s) for s in solution]
    out: set[tuple[str, str, str]] = set()
    if world.family == "token_workshop":
        recipes = {r.name: r for r in world.spec.recipes}
        producers: dict[str, set[str]] = {}
        for st in steps:
            r = recipes[st.name]
            bind = {p.name: a for p, a in zip(r.params, st.args)}
            for role, refs in (("input", r.inputs), ("catalyst", r.catalysts)):
                for ref, _ in refs:
                    for prod in producers.get(bind.get(ref, ref), ()):
                        out.add((prod, role, r.name))
            for tok, _ in r.outputs:
                producers.setdefault(tok, set()).add(r.name)
    elif world.family == "schedule":
        after = {t.name: t.after for t in world.spec.tasks}
        where: dict[str, str] = {}
        for st in steps:
            task, machine = st.args[0], st.args[1]
            for pred in after[task]:
                if pred in where:
                    rel = "same_machine" if where[pred] == machine else "cross_machine"
                    out.add((pred, rel, task))
            where[task] = machine
    else:
        raise PairConstructionError(f"no production edges defined for family {world.family!r}")
    return frozenset(out)


def _one_step(s: str | Step) -> Step:
    if isinstance(s, Step):
        return s
    got = parse_candidate(s)
    if not got.ok or len(got.steps) != 1:
        raise PairConstructionError(f"not a single step in the artifact grammar: {s!r}")
    return got.steps[0]


def reachable_graph(world: World) -> dict:
    """The reachable state graph within the step cap (cost ignored).

    Returns ``{"initial": s0, "nodes": {state: (goal, final_ok)}, "edges":
    {(state, step, next_state, cost)}, "depth": {state: first depth}}``.
    """
    fam = get_family(world.family)
    steps = grounded_steps(world)
    s0 = world.initial_state

    def flags(s):
        return (fam.goal(world, s), fam.constraints(world, s, True) is None)

    nodes = {s0: flags(s0)}
    depth = {s0: 0}
    edges: set = set()
    frontier = [s0]
    for d in range(world.budget.max_steps):
        nxt = []
        for s in frontier:
            for st in steps:
                got = fam.apply(world, s, st.name, st.args)
                if isinstance(got, Failure):
                    continue
                t, cost = got
                if fam.limits(world, t) or fam.constraints(world, t, False):
                    continue
                edges.add((s, st.render(), t, cost))
                if t not in nodes:
                    nodes[t] = flags(t)
                    depth[t] = d + 1
                    nxt.append(t)
        frontier = nxt
    return {"initial": s0, "nodes": nodes, "edges": edges, "depth": depth}


def _state_map(family: str, state: Any, ent: Mapping[str, str]) -> Any:
    from ._schedule import ScheduleState
    from ._token_workshop import TokenState

    if family == "token_workshop":
        return TokenState.of({ent[k]: v for k, v in state.inventory})
    if family == "schedule":
        return ScheduleState(tuple(sorted((ent[t], ent[m], s) for t, m, s in state.placements)))
    raise PairConstructionError(f"no state translation for family {family!r}")


def _step_map(step: str, ent: Mapping[str, str], prim: Mapping[str, str]) -> str:
    st = _one_step(step)
    args = [a if isinstance(a, int) else ent[a] for a in st.args]
    return f"{prim.get(st.name, st.name)}({', '.join(str(a) for a in args)})"


def _inverse(d: Mapping[str, str]) -> dict[str, str]:
    return {v: k for k, v in d.items()}


def isomorphism_certificate(a: Replica, b: Replica) -> dict:
    """Prove two replicas of one base isomorphic under their explicit label bijection.

    The bijection is a's labels -> base -> b's labels. Checked: the mappings,
    written back in the base's labels, are structurally equal (budget,
    constraints, recipes or tasks, initial state, goal); and the reachable
    state graphs within the step cap coincide node for node and edge for edge
    (with costs, goal flags and final-rule flags) under the bijection.
    Raises PairConstructionError on the first difference.
    """
    fam = a.world.family
    ent = {k: b.entities[v] for k, v in _inverse(a.entities).items()}
    prim = {k: b.primitives[v] for k, v in _inverse(a.primitives).items()}
    ty = {k: b.types[v] for k, v in _inverse(a.types).items()}
    back_a = _canonical(rename_mapping(a.raw, _inverse(a.entities), _inverse(a.primitives), _inverse(a.types)))
    back_b = _canonical(rename_mapping(b.raw, _inverse(b.entities), _inverse(b.primitives), _inverse(b.types)))
    if back_a != back_b:
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: mappings differ under the label bijection")
    ga, gb = reachable_graph(a.world), reachable_graph(b.world)
    if _state_map(fam, ga["initial"], ent) != gb["initial"]:
        raise PairConstructionError("initial states differ under the bijection")
    mapped_nodes = {_state_map(fam, s, ent): f for s, f in ga["nodes"].items()}
    if mapped_nodes != gb["nodes"]:
        raise PairConstructionError(
            f"{a.world.id} and {b.world.id}: reachable states or their goal/final flags differ under the bijection"
        )
    mapped_edges = {
        (_state_map(fam, s, ent), _step_map(st, ent, prim), _state_map(fam, t, ent), c)
        for s, st, t, c in ga["edges"]
    }
    if mapped_edges != gb["edges"]:
        raise PairConstructionError(
            f"{a.world.id} and {b.world.id}: transitions differ under the bijection"
        )
    return {
        "method": "explicit label bijection; reachable state graphs compared edge for edge",
        "states": len(gb["nodes"]),
        "transitions": len(gb["edges"]),
        "goal_states": sum(1 for g, ok in gb["nodes"].values() if g and ok),
        "bijection_size": len(ent) + len(prim) + len(ty),
    }


def _canonical(m: Mapping[str, Any]) -> str:
    """Order-insensitive canonical JSON of a world mapping without id, title and examples."""
    d = copy.deepcopy(dict(m))
    for k in ("id", "title", "examples"):
        d.pop(k, None)
    for key, by in (("recipes", "name"), ("tasks", "name")):
        if key in d:
            d[key] = sorted(d[key], key=lambda x: x[by])
    for key in ("token_types", "machine_kinds"):
        if key in d:
            d[key] = sorted(d[key])
    if "constraints" in d:
        d["constraints"] = sorted(d["constraints"], key=lambda c: json.dumps(c, sort_keys=True))
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def structure_hash(raw: Mapping[str, Any]) -> str:
    """sha256 of the canonical latent structure of a base mapping (labels included, order and id ignored)."""
    return hashlib.sha256(_canonical(raw).encode()).hexdigest()


# --------------------------------------------------------------------------- audits


def _renames_onto(window: Sequence[str], solution: Sequence[str], shared: frozenset = frozenset()) -> bool:
    """Whether one consistent, one-to-one relabelling turns ``window`` into ``solution``.

    Entities may be relabelled freely (one-to-one); primitives named in
    ``shared`` (those the demonstration's world shares with the target) keep
    their names, others may be relabelled one-to-one. A demonstration in the
    target's own vocabulary is thus matched up to a renaming of its entities.
    """
    if len(window) != len(solution):
        return False
    prim: dict[str, str] = {}
    ent: dict[Any, Any] = {}
    for a, b in zip(window, solution):
        sa, sb = _one_step(a), _one_step(b)
        if sa.name in shared and sa.name != sb.name:
            return False
        if len(sa.args) != len(sb.args) or prim.setdefault(sa.name, sb.name) != sb.name:
            return False
        for x, y in zip(sa.args, sb.args):
            if isinstance(x, int) or isinstance(y, int):
                if x != y:
                    return False
            elif ent.setdefault(x, y) != y:
                return False
    return len(set(prim.values())) == len(prim) and len(set(ent.values())) == len(ent)


def copy_audit(
    demo_world: World,
    demo: Sequence[str],
    target: World,
    target_sigs: set,
    target_solutions: Sequence[Sequence[str]] | None = None,
) -> str | None:
    """Why a demonstration would solve ``target`` when copied, or None.

    Covers the demonstration and every contiguous window of it (a trivially
    truncated copy), each verbatim (checked by the checker) and renamed: its
    motif signature equals a target solution's, or (when ``target_solutions``
    is given) one consistent relabelling of its entities (and of primitives the
    target does not have) turns it into a bounded target solution.
    """
    demo = tuple(demo)
    n = len(demo)
    shared = frozenset(p.name for p in demo_world.primitives) & frozenset(p.name for p in target.primitives)
    for length in range(n, 0, -1):
        for start in range(n - length + 1):
            window = demo[start : start + length]
            what = "the demonstration" if length == n else f"its steps {start + 1}..{start + length}"
            if check(target, "".join(s + "\n" for s in window)).status is Status.VALID:
                return f"{what}, copied verbatim, solve(s) target {target.id}"
            if motif_signature(demo_world, window) in target_sigs:
                return f"{what}, renamed, match(es) the motif signature of a solution of target {target.id}"
            if target_solutions is not None and any(_renames_onto(window, sol, shared) for sol in target_solutions):
                return f"{what}, relabelled consistently, become(s) a solution of target {target.id}"
    return None


# --------------------------------------------------------------------------- construction


def _variant(base_raw: Mapping[str, Any], overrides: Mapping[str, Any], vid: str, what: str, spec: PairSpec) -> dict:
    m = copy.deepcopy(dict(base_raw))
    m.pop("examples", None)
    for k, v in overrides.items():
        if k == "budget":
            m["budget"] = {**m["budget"], **v}
        else:
            m[k] = copy.deepcopy(v)
    m["id"] = vid
    m["title"] = f"source instance {vid}"
    try:
        world_from_mapping(m, source=f"{spec.source} [{what}]")
    except WorldsError as exc:
        raise PairConstructionError(f"{spec.pair_id}: {what} is not a valid world: {exc}") from None
    changed = [k for k in ("initial", "goal") if k in overrides and overrides[k] != base_raw.get(k)]
    if not changed:
        raise PairConstructionError(
            f"{spec.pair_id}: {what} keeps the base's start and goal; change 'initial' or 'goal'"
        )
    return m


def _freq(world: World, sol: Sequence[str]) -> Counter:
    return Counter(_subject(world, s) for s in sol)


def _subject(world: World, step: str) -> str:
    """What a step exposes: its recipe (token_workshop) or its task (schedule)."""
    st = _one_step(step)
    return st.name if world.family == "token_workshop" else f"start:{st.args[0]}"


def _l1(a: Counter, b: Counter) -> int:
    return sum(abs(a[k] - b[k]) for k in set(a) | set(b))


def _choose(
    spec: PairSpec,
    base: World,
    target_enum: Enumeration,
    f_src: World,
    c_src: World,
    f_ok,
    c_ok,
) -> tuple[tuple, tuple[str, ...], tuple[str, ...], bool]:
    """Pick (motif edge, F demo, C demo, required) on the base's labels.

    ``f_ok`` / ``c_ok`` give the copy-audit objection to a base-labelled
    demonstration on its side's target, or None.
    """
    edges = [production_edges(base, s) for s in target_enum.solutions]
    required = frozenset.intersection(*edges) if edges else frozenset()
    held = Counter(e for es in edges for e in es)
    if spec.motif is not None:
        if spec.motif not in held:
            raise PairConstructionError(
                f"{spec.pair_id}: pinned motif {list(spec.motif)} is realized by no bounded target solution; "
                f"edges realized: {sorted(held)}"
            )
        candidates = [spec.motif]
    else:
        # edges held by more target solutions first; required edges (held by all) lead
        candidates = sorted(held, key=lambda e: (-held[e], e))
    f_sols = _demo_candidates(spec, spec.f_demo, f_src, "F source")
    c_sols = _demo_candidates(spec, spec.c_demo, c_src, "C source")
    for cond, pinned, sols, why in (("F", spec.f_demo, f_sols, f_ok), ("C", spec.c_demo, c_sols, c_ok)):
        if pinned is not None and why(sols[0]) is not None:
            raise PairConstructionError(
                f"{spec.pair_id}: {cond} demonstration rejected: {why(sols[0])}; pin another demonstration or change the source"
            )
    tried = []
    for e in candidates:
        fs = [s for s in f_sols if e in production_edges(f_src, s)]
        if spec.f_demo is None:
            fs = [s for s in fs if f_ok(s) is None]
        if not fs:
            tried.append(f"{e}: no F source solution realizes it")
            continue
        fd = min(fs, key=lambda s: (len(s), s))
        ff = _freq(base, fd)
        cs = [s for s in c_sols if e not in production_edges(c_src, s)]
        if spec.c_demo is None:
            cs = [s for s in cs if c_ok(s) is None]
        scored = sorted(
            (abs(len(s) - len(fd)), abs(len(_freq(base, s)) - len(ff)), _l1(_freq(base, s), ff), len(s), s)
            for s in cs
        )
        scored = [x for x in scored if x[0] <= 1 and x[1] <= 1]
        if not scored:
            tried.append(f"{e}: no C source solution without it has comparable length and coverage")
            continue
        return e, fd, scored[0][-1], e in required
    raise PairConstructionError(
        f"{spec.pair_id}: no withheld motif can be demonstrated in F and left out of C; "
        f"candidates tried: {'; '.join(tried) or 'none (target has no production edge)'}; "
        "change the source variants in the pair spec"
    )


def _demo_candidates(spec: PairSpec, pinned, src: World, what: str) -> list[tuple[str, ...]]:
    if pinned is not None:
        res = check(src, "".join(s + "\n" for s in pinned))
        if res.status is not Status.VALID:
            raise PairConstructionError(
                f"{spec.pair_id}: the pinned {what} demonstration is not a valid solution of its source: "
                f"{res.reason.value if res.reason else ''} {res.message}"
            )
        return [tuple(_one_step(s).render() for s in pinned)]
    sols = list(enumerate_solutions(src).solutions)
    if not sols:
        raise PairConstructionError(f"{spec.pair_id}: the {what} has no valid solution; change its start or goal")
    return sols


def _solution_path_states(world: World, solutions) -> set:
    """Every state a bounded target solution passes through (s0 included)."""
    fam = get_family(world.family)
    seen = {world.initial_state}
    for sol in solutions:
        s = world.initial_state
        for text in sol:
            st = _one_step(text)
            got = fam.apply(world, s, st.name, st.args)
            s = got[0]
            seen.add(s)
    return seen


def _outcome(fam, world: World, state, st: Step):
    """None when ``st`` may be committed in ``state``, else the Failure."""
    got = fam.apply(world, state, st.name, st.args)
    if isinstance(got, Failure):
        return got
    return fam.limits(world, got[0]) or fam.constraints(world, got[0], False)


def _isolated_token_examples(world: World, fam, mine: Sequence[Step]):
    """Valid and invalid exposures of a recipe on constructed minimal inventories.

    The valid state holds exactly what the step consumes plus one unit of each
    catalyst; the invalid state is the same with one unit of its first catalyst
    (or, without catalysts, of its first input) removed. Such states belong to
    no trajectory of the target, so the examples cannot be chained into a
    target solution. Returns (valid, invalid); either may be None.
    """
    from ._token_workshop import TokenState

    for st in mine:
        r = next(x for x in world.spec.recipes if x.name == st.name)
        bind = {p.name: a for p, a in zip(r.params, st.args)}
        need: dict[str, int] = {}
        for ref, n in r.inputs:
            need[bind.get(ref, ref)] = need.get(bind.get(ref, ref), 0) + n
        for ref, _ in r.catalysts:
            need[bind.get(ref, ref)] = need.get(bind.get(ref, ref), 0) + 1
        state = TokenState.of(need)
        if fam.limits(world, state) or fam.constraints(world, state, False) or _outcome(fam, world, state, st):
            continue
        short = ([bind.get(ref, ref) for ref, _ in r.catalysts] or [bind.get(ref, ref) for ref, _ in r.inputs])[:1]
        invalid = None
        if short:
            less = dict(need)
            less[short[0]] -= 1
            bad_state = TokenState.of(less)
            if _outcome(fam, world, bad_state, st) is not None and not fam.constraints(world, bad_state, False):
                invalid = (bad_state, st.render())
        return (state, st.render()), invalid
    return None, None


def _examples(base: World, solutions) -> tuple[tuple[str, Any, str, Any], ...]:
    """(subject, state, step, kind): one valid and one invalid exposure per subject, on the base.

    token_workshop: constructed minimal inventories (see
    ``_isolated_token_examples``). Otherwise, and as a fallback: reachable
    states in breadth-first order, preferring for the valid exposure a state
    that no bounded target solution passes through.
    """
    fam = get_family(base.family)
    g = reachable_graph(base)
    order = sorted(g["nodes"], key=lambda s: (g["depth"][s], repr(s)))
    on_path = _solution_path_states(base, solutions)
    off_first = [s for s in order if s not in on_path] + [s for s in order if s in on_path]
    steps = grounded_steps(base)
    subjects = sorted({_subject(base, st.render()) for st in steps})
    out = []
    for subj in subjects:
        mine = [st for st in steps if _subject(base, st.render()) == subj]
        valid = invalid = None
        if base.family == "token_workshop":
            v, iv = _isolated_token_examples(base, fam, mine)
            valid = None if v is None else (subj, v[0], v[1], "VALID")
            invalid = None if iv is None else (subj, iv[0], iv[1], "INVALID")
        if valid is None:
            valid = next(
                ((subj, s, st.render(), "VALID") for s in off_first for st in mine if _outcome(fam, base, s, st) is None),
                None,
            )
        if invalid is None:
            invalid = next(
                ((subj, s, st.render(), "INVALID") for s in order for st in mine if _outcome(fam, base, s, st) is not None),
                None,
            )
        out += [x for x in (valid, invalid) if x is not None]
    return tuple(out)


def examples_chain_to_goal(world: World, examples: Sequence[PrimitiveExample]) -> bool:
    """Whether the valid examples' transitions, followed from s0, reach a goal state (a leaked witness)."""
    fam = get_family(world.family)
    edges: dict[str, list[str]] = {}
    for ex in examples:
        if ex.status == "VALID":
            edges.setdefault(json.dumps(ex.state, sort_keys=True), []).append(json.dumps(ex.result, sort_keys=True))
    start = json.dumps(fam.describe_state(world.initial_state), sort_keys=True)
    goal_states = set()
    for ex in examples:
        if ex.status == "VALID":
            goal_states.add(json.dumps(ex.result, sort_keys=True)) if _goal_of_described(world, ex.result) else None
    seen, todo = {start}, [start]
    while todo:
        cur = todo.pop()
        if cur in goal_states:
            return True
        for nxt in edges.get(cur, []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _goal_of_described(world: World, described: Any) -> bool:
    if world.family == "token_workshop":
        return all(described.get(t, 0) >= n for t, n in world.spec.goal)
    return all(t in described for t in world.spec.goal)


def example_states_on_solution_paths(world: World, examples: Sequence[PrimitiveExample], solutions) -> int:
    """How many example states are states some bounded target solution passes through."""
    fam = get_family(world.family)
    on = {json.dumps(fam.describe_state(s), sort_keys=True) for s in _solution_path_states(world, solutions)}
    return sum(1 for ex in examples if json.dumps(ex.state, sort_keys=True) in on)


def _example_on(side: World, ent, prim, ex) -> PrimitiveExample:
    fam = get_family(side.family)
    subj, s, step, kind = ex
    st = _state_map(side.family, s, ent)
    step_t = _step_map(step, ent, prim)
    one = _one_step(step_t)
    got = fam.apply(side, st, one.name, one.args)
    bad = got if isinstance(got, Failure) else (fam.limits(side, got[0]) or fam.constraints(side, got[0], False))
    if (bad is None) != (kind == "VALID"):
        raise PairConstructionError(f"{side.id}: translated example {step_t} changes its outcome")
    if bad is None:
        return PrimitiveExample(subj, fam.describe_state(st), step_t, "VALID", None, fam.describe_state(got[0]), got[1], "")
    return PrimitiveExample(subj, fam.describe_state(st), step_t, "INVALID", bad.reason.value, None, None, bad.message)


def render_prompt(target_raw: Mapping[str, Any], demos: Sequence[Demonstration], examples: Sequence[PrimitiveExample]) -> str:
    """The F/C synthesis prompt body: handbook, examples, demonstrations, goal, grammar (same template for F and C)."""
    fam = target_raw["family"]
    world = world_from_mapping(dict(target_raw))
    lines = [
        "You are given a complete, closed world. Everything that exists and every rule is stated below;",
        "no other entities, actions or effects exist. Find a sequence of steps that reaches the goal.",
        "",
        "=== HANDBOOK ===",
        render_world(target_raw).rstrip("\n"),
        "",
        "=== ONE-STEP EXAMPLES ===",
        "Each example applies one step to the state shown (these states are illustrations, not your start).",
    ]
    lines += [f"{i}. {ex.text(fam)}" for i, ex in enumerate(examples, 1)]
    lines += ["", "=== WORKED DEMONSTRATION ==="]
    for d in demos:
        src = d.source_raw
        lines.append("A valid solution of a different situation in this same world (other start and/or goal):")
        if fam == "token_workshop":
            lines.append("Its start " + format_state(fam, {k: v for k, v in src["initial"].items() if v > 0}))
            lines.append("Its goal: hold at least " + ", ".join(f"{n} {k}" for k, n in src["goal"]["require"].items()))
        else:
            lines.append("Its start " + format_state(fam, {}))
            lines.append("Its goal: place " + ", ".join(src["goal"]["scheduled"]))
        b, tb = src["budget"], target_raw["budget"]
        if b != tb:
            lines.append("Its budget: " + ", ".join(f"{k} {v}" for k, v in b.items()))
        if src.get("constraints", []) != target_raw.get("constraints", []):
            lines.append("Its hard constraints differ from the handbook's: " + json.dumps(src.get("constraints", [])))
        lines.append("Its solution:")
        lines += [f"    {s}" for s in d.steps]
    lines += [
        "",
        "=== YOUR TASK ===",
        f"Start from the initial state of world {world.id} in the handbook and reach its goal within its budget and constraints.",
        "Goal: " + _goal_words(world),
        "",
        GRAMMAR_TEXT,
        "",
        "Write your solution now.",
    ]
    return "\n".join(lines) + "\n"


def _goal_words(world: World) -> str:
    if world.family == "token_workshop":
        return "hold at least " + ", ".join(f"{n} {t}" for t, n in world.spec.goal) + "."
    return "place " + ", ".join(world.spec.goal) + "."


def _witness_hidden(side: PairSide, enum: Enumeration) -> bool:
    """No bounded target solution is written out in the side's prompt (as a demonstration run or as text)."""
    demo_runs = [d.steps for d in side.demonstrations]
    for sol in enum.solutions:
        n = len(sol)
        for run in demo_runs:
            if any(tuple(run[i : i + n]) == sol for i in range(len(run) - n + 1)):
                return False
        if "\n".join(sol) in side.prompt_text or "\n    ".join(sol) in side.prompt_text:
            return False
    return True


def build_pair(spec: PairSpec) -> tuple[Pair, dict]:
    """Build the pair of ``spec``; returns the pair (manifest not yet filled) and the audit facts.

    Raises PairConstructionError naming the pair and what to change when the
    spec cannot give a valid, copy-proof, matched fixture.
    """
    with open(spec.base, "rb") as fh:
        base_raw = tomllib.load(fh)
    base_raw.pop("examples", None)
    base = world_from_mapping(base_raw, source=str(spec.base))
    f_rep = instantiate_replica(base_raw, spec.f_seed, "W")
    c_rep = instantiate_replica(base_raw, spec.c_seed, "W")
    if f_rep.world.id == c_rep.world.id:
        raise PairConstructionError(f"{spec.pair_id}: F and C targets got the same id; use other seeds")
    shared = (set(f_rep.entities.values()) | set(f_rep.primitives.values()) | set(f_rep.types.values())) & (
        set(c_rep.entities.values()) | set(c_rep.primitives.values()) | set(c_rep.types.values())
    )
    if shared:
        raise PairConstructionError(
            f"{spec.pair_id}: F and C targets share the labels {sorted(shared)}; use other seeds"
        )
    iso = isomorphism_certificate(f_rep, c_rep)
    target_enum = enumerate_solutions(base)
    if not target_enum.solutions:
        raise PairConstructionError(f"{spec.pair_id}: the base world has no valid bounded solution")
    rng = random.Random(f"{spec.pair_id}/{spec.f_seed}/{spec.c_seed}")
    f_src_base = _variant(base_raw, spec.f_source, f"D-{rng.randrange(16**6):06x}", "f_source", spec)
    c_src_base = _variant(base_raw, spec.c_source, f"D-{rng.randrange(16**6):06x}", "c_source", spec)
    f_src_w, c_src_w = world_from_mapping(f_src_base), world_from_mapping(c_src_base)

    sides_ctx = {}
    for cond, rep, srcb in (("F", f_rep, f_src_base), ("C", c_rep, c_src_base)):
        src_raw = rep.rename(srcb)
        src_raw["id"], src_raw["title"] = srcb["id"], srcb["title"]
        src_w = world_from_mapping(src_raw)
        t_enum = enumerate_solutions(rep.world)
        sigs = {motif_signature(rep.world, s) for s in t_enum.solutions}
        sides_ctx[cond] = (rep, src_raw, src_w, t_enum, sigs)

    def ok_for(cond):
        rep, _, src_w, t_enum, sigs = sides_ctx[cond]

        def ok(sol):
            return copy_audit(src_w, rep.translate(sol), rep.world, sigs, t_enum.solutions)

        return ok

    motif, f_demo_b, c_demo_b, required = _choose(
        spec, base, target_enum, f_src_w, c_src_w, ok_for("F"), ok_for("C")
    )
    base_examples = _examples(base, target_enum.solutions)
    sides = {}
    facts: dict[str, Any] = {
        "base": base,
        "base_raw": base_raw,
        "target_enum": target_enum,
        "isomorphism": iso,
        "motif": motif,
        "required": required,
        "source_worlds": {"F": f_src_w, "C": c_src_w},
        "source_base_raw": {"F": f_src_base, "C": c_src_base},
    }
    for cond, demo_b in (("F", f_demo_b), ("C", c_demo_b)):
        rep, src_raw, src_w, t_enum, sigs = sides_ctx[cond]
        steps = rep.translate(demo_b)
        text = "".join(s + "\n" for s in steps)
        if check(src_w, text).status is not Status.VALID:
            raise PairConstructionError(f"{spec.pair_id}: {cond} demonstration is not valid in its source")
        why = copy_audit(src_w, steps, rep.world, sigs, t_enum.solutions)
        if why is not None:
            raise PairConstructionError(
                f"{spec.pair_id}: {cond} demonstration rejected: {why}; pin another demonstration or change the source"
            )
        present = motif in production_edges(base, demo_b)
        if present != (cond == "F"):
            raise PairConstructionError(f"{spec.pair_id}: {cond} demonstration {'lacks' if cond == 'F' else 'has'} the motif")
        demo = Demonstration(src_raw["id"], src_w, src_raw, steps, text, demo_b, present, motif_signature(src_w, steps))
        examples = tuple(_example_on(rep.world, rep.entities, rep.primitives, ex) for ex in base_examples)
        prompt = render_prompt(rep.raw, [demo], examples)
        sides[cond] = PairSide(cond, rep.world, rep.raw, (demo,), examples, t_enum.optimal_length, prompt, rep)
        facts[f"enum_{cond}"] = t_enum
        facts[f"sigs_{cond}"] = sigs
    facts["source_enum"] = {"F": enumerate_solutions(f_src_w), "C": enumerate_solutions(c_src_w)}
    facts["witness_hidden"] = all(_witness_hidden(sides[k], facts[f"enum_{k}"]) for k in ("F", "C"))
    novelty = MOTIF_REQUIRED if required else WITNESS_ONLY
    flags = [] if required else ["witness_only"]
    pair = Pair(spec.pair_id, base.family, sides["F"], sides["C"], novelty, tuple(flags), {}, motif)
    return pair, facts
