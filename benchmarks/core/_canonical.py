"""Canonical JSON and sha256 (from the suite's leaf module ``canonical_hash``) and atomic file writes.

Every hash in the suite is sha256 over canonical JSON: sorted keys, compact
separators, UTF-8, no NaN or infinity.  The helpers live in
``canonical_hash`` so that ``fixtures`` and ``worlds`` share them without
importing this package; they are re-exported here for core and the protocols.

Files core writes:

* JSON is UTF-8 text.  A value holding a string that UTF-8 cannot encode (a
  lone surrogate such as ``"\\ud800"``, which a model's reply may contain) is
  written with every non-ASCII character as a ``\\uXXXX`` escape instead
  (:func:`json_text`): valid JSON that every reader decodes back to the same
  strings, so nothing is lost or replaced.
* An atomic write goes to a temporary file beside the target, is fsynced and
  renamed over the target: a reader sees the old file or the whole new one,
  and a symbolic link at the target is replaced, never written through.
* A write that the system refuses (disk full, file-size limit, permission)
  raises :class:`FileWriteError`, whose message is one line naming the file
  and the errno; the target is left as it was.
"""

from __future__ import annotations

import errno as _errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from canonical_hash import canonical_json, sha256_bytes, sha256_file, sha256_files, sha256_json, sha256_text
from canonical_hash import plain as _plain

from . import bounded
from .errors import PreregbenchError

__all__ = [
    "FileOverLimitError",
    "FileReadError",
    "FileWriteError",
    "atomic_write_json",
    "atomic_write_text",
    "canonical_json",
    "errno_name",
    "json_text",
    "parse_json_bytes",
    "read_json_file",
    "sha256_bytes",
    "sha256_file",
    "sha256_files",
    "sha256_json",
    "sha256_text",
]


def errno_name(code: int | None) -> str:
    """``ENOSPC`` for 28, and so on (the number itself when the system has no name for it)."""
    return _errno.errorcode.get(code, f"errno {code}") if code is not None else "unknown errno"


class FileWriteError(PreregbenchError, OSError):
    """A file could not be written; ``str()`` is one line naming the file, the errno and what became of the file."""

    def __init__(self, path: str | os.PathLike[str], cause: OSError, outcome: str):
        code = cause.errno
        reason = cause.strerror or str(cause)
        self.line = f"{path}: write failed with {errno_name(code)} ({reason}); {outcome}"
        super().__init__(code, reason)
        self.filename = str(path)
        self.cause = cause

    def __str__(self) -> str:
        return self.line

    def __reduce__(self) -> Any:  # pickles (xdist, multiprocessing) as a plain OSError with the same line
        return (OSError, (self.errno, self.line))


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` as UTF-8-encodable text: non-ASCII characters stay as they are unless a
    string holds a lone surrogate, in which case every non-ASCII character is written as a ``\\uXXXX`` escape."""
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, **options)
    return text


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one.

    A symbolic link at ``path`` is replaced by the new file (its target is
    never touched).  A refused write is :class:`FileWriteError`; the old
    file is then left as it was and no temporary file remains.
    """
    target = Path(path)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        tmp = None
        _fsync_dir(target.parent)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise FileWriteError(target, exc, "the file was left as it was") from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write ``text`` as UTF-8 (see :func:`atomic_write_bytes`).

    Text that UTF-8 cannot encode (a lone surrogate) is refused with a
    ``ValueError`` naming the file before anything is written; JSON goes
    through :func:`atomic_write_json`, which escapes it instead.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{path}: character {exc.start} ({text[exc.start]!r}) cannot be encoded as UTF-8; "
                         "escape it before writing (JSON files are written with atomic_write_json)") from None
    return atomic_write_bytes(path, data)


def atomic_write_json(path: str | os.PathLike[str], value: Any, *, indent: int | None = 2) -> Path:
    """Atomically write deterministic (sorted-key) JSON; any string round-trips (:func:`json_text`)."""
    text = json_text(_plain(value), sort_keys=True, indent=indent, allow_nan=False)
    return atomic_write_bytes(path, (text + "\n").encode("utf-8"))


class FileReadError(PreregbenchError, ValueError):
    """A file core reads is not what it should be (a link, not UTF-8, not JSON); the message is one line."""


class FileOverLimitError(FileReadError, bounded.OverLimitError):
    """A file core reads is over a reading limit (:mod:`benchmarks.core.bounded`)."""


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """The JSON value in ``path``: strict UTF-8, read without following a symbolic link.

    A link, bytes that are not UTF-8 and text that is not JSON are each a
    :class:`FileReadError` naming the file and the byte or the line and
    column; a missing file is ``FileNotFoundError`` as usual.
    """
    target = Path(path)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == _errno.ELOOP:
            raise FileReadError(f"{target}: is a symbolic link; the suite reads its files only as regular files "
                                "(replace the link by the file itself)") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise FileReadError(f"{target}: is not a regular file")
        try:
            bounded.check_file_size(handle.fileno(), str(target))
        except bounded.OverLimitError as exc:
            raise FileOverLimitError(str(exc)) from None
        data = handle.read()
    return parse_json_bytes(data, target)


def parse_json_bytes(data: bytes, where: str | os.PathLike[str]) -> Any:
    """``data`` decoded as strict UTF-8 and parsed as JSON; a problem is :class:`FileReadError` naming ``where``."""
    if len(data) > bounded.LIMITS.file_bytes:
        raise FileOverLimitError(f"{where}: {bounded.size_text(len(data))} is over the limit of "
                                 f"{bounded.size_text(bounded.LIMITS.file_bytes)} for a JSON file the suite reads whole")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileReadError(f"{where}: byte offset {exc.start} (line {line}, 0x{data[exc.start]:02x}) is not UTF-8 "
                            f"({exc.reason}); the file is damaged: restore it or remove it") from None
    try:
        return bounded.loads(text, str(where))
    except bounded.OverLimitError as exc:
        raise FileOverLimitError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise FileReadError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                            "the file is damaged: restore it or remove it") from None
