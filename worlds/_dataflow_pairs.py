"""F/C pairs of the ``dataflow`` family: replicas, certificate, motif, demonstrations, copy audit, prompt, manifest.

A dataflow artifact is a program (typed bindings ``w = name(args)``), not a
step sequence over an inventory, so the step-sequence machinery of
``_construct`` (grounded steps, reachable state graphs, step renaming) does
not apply. This module gives each part of a pair its program counterpart and
assembles the same ``Pair`` records:

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
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from canonical_hash import canonical_json, sha256_text

from ._checker import Status, check
from ._dataflow import OPS, Binding, CANONICAL_WIRE, parse_program
from ._dataflow_enum import enumerate_programs, program_alphabet
from ._enumerate import Bounds, Enumeration
from ._errors import PairConstructionError
from ._loader import world_from_mapping
from ._model import Failure, World
from ._pair_types import MOTIF_REQUIRED, WITNESS_ONLY, Demonstration, Pair, PairSide, PrimitiveExample
from ._pairs import Replica
from ._registry import get_family

__all__ = [
    "COMMUTATIVE_OPS",
    "DATAFLOW_GRAMMAR_TEXT",
    "build_dataflow_pair",
    "dataflow_manifest",
    "dataflow_tier_properties",
    "instantiate_dataflow_replica",
    "program_copy_audit",
    "program_edges",
    "program_signature",
    "rename_dataflow_mapping",
    "render_dataflow_prompt",
    "render_dataflow_world",
    "solutions_of",
]

#: Library operations whose two arguments can be swapped without changing the result.
COMMUTATIVE_OPS = frozenset({"add", "mul", "min", "max", "eq", "and", "or", "xor", "nand"})

#: The artifact grammar of a program as shown to a solver (the same text for F and C).
DATAFLOW_GRAMMAR_TEXT = """\
Answer format: write the program as bindings, one binding per line, in execution order.
A binding is  NAME = primitive(arg1, arg2)  : a fresh wire name, '=', a primitive name and its
arguments in parentheses, separated by commas. An argument is an input or a wire bound on an
earlier line. A wire name is letters, digits and underscores, not starting with a digit.
Blank lines and lines starting with # are ignored; any other text makes the answer malformed.
The answer must contain at least one binding."""

#: The library operations in words (x1, x2, x3 are the arguments in order).
_OP_WORDS = {
    "const": "the constant {value}",
    "neg": "-x1",
    "not": "1 if x1 is 0, else 0",
    "add": "x1 + x2",
    "sub": "x1 - x2",
    "mul": "x1 * x2",
    "min": "the smaller of x1 and x2",
    "max": "the larger of x1 and x2",
    "eq": "1 if x1 equals x2, else 0",
    "lt": "1 if x1 is less than x2, else 0",
    "and": "1 if x1 and x2 are both nonzero, else 0",
    "or": "1 if x1 or x2 is nonzero, else 0",
    "xor": "1 if exactly one of x1 and x2 is nonzero, else 0",
    "nand": "0 if x1 and x2 are both nonzero, else 1",
    "select": "x2 if x1 is nonzero, else x3",
}


# ---------------------------------------------------------------- programs


def _bindings(program: Sequence[str | Binding]) -> list[Binding]:
    out: list[Binding] = []
    for s in program:
        if isinstance(s, Binding):
            out.append(s)
            continue
        got = parse_program(s)
        if not got.ok or len(got.steps) != 1:
            raise PairConstructionError(f"not a single binding in the program grammar: {s!r}")
        out.append(got.steps[0])
    return out


def _text(program: Sequence[Binding]) -> str:
    return "".join(b.render() + "\n" for b in program)


def solutions_of(world: World, bounds: Bounds | None = None) -> Enumeration:
    """Every bounded solution of a world: its programs (canonical wire names) for dataflow, its step sequences
    otherwise."""
    if world.family == "dataflow":
        return enumerate_programs(world, bounds)
    from ._enumerate import enumerate_solutions

    return enumerate_solutions(world, bounds)


def program_edges(world: World, program: Sequence[str | Binding]) -> frozenset[tuple[str, str, str]]:
    """Production edges ``(producer, "argK", consumer)`` a program realizes (see the module docstring)."""
    producer: dict[str, str] = {}
    out: set[tuple[str, str, str]] = set()
    for b in _bindings(program):
        for k, a in enumerate(b.args):
            if isinstance(a, str) and a in producer:
                out.add((producer[a], f"arg{k + 1}", b.name))
        producer[b.target] = b.name
    return frozenset(out)


def program_signature(world: World, program: Sequence[str | Binding], relabel: bool = True) -> tuple:
    """The program's canonical form (module docstring); ``relabel=False`` keeps input names as written."""
    bs = _bindings(program)
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
    bs = _bindings(demo)
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


