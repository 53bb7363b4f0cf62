"""Hashes of frozen material (preregistrations and fixture sets), for snapshot drift tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from ._canonical import sha256_file, sha256_json


def prereg_hashes(root: Path) -> dict[str, str]:
    """sha256 of every ``benchmarks/<protocol>/prereg.toml`` under ``root``, keyed by relative path."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.glob("benchmarks/*/prereg.toml"))}


def fixture_hashes(builders: Mapping[str, Callable[[], Any]]) -> dict[str, str]:
    """Canonical-JSON sha256 of every fixture set, built afresh by its registered builder."""
    return {name: sha256_json(builders[name]()) for name in sorted(builders)}
