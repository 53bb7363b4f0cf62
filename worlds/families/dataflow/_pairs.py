"""F/C pairs of the ``dataflow`` family: replicas, certificate, motif, demonstrations, copy audit, examples.

A dataflow artifact is a program (typed bindings ``w = name(args)``), not a
step sequence over an inventory, so the step-sequence machinery
(``worlds.StepFamily``: grounded steps, reachable state graphs, step
renaming) does not apply. This module gives each part of a pair its program
counterpart and assembles the same ``Pair`` records, whose manifest the one
builder (``worlds.build_manifest``) writes:

* **Replica**: fresh labels for the inputs, the goal wire, the primitives and
  the value types; shuffled declaration order of types, inputs, primitives and
  constraints; the cases keep their order (a wire's value is a tuple over
  them). Intermediate wires are not labels: the enumerator names them ``w1``,
  ``w2``, ... by position, and any fresh name means the same program.
* **Isomorphism certificate**: both replicas' mappings, written back in the
  base's labels, are structurally equal; and every bounded program of one,
  translated under the bijection, is a bounded program of the other with the
  same cost, and the counts agree.
* **Production edges** of a program: ``(producer, "argK", consumer)`` when a
  binding reads, as its K-th argument, a wire an earlier binding of primitive
  ``producer`` bound. The argument position is part of the edge: ``sub(u, v)``
  and ``sub(v, u)`` compose the same primitives differently.
* **Signature**: the least form over the orders of a program's bindings that
  keep every wire bound before it is read, with inputs relabelled by first
  occurrence and intermediate wires written as the position of the binding
  that bound them; the binding of the goal wire is marked. Primitive names are
  kept: a source and its target share every primitive, so a copied program
  keeps them (as the step audit keeps shared primitive names).
* **Copy audit**: the demonstration and every contiguous window of it that is
  a program on its own (reads only inputs and wires bound inside it), as
  written and with its last wire bound as the goal wire, is refused when it is
  VALID in the target (verbatim), or when its signature is a bounded target
  program's signature with the inputs as written (reordered) or relabelled
  (reordered and relabelled, which covers renamed).
* **One-step examples**: per primitive a valid binding and an invalid one
  (an argument of another type, or, with one type only, a rebound wire) on an
  illustration state of wires ``u1``, ``u2``, ... that no program of the target
  passes through, translated to each side and re-derived there.

A source variant keeps the world (types, inputs, primitives, budget, goal wire
and type) and changes the expected values, so its demonstration computes
another function over the same cases.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Mapping, Sequence, Set
from typing import Any

from canonical_hash import sha256_text

from ..._checker import Status, check
from ..._enumerate import Enumeration
from ..._errors import PairConstructionError
from ..._interchange import interchangeable_edges
from ..._loader import world_from_mapping
from ..._model import Failure, World
from ..._pair_types import MOTIF_REQUIRED, WITNESS_ONLY, Demonstration, Pair, PairSide, PrimitiveExample
from ..._pairs import Replica, fresh_names, rename_mapping, replica_labels
from ..._registry import get_family
from ..._structure import structure_json
from ._enumerate import enumerate_programs
from ._grammar import CANONICAL_WIRE, Binding, bindings
from ._state import OPS, DataflowState, describe
from ._text import render_dataflow_prompt

__all__ = [
    "COMMUTATIVE_OPS",
    "build_dataflow_pair",
    "dataflow_base_examples",
    "dataflow_example_on",
    "dataflow_isomorphism",
    "examples_chain_to_goal",
    "instantiate_dataflow_replica",
    "program_copy_audit",
    "program_edges",
    "program_signature",
    "relabel",
    "signature_text",
    "translate_program",
]

#: Library operations whose two arguments can be swapped without changing the result.
COMMUTATIVE_OPS = frozenset({"add", "mul", "min", "max", "eq", "and", "or", "xor", "nand"})


# ---------------------------------------------------------------- programs


def _text(program: Sequence[Binding]) -> str:
    return "".join(b.render() + "\n" for b in program)


def program_edges(world: World, program: Sequence[str | Binding]) -> frozenset[tuple[str, str, str]]:
    """Production edges ``(producer, "argK", consumer)`` a program realizes (see the module docstring)."""
    producer: dict[str, str] = {}
    out: set[tuple[str, str, str]] = set()
    for b in bindings(program):
        for k, a in enumerate(b.args):
            if isinstance(a, str) and a in producer:
                out.add((producer[a], f"arg{k + 1}", b.name))
        producer[b.target] = b.name
    return frozenset(out)


def program_signature(world: World, program: Sequence[str | Binding], relabel: bool = True) -> tuple:
    """The program's canonical form (module docstring); ``relabel=False`` keeps input names as written."""
    bs = bindings(program)
    n = len(bs)
    goal = world.spec.goal_wire
    bound_at = {b.target: i for i, b in enumerate(bs)}
    deps = [{bound_at[a] for a in b.args if isinstance(a, str) and a in bound_at and bound_at[a] < i}
            for i, b in enumerate(bs)]
    best: list[tuple | None] = [None]

    def walk(done: list[int], form: list[tuple], labels: dict):
        if best[0] is not None and tuple(form) > best[0][: len(form)]:
            return
        if len(done) == n:
            if best[0] is None or tuple(form) < best[0]:
                best[0] = tuple(form)
            return
        pos = {k: i for i, k in enumerate(done)}
        for k in range(n):
            if k in pos or not deps[k] <= pos.keys():
                continue
            b = bs[k]
            lab = dict(labels)
            args = []
            for a in b.args:
                if isinstance(a, int):
                    args.append(("int", a))
                elif a in bound_at and bound_at[a] in pos:
                    args.append(("wire", pos[bound_at[a]]))
                elif relabel:
                    args.append(("input", lab.setdefault(a, f"e{len(lab)}")))
                else:
                    args.append(("input", a))
            walk(done + [k], form + [(b.name, tuple(args), b.target == goal)], lab)

    walk([], [], {})
    return best[0] if best[0] is not None else ()


