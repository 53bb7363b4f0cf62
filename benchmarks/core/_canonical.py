"""Canonical JSON and sha256 (from the suite's leaf module ``canonical_hash``) and atomic file writes.

Every hash in the suite is sha256 over canonical JSON: sorted keys, compact
separators, UTF-8, no NaN or infinity.  The helpers live in
``canonical_hash`` so that ``fixtures`` and ``worlds`` share them without
importing this package; they are re-exported here for core and the protocols.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from canonical_hash import canonical_json, sha256_bytes, sha256_file, sha256_files, sha256_json, sha256_text
from canonical_hash import plain as _plain

__all__ = [
    "atomic_write_json",
    "atomic_write_text",
    "canonical_json",
    "sha256_bytes",
    "sha256_file",
    "sha256_files",
    "sha256_json",
    "sha256_text",
]


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
