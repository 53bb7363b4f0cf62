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
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, Iterator, Mapping, TypeVar

from ._canonical import canonical_json
from ._typed import TypedDataError, from_dict

R = TypeVar("R")

#: The key of a line's identity object (never a field of a record schema).
IDENTITY_KEY = "identity"


class LedgerError(Exception):
    """Root of ledger errors."""


class LedgerCorruptError(LedgerError):
    """A whole line of the ledger is not a valid record."""


class LedgerTornError(LedgerError):
    """The ledger ends in a partial line (a writer was killed mid-record)."""


class LedgerDuplicateError(LedgerError):
    """A unit that is already recorded was appended again."""


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
        data = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LedgerCorruptError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise LedgerCorruptError(f"{where}: a record must be a JSON object")
    return data


def _parse_line(line: bytes, schema: type, path: Path, number: int) -> tuple[Any, dict[str, Any] | None]:
    """The record of one whole line and its identity object (None when the line carries none)."""
    where = f"{path}: line {number}"
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


def _scan(path: Path, schema: type) -> tuple[list[Any], list[dict[str, Any] | None], int, bytes]:
    """Whole records, their identities, the byte length they occupy, and any torn tail bytes."""
    data = path.read_bytes() if path.exists() else b""
    end = data.rfind(b"\n") + 1
    parsed = [
        _parse_line(line, schema, path, number)
        for number, line in enumerate(data[:end].split(b"\n")[:-1], start=1)
    ]
    return [record for record, _ in parsed], [identity for _, identity in parsed], end, data[end:]


def read_identities(path: str | os.PathLike[str]) -> list[dict[str, Any] | None]:
    """The identity object of every whole line of a ledger (None for a line without one), schema unread.

    A missing file has no lines; a torn tail is ignored; a whole line that is
    not a JSON object is :class:`LedgerCorruptError`.
    """
    path = Path(path)
    data = path.read_bytes() if path.exists() else b""
    out = []
    for number, line in enumerate(data[: data.rfind(b"\n") + 1].split(b"\n")[:-1], start=1):
        identity = _json_object(line, f"{path}: line {number}").get(IDENTITY_KEY)
        out.append(identity if isinstance(identity, dict) else None)
    return out


def read_ledger(path: str | os.PathLike[str], schema: type[R]) -> list[R]:
    """Every record of a finished ledger; a torn tail or a bad line is an error."""
    path = Path(path)
    records, _, end, tail = _scan(path, schema)
    if tail:
        raise LedgerTornError(
            f"{path}: ends in a torn line of {len(tail)} bytes at offset {end} "
            "(the writer was killed mid-record); reopen the ledger with Ledger(...) to move it aside and resume"
        )
    return records


class Ledger(Generic[R]):
    """An append-only ledger of ``schema`` records keyed by the field ``key``.

    Opening an existing ledger validates every whole line, moves a torn tail
    into ``<name>.torn-<offset>`` (reported as a :class:`LedgerTornTailWarning`
    and in :attr:`torn`), and takes an exclusive lock so that only one process
    appends.  :attr:`identities` holds the identity object of every recorded
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise LedgerError(f"{self.path}: another process is appending to this ledger") from None
        try:
            self.records, self.identities, end, tail = _scan(self.path, schema)
            self.torn: TornTail | None = None
            if tail:
                self.torn = self._set_aside(end, tail)
            self._keys = {}
            for number, record in enumerate(self.records, start=1):
                unit = getattr(record, key)
                if unit in self._keys:
                    raise LedgerCorruptError(f"{self.path}: line {number}: unit {unit!r} already recorded on line {self._keys[unit]}")
                self._keys[unit] = number
        except BaseException:
            self.close()
            raise

    def _set_aside(self, offset: int, tail: bytes) -> TornTail:
        sidecar = self.path.with_name(f"{self.path.name}.torn-{offset}")
        with open(sidecar, "wb") as handle:
            handle.write(tail)
            handle.flush()
            os.fsync(handle.fileno())
        os.ftruncate(self._fd, offset)
        os.fsync(self._fd)
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
            from_dict(self.schema, {k: v for k, v in json.loads(line).items() if k not in ("schema_version", IDENTITY_KEY)})
        except (TypedDataError, TypeError, ValueError) as exc:
            raise LedgerError(f"{self.path}: record for unit {unit!r} does not match {self.schema.__name__}: {exc}") from exc
        payload = (line + "\n").encode("utf-8")
        view = memoryview(payload)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        self.records.append(record)
        self.identities.append(None if self.identity is None else dict(self.identity))
        self._keys[unit] = len(self.records)

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
