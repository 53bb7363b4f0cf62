"""Family dataflow: world files, schema, the binding grammar, the checker path and its reference replay."""

from __future__ import annotations

import copy
import functools
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import worlds
from worlds import (
    Binding,
    CheckerUsageError,
    Reason,
    Status,
    WorldFileError,
    check,
    check_bindings,
    check_steps,
    dataflow_reference_replay,
    load_world,
    parse_candidate,
    parse_program,
    world_from_mapping,
)
from worlds._checker import differential
from worlds._grammar import MAX_INT_DIGITS

from ._dataflow_mutants import CERT_BIT, CERT_NUM, cert, random_program, shipped

SHIPPED = shipped()
DF1, RAW1 = SHIPPED["DF-001"]
DF2, RAW2 = SHIPPED["DF-002"]
ALL = {**SHIPPED, **cert()}


@functools.cache
def _solutions(wid):
    return worlds.enumerate_programs(ALL[wid][0]).solutions


def _cases():
    return sorted((wid, e.name) for wid, (w, _) in SHIPPED.items() for e in w.examples)


@pytest.mark.parametrize(("wid", "name"), _cases())
def test_every_shipped_example_gets_its_documented_outcome_from_checker_and_reference(wid, name):
    w, raw = SHIPPED[wid]
    e = next(e for e in w.examples if e.name == name)
    r = check(w, e.text)
    assert r.status.value == e.expect
    assert (None if r.reason is None else r.reason.value) == e.reason
    if e.step is not None:
        assert r.failing_step == e.step
    got, ref = differential(r, raw, e.text)
    assert got == ref


def test_shipped_examples_cover_every_reason_and_status():
    seen = {(e.expect, e.reason) for w, _ in SHIPPED.values() for e in w.examples}
    assert {s for s, _ in seen} == {"VALID", "INVALID", "MALFORMED"}
    assert {r for _, r in seen if r} == {r.value for r in Reason}


def test_the_family_is_registered_and_the_worlds_load_from_their_own_folder():
    assert "dataflow" in worlds.family_names()
    assert [p.name for p in worlds.dataflow_worlds()] == ["df_001.toml", "df_002.toml"]
    assert not set(worlds.dataflow_worlds()) & set(worlds.shipped_worlds())
    assert DF1.entities == (("a", "num"), ("b", "num")) and DF1.budget.get("max_depth") == 2
    assert [p.name for p in DF1.primitives] == ["fuse", "gauge", "shave", "sway"]


def test_a_valid_program_reports_its_trace_state_and_cost():
    r = check(DF1, "c = gauge(a, b)\nout = sway(c, b, a)\n")
    assert r.ok and r.cost == 3 and r.executed == 2
    assert [t.step for t in r.trace] == ["c = gauge(a, b)", "out = sway(c, b, a)"]
    out = r.final_state.wire("out")
    assert out == ("out", "num", 2, (0, 5, 6, 7, 4, 5))
    assert r.final_state.uses == (("gauge", 1), ("sway", 1)) and r.final_state.read == ("a", "b", "c")
    described = worlds.get_family("dataflow").describe_state(r.final_state)
    assert described["wires"]["c"] == {"type": "flag", "depth": 1, "values": [0, 1, 0, 0, 1, 0]}
    assert json.dumps(r.summary(), sort_keys=True) and len(r.digest()) == 64


def test_arithmetic_is_modulo_the_result_type():
    raw = copy.deepcopy(CERT_NUM)
    w = world_from_mapping(raw)
    r = check(w, "out = join(a, b)\n")
    assert r.ok and r.final_state.wire("out")[3] == (1, 1, 0)  # 3 + 2 = 5 = 1 (mod 4)
    assert check(w, "out = tally(a, b)\n").reason is Reason.GOAL_NOT_MET  # right values, wrong type


