"""World files: loading, the published schema, error messages, the family registry."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import worlds
from worlds import (
    FamilyRegistryError,
    TokenState,
    WorldFileError,
    family_names,
    get_family,
    load_world,
    register_family,
    world_from_mapping,
)

from ._worlds import SHIPPED, SHIPPED_IDS, raw


@pytest.mark.parametrize("path", SHIPPED, ids=SHIPPED_IDS)
def test_shipped_worlds_load_and_ship_examples(path):
    w = load_world(path)
    assert w.source == str(path)
    expects = {e.expect for e in w.examples}
    assert expects == {"VALID", "INVALID", "MALFORMED"}
    hash(w.initial_state)


def test_shipped_world_ids_and_families():
    got = sorted((load_world(p).id, load_world(p).family) for p in SHIPPED)
    assert got == [("SCH-001", "schedule"), ("TW-001", "token_workshop")]


def test_tw001_model_parts():
    w = load_world(worlds.DATA_DIR / "tw_001.toml")
    assert w.initial_state == TokenState(
        (("coal", 2), ("forge", 1), ("ore_a", 2), ("ore_b", 1))
    )
    assert (
        w.budget.max_steps == 5
        and w.budget.max_cost == 7
        and w.budget.get("inventory_cap") == 3
    )
    assert [p.name for p in w.primitives] == [
        "bury_slag",
        "forge_blade",
        "forge_hammer",
        "smelt_a",
        "smelt_b",
    ]
    assert w.entity_type("ingot_b") == "metal" and w.entity_type("nope") is None


def _set(d, path, value):
    keys = path.split(".")
    for k in keys[:-1]:
        d = d[int(k)] if isinstance(d, list) else d[k]
    last = keys[-1]
    if value is _DELETE:
        del d[last]
    elif isinstance(d, list):
        d[int(last)] = value
    else:
        d[last] = value


_DELETE = object()

# (world stem, mutation path, new value, reported field, words expected in the problem)
BAD = [
    ("tw_001", "schema_version", 2, "schema_version", "migrate"),
    ("tw_001", "id", "bad id", "id", "not a world id"),
    ("tw_001", "family", "token_workshp", "family", "did you mean 'token_workshop'"),
    ("tw_001", "title", _DELETE, "title", "required"),
    ("tw_001", "budget.max_steps", 0, "budget.max_steps", "between 1 and 1000"),
    ("tw_001", "budget.max_cost", "7", "budget.max_cost", "must be an integer"),
    ("tw_001", "budget.horizon", 6, "budget.horizon", "not a known field"),
    ("tw_001", "budget.inventory_cap", _DELETE, "budget.inventory_cap", "required"),
    ("tw_001", "colour", "red", "colour", "not a known field"),
    ("tw_001", "tokens.coal", "gas", "tokens.coal", "not in token_types"),
    ("tw_001", "initial.ore_a", 9, "initial.ore_a", "between 0 and 3"),
    ("tw_001", "initial.gold", 1, "initial.gold", "not a declared token"),
    (
        "tw_001",
        "recipes.0.inputs.gold",
        1,
        "recipes[0].inputs.gold",
        "not a token or a parameter",
    ),
    ("tw_001", "recipes.1.name", "smelt_a", "recipes[1].name", "declared twice"),
    (
        "tw_001",
        "recipes.3.params.0.type",
        "gem",
        "recipes[3].params[0].type",
        "not in token_types",
    ),
    (
        "tw_001",
        "recipes.0.catalysts",
        ["forge", "forge"],
        "recipes[0].catalysts",
        "twice",
    ),
    ("tw_001", "recipes.0.cost", -1, "recipes[0].cost", "between 0"),
    ("tw_001", "goal.require", {}, "goal.require", "at least one"),
    (
        "tw_001",
        "constraints.0.kind",
        "at_least",
        "constraints[0].kind",
        "unknown constraint kind",
    ),
    (
        "tw_001",
        "constraints.0.scope",
        "sometimes",
        "constraints[0].scope",
        "unknown scope",
    ),
    ("tw_001", "examples.0.expect", "OK", "examples[0].expect", "not a status"),
    (
        "tw_001",
        "examples.2.reason",
        "schema",
        "examples[2].reason",
        "MALFORMED goes with",
    ),
    (
        "tw_001",
        "goal.require",
        {"forge": 1},
        "goal",
        "already holds in the initial state",
    ),
    ("sch_001", "budget.horizon", _DELETE, "budget.horizon", "required"),
    (
        "sch_001",
        "machines.lathe1.kind",
        "drill_press",
        "machines.lathe1.kind",
        "not in machine_kinds",
    ),
    ("sch_001", "tasks.0.after", ["finish"], "tasks", "cycle"),
    ("sch_001", "tasks.1.name", "cut", "tasks[1].name", "names must be unique"),
    ("sch_001", "tasks.0.duration", 0, "tasks[0].duration", "between 1 and 6"),
    (
        "sch_001",
        "goal.scheduled",
        ["paint"],
        "goal.scheduled[0]",
        "not a declared task",
    ),
    ("sch_001", "constraints.1.by", _DELETE, "constraints[1].by", "required"),
    (
        "sch_001",
        "constraints.0.tasks",
        ["drill"],
        "constraints[0].tasks",
        "two or more",
    ),
]


@pytest.mark.parametrize(
    ("stem", "path", "value", "field", "words"),
    BAD,
    ids=[f"{b[0]}:{b[1]}" for b in BAD],
)
def test_bad_world_error_names_file_field_and_problem(stem, path, value, field, words):
    d = raw(stem)
    _set(d, path, value)
    with pytest.raises(WorldFileError) as info:
        world_from_mapping(d, source=f"{stem}.toml")
    exc = info.value
    assert exc.source == f"{stem}.toml"
    assert exc.field == field
    assert words in exc.problem
    assert str(exc).startswith(f"{stem}.toml: field {field or '<root>'}: ")


def test_load_world_names_the_file_on_toml_and_io_errors(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text("schema_version = \n", encoding="utf-8")
    with pytest.raises(
        WorldFileError, match=r"broken\.toml: field <root>: is not valid TOML"
    ):
        load_world(bad)
    with pytest.raises(WorldFileError, match="cannot read the file"):
        load_world(tmp_path / "missing.toml")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'title = "caf\xe9"\n')
    with pytest.raises(WorldFileError, match="not UTF-8"):
        load_world(latin)


def test_load_world_reports_field_from_a_real_file(tmp_path):
    text = (
        (worlds.DATA_DIR / "tw_001.toml")
        .read_text(encoding="utf-8")
        .replace('coal = "fuel"', 'coal = "fule"')
    )
    p = tmp_path / "tw_bad.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(WorldFileError) as info:
        load_world(p)
    assert info.value.source == str(p) and info.value.field == "tokens.coal"


def test_registry_refuses_duplicates_and_suggests_names():
    assert family_names() == ("dataflow", "schedule", "token_workshop")
    with pytest.raises(FamilyRegistryError, match="already registered"):
        register_family(worlds.TokenWorkshop())
    with pytest.raises(
        FamilyRegistryError,
        match=r"did you mean 'schedule'.*available: dataflow, schedule, token_workshop",
    ):
        get_family("schedul")
    with pytest.raises(
        FamilyRegistryError, match="available: dataflow, schedule, token_workshop"
    ):
        get_family("zzz")


# ---- the published JSON Schema agrees with the code validator ----------------

# Cases a JSON Schema cannot express (cross references and dynamic bounds); the code alone rejects them.
_CODE_ONLY = {
    "tokens.coal",
    "initial.ore_a",
    "initial.gold",
    "recipes[0].inputs.gold",
    "recipes[1].name",
    "recipes[3].params[0].type",
    "goal",
    "machines.lathe1.kind",
    "tasks",
    "tasks[1].name",
    "tasks[0].duration",
    "goal.scheduled[0]",
}


def test_schema_file_is_deterministic_json():
    text = worlds.SCHEMA_PATH.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["properties"]["schema_version"] == {"const": worlds.SCHEMA_VERSION}
    assert sorted(doc["properties"]["family"]["enum"]) == list(family_names())


def test_schema_file_and_code_validator_agree():
    jsonschema = pytest.importorskip(
        "jsonschema",
        reason="the jsonschema package is not installed, so the published schema cannot be executed",
    )
    schema = json.loads(worlds.SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for stem in ("tw_001", "sch_001"):
        assert not list(validator.iter_errors(raw(stem))), stem
    checked = 0
    for stem, path, value, field, _ in BAD:
        d = raw(stem)
        _set(d, path, value)
        with pytest.raises(WorldFileError):
            world_from_mapping(d)
        if field in _CODE_ONLY:
            continue
        assert list(validator.iter_errors(d)), (
            f"schema accepts {stem} with {path}={value!r}"
        )
        checked += 1
    assert checked >= 15


# ---- fuzzing the loader: any mapping loads or raises WorldFileError ---------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 12)
    | st.sampled_from(["", "ore_a", "lathe", "x y", "cut", "start"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["a", "name", "kind", "cost"]), inner, max_size=3
        )
    ),
    max_leaves=6,
)


def _paths(d, prefix=()):
    items = (
        d.items()
        if isinstance(d, dict)
        else enumerate(d)
        if isinstance(d, list)
        else ()
    )
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["sch_001", "tw_001"]), st.data())
def test_loader_raises_only_world_file_errors(stem, data):
    d = raw(stem)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = sorted(_paths(d), key=repr)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        holder = d
        for k in path[:-1]:
            holder = holder[k]
        if data.draw(st.booleans()) and isinstance(holder, dict):
            del holder[path[-1]]
        else:
            holder[path[-1]] = data.draw(_json)
    try:
        w = world_from_mapping(d)
    except WorldFileError as exc:
        assert exc.source == "<mapping>" and exc.problem
    else:
        assert w.id
