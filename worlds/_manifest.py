"""Pair manifests: every field of the Fiction-CWR manifest contract, computed.

The manifest carries the seed's contract fields (pair id, family, latent
structure hash, F/C target ids, target motif, demonstration ids, witness
hiding, copy-solvability, holdout necessity, optimum lengths, exposure
matching, solver search metrics, prompt token counts, residual mismatches,
eligibility) plus the facts behind them (world and state sizes, budget slack,
constraint and demonstration counts, primitive frequencies with valid and
invalid exposures, motif signatures, grammar digest, isomorphism certificate).
It is validated against ``worlds/schema/pair_manifest.schema.json``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ._checker import check
from ._construct import (
    MOTIF_REQUIRED,
    Pair,
    PairSide,
    _subject,
    example_states_on_solution_paths,
    examples_chain_to_goal,
    production_edges,
    reachable_graph,
    structure_hash,
)
from ._enumerate import grounded_steps
from ._grammar import __doc__ as _GRAMMAR_DOC
from ._model import World
from ._render import GRAMMAR_TEXT
from ._signature import motif_signature

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
#: Tokenizers whose prompt token counts every manifest records (the bundled models).
TOKENIZERS = ("smollm2-135m-instruct", "gemma-3-270m")


@functools.cache
def _tokenizer(name: str):
    """Load a bundled model's tokenizer once per process; returns (tokenizer, revision) or (None, why).

    The fast tokenizer file of the model's converted cache folder is read with
    ``tokenizers`` directly (the same backend ``transformers`` wraps; loading
    through ``AutoTokenizer`` costs seconds more and counts the same).
    """
    try:
        from tokenizers import Tokenizer

        from models._bundled import bundled_folder

        folder, sha = bundled_folder(name)
        return Tokenizer.from_file(str(folder / "tokenizer.json")), f"sha256:{sha}"
    except Exception as exc:  # noqa: BLE001 - any failure means "no count", recorded with its reason
        return None, f"{type(exc).__name__}: {exc}"


def prompt_token_counts(texts: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Token counts of each text (no special tokens added) per bundled tokenizer.

    A tokenizer that cannot be loaded gives ``{"unavailable": reason}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for name in TOKENIZERS:
        tok, rev = _tokenizer(name)
        if tok is None:
            out[name] = {"unavailable": rev}
            continue
        out[name] = {"revision": rev}
        for k, t in texts.items():
            out[name][k] = len(tok.encode(t, add_special_tokens=False).ids)
    return out


def _state_bound(world: World) -> int:
    """An upper bound on the state space from the budget's finiteness devices."""
    if world.family == "token_workshop":
        return (world.spec.inventory_cap + 1) ** len(world.entities)
    if world.family == "schedule":
        n = 1
        for t in world.spec.tasks:
            machines = sum(1 for _, k, _ in world.spec.machines if k == t.kind)
            n *= 1 + machines * world.spec.horizon
        return n
    return 0


def _search_metrics(world: World, enum) -> dict[str, Any]:
    g = reachable_graph(world)
    out_deg = Counter(s for s, _, _, _ in g["edges"])
    expanded = [s for s in g["nodes"] if g["depth"][s] < world.budget.max_steps]
    degs = [out_deg[s] for s in expanded]
    # fixed oracle: breadth-first search by depth; states it visits up to and including the first goal depth
    goal_depths = [g["depth"][s] for s, (goal, ok) in g["nodes"].items() if goal and ok and s != g["initial"]]
    first = min(goal_depths, default=None)
    bfs = None if first is None else sum(1 for d in g["depth"].values() if d <= first)
    return {
        "enumeration_nodes": enum.states,
        "reachable_states": len(g["nodes"]),
        "transitions": len(g["edges"]),
        "mean_branching": round(sum(degs) / len(degs), 4) if degs else 0.0,
        "max_branching": max(degs, default=0),
        "bfs_states_to_first_goal_depth": bfs,
        "solutions": len(enum.solutions),
    }


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
            d = out.setdefault(_subject(base_world, s), {"example_valid": 0, "example_invalid": 0, "demonstration": 0})
            d["demonstration"] += 1
    return {k: out[k] for k in sorted(out)}


def _sig_text(sig: tuple) -> str:
    """A compact text form of a motif signature."""
    parts = []
    for prim, args, deps in sig:
        a = ",".join(str(v) for _, v in args)
        d = ",".join(str(x) for x in deps)
        parts.append(f"{prim}({a})<[{d}]")
    return " ; ".join(parts)


