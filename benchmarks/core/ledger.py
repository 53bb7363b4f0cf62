"""Append-only JSONL ledgers: one validated record per unit, one fsync per record.

A ledger line is the canonical JSON of a record dataclass plus its
``schema_version`` and, when the writer gives one, an ``identity`` object:
what produced the record (model, revision, device, fixture hashes, run
settings), so that a reader of the line alone can tell which run it belongs
to and a resume can refuse records of another run.  Records are never
rewritten.  A run killed at any point
leaves a prefix of whole lines and at most one torn last line (bytes with no
closing newline).  Reading refuses a torn ledger; reopening it for appending
moves the torn bytes aside into a sidecar file, reports them, and continues
after the last whole record, so a resumed run neither loses nor repeats a unit.

Hostile content and faults:

* Any Python string round-trips.  A line is UTF-8 JSON; a record holding a
  string UTF-8 cannot encode (a lone surrogate from a model's reply) is
  written with ``\\uXXXX`` escapes for every non-ASCII character instead,
  which every JSON reader decodes back to the same string (but for a lone
  high surrogate right before a lone low one: JSON spells that pair only as
  the escape pair, which every reader, this one included, reads as the one
  character it encodes in UTF-16).  Reading is
  strict UTF-8: bytes that are not UTF-8 (raw surrogates among them) are a
  :class:`LedgerCorruptError` naming the line and the byte.
* A ledger is a regular file of its own: a symbolic link (never followed:
  ``O_NOFOLLOW``), a FIFO or device, or, for appending, a file with other
  hard links is refused (:class:`LedgerUnsafeError`) before a byte is read or
  written, so a file outside the run directory is never truncated.
* A write the system refuses (disk full, file-size limit, permission) cuts
  the ledger back to its last whole record and raises
  :class:`LedgerWriteError`, one line naming the file and the errno; a cut
  that fails too leaves a torn tail, which no reader parses.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, Iterator, Mapping, TypeVar

from . import bounded
from .errors import PreregbenchError
from ._canonical import FileWriteError, canonical_json
from ._typed import TypedDataError, from_dict

R = TypeVar("R")

#: The key of a line's identity object (never a field of a record schema).
IDENTITY_KEY = "identity"


class LedgerError(PreregbenchError):
    """Root of ledger errors."""


class LedgerOverLimitError(LedgerError, bounded.OverLimitError):
    """A ledger line is over a reading limit (:mod:`benchmarks.core.bounded`): longer than a line may be, nested
    deeper, or holding a number longer than one may be."""


class LedgerCorruptError(LedgerError):
    """A whole line of the ledger is not a valid record."""


class LedgerTornError(LedgerError):
    """The ledger ends in a partial line (a writer was killed mid-record)."""


class LedgerDuplicateError(LedgerError):
    """A unit that is already recorded was appended again."""


class LedgerUnsafeError(LedgerCorruptError):
    """The ledger's path is not a regular file of its own (a symbolic link, a FIFO, a hard-linked file)."""


class LedgerWriteError(LedgerError, FileWriteError):
    """A record could not be written (disk full, file too large, permission); the ledger keeps its whole records."""


class LedgerTornTailWarning(UserWarning):
    """A torn tail was moved aside while reopening a ledger."""


@dataclass(frozen=True)
class TornTail:
    """What was found after the last whole record, and where it was put."""

    offset: int  # byte offset where the torn line starts
    size: int  # number of torn bytes
    sidecar: Path  # file holding the torn bytes verbatim


def _schema_version(schema: type) -> int:
    version = getattr(schema, "SCHEMA_VERSION", None)
    if not isinstance(version, int):
        raise TypeError(f"{schema.__name__} needs an integer class attribute SCHEMA_VERSION to be a ledger schema")
    return version


def _json_object(line: bytes, where: str) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")  # strict: raw surrogate bytes are not UTF-8 either
    except UnicodeDecodeError as exc:
        raise LedgerCorruptError(f"{where}: byte offset {exc.start} of the line (0x{line[exc.start]:02x}) is not UTF-8 "
                                 f"({exc.reason}); the file was not written by the suite's ledger") from None
    try:
        data = bounded.loads(text, where)
    except bounded.OverLimitError as exc:
        raise LedgerOverLimitError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise LedgerCorruptError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise LedgerCorruptError(f"{where}: a record must be a JSON object")
    return data


def _check_line(line: bytes, where: str) -> None:
    """A ledger line is one JSON object ended by LF alone: a blank line or a CRLF ending is refused by every reader
    (resume, verify, compare, report), since the suite's writer makes neither."""
    if not line.strip():
        raise LedgerCorruptError(f"{where}: is blank; a ledger holds one record per line and no blank line "
                                 "(the file was not written by the suite's ledger)")
    if line.endswith(b"\r"):
        raise LedgerCorruptError(f"{where}: ends in CR LF; a ledger's lines end in LF alone "
                                 "(the file was not written by the suite's ledger)")


