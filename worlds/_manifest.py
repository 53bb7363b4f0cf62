"""Pair manifests: every field of the Fiction-CWR manifest contract, computed, for a pair of any family.

The manifest carries the seed's contract fields (pair id, family, latent
structure hash, F/C target ids, target motif, demonstration ids, witness
hiding, copy-solvability, holdout necessity, optimum lengths, exposure
matching, solver search metrics, prompt token counts, residual mismatches,
eligibility) plus the facts behind them (world and state sizes, budget slack,
constraint and demonstration counts, primitive frequencies with valid and
invalid exposures, motif signatures, grammar digest, isomorphism certificate).
It is validated against ``worlds/schema/pair_manifest.schema.json``.  What
depends on the family (world sizes, search metrics, signature text, the
grammar's name and digest) comes from the base world's family.

Prompt and output token counts come from counters the caller passes
(``token_counts``), so this package loads no tokenizer and a manifest does not
depend on what happens to be installed: ``models.bundled_token_counters()``
gives the counters of the bundled models.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from canonical_hash import sha256_json, sha256_text

from ._checker import check
from ._copy_audit import copy_audit
from ._errors import WorldsError
from ._examples import example_states_on_solution_paths, examples_chain_to_goal
from ._model import World
from ._pair_types import MOTIF_REQUIRED, Pair, PairSide
from ._registry import get_family
from ._signature import motif_signature
from ._structure import production_edges, structure_hash, subject_of

__all__ = [
    "MANIFEST_SCHEMA_PATH",
    "MANIFEST_VERSION",
    "TOKENIZERS",
    "build_manifest",
    "manifest_digest",
    "prompt_token_counts",
    "validate_manifest",
]

MANIFEST_VERSION = 1
MANIFEST_SCHEMA_PATH = Path(__file__).parent / "schema" / "pair_manifest.schema.json"
#: Tokenizers whose token counts every manifest records (the bundled models; the manifest schema names them).
TOKENIZERS = ("smollm2-135m-instruct", "gemma-3-270m")

#: A tokenizer's counter: ``(count, revision)`` where ``count(text)`` is the number of tokens of ``text`` (no
#: special tokens added) and ``revision`` names the tokenizer's exact version; ``(None, reason)`` when the
#: tokenizer is unavailable.
TokenCounter = tuple[Callable[[str], int] | None, str]
#: What ``token_counts`` accepts: None or False (no counts), or a mapping tokenizer name -> counter.
TokenCounts = Mapping[str, TokenCounter] | Literal[False] | None


def _counters(token_counts: TokenCounts) -> Mapping[str, TokenCounter] | None:
    """The counter mapping of ``token_counts``, or None for no counts; refuses anything else."""
    if token_counts is None or token_counts is False:
        return None
    if not isinstance(token_counts, Mapping):
        raise WorldsError(
            f"token_counts must be None, False or a mapping tokenizer name -> (count, revision), got {token_counts!r}; "
            "pass models.bundled_token_counters() for the bundled tokenizers"
        )
    unknown = sorted(set(token_counts) - set(TOKENIZERS))
    if unknown:
        raise WorldsError(f"token_counts names tokenizers {unknown} that a manifest does not record; "
                          f"a manifest records: {', '.join(TOKENIZERS)}")
    return token_counts


def prompt_token_counts(texts: Mapping[str, str], token_counts: TokenCounts = None) -> dict[str, dict[str, Any]]:
    """Token counts of each text, per tokenizer of :data:`TOKENIZERS`.

    With no counters every tokenizer gives ``{"unavailable": "not requested"}``;
    a tokenizer the mapping lacks gives ``{"unavailable": "no counter given"}``,
    one whose counter is ``(None, reason)`` gives ``{"unavailable": reason}``,
    and one with a counter gives ``{"revision": revision, <text key>: count, ...}``.
    """
    counters = _counters(token_counts)
    out: dict[str, dict[str, Any]] = {}
    for name in TOKENIZERS:
        if counters is None:
            out[name] = {"unavailable": "not requested"}
            continue
        count, revision = counters.get(name, (None, "no counter given"))
        if count is None:
            out[name] = {"unavailable": revision}
            continue
        out[name] = {"revision": revision}
        for k, t in texts.items():
            out[name][k] = count(t)
    return out


def _min_cost(world: World, sols) -> int | None:
    costs = [check(world, "".join(s + "\n" for s in sol)).cost for sol in sols]
    return min(costs, default=None)


def _exposure(side: PairSide, base_world: World) -> dict[str, dict[str, int]]:
    """Per subject (base labels): valid and invalid exposures in the side's examples and demonstrations."""
    out: dict[str, dict[str, int]] = {}
    for ex in side.primitive_examples:
        d = out.setdefault(ex.subject, {"example_valid": 0, "example_invalid": 0, "demonstration": 0})
        d["example_valid" if ex.status == "VALID" else "example_invalid"] += 1
    for demo in side.demonstrations:
        for s in demo.base_steps:
            d = out.setdefault(subject_of(base_world, s), {"example_valid": 0, "example_invalid": 0, "demonstration": 0})
            d["demonstration"] += 1
    return {k: out[k] for k in sorted(out)}


