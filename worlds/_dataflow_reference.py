"""A second, independently written interpreter of dataflow programs, for differential replay.

It reads the raw world mapping (the TOML document) directly, splits lines
with its own regular expressions and evaluates programs over plain dicts,
sharing no code or data structure with the ``dataflow`` family or the checker.
``replay(raw, text)`` returns a ``Replay`` record with the fields of the step
interpreter's (``_reference``), with ``state`` = (wires, uses, read) as sorted
tuples, the same canonical form as ``DataflowState``'s fields, so the two
sides compare field by field.

The file is standalone (standard library only, no import of the rest of
``worlds``): a CWR run with program worlds copies it byte for byte into its run
directory, where the step interpreter's copy hands program worlds to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Replay", "replay"]


@dataclass(frozen=True)
class Replay:
    """Outcome of the program interpreter (values as plain strings, ints and tuples)."""

    status: str
    reason: str | None
    failing_step: int | None
    state: tuple
    cost: int
    executed: int

_LINE = re.compile(
    r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\((.*)\)[ \t]*", re.ASCII)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_NUMBER = re.compile(r"0|[1-9][0-9]*", re.ASCII)
_LONGEST_NUMBER = 640
_LONGEST_TEXT = 1_000_000


def _truth(x: int) -> bool:
    return x != 0


_TABLE = {
    "const": lambda k, xs: k,
    "neg": lambda k, xs: -xs[0],
    "not": lambda k, xs: int(not _truth(xs[0])),
    "add": lambda k, xs: xs[0] + xs[1],
    "sub": lambda k, xs: xs[0] - xs[1],
    "mul": lambda k, xs: xs[0] * xs[1],
    "min": lambda k, xs: xs[1] if xs[1] < xs[0] else xs[0],
    "max": lambda k, xs: xs[0] if xs[0] >= xs[1] else xs[1],
    "eq": lambda k, xs: int(xs[0] == xs[1]),
    "lt": lambda k, xs: int(xs[0] < xs[1]),
    "and": lambda k, xs: int(_truth(xs[0]) and _truth(xs[1])),
    "or": lambda k, xs: int(_truth(xs[0]) or _truth(xs[1])),
    "xor": lambda k, xs: int(_truth(xs[0]) ^ _truth(xs[1])),
    "nand": lambda k, xs: 1 - int(_truth(xs[0]) and _truth(xs[1])),
    "select": lambda k, xs: xs[1] if _truth(xs[0]) else xs[2],
}


def _split(text: str) -> list[tuple[str, str, list]] | None:
    lines = []
    for raw_line in text.split("\n"):
        if raw_line.endswith("\r"):
            raw_line = raw_line[:-1]
        body = raw_line.strip(" \t")
        if not body or body.startswith("#"):
            continue
        m = _LINE.fullmatch(raw_line)
        if not m:
            return None
        args: list = []
        inner = m.group(3)
        if inner.strip(" \t"):
            for piece in inner.split(","):
                piece = piece.strip(" \t")
                if _WORD.fullmatch(piece):
                    args.append(piece)
                elif _NUMBER.fullmatch(piece) and len(piece) <= _LONGEST_NUMBER:
                    args.append(int(piece))
                else:
                    return None
        lines.append((m.group(1), m.group(2), args))
    return lines if lines else None


def replay(raw: Mapping[str, Any], text: str) -> Replay:
    """Interpret the dataflow program ``text`` against the world mapping ``raw``."""
    mod = dict(raw["types"])
    prims = {p["name"]: p for p in raw["primitives"]}
    cases = raw["goal"]["cases"]
    wires: dict[str, list] = {}  # name -> [type, depth, values]
    for name, typ in raw["inputs"].items():
        wires[name] = [typ, 0, tuple(c["inputs"][name] for c in cases)]
    uses: dict[str, int] = {}
    read: set[str] = set()
    limits = {c["primitive"]: c["limit"] for c in raw.get("constraints", []) if c["kind"] == "max_uses"}
    no_dead = any(c["kind"] == "no_dead_wires" for c in raw.get("constraints", []))
    budget = raw["budget"]

    def snapshot():
        return (
            tuple(sorted((n, w[0], w[1], w[2]) for n, w in wires.items())),
            tuple(sorted((p, n) for p, n in uses.items() if n)),
            tuple(sorted(read)),
        )

    program = _split(text) if len(text) <= _LONGEST_TEXT else None
    if program is None:
        return Replay("MALFORMED", "schema", None, snapshot(), 0, 0)
    spent = 0
    for pos, (target, fn, args) in enumerate(program):
        def stop(why):
            return Replay("INVALID", why, pos, snapshot(), spent, pos)

        if pos == budget["max_steps"]:
            return stop("over_budget")
        prim = prims.get(fn)
        if prim is None:
            return stop("unknown_primitive")
        want = prim.get("params", [])
        if len(want) != len(args):
            return stop("bad_argument")
        for typ, arg in zip(want, args):
            if type(arg) is int:
                return stop("bad_argument")
            if arg not in wires:
                return stop("unknown_entity")
            if wires[arg][0] != typ:
                return stop("bad_argument")
        if target in wires:
            return stop("inapplicable")
        if spent + prim["cost"] > budget["max_cost"]:
            return stop("over_budget")
        depth = max([wires[a][1] for a in args] + [0]) + 1
        if depth > budget["max_depth"]:
            return stop("over_budget")
        if uses.get(fn, 0) + 1 > limits.get(fn, float("inf")):
            return stop("constraint_violation")
        m = mod[prim["result"]]
        values = []
        for c in range(len(cases)):
            xs = [wires[a][2][c] for a in args]
            values.append(_TABLE[prim["op"]](prim.get("value", 0), xs) % m)
        wires[target] = [prim["result"], depth, tuple(values)]
        uses[fn] = uses.get(fn, 0) + 1
        read.update(args)
        spent += prim["cost"]
    goal = raw["goal"]
    if no_dead:
        for name in wires:
            if name not in raw["inputs"] and name != goal["wire"] and name not in read:
                return Replay("INVALID", "constraint_violation", None, snapshot(), spent, len(program))
    out = wires.get(goal["wire"])
    if out is None or out[0] != goal["type"] or list(out[2]) != [c["expect"] for c in cases]:
        return Replay("INVALID", "goal_not_met", None, snapshot(), spent, len(program))
    return Replay("VALID", None, None, snapshot(), spent, len(program))