def rename_dataflow_mapping(raw: Mapping[str, Any], ent: Mapping[str, str], prim: Mapping[str, str],
                            types: Mapping[str, str] | None = None) -> dict:
    """A dataflow world mapping with inputs and the goal wire renamed by ``ent``, primitives by ``prim`` and value
    types by ``types`` (names absent from a map are kept); examples are dropped."""
    ty = dict(types or {})
    m = copy.deepcopy(dict(raw))
    m.pop("examples", None)
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
    return m


def _translate_binding(b: Binding, ent: Mapping[str, str], prim: Mapping[str, str]) -> str:
    args = [a if isinstance(a, int) else ent.get(a, a) for a in b.args]
    return Binding(ent.get(b.target, b.target), prim.get(b.name, b.name), tuple(args)).render()


@dataclasses.dataclass(frozen=True)
class DataflowReplica(Replica):
    """A dataflow target replica (entities: the inputs and the goal wire)."""

    def rename(self, raw: Mapping[str, Any]) -> dict:
        return rename_dataflow_mapping(raw, self.entities, self.primitives, self.types)

    def translate(self, solution) -> tuple[str, ...]:
        return tuple(_translate_binding(b, self.entities, self.primitives) for b in _bindings(solution))


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def instantiate_dataflow_replica(raw: Mapping[str, Any], seed: int, id_prefix: str = "R") -> DataflowReplica:
    """A replica of a dataflow base mapping with fresh labels, shuffled declaration order and a fresh id."""
    rng = random.Random(seed)
    ents = sorted(raw["inputs"]) + [raw["goal"]["wire"]]
    prims = sorted(p["name"] for p in raw["primitives"])
    kinds = sorted(raw["types"])
    taken = set(ents) | set(prims) | set(kinds) | set(OPS)
    fresh: list[str] = []
    while len(fresh) < len(ents) + len(prims) + len(kinds):
        name = "".join(rng.choice(_LETTERS) for _ in range(6))
        if name not in taken and not CANONICAL_WIRE.match(name):
            taken.add(name)
            fresh.append(name)
    ent = dict(zip(ents, fresh))
    prim = dict(zip(prims, fresh[len(ents):]))
    types = dict(zip(kinds, fresh[len(ents) + len(prims):]))
    m = rename_dataflow_mapping(raw, ent, prim, types)
    m["id"] = f"{id_prefix}-{rng.randrange(16**6):06x}"
    m["title"] = f"world {m['id']}"
    for key in ("types", "inputs"):
        items = list(m[key].items())
        rng.shuffle(items)
        m[key] = dict(items)
    for key in ("primitives", "constraints"):
        if key in m:
            rng.shuffle(m[key])
    return DataflowReplica(m, world_from_mapping(m), ent, prim, types)


def _structure(raw: Mapping[str, Any]) -> str:
    d = copy.deepcopy(dict(raw))
    for k in ("id", "title", "examples"):
        d.pop(k, None)
    d["primitives"] = sorted(d["primitives"], key=lambda p: p["name"])
    d["constraints"] = sorted(d.get("constraints", []), key=lambda c: canonical_json(c, ensure_ascii=True))
    return canonical_json(d, ensure_ascii=True)


def _inverse(d: Mapping[str, str]) -> dict[str, str]:
    return {v: k for k, v in d.items()}