def signature_text(sig: tuple) -> str:
    """A compact text form of a program signature (``*`` marks the goal wire's binding)."""
    parts = []
    for i, (name, args, is_goal) in enumerate(sig):
        a = ",".join(f"#{v}" if kind == "wire" else str(v) for kind, v in args)
        parts.append(f"{'*' if is_goal else ''}#{i}={name}({a})")
    return " ; ".join(parts)


def _closed_windows(program: Sequence[Binding], inputs: set[str]):
    """(start, end, window) for every contiguous window that reads only inputs and wires bound inside it."""
    n = len(program)
    for length in range(n, 0, -1):
        for start in range(n - length + 1):
            window = list(program[start : start + length])
            bound: set[str] = set()
            ok = True
            for b in window:
                if any(isinstance(a, int) or (a not in inputs and a not in bound) for a in b.args):
                    ok = False
                    break
                bound.add(b.target)
            if ok:
                yield start, start + length, window


def program_copy_audit(demo_world: World, demo: Sequence[str], target: World, target_sigs: set,
                       target_solutions: Sequence[Sequence[str]] | None = None) -> str | None:
    """Why a demonstration program would solve ``target`` when copied (module docstring), or None.

    ``target_sigs``: the signatures of every bounded target program. With ``target_solutions`` the input-as-written
    signatures are computed from them to tell a reordered copy from a relabelled one.
    """
    bs = bindings(demo)
    goal = target.spec.goal_wire
    inputs = {n for n, _ in target.spec.inputs}
    plain = None if target_solutions is None else {program_signature(target, s, relabel=False) for s in target_solutions}
    n = len(bs)
    for start, end, window in _closed_windows(bs, inputs):
        what = "the demonstration" if end - start == n else f"its steps {start + 1}..{end}"
        variants = [(window, "")]
        last = window[-1]
        if last.target != goal and all(b.target != goal for b in window):
            variants.append((window[:-1] + [dataclasses.replace(last, target=goal)],
                             " with its last wire bound as the goal wire"))
        for prog, how in variants:
            if check(target, _text(prog)).status is Status.VALID:
                return f"{what}, copied verbatim{how}, solve(s) target {target.id}"
            if program_signature(target, prog) in target_sigs:
                if plain is not None and program_signature(target, prog, relabel=False) in plain:
                    return f"{what}, reordered,{how} solve(s) target {target.id}"
                return (f"{what}, reordered and relabelled{how}, become(s) a solution of target {target.id} "
                        "(renamed inputs)")
    return None


