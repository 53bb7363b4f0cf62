"""Text of family ``dataflow``: the program grammar in words, the handbook, states and examples, the prompt."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..._model import StateLineFormat
from ..._pair_types import Demonstration, PrimitiveExample
from ..._render import markdown_table

__all__ = ["DATAFLOW_GRAMMAR_TEXT", "STATE_LINES", "format_dataflow_state", "render_dataflow_prompt",
           "render_dataflow_world"]

#: The artifact grammar of a program as shown to a solver (the same text for F and C).
DATAFLOW_GRAMMAR_TEXT = """\
Answer format: write the program as bindings, one binding per line, in execution order.
A binding is  NAME = primitive(arg1, arg2)  : a fresh wire name, '=', a primitive name and its
arguments in parentheses, separated by commas. An argument is an input or a wire bound on an
earlier line. A wire name is letters, digits and underscores, not starting with a digit.
Blank lines and lines starting with # are ignored; any other text makes the answer malformed.
The answer must contain at least one binding."""

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def _bound_wires(described: Mapping[str, Any]) -> dict[str, list[int]]:
    """The wires a program has bound (inputs, at depth 0, left out) and their values per case."""
    return {name: list(wire["values"]) for name, wire in described.get("wires", {}).items() if wire["depth"] > 0}


def _neighbour(state: Mapping[str, Any]) -> dict[str, Any]:
    if not state:
        return {"phantom": [0]}
    first = min(state)
    return {**state, first: [state[first][0] + 1, *state[first][1:]]}


#: A program's state as lines: one per wire it has bound, ``name = v1, v2, ...`` (its value on each case, in the
#: handbook's case order; brackets around the values are allowed).  Name characters, whitespace, "=", "[",
#: digits and "," are classes no neighbouring part shares, so a failed match gives each run back once: linear
#: time.  Depths and primitive uses are not in the lines; a probe's situation lists the bindings made so far.
STATE_LINES = StateLineFormat(
    words="one line per wire the program has bound (inputs left out), written  name = v1, v2, ...  its value on "
          "each case in the handbook's case order (write (empty) when no wire is bound)",
    pattern=re.compile(rf"({_NAME})\s*=\s*\[?\s*([0-9]+(?:\s*,\s*[0-9]+)*)\s*\]?"),
    write=lambda wire, values: f"{wire} = {', '.join(str(v) for v in values)}",
    read=lambda matches: {name: [int(v) for v in re.findall(r"[0-9]+", m.group(2))] for name, m in matches.items()},
    neighbour=_neighbour,
    project=_bound_wires,
    steps_in_situation=True,
    legality=("A binding is legal when its primitive exists, it has one argument per parameter, each argument is an "
              "input or a wire bound on an earlier line and has the parameter's type, its wire name is not bound "
              "yet, the number of bindings, their total cost and the circuit depth stay within the budget, and no "
              "primitive is used more often than a constraint allows."),
)

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


def _signature(p: Mapping[str, Any]) -> str:
    return f"{p['name']}(" + ", ".join(f"x{k + 1}: {t}" for k, t in enumerate(p.get("params", []))) + ")"


def render_dataflow_world(raw: Mapping[str, Any], rendering: str = "prose") -> str:
    """A dataflow world as a complete handbook: types, inputs, primitives, cases, goal, constraints, budget (the
    types, inputs, primitives and cases as lines of words, or as tables for ``rendering="tables"``)."""
    lines = [f"World {raw['id']} (family dataflow): {raw['title']}.",
             "A program is a list of bindings; each applies one primitive to wires bound earlier (inputs are",
             "bound from the start) and binds the result to a fresh wire. The program runs on every case below at",
             "once, so each wire holds one value per case.",
             "", "Value types (a value of type T is an integer from 0 to m - 1; every result is reduced modulo",
             "the modulus m of the primitive's result type):"]
    words = {p["name"]: _OP_WORDS[p["op"]].format(value=p.get("value", 0)) for p in raw["primitives"]}
    g = raw["goal"]
    if rendering == "tables":
        lines += [""] + markdown_table(["type", "modulus m"], [[t, m] for t, m in raw["types"].items()])
        lines += ["", "Inputs:", ""] + markdown_table(["input", "type"], [[n, t] for n, t in raw["inputs"].items()])
        lines += ["", "Primitives:", ""]
        lines += markdown_table(["primitive(argument: type)", "result type", "cost", "value"],
                                [[_signature(p), p["result"], p["cost"], words[p["name"]]] for p in raw["primitives"]])
        lines += ["", "Cases (input values, and the value the goal wire must hold):", ""]
        order = list(raw["inputs"])
        lines += markdown_table(["case", *order, f"{g['wire']} (goal)"],
                                [[i, *(c["inputs"][n] for n in order), c["expect"]]
                                 for i, c in enumerate(g["cases"], 1)])
    else:
        lines += [f"  - {t}: integers modulo {m}" for t, m in raw["types"].items()]
        lines += ["", "Inputs:"] + [f"  - {n}: {t}" for n, t in raw["inputs"].items()]
        lines += ["", "Primitives:"]
        lines += [f"  - {_signature(p)} -> {p['result']}, cost {p['cost']}: {words[p['name']]}"
                  for p in raw["primitives"]]
        lines += ["", "Cases (input values, and the value the goal wire must hold):"]
        lines += _case_lines(raw)
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
                           examples: Sequence[PrimitiveExample], rendering: str = "prose") -> str:
    """The F/C synthesis prompt body of a dataflow side (same template for F and C)."""
    lines = [
        "You are given a complete, closed world. Everything that exists and every rule is stated below;",
        "no other values, primitives or effects exist. Write a program that reaches the goal.",
        "",
        "=== HANDBOOK ===",
        render_dataflow_world(target_raw, rendering).rstrip("\n"),
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
