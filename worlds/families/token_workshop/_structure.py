"""Pair hooks of family ``token_workshop``: production edges, independence, relabelling, constructed examples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..._errors import WorldsError
from ..._examples import outcome
from ..._grammar import Step
from ..._model import World
from ..._structure import one_step
from ._state import TokenState

__all__ = [
    "dependency",
    "isolated_examples",
    "production_edges",
    "relabel",
    "sort_declarations",
    "state_space_bound",
]


def sort_declarations(raw: dict) -> None:
    """Recipes by name and token types sorted (their order carries no meaning)."""
    if "recipes" in raw:
        raw["recipes"] = sorted(raw["recipes"], key=lambda x: x["name"])
    if "token_types" in raw:
        raw["token_types"] = sorted(raw["token_types"])


def relabel(m: dict, ent: Mapping[str, str], prim: Mapping[str, str], ty: Mapping[str, str]) -> None:
    """Tokens renamed by ``ent``, recipes by ``prim``, token types by ``ty`` (recipe parameter names kept)."""
    m["token_types"] = [ty.get(t, t) for t in m["token_types"]]
    m["tokens"] = {ent[k]: ty.get(v, v) for k, v in m["tokens"].items()}
    m["initial"] = {ent[k]: v for k, v in m["initial"].items()}
    for r in m["recipes"]:
        r["name"] = prim[r["name"]]
        for prm in r.get("params", []):
            prm["type"] = ty.get(prm["type"], prm["type"])
        for part in ("inputs", "outputs"):
            if part in r:
                r[part] = {ent.get(k, k): v for k, v in r[part].items()}
        if "catalysts" in r:
            r["catalysts"] = [ent.get(c, c) for c in r["catalysts"]]
    m["goal"]["require"] = {ent[k]: v for k, v in m["goal"]["require"].items()}
    for c in m.get("constraints", []):
        c["tokens"] = [ent[t] for t in c["tokens"]]


def production_edges(world: World, solution: Sequence) -> frozenset[tuple[str, str, str]]:
    """(producer recipe, "input" | "catalyst", consumer recipe) whenever a step consumes or holds as catalyst a
    token that an earlier step of the solution produced."""
    recipes = {r.name: r for r in world.spec.recipes}
    producers: dict[str, set[str]] = {}
    out: set[tuple[str, str, str]] = set()
    for st in (one_step(s) for s in solution):
        r = recipes[st.name]
        bind = {p.name: a for p, a in zip(r.params, st.args)}
        for role, refs in (("input", r.inputs), ("catalyst", r.catalysts)):
            for ref, _ in refs:
                for prod in producers.get(bind.get(ref, ref), ()):
                    out.add((prod, role, r.name))
        for tok, _ in r.outputs:
            producers.setdefault(tok, set()).add(r.name)
    return frozenset(out)


def _footprint(world: World, st: Step, group: dict[str, str]):
    recipe = next((r for r in world.spec.recipes if r.name == st.name), None)
    if recipe is None:
        raise WorldsError(f"{st.name!r} is not a recipe of world {world.id}")
    bind = {p.name: a for p, a in zip(recipe.params, st.args)}

    def res(ref: str) -> str:
        tok = bind.get(ref, ref)
        return group.get(tok, tok)

    ins = {res(r) for r, _ in recipe.inputs}
    reads = ins | {res(r) for r, _ in recipe.catalysts}
    writes = ins | {res(t) for t, _ in recipe.outputs}
    return frozenset(reads), frozenset(writes)


def _never_together_groups(world: World) -> dict[str, str]:
    """Token -> representative of its never_together group (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for kind, _scope, toks, _limit in world.spec.constraints:
        if kind == "never_together":
            roots = sorted({find(t) for t in toks})
            for r in roots[1:]:
                parent[r] = roots[0]
    return {t: find(t) for t in parent}


def dependency(world: World, steps: tuple[Step, ...]) -> list[set[int]]:
    """A step *reads* its input and catalyst tokens and *writes* its input and output tokens; tokens named
    together in a ``never_together`` rule count as one resource (otherwise the intermediate state of the
    swapped order could hold all of them at once). Two steps are dependent when one writes a resource the
    other reads or writes."""
    n = len(steps)
    deps: list[set[int]] = [set() for _ in range(n)]
    group = _never_together_groups(world)
    fp = [_footprint(world, s, group) for s in steps]
    for j in range(n):
        rj, wj = fp[j]
        for i in range(j):
            ri, wi = fp[i]
            if wi & (rj | wj) or ri & wj:
                deps[j].add(i)
    return deps


def state_space_bound(world: World) -> int:
    """(inventory cap + 1) to the power of the number of tokens."""
    return (world.spec.inventory_cap + 1) ** len(world.entities)


def isolated_examples(fam, world: World, mine: Sequence[Step]) -> tuple[Any, Any]:
    """Valid and invalid exposures of a recipe on constructed minimal inventories.

    The valid state holds exactly what the step consumes plus one unit of each
    catalyst; the invalid state is the same with one unit of its first catalyst
    (or, without catalysts, of its first input) removed. Such states belong to
    no trajectory of the target, so the examples cannot be chained into a
    target solution. Returns (valid, invalid), each (state, rendered step) or None.
    """
    for st in mine:
        r = next(x for x in world.spec.recipes if x.name == st.name)
        bind = {p.name: a for p, a in zip(r.params, st.args)}
        need: dict[str, int] = {}
        for ref, n in r.inputs:
            need[bind.get(ref, ref)] = need.get(bind.get(ref, ref), 0) + n
        for ref, _ in r.catalysts:
            need[bind.get(ref, ref)] = need.get(bind.get(ref, ref), 0) + 1
        state = TokenState.of(need)
        if fam.limits(world, state) or fam.constraints(world, state, False) or outcome(fam, world, state, st):
            continue
        short = ([bind.get(ref, ref) for ref, _ in r.catalysts] or [bind.get(ref, ref) for ref, _ in r.inputs])[:1]
        invalid = None
        if short:
            less = dict(need)
            less[short[0]] -= 1
            bad_state = TokenState.of(less)
            if outcome(fam, world, bad_state, st) is not None and not fam.constraints(world, bad_state, False):
                invalid = (bad_state, st.render())
        return (state, st.render()), invalid
    return None, None
