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


@dataclass(frozen=True)
class ManifestDifference:
    """One way a run directory differs from its manifest."""

    path: str  # the file's path relative to the run directory (as the manifest lists it)
    #: outside (listed outside the run directory), missing, unreadable, size, sha256, unlisted (present, not listed)
    kind: str
    detail: str  # one line saying how


def manifest_files(manifest: object) -> list[dict] | None:
    """The manifest's ``files`` entries (path, size, sha256), or None when ``manifest`` is not a manifest."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not all(isinstance(e, dict) and isinstance(e.get("path"), str)
                                              and isinstance(e.get("size"), int) and isinstance(e.get("sha256"), str)
                                              for e in files):
        return None
    return files


def manifest_differences(run_dir: Path, files: list[dict]) -> list[ManifestDifference]:
    """Every difference between ``run_dir`` now and the manifest entries ``files`` (:func:`manifest_files`):
    listed files first, in the manifest's order, then files it does not list.  :class:`ManifestError` or
    ``OSError`` when the directory itself cannot be walked (a link or a FIFO in it)."""
    run_dir = Path(run_dir)
    found = []
    listed = {e["path"]: e for e in files}
    for path, entry in listed.items():
        target = run_dir / path
        if Path(path).is_absolute() or ".." in Path(path).parts:
            found.append(ManifestDifference(path, "outside", f"lists {path!r}, outside the run directory"))
            continue
        if not os.path.lexists(target):
            found.append(ManifestDifference(path, "missing", f"listed in {MANIFEST_FILE} but missing"))
            continue
        try:
            size, digest = file_sha256(target)
        except (OSError, ManifestError) as exc:
            found.append(ManifestDifference(path, "unreadable", f"cannot be read as a regular file ({exc})"))
            continue
        if size != entry["size"]:
            found.append(ManifestDifference(path, "size", f"{size} bytes, {MANIFEST_FILE} says {entry['size']}"))
        elif digest != entry["sha256"]:
            found.append(ManifestDifference(path, "sha256", f"sha256 {digest[:12]}, {MANIFEST_FILE} says "
                                                            f"{entry['sha256'][:12]}"))
    for present in run_files(run_dir):
        path = present.relative_to(run_dir).as_posix()
        if path not in listed:
            found.append(ManifestDifference(path, "unlisted", f"in the run directory but not in {MANIFEST_FILE}"))
    return found


def write_manifest(run_dir: Path) -> Path:
    """Write ``run_dir/manifest.json`` atomically (a link there is replaced, never written through)."""
    return atomic_write_json(Path(run_dir) / MANIFEST_FILE, build_manifest(run_dir))


__all__ = ["MANIFEST_FILE", "ManifestDifference", "ManifestEntry", "ManifestError", "build_manifest", "file_sha256",
           "is_lock_file", "manifest_differences", "manifest_files", "run_files", "write_manifest"]