# ---------------------------------------------------------------- replicas


def relabel(m: dict, ent: Mapping[str, str], prim: Mapping[str, str], ty: Mapping[str, str]) -> None:
    """Inputs and the goal wire renamed by ``ent``, primitives by ``prim`` and value types by ``ty``, in place
    (names absent from a map are kept)."""
    m["types"] = {ty.get(t, t): v for t, v in m["types"].items()}
    m["inputs"] = {ent.get(k, k): ty.get(v, v) for k, v in m["inputs"].items()}
    for p in m["primitives"]:
        p["name"] = prim.get(p["name"], p["name"])
        p["params"] = [ty.get(t, t) for t in p.get("params", [])]
        p["result"] = ty.get(p["result"], p["result"])
    g = m["goal"]
    g["wire"] = ent.get(g["wire"], g["wire"])
    g["type"] = ty.get(g["type"], g["type"])
    g["cases"] = [{"inputs": {ent.get(k, k): v for k, v in c["inputs"].items()}, "expect": c["expect"]}
                  for c in g["cases"]]
    for c in m.get("constraints", []):
        if "primitive" in c:
            c["primitive"] = prim.get(c["primitive"], c["primitive"])


def _translate_binding(b: Binding, ent: Mapping[str, str], prim: Mapping[str, str]) -> str:
    args = [a if isinstance(a, int) else ent.get(a, a) for a in b.args]
    return Binding(ent.get(b.target, b.target), prim.get(b.name, b.name), tuple(args)).render()


def translate_program(solution, ent: Mapping[str, str], prim: Mapping[str, str]) -> tuple[str, ...]:
    """A program (rendered bindings) with its inputs and goal wire relabelled by ``ent`` and primitives by
    ``prim`` (intermediate wires keep their names)."""
    return tuple(_translate_binding(b, ent, prim) for b in bindings(solution))


def instantiate_dataflow_replica(raw: Mapping[str, Any], seed: int, id_prefix: str = "R",
                                 labels: str = "letters", avoid: Set[str] = frozenset()) -> Replica:
    """A replica of a dataflow base mapping with fresh labels (of scheme ``labels``, none in ``avoid``),
    shuffled declaration order and a fresh id."""
    rng = random.Random(seed)
    ents = sorted(raw["inputs"]) + [raw["goal"]["wire"]]
    prims = sorted(p["name"] for p in raw["primitives"])
    kinds = sorted(raw["types"])
    taken = set(ents) | set(prims) | set(kinds) | set(OPS)
    fresh = fresh_names(rng, len(ents) + len(prims) + len(kinds), taken,
                        accept=lambda name: not CANONICAL_WIRE.match(name), labels=labels, avoid=avoid)
    ent = dict(zip(ents, fresh))
    prim = dict(zip(prims, fresh[len(ents):]))
    types = dict(zip(kinds, fresh[len(ents) + len(prims):]))
    m = rename_mapping(raw, ent, prim, types)
    m["id"] = f"{id_prefix}-{rng.randrange(16**6):06x}"
    m["title"] = f"world {m['id']}"
    for key in ("types", "inputs"):
        items = list(m[key].items())
        rng.shuffle(items)
        m[key] = dict(items)
    for key in ("primitives", "constraints"):
        if key in m:
            rng.shuffle(m[key])
    return Replica(m, world_from_mapping(m), ent, prim, types)


