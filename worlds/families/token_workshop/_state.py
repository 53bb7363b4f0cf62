"""The records of family ``token_workshop``: the inventory state, a recipe, the spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..._model import Param

__all__ = ["Recipe", "TokenSpec", "TokenState"]


@dataclass(frozen=True, order=True)
class TokenState:
    """Inventory: sorted (token, count) pairs, counts > 0 only (canonical, hashable)."""

    inventory: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> TokenState:
        return cls(tuple(sorted((k, v) for k, v in counts.items() if v > 0)))

    def count(self, token: str) -> int:
        for k, v in self.inventory:
            if k == token:
                return v
        return 0


@dataclass(frozen=True)
class Recipe:
    """An irreversible recipe.

    name: primitive name.  params: typed parameters (token types).
    inputs / catalysts / outputs: sorted (ref, count) pairs; a ref in inputs and
    catalysts is a token name or a parameter name, outputs name tokens.
    cost: cost added per execution.
    """

    name: str
    params: tuple[Param, ...]
    inputs: tuple[tuple[str, int], ...]
    catalysts: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    cost: int


@dataclass(frozen=True)
class TokenSpec:
    """token_workshop semantics: recipes, goal and constraints.

    goal: sorted (token, at-least count) pairs, all required in the final inventory.
    constraints: sorted tuple of (kind, scope, tokens, limit): ``at_most`` (count of
        tokens[0] <= limit) or ``never_together`` (not all of tokens present), with
        scope ``every_state`` (s0 and every committed state) or ``final``.
    inventory_cap: most units of any single token in any state (budget).
    """

    recipes: tuple[Recipe, ...]
    goal: tuple[tuple[str, int], ...]
    constraints: tuple[tuple[str, str, tuple[str, ...], int], ...]
    inventory_cap: int
