"""Seeded generator of latent base worlds and certified F/C pairs, for every family with a generator.

``generate_pairs(family, seed, n, tier)`` repeats *draws* until it holds ``n``
certified pairs. Draw ``k`` uses its own random stream, named by the generator
version, family, tier, seed and ``k``, so the result is a pure function of the
arguments. One draw:

1. draws a latent base world from the tier's parameters (the family's
   ``FamilyGenerator.draw_base``);
2. enumerates every bounded solution of it and measures its tier properties;
   a base whose measured tier is not the requested one is rejected;
3. takes as withheld motif a production edge every bounded solution holds
   (a draw with none is rejected: generated pairs are motif-required), the
   first in the family's ``motif_key`` order;
4. draws source variants of the base (``draw_source``: a changed start
   and/or goal) and collects, from all their bounded solutions, F
   demonstrations that realize the motif and C demonstrations that do not,
   each within one step of the target optimum and passing the copy audit
   (verbatim, renamed, relabelled, reordered, windowed); C candidates whose
   structure is interchangeable with the motif in the target's solution set
   (``_interchange``) are refused;
5. pairs an F with a C demonstration, preferring equal primitive exposure (the
   same subject uses), and hands the choice, pinned, to ``build_pair``, which
   builds the F/C replicas, the isomorphism certificate, the examples and the
   prompts and re-runs every audit on the replicas;
6. writes the manifest with the generator's version, parameters, tier and
   audit results (and the family's ``notes``) added.

Every rejected draw is counted under one reason; demonstration candidates the
audits refused are counted separately by what refused them.

Each family's generator lives with the family (``Family.generator``): its
base drawer, source-variant drawer, tier parameters, motif preference and
pair id code.
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

from ._construct import build_pair
from ._copy_audit import copy_audit
from ._enumerate import Bounds, EnumerationLimitError
from ._errors import PairConstructionError, WorldsError
from ._interchange import interchangeable_edges
from ._loader import world_from_mapping
from ._manifest import TokenCounts, build_manifest
from ._model import World
from ._pair_spec import PairSpec
from ._pair_types import Pair
from ._registry import get_family, registered_families
from ._signature import motif_signature
from ._structure import production_edges, subject_of
from ._tiers import TIERS, tier_of, tier_properties

__all__ = ["GENERATOR_VERSION", "GenerationResult", "generate_pairs", "generated_families", "generated_tiers"]

#: Version of the generator; part of every generated manifest and of every draw's random stream.
GENERATOR_VERSION = "worlds.generate/1"
#: Solutions above this many make a base unusable (the audits enumerate them all).
MAX_TARGET_SOLUTIONS = 2000
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


def generated_families() -> tuple[str, ...]:
    """The registered families the generator draws, in registration order."""
    return tuple(f.name for f in registered_families() if f.generator is not None)


def generated_tiers() -> dict[str, tuple[str, ...]]:
    """The tiers the generator draws for each family it draws: those its bases can measure as."""
    return {f.name: f.generator.tiers for f in registered_families() if f.generator is not None}


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


def _collect(fam, base_raw: dict, context: Any, motif, optimum: int, rng: random.Random) -> _Candidates:
    """Demonstration candidates from drawn source variants: every bounded source solution of length
    ``optimum`` or ``optimum + 1`` (so a copy, or a window of one, could be a target solution)."""
    gen = fam.generator
    out = _Candidates()
    seen: set = set()
    for _ in range(gen.source_variants):
        ov = gen.draw_source(base_raw, context, rng)
        if ov is None:
            out.refused["source:invalid_or_unchanged"] += 1
            continue
        key = repr(ov)
        if key in seen:
            continue
        seen.add(key)
        src = _source_world(base_raw, ov, "D-000000")
        if src is None:
            out.refused["source:invalid_or_unchanged"] += 1
            continue
        try:
            sols = fam.enumerate(src, Bounds(max_steps=optimum + 1 if gen.source_steps_bounded else None,
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
    fam = get_family(family)
    gen = fam.generator
    tp = gen.tier_params(tier)
    pair_id = f"GEN-{gen.pair_code}-{tier}-{seed}-{index:04d}"
    base_raw, context = gen.draw_base(rng, tp, f"B-{rng.randrange(16**6):06x}")
    try:
        base = world_from_mapping(base_raw, source=f"<generated base of {pair_id}>")
    except WorldsError as exc:
        raise _Reject("base:invalid_world", str(exc)) from None
    try:
        enum = fam.enumerate(base, Bounds(max_solutions=MAX_TARGET_SOLUTIONS))
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
    motif = min(required, key=gen.motif_key(context))
    cands = _collect(fam, base_raw, context, motif, enum.optimal_length, rng)
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
    manifest["generator"].update(gen.notes(context))
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
        "source_variants_per_side": get_family(family).generator.source_variants,
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
    drawn = generated_families()
    if family not in drawn:
        raise WorldsError(f"the generator has no family {family!r}; it draws: {', '.join(drawn)}")
    if tier not in TIERS:
        raise WorldsError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise WorldsError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise WorldsError(f"n must be a positive int, got {n!r}")
    gen = get_family(family).generator
    gen.tier_params(tier)  # refuses a tier the family has no draw parameters for
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
              "max_draws": limit, "tier_parameters": _jsonable(dataclasses.asdict(gen.tier_params(tier)))}
    if len(pairs) < n:
        raise PairConstructionError(
            f"generator {family}/{tier}/seed {seed}: {len(pairs)} of {n} pairs after {draws} draws; "
            f"rejections: {dict(sorted(rejections.items()))}; raise max_draws or use another tier"
        )
    return GenerationResult(tuple(pairs), tuple(specs), draws, dict(rejections), dict(refused), params)
