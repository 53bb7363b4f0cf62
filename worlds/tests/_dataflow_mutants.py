"""Certification of the dataflow checker path: worlds, brute force, mutants and named checks.

A mutant patches ``worlds._checker`` (its ``get_family`` view of the
family, or one of its cap tests) for its duration and restores it in
``finally``; the family module, the enumerator and the reference interpreter
are never patched: they are the witnesses.  Witness outcomes (the reference
interpreter's replays, the enumerator's solution sets) do not depend on the
checker, so they are computed once per process and reused for every mutant.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import random
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager

import worlds
import worlds._checker as ck
from worlds import Binding, Status, check, enumerate_programs, world_from_mapping
from worlds.families.dataflow import DataflowState, canonical_wire
from worlds._dataflow_reference import replay

from ._mutants import FamilyProxy, patched

#: Tiny modulo-4 world: a step-cap of 2 keeps every sequence checkable; the
#: goal (a + b) is met in one step so runs may continue past it; ``join`` is
#: limited to one use; the depth cap (1) forbids any chain; ``tally`` gives
#: the goal's values on a wire of the wrong type (a flag).
CERT_NUM = {
    "schema_version": 1, "id": "DF-C01", "family": "dataflow", "title": "sum of two, with spares",
    "budget": {"max_steps": 2, "max_cost": 3, "max_depth": 1},
    "types": {"num": 4, "flag": 2},
    "inputs": {"a": "num", "b": "num"},
    "primitives": [
        {"name": "join", "op": "add", "params": ["num", "num"], "result": "num", "cost": 1},
        {"name": "test", "op": "lt", "params": ["num", "num"], "result": "flag", "cost": 1},
        {"name": "less", "op": "sub", "params": ["num", "num"], "result": "num", "cost": 2},
        {"name": "one", "op": "const", "params": [], "result": "num", "value": 1, "cost": 2},
        {"name": "tally", "op": "add", "params": ["num", "num"], "result": "flag", "cost": 1},
    ],
    "goal": {"wire": "out", "type": "num", "cases": [
        {"inputs": {"a": 0, "b": 1}, "expect": 1},
        {"inputs": {"a": 3, "b": 2}, "expect": 1},
        {"inputs": {"a": 2, "b": 2}, "expect": 0},
    ]},
    "constraints": [{"kind": "max_uses", "primitive": "join", "limit": 1}],
}

#: Bits: ``or`` from ``nand`` and ``not`` within three gates and depth 2, no dead wires.
CERT_BIT = {
    "schema_version": 1, "id": "DF-C02", "family": "dataflow", "title": "or from nand and not",
    "budget": {"max_steps": 3, "max_cost": 3, "max_depth": 2},
    "types": {"bit": 2},
    "inputs": {"p": "bit", "q": "bit"},
    "primitives": [
        {"name": "knot", "op": "nand", "params": ["bit", "bit"], "result": "bit", "cost": 1},
        {"name": "flip", "op": "not", "params": ["bit"], "result": "bit", "cost": 1},
    ],
    "goal": {"wire": "out", "type": "bit", "cases": [
        {"inputs": {"p": 0, "q": 0}, "expect": 0},
        {"inputs": {"p": 0, "q": 1}, "expect": 1},
        {"inputs": {"p": 1, "q": 0}, "expect": 1},
        {"inputs": {"p": 1, "q": 1}, "expect": 1},
    ]},
    "constraints": [{"kind": "no_dead_wires"}],
}

#: Brute-force depth per certification world (the step cap of each).
BRUTE_DEPTH = {"DF-C01": 2, "DF-C02": 3}


@functools.cache
def shipped() -> dict[str, tuple[worlds.World, dict]]:
    out = {}
    for p in worlds.dataflow_worlds():
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
        out[raw["id"]] = (worlds.load_world(p), raw)
    return out


@functools.cache
def cert() -> dict[str, tuple[worlds.World, dict]]:
    return {r["id"]: (world_from_mapping(copy.deepcopy(r)), r) for r in (CERT_NUM, CERT_BIT)}


def brute_alphabet(world, i: int) -> list[Binding]:
    """Every binding at step ``i`` over a state-free alphabet: canonical binders, any primitive,
    any argument among the inputs, the earlier canonical wires and the goal wire (ill-typed and unbound included)."""
    spec = world.spec
    names = [n for n, _ in spec.inputs] + [canonical_wire(k) for k in range(i)] + [spec.goal_wire]
    out = []
    for target in (canonical_wire(i), spec.goal_wire):
        for prim in spec.primitives:
            for args in itertools.product(names, repeat=len(prim.params)):
                out.append(Binding(target, prim.name, args))
    return out


def all_sequences(world, depth: int) -> Iterator[tuple[Binding, ...]]:
    for n in range(1, depth + 1):
        yield from itertools.product(*(brute_alphabet(world, i) for i in range(n)))


def brute_force(world, depth: int) -> tuple[tuple[str, ...], ...]:
    """The VALID sequences of ``all_sequences``, by the checker (as patched at call time).

    A sequence whose checker run stops at a step (``failing_step`` set) is not
    extended: the checker reads bindings in order, so every extension stops at
    the same step.  Every other sequence is extended by the whole alphabet.
    """
    found = []
    frontier: list[tuple[Binding, ...]] = [()]
    for i in range(depth):
        alphabet = brute_alphabet(world, i)
        nxt = []
        for prefix in frontier:
            for b in alphabet:
                seq = prefix + (b,)
                r = ck.check_steps(world, seq)
                if r.status is Status.VALID:
                    found.append(tuple(x.render() for x in seq))
                if r.failing_step is None:
                    nxt.append(seq)
        frontier = nxt
    return tuple(sorted(found))


def _text(seq) -> str:
    return "".join(b.render() + "\n" for b in seq)


@functools.cache
def _exhaustive_reference() -> dict[str, list[tuple[str, tuple]]]:
    out = {}
    for wid, (w, raw) in cert().items():
        rows = []
        for seq in all_sequences(w, 2):
            ref = replay(raw, _text(seq))
            rows.append((_text(seq), (ref.status, ref.reason, ref.failing_step, ref.state, ref.cost, ref.executed)))
        out[wid] = rows
    return out


def random_program(rng: random.Random, world) -> str:
    """A program that is mostly type-correct, with some ill-typed, unbound, integer or malformed lines."""
    spec = world.spec
    bound = {n: t for n, t in spec.inputs}
    lines = []
    for i in range(rng.randint(1, world.budget.max_steps + 1)):
        roll = rng.random()
        if roll < 0.04:
            lines.append(rng.choice(["x = ", "out := f(a)", "f(a)", "x = y(", "# note", ""]))
            continue
        target = rng.choice([spec.goal_wire, f"v{i}", f"v{i}", rng.choice(sorted(bound))])
        prim = rng.choice(spec.primitives)
        args = []
        for t in prim.params:
            pool = [n for n, tt in bound.items() if tt == t]
            r = rng.random()
            if r < 0.06 or not pool:
                args.append(rng.choice(sorted(bound) + ["zz", "7"]))
            else:
                args.append(rng.choice(pool))
        if rng.random() < 0.03:
            args.append(rng.choice(sorted(bound)))
        name = prim.name if rng.random() > 0.03 else "nope"
        lines.append(f"{target} = {name}({', '.join(args)})")
        bound.setdefault(target, prim.result)
    return "\n".join(lines) + "\n"


@functools.cache
def _random_reference() -> list[tuple[str, str, tuple]]:
    rows = []
    rng = random.Random(20261201)
    for wid, (w, raw) in sorted({**shipped(), **cert()}.items()):
        for _ in range(300):
            text = random_program(rng, w)
            ref = replay(raw, text)
            rows.append((wid, text, (ref.status, ref.reason, ref.failing_step, ref.state, ref.cost, ref.executed)))
    return rows


@functools.cache
def _enumerated() -> dict[str, tuple]:
    return {wid: enumerate_programs(w).solutions for wid, (w, _) in cert().items()}


def _got(world, text):
    r = check(world, text)
    s = r.final_state
    return (r.status.value, None if r.reason is None else r.reason.value, r.failing_step,
            (s.wires, s.uses, s.read), r.cost, r.executed)


# ---- the named checks (each returns its discrepancies) -----------------------


def check_examples() -> list[str]:
    bad = []
    for wid, (w, _) in sorted(shipped().items()):
        for e in w.examples:
            try:
                r = check(w, e.text)
            except Exception as exc:  # a mutant that raises is caught
                bad.append(f"{wid}/{e.name}: raised {exc!r}")
                continue
            got = (r.status.value, None if r.reason is None else r.reason.value)
            if got != (e.expect, e.reason) or (e.step is not None and r.failing_step != e.step):
                bad.append(f"{wid}/{e.name}: {got} step {r.failing_step}")
    return bad


def check_differential_random() -> list[str]:
    all_w = {**shipped(), **cert()}
    bad = []
    for wid, text, ref in _random_reference():
        try:
            got = _got(all_w[wid][0], text)
        except Exception as exc:
            return [f"{wid}: raised {exc!r}"]
        if got != ref:
            bad.append(f"{wid}: {text!r}: {got} != {ref}")
    return bad


def check_differential_exhaustive() -> list[str]:
    bad = []
    for wid, rows in _exhaustive_reference().items():
        w = cert()[wid][0]
        for text, ref in rows:
            try:
                got = _got(w, text)
            except Exception as exc:
                return [f"{wid}: raised {exc!r}"]
            if got != ref:
                bad.append(f"{wid}: {text!r}: {got} != {ref}")
    return bad


def check_enumeration() -> list[str]:
    bad = []
    for wid, (w, _) in cert().items():
        try:
            brute = brute_force(w, BRUTE_DEPTH[wid])
        except Exception as exc:
            return [f"{wid}: raised {exc!r}"]
        if brute != _enumerated()[wid]:
            bad.append(f"{wid}: brute force {len(brute)} != enumerator {len(_enumerated()[wid])}")
    return bad


CHECKS = {
    "examples": check_examples,
    "differential_random": check_differential_random,
    "differential_exhaustive": check_differential_exhaustive,
    "enumeration": check_enumeration,
}


def run_check(name: str) -> list[str]:
    return CHECKS[name]()


#: The order the checks run in when looking for a mutant's first killer (cheapest first).
CHECK_ORDER = ("examples", "differential_random", "differential_exhaustive", "enumeration")


def first_killer(make) -> str | None:
    """The first check in ``CHECK_ORDER`` that catches the mutant ``make()``, or None."""
    with make():
        for name in CHECK_ORDER:
            if run_check(name):
                return name
    return None


# ---- mutants -------------------------------------------------------------------


def _patched(**attrs):
    return patched(ck, **attrs)


def _family_mutant(make):
    @contextmanager
    def cm():
        real_get = ck.get_family

        def get(name):
            fam = real_get(name)
            return FamilyProxy(fam, **make(fam))

        with _patched(get_family=get):
            yield

    return cm


def _spec(world, **kw):
    return dataclasses.replace(world, spec=dataclasses.replace(world.spec, **kw))


def _values_mutant(mutate):
    """The checker computes one operation wrongly: ``mutate(op, xs, modulus, value)`` returns the value or None (unchanged)."""

    def make(fam):
        def transition(world, state, b):
            got = fam.transition(world, state, b)
            if not isinstance(got, tuple):
                return got
            nxt, cost = got
            prim = world.spec.primitive(b.name)
            m = world.spec.modulus(prim.result)
            argw = [state.wire(a) for a in b.args]
            wires = []
            for w in nxt.wires:
                if w[0] == b.target:
                    vals = []
                    for c, v in enumerate(w[3]):
                        alt = mutate(prim.op, tuple(x[3][c] for x in argw), m, prim.value)
                        vals.append(v if alt is None else alt)
                    w = (w[0], w[1], w[2], tuple(vals))
                wires.append(w)
            return DataflowState(tuple(wires), nxt.uses, nxt.read), cost

        return {"transition": transition}

    return _family_mutant(make)


def _allow_rebinding(fam):
    def transition(world, state, b):
        kept = tuple(w for w in state.wires if w[0] != b.target)
        return fam.transition(world, DataflowState(kept, state.uses, state.read), b)

    return {"transition": transition}


def _accept_wrong_type(fam):
    def resolve(world, state, b):
        bad = fam.resolve(world, state, b)
        if bad is not None and "takes a" in bad.message and "wire" in bad.message and "integer" not in bad.message:
            return None
        return bad

    return {"resolve": resolve}


def _goal_first_case(fam):
    def goal(world, state):
        w = state.wire(world.spec.goal_wire)
        return w is not None and w[1] == world.spec.goal_type and w[3][:1] == world.spec.expect[:1]

    return {"goal": goal}


def _goal_ignores_type(fam):
    def goal(world, state):
        w = state.wire(world.spec.goal_wire)
        return w is not None and w[3] == world.spec.expect

    return {"goal": goal}


def _forget_reads(fam):
    def transition(world, state, b):
        got = fam.transition(world, state, b)
        if not isinstance(got, tuple):
            return got
        nxt, cost = got
        return DataflowState(nxt.wires, nxt.uses, state.read), cost

    return {"transition": transition}


MUTANTS = {
    # name: (context manager factory, what is broken)
    "accept_wrong_wire_type": (_family_mutant(_accept_wrong_type), "a wire of the wrong type is accepted as argument"),
    "allow_rebinding": (_family_mutant(_allow_rebinding), "binding a name already bound overwrites it"),
    "goal_first_case_only": (_family_mutant(_goal_first_case), "the goal is checked on the first case only"),
    "goal_ignores_type": (_family_mutant(_goal_ignores_type), "the goal wire's type is not checked"),
    "ignore_depth_cap": (_family_mutant(lambda f: {"limits": lambda w, s: None}), "max_depth not applied"),
    "depth_cap_off_by_one": (_family_mutant(lambda f: {"limits": lambda w, s: f.limits(
        _spec(w, max_depth=w.spec.max_depth + 1), s)}), "one level of depth too many allowed"),
    "ignore_max_uses": (_family_mutant(lambda f: {"constraints": lambda w, s, final: f.constraints(
        _spec(w, max_uses=()), s, final)}), "max_uses rules not applied"),
    "ignore_dead_wires": (_family_mutant(lambda f: {"constraints": lambda w, s, final: f.constraints(
        w, s, False)}), "no_dead_wires never checked"),
    "forget_reads": (_family_mutant(_forget_reads), "a binding's arguments are not recorded as read"),
    "sub_reversed": (_values_mutant(lambda op, xs, m, v: (xs[1] - xs[0]) % m if op == "sub" else None),
                     "sub computes y - x"),
    "no_modular_wrap": (_values_mutant(lambda op, xs, m, v: xs[0] + xs[1] if op == "add" else None),
                        "add is not reduced modulo the result type"),
    "lt_as_le": (_values_mutant(lambda op, xs, m, v: int(xs[0] <= xs[1]) if op == "lt" else None),
                 "lt computes <="),
    "select_branches_swapped": (_values_mutant(
        lambda op, xs, m, v: (xs[2] if xs[0] else xs[1]) % m if op == "select" else None),
        "select returns the other branch"),
    "nand_as_and": (_values_mutant(lambda op, xs, m, v: int(bool(xs[0]) and bool(xs[1])) if op == "nand" else None),
                    "nand computes and"),
    "step_cap_off_by_one": (lambda: _patched(_over_step_cap=lambda i, w: i > w.budget.max_steps),
                            "i > max_steps instead of i >= max_steps"),
    "cost_cap_strict": (lambda: _patched(_over_cost_cap=lambda c, s, w: c + s >= w.budget.max_cost),
                        ">= instead of > on the cost cap"),
}