def _structure(raw: Mapping[str, Any]) -> str:
    """The structure hash's canonical JSON with the primitives sorted by name (their declaration order carries
    no meaning, and a replica shuffles it)."""
    d = dict(raw)
    d["primitives"] = sorted(d["primitives"], key=lambda p: p["name"])
    d.setdefault("constraints", [])
    return structure_json(d)


def _inverse(d: Mapping[str, str]) -> dict[str, str]:
    return {v: k for k, v in d.items()}


def dataflow_isomorphism(a: Replica, b: Replica, enum_a: Enumeration | None = None,
                         enum_b: Enumeration | None = None) -> dict:
    """Prove two replicas of one base isomorphic under their label bijection (module docstring); the replicas'
    enumerations are computed when not given."""
    enum_a = enumerate_programs(a.world) if enum_a is None else enum_a
    enum_b = enumerate_programs(b.world) if enum_b is None else enum_b
    back_a = _structure(rename_mapping(a.raw, _inverse(a.entities), _inverse(a.primitives), _inverse(a.types)))
    back_b = _structure(rename_mapping(b.raw, _inverse(b.entities), _inverse(b.primitives), _inverse(b.types)))
    if back_a != back_b:
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: mappings differ under the label bijection")
    ent = {k: b.entities[v] for k, v in _inverse(a.entities).items()}
    prim = {k: b.primitives[v] for k, v in _inverse(a.primitives).items()}
    mapped = {translate_program(s, ent, prim) for s in enum_a.solutions}
    if mapped != set(enum_b.solutions):
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: bounded programs differ under the bijection")
    for s in enum_a.solutions:
        t = translate_program(s, ent, prim)
        if check(a.world, _text(bindings(s))).cost != check(b.world, _text(bindings(t))).cost:
            raise PairConstructionError(f"{a.world.id} and {b.world.id}: program costs differ under the bijection")
    return {
        "method": "explicit label bijection; mappings compared structurally; every bounded program of each "
                  "replica translated onto the other's bounded programs (dataflow: no step-state graph)",
        "states": enum_b.states,
        "transitions": sum(len(s) for s in enum_b.solutions),
        "goal_states": len(enum_b.solutions),
        "bijection_size": len(ent) + len(prim) + len(a.types),
    }


# ---------------------------------------------------------------- examples


def _illustration_state(world: World, types_needed: Sequence[str], rng: random.Random):
    """A state holding the inputs and illustration wires ``u1``, ``u2``, ... of the given types."""
    n_cases = len(world.spec.cases)
    wires = list(world.initial_state.wires)
    names = []
    for i, t in enumerate(types_needed):
        m = world.spec.modulus(t)
        name = f"u{i + 1}"
        wires.append((name, t, 1, tuple(rng.randrange(m) for _ in range(n_cases))))
        names.append(name)
    return DataflowState(tuple(sorted(wires))), names


def dataflow_base_examples(base: World, base_raw: Mapping[str, Any]) -> tuple[tuple[str, Any, Binding, str], ...]:
    """(subject, state, binding, kind): a valid and an invalid binding of every primitive, on the base.

    The valid one reads illustration wires of its parameter types; the invalid one passes, for its first
    parameter, an illustration wire of another type (BAD_ARGUMENT), or with a single value type rebinds an
    illustration wire (INAPPLICABLE). Values are drawn from a stream named by the base's structure.
    """
    fam = get_family(base.family)
    rng = random.Random(sha256_text(_structure(base_raw)))
    out = []
    types = [t for t, _ in base.spec.types]
    for p in base.spec.primitives:
        state, names = _illustration_state(base, list(p.params), rng)
        good = Binding("v", p.name, tuple(names))
        if isinstance(fam.bind(base, state, good), Failure):
            raise PairConstructionError(f"{base.id}: example binding {good.render()} is not applicable")
        out.append((p.name, state, good, "VALID"))
        others = [t for t in types if p.params and t != p.params[0]]
        if others:
            bad_types = [others[0]] + list(p.params[1:])
            bstate, bnames = _illustration_state(base, bad_types, rng)
            bad = Binding("v", p.name, tuple(bnames))
            out.append((p.name, bstate, bad, "INVALID"))
        else:
            bstate, bnames = _illustration_state(base, list(p.params) or [types[0]], rng)
            bad = Binding(bnames[0], p.name, tuple(bnames[: len(p.params)]))
            out.append((p.name, bstate, bad, "INVALID"))
    return tuple(out)


