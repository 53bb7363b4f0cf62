"""Family ``token_workshop``: typed tokens in an inventory and irreversible recipes (see docs/worlds-and-fixtures.md, section The three families)."""

from ._family import TokenWorkshop
from ._generate import TierParams, token_tier_params
from ._state import Recipe, TokenSpec, TokenState

__all__ = ["Recipe", "TierParams", "TokenSpec", "TokenState", "TokenWorkshop", "token_tier_params"]