def test_failures_are_coded_with_the_step_line_and_column():
    r = check(DF1, "# header\n\nc = gauge(a, b)\nout = sway(a, b, c)\n")
    assert (r.reason, r.failing_step, r.line, r.executed) == (Reason.BAD_ARGUMENT, 1, 4, 1)
    assert "argument 1 takes a flag, wire a is a num" in r.message
    m = check(DF1, "c = gauge(a, b)\n  gauge(a, b)\n")
    assert m.status is Status.MALFORMED and (m.line, m.column) == (2, 8)
    assert "expected '='" in m.message
    m = check(DF1, "out = sway(c, b a)\n")
    assert (m.line, m.column) == (1, 17)
    assert check(DF1, "out = gauge(a, b)\n").message.endswith("the goal wire out is a flag, the goal needs a num")


def test_the_generic_parser_and_check_steps_refuse_what_belongs_to_the_binding_grammar():
    assert not parse_candidate("x = add(a, b)\n").ok  # the generic grammar's language is unchanged
    with pytest.raises(CheckerUsageError, match="own artifact grammar"):
        check_steps(DF1, parse_candidate("gauge(a, b)\n").steps)
    with pytest.raises(CheckerUsageError):
        check(DF1, b"out = gauge(a, b)")
    with pytest.raises(CheckerUsageError):
        check_bindings(DF1, ["out = gauge(a, b)"])


# ---- world files ------------------------------------------------------------------

BAD = [
    ("types.num", 1, "types.num", "between 2 and 1024"),
    ("inputs.a", "int", "inputs.a", "not in types"),
    ("inputs.w7", "num", "inputs.w7", "canonical wire name"),
    ("primitives[0].op", "less", "primitives[0].op", "unknown operation"),
    ("primitives[0].params", ["num"], "primitives[0].params", "takes 2 argument"),
    ("primitives[0].result", "bool", "primitives[0].result", "not in types"),
    ("primitives[0].value", 1, "primitives[0].value", "only a 'const' primitive"),
    ("primitives[1].name", "gauge", "primitives[1].name", "unique"),
    ("goal.wire", "a", "goal.wire", "fresh name"),
    ("goal.type", "real", "goal.type", "not in types"),
    ("goal.cases[0].inputs.a", 8, "goal.cases[0].inputs.a", "between 0 and 7"),
    ("goal.cases[0].inputs.z", 1, "goal.cases[0].inputs.z", "not a declared input"),
    ("goal.cases[1].inputs", {"a": 0, "b": 0}, "goal.cases[1].inputs", "repeats the inputs"),
    ("goal.cases[0].expect", 9, "goal.cases[0].expect", "between 0 and 7"),
    ("constraints[0].primitive", "nope", "constraints[0].primitive", "not a declared primitive"),
    ("constraints[0].kind", "at_most", "constraints[0].kind", "unknown constraint kind"),
    ("budget.max_depth", 0, "budget.max_depth", "between 1 and 1000"),
    ("budget.horizon", 3, "budget.horizon", "not a known field"),
    ("wires", {}, "wires", "not a known field"),
]


def _set(d, path, value):
    parts = path.replace("]", "").replace("[", ".").split(".")
    for p in parts[:-1]:
        d = d[int(p)] if p.isdigit() else d[p]
    last = parts[-1]
    d[int(last) if last.isdigit() else last] = value


