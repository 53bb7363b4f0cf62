"""``manifest.json``: the size and sha256 of every file a run wrote, written last, at the session end.

The manifest lists every regular file under the run directory (sub-folders
included), by its path relative to the run directory, except the manifest
itself and the run's lock files (``.<name>.lock``, empty, left by the
inter-process locks; they hold no result).  It is written atomically after
``report.json``, so it covers the report too.  A symbolic link or any other
non-regular entry in the run directory is refused (:class:`ManifestError`,
one line): a manifest never vouches for what a link points to.
``preregbench verify`` (:mod:`benchmarks.core.verify`) checks a run
directory against it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from .errors import PreregbenchError
from ._canonical import atomic_write_json

MANIFEST_FILE = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1


class ManifestError(PreregbenchError, ValueError):
    """The run directory holds something a manifest cannot vouch for; the message is one line."""


@dataclass(frozen=True)
class ManifestEntry:
    path: str  # relative to the run directory, '/'-separated
    size: int  # bytes
    sha256: str  # hex digest of the file's bytes


def is_lock_file(name: str) -> bool:
    """A lock file of the run (``.measure.lock``, ``.summary.json.lock``): not a result."""
    return name.startswith(".") and name.endswith(".lock")


def file_sha256(path: Path) -> tuple[int, str]:
    """Size and sha256 of a regular file, read without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ManifestError(f"{path}: is not a regular file")
        digest, size = hashlib.sha256(), 0
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def run_files(run_dir: Path) -> Iterator[Path]:
    """Every file of the run under ``run_dir``, sorted, the manifest and lock files left out.

    A symbolic link, a FIFO, a socket or a device anywhere below is :class:`ManifestError`.
    """
    for root, dirs, files in os.walk(run_dir, followlinks=False):
        folder = Path(root)
        for name in sorted(dirs):
            if (folder / name).is_symlink():
                raise ManifestError(f"{folder / name}: is a symbolic link; a run directory holds only real files "
                                    "and folders (replace the link by what it points to, or remove it)")
        dirs.sort()
        for name in sorted(files):
            path = folder / name
            relative = path.relative_to(run_dir).as_posix()
            if relative == MANIFEST_FILE or is_lock_file(name):
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise ManifestError(f"{path}: is a symbolic link; a run directory holds only real files "
                                    "(replace the link by the file itself, or remove it)")
            if not stat.S_ISREG(mode):
                raise ManifestError(f"{path}: is not a regular file (a FIFO, socket or device); remove it")
            yield path


def build_manifest(run_dir: Path) -> dict:
    """The manifest of ``run_dir`` as it is now (nothing written), its files sorted by relative path."""
    run_dir = Path(run_dir)
    entries = []
    for path in sorted(run_files(run_dir), key=lambda p: p.relative_to(run_dir).as_posix()):
        size, digest = file_sha256(path)
        entries.append(ManifestEntry(path.relative_to(run_dir).as_posix(), size, digest))
    return {"schema_version": MANIFEST_SCHEMA_VERSION, "run_id": run_dir.name, "protocol": run_dir.parent.name,
            "files": [asdict(e) for e in entries]}


def write_manifest(run_dir: Path) -> Path:
    """Write ``run_dir/manifest.json`` atomically (a link there is replaced, never written through)."""
    return atomic_write_json(Path(run_dir) / MANIFEST_FILE, build_manifest(run_dir))


__all__ = ["MANIFEST_FILE", "ManifestEntry", "ManifestError", "build_manifest", "file_sha256", "is_lock_file",
           "run_files", "write_manifest"]