def dataflow_isomorphism(a: DataflowReplica, b: DataflowReplica, enum_a: Enumeration, enum_b: Enumeration) -> dict:
    """Prove two replicas of one base isomorphic under their label bijection (module docstring)."""
    back_a = _structure(rename_dataflow_mapping(a.raw, _inverse(a.entities), _inverse(a.primitives), _inverse(a.types)))
    back_b = _structure(rename_dataflow_mapping(b.raw, _inverse(b.entities), _inverse(b.primitives), _inverse(b.types)))
    if back_a != back_b:
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: mappings differ under the label bijection")
    ent = {k: b.entities[v] for k, v in _inverse(a.entities).items()}
    prim = {k: b.primitives[v] for k, v in _inverse(a.primitives).items()}
    mapped = {tuple(_translate_binding(x, ent, prim) for x in _bindings(s)) for s in enum_a.solutions}
    if mapped != set(enum_b.solutions):
        raise PairConstructionError(f"{a.world.id} and {b.world.id}: bounded programs differ under the bijection")
    for s in enum_a.solutions:
        t = tuple(_translate_binding(x, ent, prim) for x in _bindings(s))
        if check(a.world, _text(_bindings(s))).cost != check(b.world, _text(_bindings(t))).cost:
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


def _described(state) -> dict:
    return get_family("dataflow").describe_state(state)


def _illustration_state(world: World, types_needed: Sequence[str], rng: random.Random):
    """A state holding the inputs and illustration wires ``u1``, ``u2``, ... of the given types."""
    from ._dataflow import DataflowState

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
    fam = get_family("dataflow")
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
    from ._dataflow import DataflowState

    return DataflowState(
        tuple(sorted((ent.get(n, n), ty.get(t, t), d, v) for n, t, d, v in state.wires)),
        tuple(sorted((prim.get(p, p), k) for p, k in state.uses)),
        tuple(sorted(ent.get(r, r) for r in state.read)),
    )


def dataflow_example_on(side: World, rep: DataflowReplica, ex) -> PrimitiveExample:
    """A base example written in a side's labels, its outcome re-derived on the side."""
    fam = get_family("dataflow")
    subj, s, b, kind = ex
    st = _map_state(s, rep.entities, rep.types, rep.primitives)
    bt = Binding(b.target, rep.primitives[b.name], b.args)
    got = fam.resolve(side, st, bt) or fam.bind(side, st, bt)
    if isinstance(got, Failure) == (kind == "VALID"):
        raise PairConstructionError(f"{side.id}: translated example {bt.render()} changes its outcome")
    if not isinstance(got, Failure):
        nxt, cost = got
        return PrimitiveExample(subj, _described(st), bt.render(), "VALID", None, _described(nxt), cost, "")
    return PrimitiveExample(subj, _described(st), bt.render(), "INVALID", got.reason.value, None, None, got.message)


def format_dataflow_state(described: Mapping[str, Any]) -> str:
    """A described dataflow state in words: each wire with its type and its value on every case."""
    wires = described.get("wires", {})
    if not wires:
        return "state with no wires"
    parts = [f"{n}: {w['type']} = [{', '.join(str(v) for v in w['values'])}]" for n, w in wires.items()]
    return "state with wires " + "; ".join(parts)


def _example_text(ex: PrimitiveExample) -> str:
    head = f"In the {format_dataflow_state(ex.state)}: {ex.step}"
    if ex.status == "VALID":
        v = ex.result["wires"]["v"]
        return f"{head} -> valid, cost {ex.cost}; v: {v['type']} = [{', '.join(str(x) for x in v['values'])}]."
    return f"{head} -> invalid ({ex.reason}): {ex.message}."


# ---------------------------------------------------------------- prompt


def render_dataflow_world(raw: Mapping[str, Any]) -> str:
    """A dataflow world as a complete handbook: types, inputs, primitives, cases, goal, constraints, budget."""
    lines = [f"World {raw['id']} (family dataflow): {raw['title']}.",
             "A program is a list of bindings; each applies one primitive to wires bound earlier (inputs are",
             "bound from the start) and binds the result to a fresh wire. The program runs on every case below at",
             "once, so each wire holds one value per case.",
             "", "Value types (a value of type T is an integer from 0 to m - 1; every result is reduced modulo",
             "the modulus m of the primitive's result type):"]
    lines += [f"  - {t}: integers modulo {m}" for t, m in raw["types"].items()]
    lines += ["", "Inputs:"] + [f"  - {n}: {t}" for n, t in raw["inputs"].items()]
    lines += ["", "Primitives:"]
    for p in raw["primitives"]:
        params = ", ".join(f"x{k + 1}: {t}" for k, t in enumerate(p.get("params", [])))
        words = _OP_WORDS[p["op"]].format(value=p.get("value", 0))
        lines.append(f"  - {p['name']}({params}) -> {p['result']}, cost {p['cost']}: {words}")
    lines += ["", "Cases (input values, and the value the goal wire must hold):"]
    lines += _case_lines(raw)
    g = raw["goal"]
    lines += ["", f"Goal: bind the wire {g['wire']} with a value of type {g['type']} equal to the expected value on "
                  "every case."]
    rules = []
    for c in raw.get("constraints", []):
        if c["kind"] == "max_uses":
            rules.append(f"  - {c['primitive']} is used at most {c['limit']} time(s)")
        else:
            rules.append(f"  - every wire bound, other than {g['wire']}, is read by a later binding")
    lines += ["", "Hard constraints:"] + (rules or ["  - none"])
    b = raw["budget"]
    lines += ["", f"Budget: at most {b['max_steps']} bindings, total cost at most {b['max_cost']}, depth at most "
                  f"{b['max_depth']} (an input has depth 0; a binding has depth 1 + the deepest of its arguments)."]
    return "\n".join(lines) + "\n"


