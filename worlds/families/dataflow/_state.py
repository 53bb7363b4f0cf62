"""The records of family ``dataflow``: the operation library, a supplied primitive, the spec, the state."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OPS", "DataflowSpec", "DataflowState", "DfPrimitive", "describe", "evaluate"]

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


def describe(state: DataflowState) -> dict:
    """A JSON-able canonical rendering of a state: wires (type, depth, values), use counts, wires read."""
    return {
        "wires": {n: {"type": t, "depth": d, "values": list(vs)} for n, t, d, vs in state.wires},
        "uses": dict(state.uses),
        "read": list(state.read),
    }
