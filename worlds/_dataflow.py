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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._grammar import ParseResult, _parse_line, _skip_ws, MAX_ARTIFACT_CHARS
from ._model import Failure, Param, Primitive, Reason, World
from ._validate import V

__all__ = [
    "OPS",
    "Binding",
    "Dataflow",
    "DataflowSpec",
    "DataflowState",
    "DfPrimitive",
    "canonical_wire",
    "parse_program",
]

#: The operation library: name -> arity.  Logical operations read a value as
#: true when it is not 0 and give 1 or 0; ``select(c, x, y)`` is x when c is
#: not 0, else y; ``const`` takes no argument and gives the primitive's value.
OPS: dict[str, int] = {
    "const": 0,
    "neg": 1,
    "not": 1,
    "add": 2,
    "sub": 2,
    "mul": 2,
    "min": 2,
    "max": 2,
    "eq": 2,
    "lt": 2,
    "and": 2,
    "or": 2,
    "xor": 2,
    "nand": 2,
    "select": 3,
}

#: Names of the form ``w<digits>`` are the enumerator's canonical names for
#: intermediate wires; inputs and the goal wire may not take one.
CANONICAL_WIRE = re.compile(r"^w[0-9]+$", re.ASCII)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_CONSTRAINT_KINDS = ("max_uses", "no_dead_wires")
_MAX_CASES = 64


def canonical_wire(i: int) -> str:
    """The enumerator's name of the wire bound by step ``i`` (0-based): ``w1``, ``w2``, ..."""
    return f"w{i + 1}"


@dataclass(frozen=True)
class Binding:
    """One parsed binding ``target = name(args)``.

    ``args`` holds wire names as ``str`` and integer literals as ``int`` (an
    integer is never a wire, so it fails the type check, not the grammar).
    ``line`` is the 1-based line of the text it came from.
    """

    target: str
    name: str
    args: tuple[str | int, ...]
    line: int = 0

    def render(self) -> str:
        """The binding written back in the grammar (canonical spacing)."""
        return f"{self.target} = {self.name}({', '.join(str(a) for a in self.args)})"


def parse_program(text: str) -> ParseResult:
    """Parse a dataflow program; never raises on a ``str``, linear time in its length.

    The binding grammar is the generic step grammar with a binder in front::

        binding := [ \\t]* NAME [ \\t]* "=" step

    ``ParseResult.steps`` then holds ``Binding`` values.  Blank lines,
    ``#`` comments, CR-LF line ends and the length and digit limits are the
    generic grammar's.
    """
    if not isinstance(text, str):
        from ._errors import CheckerUsageError

        raise CheckerUsageError(
            f"candidate text must be str, got {type(text).__name__}; decode bytes before checking"
        )
    if len(text) > MAX_ARTIFACT_CHARS:
        return ParseResult(False, (), 1, 1, f"artifact longer than {MAX_ARTIFACT_CHARS} characters")
    out: list[Binding] = []
    for idx, raw in enumerate(text.split("\n")):
        lineno = idx + 1
        s = raw.removesuffix("\r")
        body = s.strip(" \t")
        if not body or body.startswith("#"):
            continue
        i = _skip_ws(s, 0)
        m = _NAME.match(s, i)
        if m is None:
            return ParseResult(False, tuple(out), lineno, i + 1,
                               "expected a wire name ([A-Za-z_][A-Za-z0-9_]*) to bind: NAME = primitive(args)")
        j = _skip_ws(s, m.end())
        if j >= len(s) or s[j] != "=":
            return ParseResult(False, tuple(out), lineno, j + 1,
                               f"expected '=' after wire name {m.group(0)!r}; write NAME = primitive(args)")
        # the rest is one generic step; blanking the binder keeps every column
        got = _parse_line(" " * (j + 1) + s[j + 1:], lineno)
        if isinstance(got, tuple):
            col, msg = got
            return ParseResult(False, tuple(out), lineno, col, msg)
        out.append(Binding(m.group(0), got.name, got.args, lineno))
    if not out:
        return ParseResult(False, (), 1, 1, "the artifact contains no binding")
    return ParseResult(True, tuple(out))