def _parse_line(line: bytes, schema: type, path: Path, number: int) -> tuple[Any, dict[str, Any] | None]:
    """The record of one whole line and its identity object (None when the line carries none)."""
    where = f"{path}: line {number}"
    _check_line(line, where)
    data = _json_object(line, where)
    identity = data.pop(IDENTITY_KEY, None)
    if identity is not None and not isinstance(identity, dict):
        raise LedgerCorruptError(f"{where}: '{IDENTITY_KEY}' must be a JSON object")
    version = data.pop("schema_version", None)
    expected = _schema_version(schema)
    if version != expected:
        raise LedgerCorruptError(f"{where}: schema_version {version!r}, expected {expected} for {schema.__name__}")
    try:
        return from_dict(schema, data), identity
    except TypedDataError as exc:
        raise LedgerCorruptError(f"{where}: field '{exc.key}': {exc.problem}") from exc


def _open(path: Path, flags: int, mode: int = 0o644) -> int:
    """A file descriptor of ``path``, refusing a symbolic link and anything but a regular file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LedgerUnsafeError(f"{path}: is a symbolic link; a ledger is never opened through a link "
                                    "(remove the link, or start a new run without --run-id)") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise LedgerUnsafeError(f"{path}: is not a regular file; remove it, or start a new run without --run-id")
    return fd


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[int | None]:
    """A read-only descriptor of a ledger (None when it does not exist), opened without following a link."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _lines(fd: int | None, path: Path) -> bounded.Lines | tuple[()]:
    """The whole lines of a ledger, one at a time (:class:`benchmarks.core.bounded.Lines`), over-limit lines refused."""
    if fd is None:
        return ()
    return _BoundedLines(fd, str(path))


class _BoundedLines(bounded.Lines):
    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        try:
            yield from super().__iter__()
        except bounded.OverLimitError as exc:
            raise LedgerOverLimitError(str(exc)) from None


def _parse(path: Path, schema: type, fd: int | None) -> tuple[list[Any], list[dict[str, Any] | None], int, bytes]:
    """Whole records, their identities, the byte length they occupy, and any torn tail bytes."""
    records, identities = [], []
    lines = _lines(fd, path)
    for number, line in lines:
        record, identity = _parse_line(line, schema, path, number)
        records.append(record)
        identities.append(identity)
    if not lines:
        return records, identities, 0, b""
    return records, identities, lines.end, lines.tail


def read_identities(path: str | os.PathLike[str]) -> list[dict[str, Any] | None]:
    """The identity object of every whole line of a ledger (None for a line without one), schema unread.

    A missing file has no lines; a torn tail is ignored; a whole line that is
    not a JSON object, and a path that is a link, is :class:`LedgerCorruptError`.
    """
    path = Path(path)
    out = []
    with _reading(path) as fd:
        for number, line in _lines(fd, path):
            _check_line(line, f"{path}: line {number}")
            identity = _json_object(line, f"{path}: line {number}").get(IDENTITY_KEY)
            out.append(identity if isinstance(identity, dict) else None)
    return out


def read_ledger(path: str | os.PathLike[str], schema: type[R], key: str | None = None) -> list[R]:
    """Every record of a finished ledger; a torn tail, a bad line (blank, CR LF, not a record) or, with ``key``,
    a unit recorded twice is an error (:class:`LedgerError`, one line naming the file and the line)."""
    path = Path(path)
    with _reading(path) as fd:
        records, _, end, tail = _parse(path, schema, fd)
    if tail:
        raise LedgerTornError(
            f"{path}: ends in a torn line of {len(tail)} bytes at offset {end} "
            "(the writer was killed mid-record); reopen the ledger with Ledger(...) to move it aside and resume"
        )
    if key is not None:
        _unique(path, records, key)
    return records


def _unique(path: Path, records: list[Any], key: str) -> dict[Any, int]:
    """Unit key -> line number; a unit on two lines is :class:`LedgerCorruptError`."""
    seen: dict[Any, int] = {}
    for number, record in enumerate(records, start=1):
        unit = getattr(record, key)
        if unit in seen:
            raise LedgerCorruptError(f"{path}: line {number}: unit {unit!r} already recorded on line {seen[unit]}")
        seen[unit] = number
    return seen


