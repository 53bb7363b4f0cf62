"""Loading and validating world files (TOML) and world mappings."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import FamilyRegistryError, WorldFileError
from ._model import Budget, Example, Reason, World
from ._registry import get_family
from ._validate import V

__all__ = ["SCHEMA_VERSION", "load_world", "world_from_mapping"]

#: The world-file schema version this code reads.
SCHEMA_VERSION = 1

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", re.ASCII)
_COMMON = {"schema_version", "id", "family", "title", "budget", "examples"}
_EXPECT = ("VALID", "INVALID", "MALFORMED")
_REASONS = tuple(r.value for r in Reason)


def load_world(path: str | Path) -> World:
    """Load and validate the world file at ``path`` (TOML).

    Raises ``WorldFileError`` naming the file, the dotted field and the problem
    when the file cannot be read, is not TOML, or breaks the schema.
    """
    p = Path(path)
    src = str(p)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise WorldFileError(
            src, "", f"cannot read the file ({exc.strerror or exc}); check the path"
        ) from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise WorldFileError(
            src, "", "is not UTF-8 text; save the world file as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise WorldFileError(
            src, "", f"is not valid TOML ({exc}); fix the syntax"
        ) from None
    return world_from_mapping(raw, source=src)


def world_from_mapping(raw: Mapping[str, Any], source: str = "<mapping>") -> World:
    """Validate a parsed world mapping (the TOML document as a dict) and build the World."""

    def err(field: str, problem: str) -> None:
        raise WorldFileError(source, field, problem)

    v = V(err)
    v.typed(raw, dict, "")
    sv = v.table(raw, "schema_version", "schema_version")
    v.typed(sv, int, "schema_version")
    if sv != SCHEMA_VERSION:
        err(
            "schema_version",
            f"is {sv}, this code reads schema_version {SCHEMA_VERSION}; migrate the file",
        )
    wid = v.typed(v.table(raw, "id", "id"), str, "id")
    if not _ID.match(wid):
        err(
            "id",
            f"{wid!r} is not a world id; use letters, digits, '_', '.', '-' (e.g. TW-001)",
        )
    fam_name = v.typed(v.table(raw, "family", "family"), str, "family")
    try:
        family = get_family(fam_name)
    except FamilyRegistryError as exc:
        err("family", str(exc))
    title = v.typed(v.table(raw, "title", "title"), str, "title")
    v.only(raw, _COMMON | set(family.fields), "")
    budget = v.typed(v.table(raw, "budget", "budget"), dict, "budget")
    v.only(budget, {"max_steps", "max_cost"} | set(family.budget_fields), "budget")
    max_steps = v.int_range(
        v.table(budget, "max_steps", "budget.max_steps"), "budget.max_steps", 1, 1000
    )
    max_cost = v.int_range(
        v.table(budget, "max_cost", "budget.max_cost"), "budget.max_cost", 0, 10**9
    )
    family.validate(raw, err)
    entities, prims, spec, s0, extra, etypes = family.build(raw)
    examples = _examples(raw.get("examples", []), v, err)
    world = World(
        id=wid,
        family=fam_name,
        title=title,
        entity_types=etypes,
        entities=entities,
        primitives=prims,
        budget=Budget(max_steps, max_cost, tuple(sorted(extra))),
        spec=spec,
        initial_state=s0,
        examples=examples,
        source=source,
    )
    bad = family.limits(world, s0) or family.constraints(world, s0, False)
    if bad is not None:
        err(
            "",
            f"the initial state breaks the world's own rules ({bad.message}); fix the initial state or the rule",
        )
    if family.goal(world, s0):
        err(
            "goal",
            "already holds in the initial state; a world must need at least one step",
        )
    return world


def _examples(items: Any, v: V, err) -> tuple[Example, ...]:
    v.typed(items, list, "examples")
    out = []
    names: set[str] = set()
    for i, e in enumerate(items):
        p = f"examples[{i}]"
        v.typed(e, dict, p)
        v.only(e, {"name", "text", "expect", "reason", "step"}, p)
        nm = v.name(v.table(e, "name", f"{p}.name"), f"{p}.name")
        if nm in names:
            err(f"{p}.name", f"example {nm!r} is declared twice; names must be unique")
        names.add(nm)
        text = v.typed(v.table(e, "text", f"{p}.text"), str, f"{p}.text")
        expect = v.typed(v.table(e, "expect", f"{p}.expect"), str, f"{p}.expect")
        if expect not in _EXPECT:
            err(
                f"{p}.expect",
                f"{expect!r} is not a status; use one of {', '.join(_EXPECT)}",
            )
        reason = e.get("reason")
        if expect == "VALID":
            if reason is not None or "step" in e:
                err(p, "a VALID example takes no reason or step; remove them")
        else:
            v.typed(v.table(e, "reason", f"{p}.reason"), str, f"{p}.reason")
            if reason not in _REASONS:
                err(
                    f"{p}.reason",
                    f"{reason!r} is not a reason; use one of {', '.join(_REASONS)}",
                )
            if (expect == "MALFORMED") != (reason == Reason.SCHEMA.value):
                err(
                    f"{p}.reason",
                    "MALFORMED goes with reason 'schema' and only with it",
                )
        step = e.get("step")
        if step is not None:
            v.int_range(step, f"{p}.step", 0)
        out.append(Example(nm, text, expect, reason, step))
    return tuple(out)
