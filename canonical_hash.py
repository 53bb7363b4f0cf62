"""Canonical JSON and sha256: the one spelling the suite's hashes are computed with.

Canonical JSON is sorted keys, compact separators (``,`` and ``:``), UTF-8
text and no NaN or infinity (they have no JSON spelling, so two readers would
disagree).  Dataclasses, tuples, paths and dates are turned into JSON values
first; sets are refused, since they have no stable order.

``ensure_ascii=True`` writes every non-ASCII character as a ``\\uXXXX`` escape
instead.  The hashes defined over that spelling keep it: the RES fixture hash
(the original runner's formula), a world's latent structure hash, a pair
manifest's digest and a check result's digest.  Everything else uses the
UTF-8 spelling.

This module imports only the standard library, so every package of the suite
(``benchmarks.core``, ``fixtures``, ``worlds``) can use it without importing
another.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

__all__ = [
    "canonical_json",
    "plain",
    "sha256_bytes",
    "sha256_file",
    "sha256_files",
    "sha256_json",
    "sha256_text",
]


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as dicts, tuples as lists, paths as POSIX text, dates in ISO form."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        raise TypeError("sets have no stable order; convert to a sorted list before serializing")
    if isinstance(value, Path):
        return value.as_posix()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} has no canonical JSON form; record it as null with a reason")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def canonical_json(value: Any, *, ensure_ascii: bool = False) -> str:
    """Compact, sorted-key JSON text of ``value``; ``ensure_ascii`` escapes non-ASCII characters."""
    return json.dumps(plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii, allow_nan=False)


def sha256_bytes(data: bytes) -> str:
    """sha256 hex digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """sha256 hex digest of the UTF-8 bytes of ``text``.

    A text holding a lone surrogate (a model may return one) has no UTF-8
    form; it is hashed over its ``surrogatepass`` bytes, where each lone
    surrogate is the three bytes of its code point.  Every other text hashes
    exactly as before.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    return sha256_bytes(data)


def sha256_json(value: Any, *, ensure_ascii: bool = False) -> str:
    """sha256 hex digest of the canonical JSON of ``value`` (``ensure_ascii`` as in :func:`canonical_json`).

    A value whose UTF-8 spelling cannot be encoded (a string with a lone
    surrogate) is hashed over its ``ensure_ascii`` spelling, which escapes the
    surrogate as ``\\uXXXX``; values that encode hash as before.
    """
    text = canonical_json(value, ensure_ascii=ensure_ascii)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = canonical_json(value, ensure_ascii=True).encode("ascii")
    return sha256_bytes(data)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """sha256 hex digest of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_files(paths: Iterable[str | os.PathLike[str]], root: Path) -> str:
    """One digest over several files: each file's path relative to ``root`` and its own digest.

    Paths are sorted, so the digest does not depend on directory listing order.
    """
    entries = sorted((Path(p).resolve().relative_to(Path(root).resolve()).as_posix(), sha256_file(p)) for p in paths)
    return sha256_json(entries)