def _map_state(state, ent: Mapping[str, str], ty: Mapping[str, str], prim: Mapping[str, str]):
    return DataflowState(
        tuple(sorted((ent.get(n, n), ty.get(t, t), d, v) for n, t, d, v in state.wires)),
        tuple(sorted((prim.get(p, p), k) for p, k in state.uses)),
        tuple(sorted(ent.get(r, r) for r in state.read)),
    )


def dataflow_example_on(side: World, rep: Replica, ex) -> PrimitiveExample:
    """A base example written in a side's labels, its outcome re-derived on the side."""
    fam = get_family(side.family)
    subj, s, b, kind = ex
    st = _map_state(s, rep.entities, rep.types, rep.primitives)
    bt = Binding(b.target, rep.primitives[b.name], b.args)
    got = fam.resolve(side, st, bt) or fam.bind(side, st, bt)
    if isinstance(got, Failure) == (kind == "VALID"):
        raise PairConstructionError(f"{side.id}: translated example {bt.render()} changes its outcome")
    if not isinstance(got, Failure):
        nxt, cost = got
        return PrimitiveExample(subj, describe(st), bt.render(), "VALID", None, describe(nxt), cost, "")
    return PrimitiveExample(subj, describe(st), bt.render(), "INVALID", got.reason.value, None, None, got.message)


def _source(base_raw: Mapping[str, Any], overrides: Mapping[str, Any], vid: str) -> dict:
    m = copy.deepcopy(dict(base_raw))
    m.pop("examples", None)
    for k, v in overrides.items():
        m[k] = copy.deepcopy(v)
    m["id"], m["title"] = vid, f"source instance {vid}"
    return m