@pytest.mark.parametrize(("path", "value", "field", "words"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_world_file_names_the_field_and_the_fix(path, value, field, words):
    d = copy.deepcopy(RAW1)
    _set(d, path, value)
    with pytest.raises(WorldFileError) as exc:
        world_from_mapping(d, source="df_bad.toml")
    assert exc.value.field == field and words in exc.value.problem
    assert str(exc.value).startswith(f"df_bad.toml: field {field}: ")


def test_a_case_missing_an_input_and_a_goal_met_at_the_start_are_refused():
    d = copy.deepcopy(RAW1)
    del d["goal"]["cases"][0]["inputs"]["b"]
    with pytest.raises(WorldFileError, match="gives no value for input"):
        world_from_mapping(d)


def test_schema_accepts_the_shipped_worlds_and_refuses_the_structural_bad_cases():
    jsonschema = pytest.importorskip(
        "jsonschema", reason="the jsonschema package is not installed, so the published schema cannot be executed")
    schema = json.loads(worlds.SCHEMA_PATH.read_text(encoding="utf-8"))
    v = jsonschema.Draft202012Validator(schema)
    for raw in (RAW1, RAW2, CERT_NUM, CERT_BIT):
        assert not list(v.iter_errors(raw)), raw["id"]
    code_only = {"inputs.a", "primitives[0].params", "primitives[0].result", "primitives[1].name", "goal.wire",
                 "goal.type", "goal.cases[0].inputs.a", "goal.cases[0].inputs.z", "goal.cases[1].inputs",
                 "goal.cases[0].expect", "constraints[0].primitive"}
    checked = 0
    for path, value, field, _ in BAD:
        if field in code_only:
            continue
        d = copy.deepcopy(RAW1)
        _set(d, path, value)
        assert list(v.iter_errors(d)), f"schema accepts {path}={value!r}"
        checked += 1
    assert checked >= 7
    tw = json.loads(json.dumps(tomllib_load("tw_001")))
    tw["budget"]["max_depth"] = 2
    assert list(v.iter_errors(tw)), "max_depth belongs to dataflow worlds only"


def tomllib_load(stem):
    import tomllib

    return tomllib.loads((worlds.DATA_DIR / f"{stem}.toml").read_text(encoding="utf-8"))


def test_a_bad_file_on_disk_is_a_world_file_error(tmp_path):
    p = tmp_path / "df.toml"
    p.write_text("schema_version = 1\nid = 'X'\nfamily = 'dataflow'\ntitle = 't'\n[budget]\nmax_steps = 1\n"
                 "max_cost = 1\nmax_depth = 1\n", encoding="utf-8")
    with pytest.raises(WorldFileError, match="field types: is required"):
        load_world(p)


# ---- differential replay on Hypothesis programs ---------------------------------------

_LINE_PIECES = ["out", "w1", "c", "a", "b", "p", "q", "n", "=", "==", "(", ")", ",", " ", "\t", "#", "7", "01",
                "gauge", "sway", "fuse", "shave", "knot", "lamp", "join", "test", "less", "one", "tally", "flip",
                "\r", "é", "\u0663"]


@st.composite
def programs(draw):
    """Programs over a world: well-formed bindings (any primitive, any names, ints) or free text lines."""
    wid = draw(st.sampled_from(sorted(ALL)))
    w = ALL[wid][0]
    names = [n for n, _ in w.entities] + [w.spec.goal_wire, "w1", "w2", "c", "n", "x", "zz"]
    prims = [p.name for p in w.primitives] + ["nope"]
    lines = []
    for _ in range(draw(st.integers(1, w.budget.max_steps + 2))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            lines.append(draw(st.lists(st.sampled_from(_LINE_PIECES), max_size=8).map("".join)))
        else:
            args = draw(st.lists(st.one_of(st.sampled_from(names), st.integers(0, 9).map(str)), max_size=4))
            sep = draw(st.sampled_from([" = ", "=", "  =\t"]))
            lines.append(f"{draw(st.sampled_from(names))}{sep}{draw(st.sampled_from(prims))}({', '.join(args)})")
    return wid, "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@settings(max_examples=250, deadline=None)
@given(programs())
@example(("DF-001", "c = gauge(a, b)\nout = sway(c, b, a)\n"))
@example(("DF-002", "out = knot(p, q)\nx = knot(out, out)\n"))
def test_checker_and_reference_agree_on_generated_programs(case):
    wid, text = case
    w, raw = ALL[wid]
    got, ref = differential(check(w, text), raw, text)
    assert got == ref


def _near_misses(rng, w, sol):
    """``sol`` and programs one edit away: an argument, primitive or binder replaced, a line dropped,
    repeated or moved."""
    lines = list(sol)
    names = [n for n, _ in w.entities] + [w.spec.goal_wire] + [s.split(" = ")[0] for s in sol] + ["zz"]
    out = ["\n".join(lines)]
    for _ in range(6):
        ls = list(lines)
        k = rng.randrange(len(ls))
        target, call = ls[k].split(" = ")
        prim, rest = call.split("(")
        args = [a for a in rest.rstrip(")").split(", ") if a]
        edit = rng.randrange(6)
        if edit == 0 and args:
            args[rng.randrange(len(args))] = rng.choice(names)
        elif edit == 1:
            prim = rng.choice([p.name for p in w.primitives])
        elif edit == 2:
            target = rng.choice(names)
        ls[k] = f"{target} = {prim}({', '.join(args)})"
        if edit == 3:
            del ls[k]
        elif edit == 4:
            ls.insert(k, ls[k])
        elif edit == 5:
            ls.insert(rng.randrange(len(ls) + 1), ls.pop(k))
        out.append("\n".join(ls))
    return out


def test_checker_and_reference_agree_on_solutions_and_their_near_misses_and_on_random_programs():
    import random

    rng = random.Random(7)
    reasons = []
    for wid in sorted(ALL):
        w, raw = ALL[wid]
        texts = [random_program(rng, w) for _ in range(100)]
        for sol in _solutions(wid)[:40]:
            texts.extend(_near_misses(rng, w, sol))
        for text in texts:
            r = check(w, text)
            got, ref = differential(r, raw, text)
            assert got == ref, text
            reasons.append(r.reason)
    assert reasons.count(None) >= 40  # VALID programs are replayed too
    assert set(reasons) == {None} | set(Reason), set(Reason) - set(reasons)


def test_the_public_reference_replays_dispatch_to_the_dataflow_interpreter():
    text = "n = knot(p, q)\nx = knot(p, n)\ny = knot(q, n)\nout = knot(x, y)\n"
    r = dataflow_reference_replay(RAW2, text)
    assert (r.status, r.cost, r.executed) == ("VALID", 4, 4)
    assert worlds.reference_replay(RAW2, text) == r
    assert worlds.reference_replay(RAW2, "out = knot(p, q)\n").reason == "goal_not_met"


def test_the_generic_step_interface_of_the_family_binds_its_first_argument():
    fam = worlds.get_family("dataflow")
    nxt, cost = fam.apply(DF1, DF1.initial_state, "gauge", ("c", "a", "b"))
    assert cost == 1 and nxt.wire("c") == ("c", "flag", 1, (0, 1, 0, 0, 1, 0))
    assert fam.apply(DF1, DF1.initial_state, "gauge", ("a", "a", "b")).reason is Reason.INAPPLICABLE
    assert fam.apply(DF1, DF1.initial_state, "sway", ("o", "a", "b", "a")).reason is Reason.BAD_ARGUMENT


# ---- renaming intermediate wires keeps the verdict ----------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_renaming_intermediate_wires_keeps_status_reason_step_and_cost(data):
    wid = data.draw(st.sampled_from(sorted(ALL)))
    w = ALL[wid][0]
    sols = _solutions(wid)
    sol = data.draw(st.sampled_from(sols))
    inter = [s.split(" = ")[0] for s in sol if not s.startswith(w.spec.goal_wire + " ")]
    fresh = data.draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True).filter(
        lambda n: n not in {x for x, _ in w.entities} | {w.spec.goal_wire} | {"w" + str(i) for i in range(9)}),
        min_size=len(inter), max_size=len(inter), unique=True))
    mapping = dict(zip(inter, fresh))
    parsed = parse_program("\n".join(sol)).steps
    renamed = [Binding(mapping.get(b.target, b.target), b.name, tuple(mapping.get(a, a) for a in b.args))
               for b in parsed]
    text = "".join(b.render() + "\n" for b in renamed)
    a, b = check(w, "\n".join(sol)), check(w, text)
    assert a.ok and b.ok and (a.cost, a.executed) == (b.cost, b.executed)
    # breaking one binding the same way gives the same verdict on both spellings
    broken = [*parsed[:-1], Binding(parsed[-1].target, parsed[-1].name, parsed[-1].args + ("zz",))]
    broken_renamed = [*renamed[:-1], Binding(renamed[-1].target, renamed[-1].name, renamed[-1].args + ("zz",))]
    x, y = check_bindings(w, broken), check_bindings(w, broken_renamed)
    assert (x.status, x.reason, x.failing_step) == (y.status, y.reason, y.failing_step) == (
        Status.INVALID, Reason.BAD_ARGUMENT, len(parsed) - 1)


