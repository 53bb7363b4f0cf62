"""Family ``dataflow``: typed dataflow programs (circuits) over supplied primitives.

The artifact is not an action sequence over an inventory but a program: a
list of typed bindings ``x3 = add(x1, x2)`` over the world's typed input
wires.  Each binding applies one supplied primitive to wires bound earlier
and binds its result to a fresh wire.  A program is evaluated on every case
of a fixed set of input vectors at once, so a wire's value is a tuple with one
entry per case.  The goal: the goal wire is bound, has the goal type, and on
every case holds the expected value (a truth table for a circuit).  The budget
counts nodes (``max_steps``), their cost (``max_cost``) and the circuit depth
(``budget.max_depth``).

Every value type is a finite ring ``Z_m`` declared by its modulus; every
primitive is one operation of a fixed library (``OPS``) under a name the
world chooses, with declared parameter and result types.  Results are
reduced modulo the result type's modulus, so every operation is total and
every wire value is in range.

State: the canonical sorted tuples of bound wires ``(name, type, depth,
values)``, primitive use counts and the names of wires read by some binding.

This module holds the world file, the semantics and the family object;
``_state`` the records and the operation library, ``_grammar`` the binding
grammar, ``_enumerate`` the enumerator, ``_pairs`` the program counterparts of
a pair's parts, ``_text`` the handbook and prompt, ``_metrics`` the tier
properties and search metrics, ``_generate`` the generator's drawers.  The
reference interpreter is the standalone ``worlds/_dataflow_reference.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import _dataflow_reference, _reference
from ..._model import Failure, Param, Primitive, Reason, World
from ..._validate import V
from . import _generate, _metrics, _pairs, _text
from ._enumerate import enumerate_programs, program_alphabet
from ._grammar import CANONICAL_WIRE, Binding, bindings, parse_program
from ._state import OPS, DataflowSpec, DataflowState, DfPrimitive, describe, evaluate

__all__ = ["Dataflow"]

_CONSTRAINT_KINDS = ("max_uses", "no_dead_wires")
_MAX_CASES = 64


class Dataflow:
    """The ``dataflow`` family (see the module docstring and docs/worlds-and-fixtures.md)."""

    name = "dataflow"
    fields = ("types", "inputs", "primitives", "goal", "constraints")
    budget_fields = ("max_depth",)
    step_type = Binding
    step_cap_name = "node cap"
    solution_noun = "programs"
    relabels_primitives = True
    grammar_name = "worlds dataflow program grammar v1"
    grammar_digest_text = _text.DATAFLOW_GRAMMAR_TEXT
    reference_sources = (Path(_reference.__file__).resolve(), Path(_dataflow_reference.__file__).resolve())
    state_lines = _text.STATE_LINES
    generator = _generate.GENERATOR
    #: a World keeps no mapping a program handbook could be rebuilt from
    raw_of_world = None

    # ---- the world file ------------------------------------------------------

    def validate(self, raw: Mapping[str, Any], err) -> None:
        v = V(err)
        v.int_range(v.table(raw["budget"], "max_depth", "budget.max_depth"), "budget.max_depth", 1, 1000)
        types = v.typed(v.table(raw, "types", "types"), dict, "types")
        if not types:
            err("types", "must declare at least one value type (name = modulus)")
        for t in sorted(types):
            v.name(t, f"types.{t}")
            v.int_range(types[t], f"types.{t}", 2, 1024)
        inputs = v.typed(v.table(raw, "inputs", "inputs"), dict, "inputs")
        if not inputs:
            err("inputs", "must declare at least one input wire (name = type)")
        for n in sorted(inputs):
            v.name(n, f"inputs.{n}")
            if CANONICAL_WIRE.match(n):
                err(f"inputs.{n}", f"{n!r} has the form of a canonical wire name (w1, w2, ...); rename the input")
            v.typed(inputs[n], str, f"inputs.{n}")
            if inputs[n] not in types:
                err(f"inputs.{n}", f"type {inputs[n]!r} is not in types {sorted(types)}")
        prims = v.typed(v.table(raw, "primitives", "primitives"), list, "primitives")
        if not prims:
            err("primitives", "must declare at least one primitive")
        names: list[str] = []
        for i, p in enumerate(prims):
            f = f"primitives[{i}]"
            v.typed(p, dict, f)
            v.only(p, {"name", "op", "params", "result", "cost", "value"}, f)
            nm = v.name(v.table(p, "name", f"{f}.name"), f"{f}.name")
            if nm in names or nm in inputs:
                err(f"{f}.name", f"{nm!r} repeats a primitive or input name; names must be unique")
            names.append(nm)
            op = v.choice(p, "op", f"{f}.op", tuple(sorted(OPS)), "operation")
            params = v.refs({"params": p.get("params", [])}, "params", f"{f}.params", types, "type")
            if len(params) != OPS[op]:
                err(f"{f}.params", f"operation {op!r} takes {OPS[op]} argument(s); list {OPS[op]} parameter type(s)")
            result = v.typed(v.table(p, "result", f"{f}.result"), str, f"{f}.result")
            if result not in types:
                err(f"{f}.result", f"type {result!r} is not in types {sorted(types)}")
            v.int_range(v.table(p, "cost", f"{f}.cost"), f"{f}.cost", 0, 10**6)
            if op == "const":
                v.int_range(v.table(p, "value", f"{f}.value"), f"{f}.value", 0, types[result] - 1)
            elif "value" in p:
                err(f"{f}.value", "only a 'const' primitive takes a value; remove it or use op = \"const\"")
        goal = v.typed(v.table(raw, "goal", "goal"), dict, "goal")
        v.only(goal, {"wire", "type", "cases"}, "goal")
        gw = v.name(v.table(goal, "wire", "goal.wire"), "goal.wire")
        if gw in inputs or gw in names:
            err("goal.wire", f"{gw!r} is an input or primitive name; the goal wire must be a fresh name")
        if CANONICAL_WIRE.match(gw):
            err("goal.wire", f"{gw!r} has the form of a canonical wire name (w1, w2, ...); choose another name")
        gt = v.typed(v.table(goal, "type", "goal.type"), str, "goal.type")
        if gt not in types:
            err("goal.type", f"type {gt!r} is not in types {sorted(types)}")
        cases = v.typed(v.table(goal, "cases", "goal.cases"), list, "goal.cases")
        if not 1 <= len(cases) <= _MAX_CASES:
            err("goal.cases", f"must list 1 to {_MAX_CASES} cases, got {len(cases)}")
        seen: dict[tuple, int] = {}
        for i, c in enumerate(cases):
            f = f"goal.cases[{i}]"
            v.typed(c, dict, f)
            v.only(c, {"inputs", "expect"}, f)
            given = v.typed(v.table(c, "inputs", f"{f}.inputs"), dict, f"{f}.inputs")
            for n in sorted(given):
                if n not in inputs:
                    err(f"{f}.inputs.{n}", f"{n!r} is not a declared input")
                v.int_range(given[n], f"{f}.inputs.{n}", 0, types[inputs[n]] - 1)
            missing = sorted(set(inputs) - set(given))
            if missing:
                err(f"{f}.inputs", f"gives no value for input(s) {missing}; every case sets every input")
            v.int_range(v.table(c, "expect", f"{f}.expect"), f"{f}.expect", 0, types[gt] - 1)
            key = tuple(sorted(given.items()))
            if key in seen:
                err(f"{f}.inputs", f"repeats the inputs of goal.cases[{seen[key]}]; list each input vector once")
            seen[key] = i
        cons = v.typed(raw.get("constraints", []), list, "constraints")
        kinds_seen: set[str] = set()
        limited: set[str] = set()
        for i, c in enumerate(cons):
            f = f"constraints[{i}]"
            v.typed(c, dict, f)
            kind = v.choice(c, "kind", f"{f}.kind", _CONSTRAINT_KINDS, "constraint kind")
            if kind == "max_uses":
                v.only(c, {"kind", "primitive", "limit"}, f)
                pn = v.typed(v.table(c, "primitive", f"{f}.primitive"), str, f"{f}.primitive")
                if pn not in names:
                    err(f"{f}.primitive", f"{pn!r} is not a declared primitive")
                if pn in limited:
                    err(f"{f}.primitive", f"{pn!r} already has a max_uses rule; keep one per primitive")
                limited.add(pn)
                v.int_range(v.table(c, "limit", f"{f}.limit"), f"{f}.limit", 0, 1000)
            else:
                v.only(c, {"kind"}, f)
                if kind in kinds_seen:
                    err(f, "no_dead_wires is listed twice; list it once")
            kinds_seen.add(kind)

    def build(self, raw: Mapping[str, Any]):
        types = tuple(sorted(raw["types"].items()))
        inputs = tuple(sorted(raw["inputs"].items()))
        prims = tuple(sorted(
            (DfPrimitive(p["name"], p["op"], tuple(p.get("params", [])), p["result"], p["cost"],
                         p.get("value", 0)) for p in raw["primitives"]),
            key=lambda p: p.name))
        goal = raw["goal"]
        cases = tuple(tuple(sorted(c["inputs"].items())) for c in goal["cases"])
        cons = raw.get("constraints", [])
        spec = DataflowSpec(
            types=types,
            inputs=inputs,
            primitives=prims,
            goal_wire=goal["wire"],
            goal_type=goal["type"],
            cases=cases,
            expect=tuple(c["expect"] for c in goal["cases"]),
            max_uses=tuple(sorted((c["primitive"], c["limit"]) for c in cons if c["kind"] == "max_uses")),
            no_dead_wires=any(c["kind"] == "no_dead_wires" for c in cons),
            max_depth=raw["budget"]["max_depth"],
        )
        s0 = DataflowState(tuple(sorted(
            (n, t, 0, tuple(dict(case)[n] for case in cases)) for n, t in inputs)))
        primitives = tuple(
            Primitive(p.name, tuple(Param(f"x{k + 1}", t) for k, t in enumerate(p.params))) for p in prims)
        return (inputs, primitives, spec, s0, (("max_depth", spec.max_depth),),
                tuple(t for t, _ in types))

    # ---- the semantics -------------------------------------------------------

    def resolve(self, world: World, state: DataflowState, b: Binding) -> Failure | None:
        """Primitive known, arity, and each argument in order a bound wire of the parameter's type."""
        prim = world.spec.primitive(b.name)
        if prim is None:
            return Failure(Reason.UNKNOWN_PRIMITIVE, f"{b.name!r} is not a primitive of world {world.id}")
        if len(b.args) != len(prim.params):
            return Failure(Reason.BAD_ARGUMENT, f"{b.name} takes {len(prim.params)} argument(s), got {len(b.args)}")
        for k, (ptype, arg) in enumerate(zip(prim.params, b.args)):
            if isinstance(arg, int):
                return Failure(Reason.BAD_ARGUMENT,
                               f"{b.name}: argument {k + 1} takes a wire of type {ptype}, got integer {arg}")
            w = state.wire(arg)
            if w is None:
                return Failure(Reason.UNKNOWN_ENTITY, f"{arg!r} is not an input or an earlier bound wire")
            if w[1] != ptype:
                return Failure(Reason.BAD_ARGUMENT,
                               f"{b.name}: argument {k + 1} takes a {ptype}, wire {arg} is a {w[1]}")
        return None

    def bind(self, world: World, state: DataflowState, b: Binding):
        """Applicability and transition of a resolved binding: (next state, cost) or an INAPPLICABLE Failure."""
        if state.wire(b.target) is not None:
            return Failure(Reason.INAPPLICABLE,
                           f"wire {b.target} is already bound; every binding names a fresh wire")
        prim = world.spec.primitive(b.name)
        modulus = world.spec.modulus(prim.result)
        argw = [state.wire(a) for a in b.args]
        values = tuple(
            evaluate(prim.op, tuple(w[3][c] for w in argw), modulus, prim.value)
            for c in range(len(world.spec.cases)))
        depth = 1 + max((w[2] for w in argw), default=0)
        uses = dict(state.uses)
        uses[b.name] = uses.get(b.name, 0) + 1
        nxt = DataflowState(
            tuple(sorted(state.wires + ((b.target, prim.result, depth, values),))),
            tuple(sorted(uses.items())),
            tuple(sorted(set(state.read) | set(b.args))),
        )
        return nxt, prim.cost

    def apply(self, world: World, state: DataflowState, name: str, args: tuple):
        """The generic step interface: ``args[0]`` is the wire bound, the rest the arguments."""
        b = Binding(args[0], name, tuple(args[1:]))
        return self.resolve(world, state, b) or self.bind(world, state, b)

    def limits(self, world: World, state: DataflowState):
        for name, _, depth, _ in state.wires:
            if depth > world.spec.max_depth:
                return Failure(Reason.OVER_BUDGET, f"wire {name} has depth {depth}, past max_depth {world.spec.max_depth}")
        return None

    def constraints(self, world: World, state: DataflowState, final: bool):
        for prim, limit in world.spec.max_uses:
            if state.count(prim) > limit:
                return Failure(Reason.CONSTRAINT_VIOLATION,
                               f"max_uses: {prim} used {state.count(prim)} times, at most {limit} allowed")
        if final and world.spec.no_dead_wires:
            inputs = {n for n, _ in world.spec.inputs}
            for name, *_ in state.wires:
                if name not in inputs and name != world.spec.goal_wire and name not in state.read:
                    return Failure(Reason.CONSTRAINT_VIOLATION,
                                   f"no_dead_wires: wire {name} is bound but never read")
        return None

    def goal(self, world: World, state: DataflowState) -> bool:
        w = state.wire(world.spec.goal_wire)
        return w is not None and w[1] == world.spec.goal_type and w[3] == world.spec.expect

    def describe_state(self, state: DataflowState):
        return describe(state)

    def state_from_described(self, world: World, described: Mapping[str, Any]) -> DataflowState:
        wires = described.get("wires", {})
        return DataflowState(
            tuple(sorted((n, w["type"], w["depth"], tuple(w["values"])) for n, w in wires.items())),
            tuple(sorted(described.get("uses", {}).items())),
            tuple(sorted(described.get("read", []))),
        )

    # ---- the program grammar and the checker's hooks ---------------------------

    def parse(self, text: str):
        return parse_program(text)

    def transition(self, world: World, state: DataflowState, b: Binding):
        return self.bind(world, state, b)

    def goal_miss(self, world: World, state: DataflowState) -> str:
        """Why the goal does not hold, in words."""
        spec = world.spec
        w = state.wire(spec.goal_wire)
        if w is None:
            why = f"the goal wire {spec.goal_wire} is never bound"
        elif w[1] != spec.goal_type:
            why = f"the goal wire {spec.goal_wire} is a {w[1]}, the goal needs a {spec.goal_type}"
        else:
            wrong = [c for c, (x, y) in enumerate(zip(w[3], spec.expect)) if x != y]
            if wrong:
                why = f"the goal wire {spec.goal_wire} differs from the expected value on case {wrong[0]}"
            else:
                why = f"the goal wire {spec.goal_wire} does not meet the goal"
        return f"every binding is legal but {why}"

    def trajectory(self, world: World, solution: Sequence) -> list[DataflowState]:
        out, s = [], world.initial_state
        for b in bindings(solution):
            s = self.bind(world, s, b)[0]
            out.append(s)
        return out

    # ---- enumeration and the reference interpreter ------------------------------

    enumerate = staticmethod(enumerate_programs)

    def alphabet(self, world: World, state: DataflowState, index: int) -> list[Binding]:
        return program_alphabet(world, state, index)

    def alphabet_size(self, world: World) -> int:
        return len(program_alphabet(world, world.initial_state, 0))

    def reference_replay(self, raw: Mapping[str, Any], text: str):
        return _dataflow_reference.replay(raw, text)

    def replay_state(self, state: DataflowState) -> tuple:
        return (state.wires, state.uses, state.read)

    # ---- structure, signatures, copy audits, pairs (``_pairs``) ----------------

    def sort_declarations(self, raw: dict) -> None:
        return None

    relabel = staticmethod(_pairs.relabel)
    production_edges = staticmethod(_pairs.program_edges)
    signature = staticmethod(_pairs.program_signature)
    signature_text = staticmethod(_pairs.signature_text)
    copy_audit = staticmethod(_pairs.program_copy_audit)
    translate = staticmethod(_pairs.translate_program)
    isomorphism = staticmethod(_pairs.dataflow_isomorphism)
    build_pair = staticmethod(_pairs.build_dataflow_pair)
    examples_chain_to_goal = staticmethod(_pairs.examples_chain_to_goal)

    def subject_of(self, world: World, step: str) -> str:
        """The primitive a binding applies."""
        return bindings([step])[0].name

    def instantiate_replica(self, raw: Mapping[str, Any], seed: int, id_prefix: str, labels: str = "letters",
                            avoid=frozenset()):
        return _pairs.instantiate_dataflow_replica(raw, seed, id_prefix, labels, avoid)

    # ---- text (``_text``) ---------------------------------------------------------

    render_handbook = staticmethod(_text.render_dataflow_world)
    format_state = staticmethod(_text.format_dataflow_state)
    render_prompt = staticmethod(_text.render_dataflow_prompt)

    # ---- tiers and manifest facts (``_metrics``) ----------------------------------

    tier_properties = staticmethod(_metrics.dataflow_tier_properties)
    search_metrics = staticmethod(_metrics.search_metrics)

    def constraint_count(self, world: World) -> int:
        return len(world.spec.max_uses) + int(world.spec.no_dead_wires)

    def world_facts(self, world: World) -> dict[str, Any]:
        return {
            "entities": len(world.spec.inputs) + 1,
            "primitive_set": [f"{p.name}({', '.join(p.params)}) -> {p.result}" for p in world.spec.primitives],
            "grounded_steps": self.alphabet_size(world),
            "state_space_bound": _metrics.prefix_bound(world),
        }

    # ---- baselines ----------------------------------------------------------------

    def goal_progress(self, world: World, state: DataflowState) -> int:
        """Cases on which a wire of the goal type holds the expected value (counted twice on the goal wire)."""
        spec = world.spec
        best = 0
        for name, typ, _, values in state.wires:
            if typ == spec.goal_type:
                hits = sum(v == e for v, e in zip(values, spec.expect))
                best = max(best, 2 * hits if name == spec.goal_wire else hits)
        return best

    def goal_unreachable(self, world: World, state: DataflowState) -> bool:
        """The goal wire is bound (and the goal does not hold): no later binding can change it."""
        return state.wire(world.spec.goal_wire) is not None and not self.goal(world, state)

    def random_artifacts(self, world: World, rng, samples: int) -> Iterator[str]:
        """Random programs: each binding a random primitive over random earlier wires, the last one binding the
        goal wire."""
        spec = world.spec
        names = sorted(p.name for p in spec.primitives)
        arity = {p.name: len(p.params) for p in spec.primitives}
        inputs = sorted(n for n, _ in spec.inputs)
        for _ in range(samples):
            length = rng.randint(1, world.budget.max_steps)
            wires, lines = list(inputs), []
            for i in range(length):
                name = rng.choice(names)
                wire = spec.goal_wire if i == length - 1 else f"w{i + 1}"
                lines.append(f"{wire} = {name}({', '.join(rng.choice(wires) for _ in range(arity[name]))})")
                wires.append(wire)
            yield "".join(line + "\n" for line in lines)
