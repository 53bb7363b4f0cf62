"""Family ``token_workshop``: typed tokens in an inventory and irreversible recipes.

State: a canonical inventory, the sorted tuple of (token, count) with count > 0.
A recipe has typed parameters (each bound to a token of that type by the
step's arguments), inputs (consumed), catalysts (must be present, not
consumed), outputs (produced) and a cost.

This module holds the world file and the semantics; ``_state`` the state and
spec records, ``_structure`` the pair hooks (production edges, independence,
relabelling, examples), ``_text`` the handbook and prompt text, ``_generate``
the generator's drawers and tier parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import _reference
from ..._model import Failure, Param, Primitive, Reason, World
from ..._steps import StepFamily
from ..._validate import V
from . import _generate, _structure, _text
from ._state import Recipe, TokenSpec, TokenState

__all__ = ["TokenWorkshop"]


_SCOPES = ("every_state", "final")
_KINDS = ("at_most", "never_together")


class TokenWorkshop(StepFamily):
    """The ``token_workshop`` family (see the module docstring and docs/worlds-and-fixtures.md)."""

    name = "token_workshop"
    fields = ("token_types", "tokens", "initial", "recipes", "goal", "constraints")
    budget_fields = ("inventory_cap",)
    reference_sources = (Path(_reference.__file__).resolve(),)
    shuffled_tables = ("tokens", "initial")
    shuffled_lists = ("recipes", "constraints")
    state_lines = _text.STATE_LINES
    generator = _generate.GENERATOR

    # ---- schema ---------------------------------------------------------
    def validate(self, raw: Mapping[str, Any], err) -> None:
        v = V(err)
        cap = v.int_range(
            v.table(raw["budget"], "inventory_cap", "budget.inventory_cap"),
            "budget.inventory_cap",
            1,
            1000,
        )
        types = v.typed(v.table(raw, "token_types", "token_types"), list, "token_types")
        if not types:
            err("token_types", "must list at least one token type")
        for i, t in enumerate(types):
            v.name(t, f"token_types[{i}]")
        if len(set(types)) != len(types):
            err("token_types", "lists a type twice; list each type once")
        tokens = v.typed(v.table(raw, "tokens", "tokens"), dict, "tokens")
        if not tokens:
            err("tokens", "must declare at least one token")
        for k in sorted(tokens):
            v.name(k, f"tokens.{k}")
            v.typed(tokens[k], str, f"tokens.{k}")
            if tokens[k] not in types:
                err(
                    f"tokens.{k}",
                    f"type {tokens[k]!r} is not in token_types {sorted(types)}",
                )
        initial = v.typed(v.table(raw, "initial", "initial"), dict, "initial")
        for k in sorted(initial):
            if k not in tokens:
                err(
                    f"initial.{k}",
                    f"{k!r} is not a declared token; declare it under [tokens]",
                )
            v.int_range(initial[k], f"initial.{k}", 0, cap)
        recipes = v.typed(v.table(raw, "recipes", "recipes"), list, "recipes")
        if not recipes:
            err("recipes", "must declare at least one recipe")
        seen: set[str] = set()
        for i, r in enumerate(recipes):
            p = f"recipes[{i}]"
            v.typed(r, dict, p)
            v.only(r, {"name", "params", "inputs", "catalysts", "outputs", "cost"}, p)
            nm = v.name(v.table(r, "name", f"{p}.name"), f"{p}.name")
            if nm in seen:
                err(
                    f"{p}.name",
                    f"recipe {nm!r} is declared twice; recipe names must be unique",
                )
            seen.add(nm)
            if nm in tokens:
                err(
                    f"{p}.name",
                    f"{nm!r} is also a token name; primitives and entities need distinct names",
                )
            params = v.typed(r.get("params", []), list, f"{p}.params")
            pnames: set[str] = set()
            for j, prm in enumerate(params):
                q = f"{p}.params[{j}]"
                v.typed(prm, dict, q)
                v.only(prm, {"name", "type"}, q)
                pn = v.name(v.table(prm, "name", f"{q}.name"), f"{q}.name")
                if pn in pnames or pn in tokens:
                    err(
                        f"{q}.name",
                        f"{pn!r} repeats a parameter or token name; use a fresh name",
                    )
                pnames.add(pn)
                pt = v.typed(v.table(prm, "type", f"{q}.type"), str, f"{q}.type")
                if pt not in types:
                    err(
                        f"{q}.type",
                        f"type {pt!r} is not in token_types {sorted(types)}",
                    )
            for part, refs_ok in (("inputs", True), ("outputs", False)):
                if part not in r and part == "inputs":
                    continue
                tbl = v.typed(v.table(r, part, f"{p}.{part}"), dict, f"{p}.{part}")
                for k in sorted(tbl):
                    if not (k in tokens or (refs_ok and k in pnames)):
                        what = "a token or a parameter" if refs_ok else "a token"
                        err(f"{p}.{part}.{k}", f"{k!r} is not {what} of this world")
                    v.int_range(tbl[k], f"{p}.{part}.{k}", 1, cap)
            if not r.get("outputs"):
                err(f"{p}.outputs", "must produce at least one token")
            cats = v.typed(r.get("catalysts", []), list, f"{p}.catalysts")
            for j, c in enumerate(cats):
                v.typed(c, str, f"{p}.catalysts[{j}]")
                if c not in tokens and c not in pnames:
                    err(
                        f"{p}.catalysts[{j}]",
                        f"{c!r} is not a token or a parameter of this recipe",
                    )
            if len(set(cats)) != len(cats):
                err(f"{p}.catalysts", "names a catalyst twice; list each once")
            used = set(r.get("inputs", {})) | set(cats)
            for prm_name in sorted(pnames - used):
                err(
                    f"{p}.params",
                    f"parameter {prm_name!r} is used by no input or catalyst; remove it",
                )
            v.int_range(v.table(r, "cost", f"{p}.cost"), f"{p}.cost", 0, 10**6)
        goal = v.typed(v.table(raw, "goal", "goal"), dict, "goal")
        v.only(goal, {"require"}, "goal")
        req = v.typed(v.table(goal, "require", "goal.require"), dict, "goal.require")
        if not req:
            err("goal.require", "must require at least one token")
        for k in sorted(req):
            if k not in tokens:
                err(f"goal.require.{k}", f"{k!r} is not a declared token")
            v.int_range(req[k], f"goal.require.{k}", 1, cap)
        cons = v.typed(raw.get("constraints", []), list, "constraints")
        for i, c in enumerate(cons):
            p = f"constraints[{i}]"
            v.typed(c, dict, p)
            v.only(c, {"kind", "scope", "tokens", "limit"}, p)
            kind = v.choice(c, "kind", f"{p}.kind", _KINDS, "constraint kind")
            v.choice(c, "scope", f"{p}.scope", _SCOPES, "scope")
            toks = v.refs(c, "tokens", f"{p}.tokens", tokens, "token")
            if kind == "at_most":
                if len(toks) != 1:
                    err(f"{p}.tokens", "an at_most constraint names exactly one token")
                v.int_range(v.table(c, "limit", f"{p}.limit"), f"{p}.limit", 0, cap)
            elif kind == "never_together":
                if len(toks) < 2 or len(set(toks)) != len(toks):
                    err(
                        f"{p}.tokens",
                        "a never_together constraint names two or more distinct tokens",
                    )
                if "limit" in c:
                    err(
                        f"{p}.limit",
                        "a never_together constraint takes no limit; remove it",
                    )

    def build(self, raw: Mapping[str, Any]):
        tokens = raw["tokens"]
        recipes = []
        prims = []
        for r in raw["recipes"]:
            params = tuple(Param(p["name"], p["type"]) for p in r.get("params", []))
            cats = tuple(sorted((c, 1) for c in r.get("catalysts", [])))
            recipes.append(
                Recipe(
                    r["name"],
                    params,
                    tuple(sorted(r.get("inputs", {}).items())),
                    cats,
                    tuple(sorted(r["outputs"].items())),
                    r["cost"],
                )
            )
            prims.append(Primitive(r["name"], params))
        cons = tuple(
            sorted(
                (c["kind"], c["scope"], tuple(c["tokens"]), int(c.get("limit", 0)))
                for c in raw.get("constraints", [])
            )
        )
        spec = TokenSpec(
            tuple(sorted(recipes, key=lambda x: x.name)),
            tuple(sorted(raw["goal"]["require"].items())),
            cons,
            raw["budget"]["inventory_cap"],
        )
        entities = tuple(sorted(tokens.items()))
        return (
            entities,
            tuple(sorted(prims, key=lambda p: p.name)),
            spec,
            TokenState.of(raw["initial"]),
            (("inventory_cap", raw["budget"]["inventory_cap"]),),
            tuple(sorted(raw["token_types"])),
        )

    # ---- semantics ------------------------------------------------------
    def _recipe(self, world: World, name: str) -> Recipe:
        for r in world.spec.recipes:
            if r.name == name:
                return r
        raise KeyError(name)  # unreachable: the checker resolved the name

    def apply(self, world: World, state: TokenState, name: str, args: tuple):
        r = self._recipe(world, name)
        bind = {p.name: a for p, a in zip(r.params, args)}
        need: dict[str, int] = {}
        for ref, n in r.inputs:
            tok = bind.get(ref, ref)
            need[tok] = need.get(tok, 0) + n
        for ref, _ in r.catalysts:
            tok = bind.get(ref, ref)
            if state.count(tok) < need.get(tok, 0) + 1:
                return Failure(
                    Reason.INAPPLICABLE,
                    f"{name} needs catalyst {tok} present (have {state.count(tok)}, of which {need.get(tok, 0)} consumed)",
                )
        for tok in sorted(need):
            if state.count(tok) < need[tok]:
                return Failure(
                    Reason.INAPPLICABLE,
                    f"{name} consumes {need[tok]} {tok}, inventory has {state.count(tok)}",
                )
        counts = dict(state.inventory)
        for tok, n in need.items():
            counts[tok] = counts.get(tok, 0) - n
        for tok, n in r.outputs:
            counts[tok] = counts.get(tok, 0) + n
        return TokenState.of(counts), r.cost

    def limits(self, world: World, state: TokenState):
        cap = world.spec.inventory_cap
        for tok, n in state.inventory:
            if n > cap:
                return Failure(
                    Reason.OVER_BUDGET, f"inventory cap {cap} exceeded: {n} {tok}"
                )
        return None

    def constraints(self, world: World, state: TokenState, final: bool):
        for kind, scope, toks, limit in world.spec.constraints:
            if scope == "final" and not final:
                continue
            if kind == "at_most" and state.count(toks[0]) > limit:
                return Failure(
                    Reason.CONSTRAINT_VIOLATION,
                    f"at_most {limit} {toks[0]} ({scope}) violated: have {state.count(toks[0])}",
                )
            if kind == "never_together" and all(state.count(t) > 0 for t in toks):
                return Failure(
                    Reason.CONSTRAINT_VIOLATION,
                    f"never_together {', '.join(toks)} ({scope}) violated",
                )
        return None

    def goal(self, world: World, state: TokenState) -> bool:
        return all(state.count(t) >= n for t, n in world.spec.goal)

    def describe_state(self, state: TokenState):
        return {k: v for k, v in state.inventory}

    def state_from_described(self, world: World, described: Mapping[str, int]) -> TokenState:
        return TokenState.of(described)

    def reference_replay(self, raw: Mapping[str, Any], text: str):
        return _reference.replay(raw, text)

    def replay_state(self, state: TokenState) -> tuple:
        return tuple(state.inventory)

    def goal_progress(self, world: World, state: TokenState) -> int:
        return sum(min(state.count(token), need) for token, need in world.spec.goal)

    # ---- pairs, text and generation (the family's other modules) -----------------

    sort_declarations = staticmethod(_structure.sort_declarations)
    relabel = staticmethod(_structure.relabel)
    production_edges = staticmethod(_structure.production_edges)
    dependency = staticmethod(_structure.dependency)
    state_space_bound = staticmethod(_structure.state_space_bound)

    def state_map(self, state: TokenState, ent: Mapping[str, str]) -> TokenState:
        return TokenState.of({ent[k]: v for k, v in state.inventory})

    def type_labels(self, raw: Mapping[str, Any]) -> list[str]:
        return list(raw["token_types"])

    def reserved_labels(self, raw: Mapping[str, Any]) -> set[str]:
        return {p["name"] for r in raw.get("recipes", []) for p in r.get("params", [])}

    def isolated_examples(self, world: World, steps) -> tuple:
        return _structure.isolated_examples(self, world, steps)

    raw_of_world = staticmethod(_text.raw_of_world)
    handbook_lines = staticmethod(_text.handbook_lines)
    format_state = staticmethod(_text.format_state)
    situation_lines = staticmethod(_text.situation_lines)
    goal_words = staticmethod(_text.goal_words)