# ---- hostile text ------------------------------------------------------------------------

_HOSTILE = ["out", "=", "gauge", "sway", "knot", "(", ")", ",", " ", "\t", "\n", "\r\n", "#", "0", "7", "01",
            "9" * 30, "9" * (MAX_INT_DIGITS + 1), "a", "b", "p", "\ud800", "\udfff", "é", "\u0663", "\u00a0", "```",
            "x", "==", "=>", ":"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(ALL)), st.one_of(
    st.lists(st.sampled_from(_HOSTILE), max_size=24).map("".join),
    st.text(alphabet=st.characters(codec=None, categories=None), max_size=60)))
@example("DF-001", "out = gauge(a, " + "9" * 5000 + ")")
@example("DF-002", "\ud800out = knot(p, q)")
@example("DF-002", "out = knot(p, q)\x00")
def test_checker_never_raises_on_hostile_text_and_agrees_with_the_reference(wid, text):
    w, raw = ALL[wid]
    r = check(w, text)
    assert r.status in (Status.VALID, Status.INVALID, Status.MALFORMED)
    assert r.status is not Status.MALFORMED or (r.line is not None and r.message and r.reason is Reason.SCHEMA)
    assert r.status is Status.MALFORMED or r.reason is None or r.message
    got, ref = differential(r, raw, text)
    assert got == ref