def _case_lines(raw: Mapping[str, Any]) -> list[str]:
    g = raw["goal"]
    order = list(raw["inputs"])
    return [f"  case {i}: " + ", ".join(f"{n} = {c['inputs'][n]}" for n in order) + f" -> {g['wire']} = {c['expect']}"
            for i, c in enumerate(g["cases"], 1)]


def render_dataflow_prompt(target_raw: Mapping[str, Any], demos: Sequence[Demonstration],
                           examples: Sequence[PrimitiveExample]) -> str:
    """The F/C synthesis prompt body of a dataflow side (same template for F and C)."""
    lines = [
        "You are given a complete, closed world. Everything that exists and every rule is stated below;",
        "no other values, primitives or effects exist. Write a program that reaches the goal.",
        "",
        "=== HANDBOOK ===",
        render_dataflow_world(target_raw).rstrip("\n"),
        "",
        "=== ONE-STEP EXAMPLES ===",
        "Each example applies one binding to the wires shown (illustrations, not your inputs).",
    ]
    lines += [f"{i}. {_example_text(ex)}" for i, ex in enumerate(examples, 1)]
    lines += ["", "=== WORKED DEMONSTRATION ==="]
    for d in demos:
        lines.append("A valid program for a different situation in this same world (same inputs and primitives,")
        lines.append("other expected values):")
        lines += _case_lines(d.source_raw)
        lines.append("Its program:")
        lines += [f"    {s}" for s in d.steps]
    g = target_raw["goal"]
    lines += [
        "",
        "=== YOUR TASK ===",
        f"Write a program for world {target_raw['id']} in the handbook, within its budget and constraints.",
        f"Goal: bind {g['wire']} (type {g['type']}) to the expected value on every case of the handbook.",
        "",
        DATAFLOW_GRAMMAR_TEXT,
        "",
        "Write your program now.",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- tiers and metrics


def _start_branching(world: World) -> int:
    fam = get_family("dataflow")
    n = 0
    for b in program_alphabet(world, world.initial_state, 0):
        got = fam.bind(world, world.initial_state, b)
        if not isinstance(got, Failure) and not fam.limits(world, got[0]) and not fam.constraints(world, got[0], False):
            n += 1
    return n


def _path_states(world: World, solutions) -> list:
    """The states the bounded programs pass through before their last binding (s0 included), without repeats."""
    fam = get_family("dataflow")
    seen = {world.initial_state: 0}
    for sol in solutions:
        s = world.initial_state
        for i, b in enumerate(_bindings(sol)[:-1]):
            s = fam.bind(world, s, b)[0]
            seen.setdefault(s, i + 1)
    return list(seen.items())


def _branching(world: World, solutions) -> tuple[float, int]:
    fam = get_family("dataflow")
    degs = []
    for s, depth in _path_states(world, solutions):
        n = 0
        for b in program_alphabet(world, s, depth):
            got = fam.bind(world, s, b)
            if not isinstance(got, Failure) and not fam.limits(world, got[0]) and not fam.constraints(world, got[0], False):
                n += 1
        degs.append(n)
    return (round(sum(degs) / len(degs), 4) if degs else 0.0), max(degs, default=0)


def dataflow_tier_properties(world: World, enum: Enumeration) -> dict[str, Any]:
    """The tier properties of a dataflow world (the keys ``tier_of`` reads; branching over the states the
    bounded programs pass through, since a program world has no small step-state graph)."""
    sols = enum.solutions
    opt = enum.optimal_length
    optimal = [s for s in sols if len(s) == opt]
    used = {b.name for s in optimal for b in _bindings(s)}
    mean, _ = _branching(world, sols)
    return {
        "optimum_length": opt,
        "solutions": len(sols),
        "optimal_solutions": len(optimal),
        "distractor_primitives": sum(1 for p in world.primitives if p.name not in used),
        "constraints": len(world.spec.max_uses) + int(world.spec.no_dead_wires),
        "grounded_steps": len(program_alphabet(world, world.initial_state, 0)),
        "branching_at_start": _start_branching(world),
        "mean_branching": mean,
    }


def _search_metrics(world: World, enum: Enumeration) -> dict[str, Any]:
    mean, top = _branching(world, enum.solutions)
    return {
        "enumeration_nodes": enum.states,
        "reachable_states": len(_path_states(world, enum.solutions)),
        "transitions": sum(len(s) for s in enum.solutions),
        "mean_branching": mean,
        "max_branching": top,
        "bfs_states_to_first_goal_depth": None,
        "solutions": len(enum.solutions),
    }


# ---------------------------------------------------------------- the pair


def _freq(program) -> Counter:
    return Counter(b.name for b in _bindings(program))


def _source(base_raw: Mapping[str, Any], overrides: Mapping[str, Any], vid: str) -> dict:
    m = copy.deepcopy(dict(base_raw))
    m.pop("examples", None)
    for k, v in overrides.items():
        m[k] = copy.deepcopy(v)
    m["id"], m["title"] = vid, f"source instance {vid}"
    return m


def build_dataflow_pair(spec) -> tuple[Pair, dict]:
    """Build the dataflow pair of a pinned ``PairSpec`` (base mapping, seeds, source overrides, demonstrations
    and motif all given, as the generator pins them); returns the pair (manifest not yet filled) and the facts.

    Re-runs every audit: the certificate, the demonstrations valid in their sources, the motif in F and not in
    C, both copy audits on the replicas, and the interchangeable-edge audit on C.
    """
    from ._interchange import interchangeable_edges

    if spec.base_raw is None or spec.f_demo is None or spec.c_demo is None or spec.motif is None:
        raise PairConstructionError(f"{spec.pair_id}: a dataflow pair spec pins its base mapping, demonstrations and motif")
    base_raw = copy.deepcopy(spec.base_raw)
    base_raw.pop("examples", None)
    base = world_from_mapping(base_raw, source=str(spec.base))
    f_rep = instantiate_dataflow_replica(base_raw, spec.f_seed, "W")
    c_rep = instantiate_dataflow_replica(base_raw, spec.c_seed, "W")
    if f_rep.world.id == c_rep.world.id:
        raise PairConstructionError(f"{spec.pair_id}: F and C targets got the same id; use other seeds")
    labels = lambda r: set(r.entities.values()) | set(r.primitives.values()) | set(r.types.values())  # noqa: E731
    shared = labels(f_rep) & labels(c_rep)
    if shared:
        raise PairConstructionError(f"{spec.pair_id}: F and C targets share the labels {sorted(shared)}; use other seeds")
    target_enum = solutions_of(base)
    if not target_enum.solutions:
        raise PairConstructionError(f"{spec.pair_id}: the base world has no valid bounded program")
    enum_f, enum_c = solutions_of(f_rep.world), solutions_of(c_rep.world)
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
        facts["source_enum"][cond] = solutions_of(src_base_w)
    facts["witness_hidden"] = all(
        not any("\n".join(sol) in sides[k].prompt_text or "\n    ".join(sol) in sides[k].prompt_text
                for sol in facts[f"enum_{k}"].solutions) for k in ("F", "C"))
    novelty = MOTIF_REQUIRED if required else WITNESS_ONLY
    flags = () if required else ("witness_only",)
    pair = Pair(spec.pair_id, "dataflow", sides["F"], sides["C"], novelty, flags, {}, spec.motif)
    return pair, facts


def _prefix_bound(world: World) -> int:
    """An upper bound on the states within the step cap: a state is fixed by the program prefix that made it, and
    binding i (0-based) has at most 2 binders (``w<i+1>`` or the goal wire) times, per primitive, one choice of a
    wire per parameter among the inputs and the i wires bound before it."""
    n = len(world.spec.inputs)
    total, prefixes = 1, 1
    for i in range(world.budget.max_steps):
        prefixes *= 2 * sum((n + i) ** len(p.params) for p in world.spec.primitives)
        total += prefixes
    return total


def _edge_text(e: tuple) -> str:
    return f"{e[0]} -{e[1]}-> {e[2]}"


def _exposure(side: PairSide) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for ex in side.primitive_examples:
        d = out.setdefault(ex.subject, {"example_valid": 0, "example_invalid": 0, "demonstration": 0})
        d["example_valid" if ex.status == "VALID" else "example_invalid"] += 1
    for demo in side.demonstrations:
        for b in _bindings(demo.base_steps):
            d = out.setdefault(b.name, {"example_valid": 0, "example_invalid": 0, "demonstration": 0})
            d["demonstration"] += 1
    return {k: out[k] for k in sorted(out)}


def dataflow_manifest(pair: Pair, facts: dict, token_counts=None) -> dict:
    """The manifest of a dataflow pair: every field of the published schema (worlds/schema)."""
    from ._manifest import MANIFEST_VERSION, _counters, prompt_token_counts
    from ._structure import structure_hash

    counters = _counters(token_counts)
    base: World = facts["base"]
    f, c = pair.f, pair.c
    enum_f, enum_c = facts["enum_F"], facts["enum_C"]
    motif = facts["motif"]
    fd, cd = f.demonstrations[0], c.demonstrations[0]
    target_edges = [program_edges(base, s) for s in facts["target_enum"].solutions]
    holding = sum(1 for e in target_edges if motif in e)
    exp_f, exp_c = _exposure(f), _exposure(c)
    residual: list[str] = []
    for subj in sorted(set(exp_f) | set(exp_c)):
        a, b = exp_f.get(subj, {}), exp_c.get(subj, {})
        for k in ("example_valid", "example_invalid", "demonstration"):
            if a.get(k, 0) != b.get(k, 0):
                residual.append(f"exposure of {subj} in {k}: F {a.get(k, 0)}, C {b.get(k, 0)}")
    if len(fd.steps) != len(cd.steps):
        residual.append(f"demonstration length: F {len(fd.steps)}, C {len(cd.steps)}")
    n_src_f, n_src_c = len(facts["source_enum"]["F"].solutions), len(facts["source_enum"]["C"].solutions)
    if n_src_f != n_src_c:
        residual.append(f"source instance solution counts: F {n_src_f}, C {n_src_c}")
    residual.append("demonstrated motif: F realizes " + _edge_text(motif) + ", C does not (by construction)")
    if pair.novelty != MOTIF_REQUIRED:
        residual.append(f"motif held by {holding} of {len(target_edges)} bounded target programs; novelty is witness-only")
    exposure_matched = not any(r.startswith("exposure of") for r in residual)
    counts = prompt_token_counts({"F": f.prompt_text, "C": c.prompt_text}, counters)
    opt_base = min(facts["target_enum"].solutions, key=lambda s: (len(s), s))
    outputs = {k: "".join(x + "\n" for x in sd.replica.translate(opt_base)) for k, sd in (("F", f), ("C", c))}
    out_counts = prompt_token_counts(outputs, counters)
    for what, cnt in (("prompt", counts), ("optimal output", out_counts)):
        for name, d in cnt.items():
            if "F" in d and d["F"] != d["C"]:
                residual.append(f"{what} tokens ({name}): F {d['F']}, C {d['C']}")
    copy_solves = any(
        program_copy_audit(demo.source, demo.steps, side.target, facts[f"sigs_{k}"], facts[f"enum_{k}"].solutions)
        is not None for k, side in (("F", f), ("C", c)) for demo in side.demonstrations)
    costs = [check(f.target, "".join(s + "\n" for s in sol)).cost for sol in enum_f.solutions]
    b = f.target.budget
    states_bound = _prefix_bound(base)
    sig_classes = Counter(signature_text(program_signature(base, s)) for s in facts["target_enum"].solutions)
    chain = _examples_reach_goal(f)
    return {
        "manifest_version": MANIFEST_VERSION,
        "pair_id": pair.pair_id,
        "family": "dataflow",
        "latent_structure_hash": structure_hash(facts["base_raw"]),
        "f_target_id": f.target.id,
        "c_target_id": c.target.id,
        "target_motif": _edge_text(motif),
        "f_source_demo_id": fd.source_id,
        "c_replacement_demo_id": cd.source_id,
        "target_witness_hidden": facts["witness_hidden"],
        "exact_or_renamed_demo_solves_target": copy_solves,
        "all_bounded_solutions_require_holdout": holding == len(target_edges),
        "novelty": pair.novelty,
        "optimal_lengths": {"F": enum_f.optimal_length, "C": enum_c.optimal_length},
        "primitive_exposure_matched": exposure_matched,
        "solver_search_metrics": {"F": _search_metrics(f.target, enum_f), "C": _search_metrics(c.target, enum_c)},
        "prompt_token_counts": counts,
        "output_token_counts": out_counts,
        "residual_mismatches": residual,
        "eligibility": "directional_showcase" if pair.novelty == MOTIF_REQUIRED else "directional_showcase_witness_only",
        "world": {
            "entities": len(base.spec.inputs) + 1,
            "entity_types": len(base.spec.types),
            "primitives": len(base.primitives),
            "primitive_set": [f"{p.name}({', '.join(p.params)}) -> {p.result}" for p in base.spec.primitives],
            "grounded_steps": len(program_alphabet(base, base.initial_state, 0)),
            "constraints": len(base.spec.max_uses) + int(base.spec.no_dead_wires),
            "state_space_bound": states_bound,
            "reachable_states": facts["isomorphism"]["states"],
            "transitions": facts["isomorphism"]["transitions"],
            "budget": {"max_steps": b.max_steps, "max_cost": b.max_cost, **dict(b.extra)},
        },
        "budget_slack": {"steps": b.max_steps - enum_f.optimal_length,
                         "cost": None if not costs else b.max_cost - min(costs)},
        "constraint_count": len(base.spec.max_uses) + int(base.spec.no_dead_wires),
        "demonstration_count": {"F": len(f.demonstrations), "C": len(c.demonstrations)},
        "primitive_example_count": {"F": len(f.primitive_examples), "C": len(c.primitive_examples)},
        "primitive_frequencies": {"F": exp_f, "C": exp_c},
        "primitive_examples": {"chain_to_goal": chain, "states_on_target_solution_paths": {
            k: _example_states_on_paths(sd, facts[f"enum_{k}"]) for k, sd in (("F", f), ("C", c))}},
        "motif_signatures": {
            "target_classes": dict(sorted(sig_classes.items())),
            "f_demo": signature_text(fd.signature),
            "c_demo": signature_text(cd.signature),
            "holdout_edge_in_target_solutions": {"with": holding, "of": len(target_edges)},
        },
        "demonstrations": {
            "F": {"source_id": fd.source_id, "length": len(fd.steps), "motif_present": fd.motif_present,
                  "source_solutions": n_src_f},
            "C": {"source_id": cd.source_id, "length": len(cd.steps), "motif_present": cd.motif_present,
                  "source_solutions": n_src_c},
        },
        "isomorphism": facts["isomorphism"],
        "grammar": {"name": "worlds dataflow program grammar v1", "sha256": sha256_text(DATAFLOW_GRAMMAR_TEXT)},
        "prompt_sha256": {"F": sha256_text(f.prompt_text), "C": sha256_text(c.prompt_text)},
        "flags": list(pair.flags),
    }


def _example_states_on_paths(side: PairSide, enum: Enumeration) -> int:
    """How many example states are states some bounded target program passes through."""
    on = {canonical_json(_described(s)) for s, _ in _path_states(side.target, enum.solutions)}
    return sum(1 for ex in side.primitive_examples if canonical_json(ex.state) in on)


def _examples_reach_goal(side: PairSide) -> bool:
    """Whether some valid example's binding, applied to the target's initial state, is already a goal program:
    an example state is the initial state only if it holds no illustration wire (never, by construction), so
    this checks the construction rather than assuming it."""
    init = _described(side.target.initial_state)
    for ex in side.primitive_examples:
        if ex.status == "VALID" and ex.state == init:
            text = ex.step.replace("v =", f"{side.target.spec.goal_wire} =", 1) + "\n"
            if check(side.target, text).status is Status.VALID:
                return True
    return False


__all__ += ["DataflowReplica", "dataflow_base_examples", "dataflow_example_on", "dataflow_isomorphism",
            "format_dataflow_state", "signature_text"]
