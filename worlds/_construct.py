"""F/C pair construction from a latent base world, with every audit computed.

A pair spec (``worlds/data/pairs/*.toml``) names a latent base world file,
two replica seeds and two *source variants* of the base (the base with a
changed initial state and/or goal, and optionally budget or constraints).
``build_pair`` then:

1. instantiates independent F and C target replicas of the base (fresh labels
   for entities, primitives and types, drawn by the spec's label scheme,
   shuffled declaration order, fresh ids);
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

``build_pair`` hands the spec to the base world's family
(``Family.build_pair``); this module's ``build_step_pair`` is the
construction of step-sequence families.  It holds the choices (source
variants, motif, demonstrations) and the assembly; the parts live beside it: the replicas in ``_pairs``, the
isomorphism certificate and production edges in ``_structure``, the copy
audit in ``_copy_audit``, the one-step examples in ``_examples``, the prompt
in ``_prompt`` and the manifest in ``_manifest``.
"""

from __future__ import annotations

import copy
import random
import tomllib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ._checker import Status, check
from ._copy_audit import copy_audit
from ._enumerate import Enumeration, enumerate_solutions
from ._errors import PairConstructionError, WorldsError
from ._examples import base_examples, example_on
from ._loader import world_from_mapping
from ._model import World
from ._pair_spec import PairSpec
from ._pair_types import MOTIF_REQUIRED, WITNESS_ONLY, Demonstration, Pair, PairSide
from ._pairs import instantiate_replica, replica_labels
from ._prompt import render_prompt
from ._registry import get_family
from ._signature import motif_signature
from ._structure import isomorphism_certificate, one_step, production_edges, subject_of

__all__ = ["build_pair", "build_step_pair"]


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
    """How often a solution exposes each subject."""
    return Counter(subject_of(world, s) for s in sol)


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
        return [tuple(one_step(s).render() for s in pinned)]
    sols = list(enumerate_solutions(src).solutions)
    if not sols:
        raise PairConstructionError(f"{spec.pair_id}: the {what} has no valid solution; change its start or goal")
    return sols


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
    """Build the pair of ``spec`` by its base world's family; returns the pair (manifest not yet filled) and
    the audit facts.

    Raises PairConstructionError naming the pair and what to change when the
    spec cannot give a valid, copy-proof, matched fixture.
    """
    if spec.base_raw is not None:
        base_raw = copy.deepcopy(spec.base_raw)
    else:
        with open(spec.base, "rb") as fh:
            base_raw = tomllib.load(fh)
    base_raw.pop("examples", None)
    base = world_from_mapping(base_raw, source=str(spec.base))
    return get_family(base.family).build_pair(spec, base_raw, base)


def build_step_pair(spec: PairSpec, base_raw: dict, base: World) -> tuple[Pair, dict]:
    """``build_pair`` of a step-sequence base (``StepFamily``): its mapping without examples, and its world."""
    f_rep = instantiate_replica(base_raw, spec.f_seed, "W", spec.labels)
    c_rep = instantiate_replica(base_raw, spec.c_seed, "W", spec.labels, avoid=replica_labels(f_rep))
    if f_rep.world.id == c_rep.world.id:
        raise PairConstructionError(f"{spec.pair_id}: F and C targets got the same id; use other seeds")
    shared = replica_labels(f_rep) & replica_labels(c_rep)
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
    examples_on_base = base_examples(base, target_enum.solutions)
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
        examples = tuple(example_on(rep.world, rep.entities, rep.primitives, ex) for ex in examples_on_base)
        prompt = render_prompt(rep.raw, [demo], examples)
        sides[cond] = PairSide(cond, rep.world, rep.raw, (demo,), examples, t_enum.optimal_length, prompt, rep)
        facts[f"enum_{cond}"] = t_enum
        facts[f"sigs_{cond}"] = sigs
    facts["source_enum"] = {"F": enumerate_solutions(f_src_w), "C": enumerate_solutions(c_src_w)}
    facts["witness_hidden"] = all(_witness_hidden(sides[k], facts[f"enum_{k}"]) for k in ("F", "C"))
    novelty = MOTIF_REQUIRED if required else WITNESS_ONLY
    flags = [] if required else ["witness_only"]
    pair = Pair(spec.pair_id, base.family, sides["F"], sides["C"], novelty, tuple(flags), {}, motif, spec)
    return pair, facts