def _copy_solves(pair: Pair, facts: dict) -> bool:
    """The copy audit's result for the manifest: whether any demonstration of either side, or a window of it,
    copied verbatim, renamed or relabelled, solves that side's target (construction refuses such a pair, so a
    built pair gives False; the field records the audit's answer, not the expectation)."""
    for cond, side in (("F", pair.f), ("C", pair.c)):
        sigs, solutions = facts[f"sigs_{cond}"], facts[f"enum_{cond}"].solutions
        for demo in side.demonstrations:
            if copy_audit(demo.source, demo.steps, side.target, sigs, solutions) is not None:
                return True
    return False


def _edge_text(e: tuple) -> str:
    return f"{e[0]} -{e[1]}-> {e[2]}"


def build_manifest(pair: Pair, facts: dict, token_counts: TokenCounts = None) -> dict:
    """The manifest of ``pair`` from the construction facts (see module docstring).

    ``token_counts``: the tokenizer counters for the prompt and output token
    counts (see :func:`prompt_token_counts`); None or False records none.
    """
    counters = _counters(token_counts)
    base: World = facts["base"]
    fam = get_family(base.family)
    f, c = pair.f, pair.c
    enum_f, enum_c = facts["enum_F"], facts["enum_C"]
    motif = facts["motif"]
    fd, cd = f.demonstrations[0], c.demonstrations[0]
    target_edges = [production_edges(base, s) for s in facts["target_enum"].solutions]
    holding = sum(1 for e in target_edges if motif in e)
    exp_f, exp_c = _exposure(f, base), _exposure(c, base)
    residual: list[str] = []
    for subj in sorted(set(exp_f) | set(exp_c)):
        a = exp_f.get(subj, {})
        b = exp_c.get(subj, {})
        for k in ("example_valid", "example_invalid", "demonstration"):
            if a.get(k, 0) != b.get(k, 0):
                residual.append(f"exposure of {subj} in {k}: F {a.get(k, 0)}, C {b.get(k, 0)}")
    if len(fd.steps) != len(cd.steps):
        residual.append(f"demonstration length: F {len(fd.steps)}, C {len(cd.steps)}")
    n_src_f = len(facts["source_enum"]["F"].solutions)
    n_src_c = len(facts["source_enum"]["C"].solutions)
    if n_src_f != n_src_c:
        residual.append(f"source instance solution counts: F {n_src_f}, C {n_src_c}")
    sb = facts["source_base_raw"]
    for k in ("initial", "goal", "budget", "constraints"):
        cf = sb["F"].get(k) != facts["base_raw"].get(k)
        cc = sb["C"].get(k) != facts["base_raw"].get(k)
        if cf != cc:
            residual.append(f"source {k} changed: F {cf}, C {cc}")
    residual.append("demonstrated motif: F realizes " + _edge_text(motif) + ", C does not (by construction)")
    if pair.novelty != MOTIF_REQUIRED:
        residual.append(
            f"motif held by {holding} of {len(target_edges)} bounded target {fam.solution_noun}; novelty is witness-only"
        )
    exposure_matched = not any(r.startswith("exposure of") for r in residual)
    counts = prompt_token_counts({"F": f.prompt_text, "C": c.prompt_text}, counters)
    # output burden: the first optimal base solution (base order), written in each side's labels
    opt_base = min(facts["target_enum"].solutions, key=lambda s: (len(s), s))
    outputs = {k: "".join(x + "\n" for x in sd.replica.translate(opt_base)) for k, sd in (("F", f), ("C", c))}
    out_counts = prompt_token_counts(outputs, counters)
    for what, cnt in (("prompt", counts), ("optimal output", out_counts)):
        for name, d in cnt.items():
            if "F" in d and d["F"] != d["C"]:
                residual.append(f"{what} tokens ({name}): F {d['F']}, C {d['C']}")
    opt_f, opt_c = enum_f.optimal_length, enum_c.optimal_length
    cost_f = _min_cost(f.target, enum_f.solutions)
    b = f.target.budget
    sizes = fam.world_facts(base)
    n_constraints = fam.constraint_count(base)
    world_facts = {
        "entities": sizes["entities"],
        "entity_types": len(base.entity_types),
        "primitives": len(base.primitives),
        "primitive_set": sizes["primitive_set"],
        "grounded_steps": sizes["grounded_steps"],
        "constraints": n_constraints,
        "state_space_bound": sizes["state_space_bound"],
        "reachable_states": facts["isomorphism"]["states"],
        "transitions": facts["isomorphism"]["transitions"],
        "budget": {"max_steps": b.max_steps, "max_cost": b.max_cost, **dict(b.extra)},
    }
    sig_classes = Counter(fam.signature_text(motif_signature(base, sol)) for sol in facts["target_enum"].solutions)
    m = {
        "manifest_version": MANIFEST_VERSION,
        "pair_id": pair.pair_id,
        "family": pair.family,
        "latent_structure_hash": structure_hash(facts["base_raw"]),
        "f_target_id": f.target.id,
        "c_target_id": c.target.id,
        "target_motif": _edge_text(motif),
        "f_source_demo_id": fd.source_id,
        "c_replacement_demo_id": cd.source_id,
        "target_witness_hidden": facts["witness_hidden"],
        "exact_or_renamed_demo_solves_target": _copy_solves(pair, facts),
        "all_bounded_solutions_require_holdout": holding == len(target_edges),
        "novelty": pair.novelty,
        "optimal_lengths": {"F": opt_f, "C": opt_c},
        "primitive_exposure_matched": exposure_matched,
        "solver_search_metrics": {"F": fam.search_metrics(f.target, enum_f), "C": fam.search_metrics(c.target, enum_c)},
        "prompt_token_counts": counts,
        "output_token_counts": out_counts,
        "residual_mismatches": residual,
        "eligibility": "directional_showcase" if pair.novelty == MOTIF_REQUIRED else "directional_showcase_witness_only",
        "world": world_facts,
        "budget_slack": {
            "steps": b.max_steps - opt_f,
            "cost": None if cost_f is None else b.max_cost - cost_f,
        },
        "constraint_count": n_constraints,
        "demonstration_count": {"F": len(f.demonstrations), "C": len(c.demonstrations)},
        "primitive_example_count": {"F": len(f.primitive_examples), "C": len(c.primitive_examples)},
        "primitive_frequencies": {"F": exp_f, "C": exp_c},
        "primitive_examples": {
            "chain_to_goal": any(
                examples_chain_to_goal(sd.target, sd.primitive_examples) for sd in (f, c)
            ),
            "states_on_target_solution_paths": {
                "F": example_states_on_solution_paths(f.target, f.primitive_examples, enum_f.solutions),
                "C": example_states_on_solution_paths(c.target, c.primitive_examples, enum_c.solutions),
            },
        },
        "motif_signatures": {
            "target_classes": dict(sorted(sig_classes.items())),
            "f_demo": fam.signature_text(fd.signature),
            "c_demo": fam.signature_text(cd.signature),
            "holdout_edge_in_target_solutions": {"with": holding, "of": len(target_edges)},
        },
        "demonstrations": {
            "F": {"source_id": fd.source_id, "length": len(fd.steps), "motif_present": fd.motif_present,
                  "source_solutions": n_src_f},
            "C": {"source_id": cd.source_id, "length": len(cd.steps), "motif_present": cd.motif_present,
                  "source_solutions": n_src_c},
        },
        "isomorphism": facts["isomorphism"],
        "grammar": {
            "name": fam.grammar_name,
            "sha256": sha256_text(fam.grammar_digest_text),
        },
        "prompt_sha256": {"F": sha256_text(f.prompt_text), "C": sha256_text(c.prompt_text)},
        "flags": list(pair.flags),
    }
    return m


def manifest_digest(manifest: dict, *, without_token_counts: bool = False) -> str:
    """sha256 of the ASCII-escaped canonical JSON of a manifest (optionally without the tokenizer-dependent fields)."""
    m = dict(manifest)
    if without_token_counts:
        m.pop("prompt_token_counts", None)
        m.pop("output_token_counts", None)
        m["residual_mismatches"] = [r for r in m["residual_mismatches"] if " tokens (" not in r]
    return sha256_json(m, ensure_ascii=True)


def validate_manifest(manifest: dict) -> None:
    """Validate against the published manifest schema (needs ``jsonschema``); raises on the first error."""
    import jsonschema

    schema = json.loads(MANIFEST_SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(manifest, schema)