def test_limits_of_the_text_are_the_generic_grammars():
    within = check(DF1, "c = gauge(a, " + "9" * MAX_INT_DIGITS + ")\n")
    assert within.reason is Reason.BAD_ARGUMENT
    past = check(DF1, "c = gauge(a, " + "9" * (MAX_INT_DIGITS + 1) + ")\n")
    assert past.status is Status.MALFORMED and (past.line, past.column) == (1, 14)
    assert check(DF1, "x" * 1_000_001).status is Status.MALFORMED
    assert check(DF1, "# only a comment\n\n").message.endswith("the artifact contains no binding")


def test_parsing_a_long_program_takes_time_linear_in_its_length():
    """Parsing 1,000 and 64,000 bindings: the second takes at most about 64 times the first (best of 3)."""
    import time

    def best(text):
        t = float("inf")
        for _ in range(3):
            s = time.perf_counter()
            parse_program(text)
            t = min(t, time.perf_counter() - s)
        return t

    small, large = best("x = gauge(a, b)\n" * 1000), best("x = gauge(a, b)\n" * 64000)
    assert large <= 64 * 8 * small + 0.05, (small, large)


# ---- fuzzing the loader: any damaged dataflow mapping loads or raises WorldFileError ---------

_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2, 1100), st.sampled_from(["", "num", "flag", "a", "out",
                  "w1", "lt", "const", "x y"]), st.lists(st.sampled_from(["num", "flag", 3]), max_size=4),
                  st.dictionaries(st.sampled_from(["a", "b", "z"]), st.integers(-1, 9), max_size=3))


def _paths(d, prefix=()):
    if isinstance(d, dict):
        for k in sorted(d):
            yield prefix + (k,)
            yield from _paths(d[k], prefix + (k,))
    elif isinstance(d, list):
        for i, x in enumerate(d):
            yield prefix + (i,)
            yield from _paths(x, prefix + (i,))


_RAW_PATHS = [p for p in _paths(RAW1) if p[0] != "examples"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_RAW_PATHS), _LEAF, st.booleans()), min_size=1, max_size=3))
def test_a_damaged_dataflow_mapping_loads_or_raises_a_world_file_error(edits):
    d = copy.deepcopy(RAW1)
    for path, value, delete in edits:
        node = d
        try:
            for k in path[:-1]:
                node = node[k]
            if delete and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        w = world_from_mapping(d)
    except WorldFileError as exc:
        assert exc.problem
        return
    check(w, "c = gauge(a, b)\nout = sway(c, b, a)\n")  # a world that loads can be checked