def build_dataflow_pair(spec, base_raw: dict, base: World) -> tuple[Pair, dict]:
    """Build the dataflow pair of a pinned ``PairSpec`` (base mapping, seeds, source overrides, demonstrations
    and motif all given, as the generator pins them) from its base mapping (examples dropped) and world;
    returns the pair (manifest not yet filled) and the facts.

    Re-runs every audit: the certificate, the demonstrations valid in their sources, the motif in F and not in
    C, both copy audits on the replicas, and the interchangeable-edge audit on C.
    """
    if spec.base_raw is None or spec.f_demo is None or spec.c_demo is None or spec.motif is None:
        raise PairConstructionError(f"{spec.pair_id}: a dataflow pair spec pins its base mapping, demonstrations and motif")
    f_rep = instantiate_dataflow_replica(base_raw, spec.f_seed, "W", spec.labels)
    c_rep = instantiate_dataflow_replica(base_raw, spec.c_seed, "W", spec.labels, avoid=replica_labels(f_rep))
    if f_rep.world.id == c_rep.world.id:
        raise PairConstructionError(f"{spec.pair_id}: F and C targets got the same id; use other seeds")
    shared = replica_labels(f_rep) & replica_labels(c_rep)
    if shared:
        raise PairConstructionError(f"{spec.pair_id}: F and C targets share the labels {sorted(shared)}; use other seeds")
    target_enum = enumerate_programs(base)
    if not target_enum.solutions:
        raise PairConstructionError(f"{spec.pair_id}: the base world has no valid bounded program")
    enum_f, enum_c = enumerate_programs(f_rep.world), enumerate_programs(c_rep.world)
    iso = dataflow_isomorphism(f_rep, c_rep, enum_f, enum_c)
    edges = [program_edges(base, s) for s in target_enum.solutions]
    required = spec.motif in frozenset.intersection(*edges)
    if not any(spec.motif in e for e in edges):
        raise PairConstructionError(f"{spec.pair_id}: motif {list(spec.motif)} is realized by no bounded target program")
    rng = random.Random(f"{spec.pair_id}/{spec.f_seed}/{spec.c_seed}")
    examples_on_base = dataflow_base_examples(base, base_raw)
    sides: dict[str, PairSide] = {}
    facts: dict[str, Any] = {"base": base, "base_raw": base_raw, "target_enum": target_enum, "isomorphism": iso,
                             "motif": spec.motif, "required": required, "source_worlds": {}, "source_base_raw": {},
                             "source_enum": {}}
    for cond, rep, t_enum, ov, demo_b in (("F", f_rep, enum_f, spec.f_source, spec.f_demo),
                                          ("C", c_rep, enum_c, spec.c_source, spec.c_demo)):
        src_base = _source(base_raw, ov, f"D-{rng.randrange(16**6):06x}")
        if src_base["goal"] == base_raw["goal"]:
            raise PairConstructionError(f"{spec.pair_id}: {cond} source keeps the base's goal; change its expected values")
        src_base_w = world_from_mapping(src_base)
        src_raw = rep.rename(src_base)
        src_raw["id"], src_raw["title"] = src_base["id"], src_base["title"]
        src_w = world_from_mapping(src_raw)
        steps = rep.translate(demo_b)
        if check(src_w, "".join(s + "\n" for s in steps)).status is not Status.VALID:
            raise PairConstructionError(f"{spec.pair_id}: {cond} demonstration is not valid in its source")
        sigs = {program_signature(rep.world, s) for s in t_enum.solutions}
        why = program_copy_audit(src_w, steps, rep.world, sigs, t_enum.solutions)
        if why is not None:
            raise PairConstructionError(f"{spec.pair_id}: {cond} demonstration rejected: {why}")
        present = spec.motif in program_edges(base, demo_b)
        if present != (cond == "F"):
            raise PairConstructionError(f"{spec.pair_id}: {cond} demonstration {'lacks' if cond == 'F' else 'has'} the motif")
        if cond == "C" and interchangeable_edges(base, target_enum.solutions, spec.motif, src_base_w, demo_b):
            raise PairConstructionError(f"{spec.pair_id}: C demonstration realizes an edge interchangeable with the motif")
        demo = Demonstration(src_raw["id"], src_w, src_raw, steps, "".join(s + "\n" for s in steps), tuple(demo_b),
                             present, program_signature(src_w, steps))
        examples = tuple(dataflow_example_on(rep.world, rep, ex) for ex in examples_on_base)
        prompt = render_dataflow_prompt(rep.raw, [demo], examples)
        sides[cond] = PairSide(cond, rep.world, rep.raw, (demo,), examples, t_enum.optimal_length, prompt, rep)
        facts[f"enum_{cond}"] = t_enum
        facts[f"sigs_{cond}"] = sigs
        facts["source_worlds"][cond] = src_base_w
        facts["source_base_raw"][cond] = src_base
        facts["source_enum"][cond] = enumerate_programs(src_base_w)
    facts["witness_hidden"] = all(
        not any("\n".join(sol) in sides[k].prompt_text or "\n    ".join(sol) in sides[k].prompt_text
                for sol in facts[f"enum_{k}"].solutions) for k in ("F", "C"))
    novelty = MOTIF_REQUIRED if required else WITNESS_ONLY
    flags = () if required else ("witness_only",)
    pair = Pair(spec.pair_id, "dataflow", sides["F"], sides["C"], novelty, flags, {}, spec.motif, spec)
    return pair, facts


def examples_chain_to_goal(world: World, examples: Sequence[PrimitiveExample]) -> bool:
    """Whether some valid example's binding, applied to the target's initial state, is already a goal program
    (an example state is the initial state only when its primitive reads no illustration wire: a constant), so
    this checks the construction rather than assuming it."""
    init = describe(world.initial_state)
    for ex in examples:
        if ex.status == "VALID" and ex.state == init:
            text = ex.step.replace("v =", f"{world.spec.goal_wire} =", 1) + "\n"
            if check(world, text).status is Status.VALID:
                return True
    return False