@dataclass(frozen=True)
class DfPrimitive:
    """A supplied primitive: its name, library operation, parameter and result types, cost, constant value."""

    name: str
    op: str
    params: tuple[str, ...]
    result: str
    cost: int
    value: int = 0


@dataclass(frozen=True)
class DataflowSpec:
    """dataflow semantics.

    types: sorted (type, modulus); values of a type are 0 .. modulus - 1.
    inputs: sorted (input wire, type).
    primitives: sorted by name.
    goal_wire, goal_type: the wire the program must bind, and its type.
    cases: the input vectors, each a sorted tuple of (input, value), in file order.
    expect: the goal wire's required value on each case.
    max_uses: sorted (primitive, limit); checked on every committed state.
    no_dead_wires: whether every bound wire other than the goal wire must be
        read by a later binding (checked once, at the end).
    max_depth: longest path from an input to any bound wire (inputs: 0).
    """

    types: tuple[tuple[str, int], ...]
    inputs: tuple[tuple[str, str], ...]
    primitives: tuple[DfPrimitive, ...]
    goal_wire: str
    goal_type: str
    cases: tuple[tuple[tuple[str, int], ...], ...]
    expect: tuple[int, ...]
    max_uses: tuple[tuple[str, int], ...]
    no_dead_wires: bool
    max_depth: int

    def modulus(self, type_name: str) -> int:
        return dict(self.types)[type_name]

    def primitive(self, name: str) -> DfPrimitive | None:
        for p in self.primitives:
            if p.name == name:
                return p
        return None


@dataclass(frozen=True, order=True)
class DataflowState:
    """Bound wires (name, type, depth, values per case), use counts, wires read; all sorted tuples."""

    wires: tuple[tuple[str, str, int, tuple[int, ...]], ...]
    uses: tuple[tuple[str, int], ...] = ()
    read: tuple[str, ...] = ()

    def wire(self, name: str) -> tuple[str, str, int, tuple[int, ...]] | None:
        for w in self.wires:
            if w[0] == name:
                return w
        return None

    def count(self, primitive: str) -> int:
        return dict(self.uses).get(primitive, 0)


def evaluate(op: str, xs: tuple[int, ...], modulus: int, value: int = 0) -> int:
    """One library operation on one case's argument values, reduced modulo ``modulus``."""
    if op == "const":
        r = value
    elif op == "neg":
        r = -xs[0]
    elif op == "not":
        r = 1 if xs[0] == 0 else 0
    elif op == "add":
        r = xs[0] + xs[1]
    elif op == "sub":
        r = xs[0] - xs[1]
    elif op == "mul":
        r = xs[0] * xs[1]
    elif op == "min":
        r = min(xs[0], xs[1])
    elif op == "max":
        r = max(xs[0], xs[1])
    elif op == "eq":
        r = 1 if xs[0] == xs[1] else 0
    elif op == "lt":
        r = 1 if xs[0] < xs[1] else 0
    elif op == "and":
        r = 1 if xs[0] != 0 and xs[1] != 0 else 0
    elif op == "or":
        r = 1 if xs[0] != 0 or xs[1] != 0 else 0
    elif op == "xor":
        r = 1 if (xs[0] != 0) != (xs[1] != 0) else 0
    elif op == "nand":
        r = 0 if xs[0] != 0 and xs[1] != 0 else 1
    elif op == "select":
        r = xs[1] if xs[0] != 0 else xs[2]
    else:  # unreachable: the loader refuses an unknown operation
        raise ValueError(op)
    return r % modulus


class Dataflow:
    """The ``dataflow`` family (see the module docstring and worlds/README.md)."""

    name = "dataflow"
    fields = ("types", "inputs", "primitives", "goal", "constraints")
    budget_fields = ("max_depth",)

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
        return {
            "wires": {n: {"type": t, "depth": d, "values": list(vs)} for n, t, d, vs in state.wires},
            "uses": dict(state.uses),
            "read": list(state.read),
        }

    # ---- the family's own artifact grammar and checker path -------------------

    def check_text(self, world: World, text: str):
        from ._dataflow_check import check_program

        return check_program(world, text)
