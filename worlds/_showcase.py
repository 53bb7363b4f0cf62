"""The showcase F/C pairs: every pair spec under ``worlds/data/pairs``, built and manifested."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from ._construct import build_pair
from ._manifest import TokenCounts, build_manifest
from ._pair_spec import load_pair_spec
from ._pair_types import Pair

__all__ = ["PAIRS_DIR", "build_pair_from_file", "build_showcase_pairs", "pair_spec_paths"]

#: Folder holding the showcase pair specs.
PAIRS_DIR = Path(__file__).parent / "data" / "pairs"


def pair_spec_paths() -> tuple[Path, ...]:
    """The showcase pair spec files, sorted."""
    return tuple(sorted(PAIRS_DIR.glob("*.toml")))


def _manifested(pair: Pair, facts: dict, token_counts: TokenCounts) -> Pair:
    return dataclasses.replace(pair, manifest=build_manifest(pair, facts, token_counts=token_counts))


def build_pair_from_file(path: str | Path, token_counts: TokenCounts = None) -> Pair:
    """Build one pair from its spec file, with its manifest filled in (``token_counts`` as in ``build_manifest``)."""
    return _manifested(*build_pair(load_pair_spec(path)), token_counts)


@functools.cache
def _constructed() -> tuple[tuple[Pair, dict], ...]:
    return tuple(build_pair(load_pair_spec(p)) for p in pair_spec_paths())


@functools.cache
def _without_counts() -> tuple[Pair, ...]:
    return tuple(_manifested(pair, facts, None) for pair, facts in _constructed())


def build_showcase_pairs(token_counts: TokenCounts = None) -> tuple[Pair, ...]:
    """Every showcase pair, in spec-file order; deterministic.

    ``token_counts``: None or False records no token counts (the manifest says
    they were not requested); a mapping tokenizer name -> (count, revision),
    such as ``models.bundled_token_counters()``, fills them in.  Construction
    is cached per process, and so are the pairs without counts;
    ``build_showcase_pairs.cache_clear()`` forgets both.
    """
    if token_counts is None or token_counts is False:
        return _without_counts()
    return tuple(_manifested(pair, facts, token_counts) for pair, facts in _constructed())


def _cache_clear() -> None:
    _without_counts.cache_clear()
    _constructed.cache_clear()


build_showcase_pairs.cache_clear = _cache_clear  # type: ignore[attr-defined]
