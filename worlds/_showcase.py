"""The showcase F/C pairs: every pair spec under ``worlds/data/pairs``, built and manifested."""

from __future__ import annotations

import functools
from pathlib import Path

from ._construct import Pair, build_pair, load_pair_spec
from ._manifest import build_manifest

__all__ = ["PAIRS_DIR", "build_pair_from_file", "build_showcase_pairs", "pair_spec_paths"]

#: Folder holding the showcase pair specs.
PAIRS_DIR = Path(__file__).parent / "data" / "pairs"


def pair_spec_paths() -> tuple[Path, ...]:
    """The showcase pair spec files, sorted."""
    return tuple(sorted(PAIRS_DIR.glob("*.toml")))


def build_pair_from_file(path: str | Path, token_counts: bool = True) -> Pair:
    """Build one pair from its spec file, with its manifest filled in."""
    pair, facts = build_pair(load_pair_spec(path))
    pair.manifest.update(build_manifest(pair, facts, token_counts=token_counts))
    return pair


@functools.lru_cache(maxsize=2)
def _showcase(token_counts: bool) -> tuple[Pair, ...]:
    return tuple(build_pair_from_file(p, token_counts) for p in pair_spec_paths())


def build_showcase_pairs(token_counts: bool = True) -> tuple[Pair, ...]:
    """Every showcase pair, in spec-file order; deterministic and cached per process.

    ``token_counts=False`` skips loading the tokenizers (the manifest then says
    the counts were not requested). ``build_showcase_pairs.cache_clear()``
    forgets the cached pairs.
    """
    return _showcase(bool(token_counts))


build_showcase_pairs.cache_clear = _showcase.cache_clear  # type: ignore[attr-defined]