class Ledger(Generic[R]):
    """An append-only ledger of ``schema`` records keyed by the field ``key``.

    Opening an existing ledger refuses a path that is not a regular file of
    its own (:class:`LedgerUnsafeError`), validates every whole line, moves a
    torn tail into ``<name>.torn-<offset>`` (``.<n>`` added when that name is
    taken; reported as a :class:`LedgerTornTailWarning` and in :attr:`torn`),
    and takes an exclusive lock so that only one process appends.  :attr:`identities` holds the identity object of every recorded
    line; :attr:`identity`, when set, is written into every line appended.
    """

    def __init__(self, path: str | os.PathLike[str], schema: type[R], key: str,
                 identity: Mapping[str, Any] | None = None):
        self.path = Path(path)
        self.schema = schema
        self.key = key
        self.identity = identity
        self._version = _schema_version(schema)
        names = {f.name for f in fields(schema)}
        if key not in names:
            raise TypeError(f"{schema.__name__} has no field {key!r} to key the ledger by")
        if IDENTITY_KEY in names or "schema_version" in names:
            raise TypeError(f"{schema.__name__}: the field names {IDENTITY_KEY!r} and 'schema_version' belong to the ledger")
        self._fd = -1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = _open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise LedgerError(f"{self.path}: another process is appending to this ledger") from None
        try:
            links = os.fstat(self._fd).st_nlink
            if links != 1:
                raise LedgerUnsafeError(f"{self.path}: has {links} hard links, so appending would change another "
                                        "file too; copy it to a file of its own, or start a new run without --run-id")
            self.records, self.identities, end, tail = _parse(self.path, schema, self._fd)
            self._end = end
            self.torn: TornTail | None = None
            if tail:
                self.torn = self._set_aside(end, tail)
            self._keys = _unique(self.path, self.records, key)
        except BaseException:
            self.close()
            raise

    def _set_aside(self, offset: int, tail: bytes) -> TornTail:
        base = f"{self.path.name}.torn-{offset}"
        for attempt in range(1000):
            sidecar = self.path.with_name(base if attempt == 0 else f"{base}.{attempt}")
            try:  # a new file of its own: never an existing one, never through a link
                fd = os.open(sidecar, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
                break
            except FileExistsError:
                continue
        else:
            raise LedgerError(f"{self.path}: 1000 torn-tail files for offset {offset} already exist; move them away")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(tail)
                handle.flush()
                os.fsync(handle.fileno())
            os.ftruncate(self._fd, offset)
            os.fsync(self._fd)
        except OSError as exc:
            raise LedgerWriteError(self.path, exc, f"its torn last line ({len(tail)} bytes at offset {offset}) "
                                   "is still in place and will be set aside again on the next resume") from exc
        torn = TornTail(offset=offset, size=len(tail), sidecar=sidecar)
        warnings.warn(
            f"{self.path}: torn last line ({len(tail)} bytes at offset {offset}) moved to {sidecar.name}; "
            "resuming after the last whole record",
            LedgerTornTailWarning,
            stacklevel=3,
        )
        return torn

    def __contains__(self, unit: object) -> bool:
        return unit in self._keys

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[R]:
        return iter(list(self.records))

    @property
    def done(self) -> frozenset:
        """Keys of the units already recorded."""
        return frozenset(self._keys)

    def append(self, record: R) -> None:
        """Validate, write and fsync one record; a unit may be recorded once only."""
        if self._fd < 0:
            raise LedgerError(f"{self.path}: ledger is closed")
        if type(record) is not self.schema:
            raise TypeError(f"expected a {self.schema.__name__} record, got {type(record).__name__}")
        unit = getattr(record, self.key)
        if unit in self._keys:
            raise LedgerDuplicateError(f"{self.path}: unit {unit!r} is already recorded (line {self._keys[unit]})")
        body = {f.name: getattr(record, f.name) for f in fields(record)}
        body["schema_version"] = self._version
        if self.identity is not None:
            body[IDENTITY_KEY] = dict(self.identity)
        try:  # the record must serialize and read back as itself
            line = canonical_json(body)
            try:
                payload = (line + "\n").encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: the same JSON value, every non-ASCII character escaped
                line = canonical_json(body, ensure_ascii=True)
                payload = (line + "\n").encode("ascii")
            from_dict(self.schema, {k: v for k, v in json.loads(line).items() if k not in ("schema_version", IDENTITY_KEY)})
        except (TypedDataError, TypeError, ValueError) as exc:
            raise LedgerError(f"{self.path}: record for unit {unit!r} does not match {self.schema.__name__}: {exc}") from exc
        self._write(payload, unit)
        self.records.append(record)
        self.identities.append(None if self.identity is None else dict(self.identity))
        self._keys[unit] = len(self.records)

    def _write(self, payload: bytes, unit: object) -> None:
        """Write one line and fsync it; on any failure cut the file back to its last whole record."""
        start = self._end
        view = memoryview(payload)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except BaseException as exc:
            try:
                os.ftruncate(self._fd, start)
                outcome = f"the ledger was cut back to its last whole record ({start} bytes)"
            except OSError:
                outcome = "cutting it back failed too; the partial line is a torn tail that the next resume sets aside"
            else:
                with contextlib.suppress(OSError):  # best effort: the cut holds in this process's view either way
                    os.fsync(self._fd)
            if isinstance(exc, OSError):
                raise LedgerWriteError(self.path, exc, f"unit {unit!r} is not recorded and {outcome}; fix the cause "
                                       "and resume the run with the same --run-id") from exc
            raise
        self._end = start + len(payload)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing releases the flock
            self._fd = -1

    def __enter__(self) -> "Ledger[R]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - safety net
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