def _edge_text(e: tuple) -> str:
    return f"{e[0]} -{e[1]}-> {e[2]}"


def build_manifest(pair: Pair, facts: dict, token_counts: bool = True) -> dict:
    """The manifest of ``pair`` from the construction facts (see module docstring)."""
    base: World = facts["base"]
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
            f"motif held by {holding} of {len(target_edges)} bounded target solutions; novelty is witness-only"
        )
    exposure_matched = not any(r.startswith("exposure of") for r in residual)
    counts = (
        prompt_token_counts({"F": f.prompt_text, "C": c.prompt_text})
        if token_counts
        else {n: {"unavailable": "not requested"} for n in TOKENIZERS}
    )
    # output burden: the first optimal base solution (base order), written in each side's labels
    opt_base = min(facts["target_enum"].solutions, key=lambda s: (len(s), s))
    outputs = {k: "".join(x + "\n" for x in sd.replica.translate(opt_base)) for k, sd in (("F", f), ("C", c))}
    out_counts = (
        prompt_token_counts(outputs)
        if token_counts
        else {n: {"unavailable": "not requested"} for n in TOKENIZERS}
    )
    for what, cnt in (("prompt", counts), ("optimal output", out_counts)):
        for name, d in cnt.items():
            if "F" in d and d["F"] != d["C"]:
                residual.append(f"{what} tokens ({name}): F {d['F']}, C {d['C']}")
    opt_f, opt_c = enum_f.optimal_length, enum_c.optimal_length
    cost_f = _min_cost(f.target, enum_f.solutions)
    b = f.target.budget
    world_facts = {
        "entities": len(base.entities),
        "entity_types": len(base.entity_types),
        "primitives": len(base.primitives),
        "primitive_set": [f"{p.name}({', '.join(q.type for q in p.params)})" for p in base.primitives],
        "grounded_steps": len(grounded_steps(base)),
        "constraints": len(base.spec.constraints),
        "state_space_bound": _state_bound(base),
        "reachable_states": facts["isomorphism"]["states"],
        "transitions": facts["isomorphism"]["transitions"],
        "budget": {"max_steps": b.max_steps, "max_cost": b.max_cost, **dict(b.extra)},
    }
    sig_classes = Counter(_sig_text(motif_signature(base, sol)) for sol in facts["target_enum"].solutions)
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
        "exact_or_renamed_demo_solves_target": False,
        "all_bounded_solutions_require_holdout": holding == len(target_edges),
        "novelty": pair.novelty,
        "optimal_lengths": {"F": opt_f, "C": opt_c},
        "primitive_exposure_matched": exposure_matched,
        "solver_search_metrics": {"F": _search_metrics(f.target, enum_f), "C": _search_metrics(c.target, enum_c)},
        "prompt_token_counts": counts,
        "output_token_counts": out_counts,
        "residual_mismatches": residual,
        "eligibility": "directional_showcase" if pair.novelty == MOTIF_REQUIRED else "directional_showcase_witness_only",
        "world": world_facts,
        "budget_slack": {
            "steps": b.max_steps - opt_f,
            "cost": None if cost_f is None else b.max_cost - cost_f,
        },
        "constraint_count": len(base.spec.constraints),
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
            "f_demo": _sig_text(fd.signature),
            "c_demo": _sig_text(cd.signature),
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
            "name": "worlds artifact grammar v1",
            "sha256": hashlib.sha256((_GRAMMAR_DOC or "").encode() + GRAMMAR_TEXT.encode()).hexdigest(),
        },
        "prompt_sha256": {
            "F": hashlib.sha256(f.prompt_text.encode()).hexdigest(),
            "C": hashlib.sha256(c.prompt_text.encode()).hexdigest(),
        },
        "flags": list(pair.flags),
    }
    return m


def manifest_digest(manifest: dict, *, without_token_counts: bool = False) -> str:
    """sha256 of the canonical JSON of a manifest (optionally without the tokenizer-dependent field)."""
    m = dict(manifest)
    if without_token_counts:
        m.pop("prompt_token_counts", None)
        m.pop("output_token_counts", None)
        m["residual_mismatches"] = [r for r in m["residual_mismatches"] if " tokens (" not in r]
    blob = json.dumps(m, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def validate_manifest(manifest: dict) -> None:
    """Validate against the published manifest schema (needs ``jsonschema``); raises on the first error."""
    import jsonschema

    schema = json.loads(MANIFEST_SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(manifest, schema)
