"""Canonical JSON, sha256 helpers and atomic file writes.

Every hash in the suite is sha256 over canonical JSON: sorted keys, compact
separators, UTF-8, no NaN or infinity (they have no JSON spelling and would
make two readers disagree).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def _plain(value: Any) -> Any:
    """Turn dataclasses, tuples and paths into JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        raise TypeError("sets have no stable order; convert to a sorted list before serializing")
    if isinstance(value, Path):
        return value.as_posix()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} has no canonical JSON form; record it as null with a reason")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def canonical_json(value: Any) -> str:
    """Compact, sorted-key JSON text of ``value`` (dataclasses included)."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """sha256 hex digest of the canonical JSON of ``value``."""
    return sha256_bytes(canonical_json(value).encode("utf-8"))


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_files(paths: Iterable[Path], root: Path) -> str:
    """One digest over several files: each file's path relative to ``root`` and its own digest.

    Paths are sorted so that the digest does not depend on directory listing order.
    """
    entries = sorted((Path(p).resolve().relative_to(root.resolve()).as_posix(), sha256_file(p)) for p in paths)
    return sha256_json(entries)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader sees the old file or the whole new one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)
    return target


def atomic_write_json(path: str | os.PathLike[str], value: Any, *, indent: int | None = 2) -> Path:
    """Atomically write deterministic (sorted-key) JSON."""
    text = json.dumps(_plain(value), sort_keys=True, indent=indent, ensure_ascii=False, allow_nan=False)
    return atomic_write_text(path, text + "\n")
