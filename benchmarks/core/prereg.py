"""Typed loading of ``benchmarks/<protocol>/prereg.toml``.

A protocol declares its preregistration as a frozen dataclass; the pieces
every protocol shares (the header, a classification block) are declared here.
The loader rejects unknown and missing keys, checks every type, and hashes
the file's bytes, so that the object a rule reads is exactly what was frozen.

Every frozen key must be read by the code it governs.  When the environment
variable ``PREREGBENCH_PREREG_READS`` names a file, each loaded
preregistration is handed out as a recording copy: the loader appends one
``declared`` line per leaf key of the file, and the first read of every leaf
(a scalar or an array of scalars, an entry of a table of scalars, a threshold
named by a compiled rule) appends one ``read`` line.  :func:`unread_keys`
turns such a log into the keys that were declared and never read.  Entries of
a table of tables (``[scales.270M]``, ``[scales.1B]``) and of an array of
tables (``[[gate.rules]]``) share one pattern (``scales.*.model_id``,
``gate.rules[].label``): reading a field of the entry a run selects counts for
that field of every entry.  Reads made while the loader validates the file do
not count.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Mapping, TypeVar

from .errors import PreregbenchError
from ._canonical import sha256_bytes
from ._typed import TypedDataError, from_dict
from .rules import Classification, Condition, Rule, RuleError

T = TypeVar("T")

#: Names a file to which every process appends the prereg keys it declares and reads (see the module docstring).
READS_ENV = "PREREGBENCH_PREREG_READS"


class PreregError(PreregbenchError, ValueError):
    """A preregistration file is missing, unreadable or does not match its declared form."""


@dataclass(frozen=True)
class ProtocolHeader:
    """The ``[protocol]`` table that opens every preregistration."""

    name: str  # protocol name; equals the benchmark folder's name
    title: str  # human-readable title
    registered: _dt.date  # the date the protocol was preregistered
    seed_document: str  # the specification the rules come from


@dataclass(frozen=True)
class ModelSpec:
    """A ``[model]`` table for a protocol that runs one local or hub model."""

    id: str  # preregistered model (hub id)
    revision: str  # branch or sha; resolved to a commit sha before loading
    dtype: str
    device: str
    batch_size: int


@dataclass(frozen=True)
class RuleSpec:
    """One ``[[classification.rules]]`` entry: see :mod:`benchmarks.core.rules` for the semantics."""

    label: str
    all: tuple[str, ...] = ()
    any: tuple[str, ...] = ()
    otherwise: bool = False
    passes: bool = False


@dataclass(frozen=True)
class ClassificationSpec:
    """A ``[classification]`` table: the ordered rules and the state reached when none fires."""

    name: str
    rules: tuple[RuleSpec, ...]
    passing: str | None = None

    def build(self, thresholds: dict[str, float]) -> Classification:
        rules = []
        for rule in self.rules:
            rules.append(
                Rule(
                    rule.label,
                    all=tuple(Condition.parse(c, thresholds) for c in rule.all),
                    any=tuple(Condition.parse(c, thresholds) for c in rule.any),
                    otherwise=rule.otherwise,
                    passes=rule.passes,
                )
            )
        return Classification(self.name, tuple(rules), self.passing, _plain(thresholds))  # a copy is no read


@dataclass(frozen=True)
class Prereg(Generic[T]):
    """A loaded preregistration: the typed values, the file and the sha256 of its bytes."""

    path: Path
    sha256: str
    values: T


#: The largest preregistration file read (a preregistration is a page of settings, not data).
MAX_BYTES = 1 << 20
#: How deep tables and arrays may nest (the four protocols nest at most 4 deep).
MAX_NESTING = 16
#: The most rules one classification may hold (an ordered list people read and check; RES's has 6).
MAX_RULES = 100


def load_prereg(path: str | Path, spec: type[T]) -> Prereg[T]:
    """Load and validate ``path`` against the dataclass ``spec``.

    Any classification block is compiled to check that every condition parses
    and names a declared threshold; errors name the file and the key.  A file
    over :data:`MAX_BYTES`, tables or arrays nested deeper than
    :data:`MAX_NESTING`, a classification of more than :data:`MAX_RULES` rules
    and a number beyond the range of a float are refused the same way.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise PreregError(f"{path}: {size} bytes; a preregistration is at most {MAX_BYTES} bytes of settings")
        raw = path.read_bytes()
    except OSError as exc:
        raise PreregError(f"{path}: cannot read the preregistration ({exc.strerror})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PreregError(f"{path}: not valid TOML: {' '.join(str(exc).split())}") from exc
    except RecursionError:
        raise PreregError(f"{path}: tables or arrays nested too deep to read; a preregistration nests them at most "
                          f"{MAX_NESTING} deep") from None
    deep = _too_deep(data, "", 0)
    if deep is not None:
        raise PreregError(f"{path}: key '{deep}': nested more than {MAX_NESTING} tables or arrays deep; a "
                          "preregistration nests them less deeply")
    try:
        values = from_dict(spec, data)
    except TypedDataError as exc:
        raise PreregError(f"{path}: key '{exc.key}': {exc.problem}") from exc
    for key, block in _classification_blocks(values):
        if len(block.rules) > MAX_RULES:
            raise PreregError(f"{path}: key '{key}.rules': {len(block.rules)} rules; a classification holds at most "
                              f"{MAX_RULES}")
        try:
            block.build(_thresholds(values))
        except RuleError as exc:
            raise PreregError(f"{path}: key '{key}': {exc}") from exc
    log = os.environ.get(READS_ENV)
    if log:
        values = _recording_copy(path, data, values, Path(log))
    header = getattr(values, "protocol", None)  # the header's name governs which folder the file belongs to
    if isinstance(header, ProtocolHeader) and header.name != path.parent.name:
        raise PreregError(
            f"{path}: key 'protocol.name' is {header.name!r} but the file lives in the folder "
            f"{path.parent.name!r}; they must agree"
        )
    return Prereg(path=path, sha256=sha256_bytes(raw), values=values)


def _too_deep(value: Any, key: str, depth: int) -> str | None:
    """The dotted key of the first table or array nested deeper than :data:`MAX_NESTING`, None when none is."""
    if isinstance(value, (dict, list)):
        if depth >= MAX_NESTING:
            return key or "<top level>"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for name, item in items:
            found = _too_deep(item, f"{key}[{name}]" if isinstance(value, list) else (f"{key}.{name}" if key else name),
                              depth + 1)
            if found is not None:
                return found
    return None


def classification(prereg: Prereg, key: str = "classification") -> Classification:
    """Compile the classification block named ``key`` with the prereg's thresholds."""
    block = getattr(prereg.values, key)
    return block.build(_thresholds(prereg.values))


def unrecorded(value: Any) -> Any:
    """A plain copy of a prereg value (a table, a dataclass) that does not count as reading its keys.

    For echoing frozen values into a run file (the thresholds in the summary, the seeds in the
    provenance): an echo is not a use, so a key only echoed still shows up as unread.
    """
    return _plain(value)


def header_record(prereg: Prereg) -> dict[str, str] | None:
    """The ``[protocol]`` header as a run file records it: which preregistration, when, from which seed document
    (None for a spec without a header)."""
    header = getattr(prereg.values, "protocol", None)
    if not isinstance(header, ProtocolHeader):
        return None
    return {"name": header.name, "title": header.title, "registered": header.registered.isoformat(),
            "seed_document": header.seed_document}


def _thresholds(values: object) -> Mapping[str, float]:
    # The mapping itself (not a copy), so that a recording copy notes each threshold a rule names.
    return getattr(values, "thresholds", None) or {}


def _classification_blocks(values: object):
    for name in getattr(values, "__dataclass_fields__", {}):
        block = getattr(values, name)
        if isinstance(block, ClassificationSpec):
            yield name, block


# --------------------------------------------------------------------------- which keys are read


class _Recorder:
    """Appends ``declared`` and first ``read`` lines for one loaded file to the log."""

    def __init__(self, prereg: Path, log: Path):
        self.prereg = str(prereg.resolve())
        self.log = log
        self.seen: set[str] = set()

    def write(self, kind: str, key: str, pattern: str | None = None) -> None:
        line = {"kind": kind, "prereg": self.prereg, "key": key}
        if pattern is not None:
            line["pattern"] = pattern
        with open(self.log, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")

    def read(self, pattern: str) -> None:
        if pattern not in self.seen:
            self.seen.add(pattern)
            self.write("read", pattern)


class _RecordingSpec:
    """Mixed into a copy of a prereg dataclass: reading a leaf field notes its key."""

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name in type(self).__dataclass_fields__ and _is_leaf(value):
            where = object.__getattribute__(self, "__dict__").get("_prereg_where")
            if where is not None:
                recorder, key = where
                recorder.read(_join(key, name))
        return value

    def __reduce__(self):  # pickled (a spawned child, a deep copy) as the plain dataclass
        base = next(c for c in type(self).__mro__[1:] if dataclasses.is_dataclass(c) and not issubclass(c, _RecordingSpec))
        state = {f.name: _plain(object.__getattribute__(self, f.name)) for f in dataclasses.fields(base)}
        return _rebuild, (base, state)


class _RecordingDict(dict):
    """A table as a dict: reading an entry (``[]``, ``get``, ``items``, ``values``) notes its key."""

    def _note(self, key: str, value: Any) -> None:
        if _is_leaf(value):
            recorder, prefix = self._prereg_where
            recorder.read(_join(prefix, key))

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        self._note(self._pattern(key), value)
        return value

    def get(self, key, default=None):
        if key in self:
            return self[key]
        return default

    def items(self):
        for key, value in dict.items(self):
            self._note(self._pattern(key), value)
        return dict.items(self)

    def values(self):
        self.items()
        return dict.values(self)

    def __iter__(self):
        # Overridden so that dict(table) and {**table} go through __getitem__: copying a table reads it.
        return dict.__iter__(self)

    def _pattern(self, key: str) -> str:
        return "*" if self._prereg_tables else key

    def __reduce__(self):
        return dict, ({k: _plain(v) for k, v in dict.items(self)},)


_RECORDING_CLASSES: dict[type, type] = {}


def _join(prefix: str, key: str) -> str:
    if key == "[]":
        return prefix + key
    return f"{prefix}.{key}" if prefix else key


def _is_leaf(value: Any) -> bool:
    if isinstance(value, (_RecordingSpec, _RecordingDict)):
        return False
    return not (isinstance(value, tuple) and any(isinstance(v, _RecordingSpec) for v in value))


def _rebuild(cls: type, state: dict[str, Any]) -> Any:
    return cls(**state)


def _plain(value: Any) -> Any:
    if isinstance(value, _RecordingSpec):
        return _rebuild(*value.__reduce__()[1])
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in dict.items(value)}
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _recording_class(cls: type) -> type:
    if cls not in _RECORDING_CLASSES:
        _RECORDING_CLASSES[cls] = type(cls.__name__, (_RecordingSpec, cls), {"__module__": cls.__module__,
                                                                             "__qualname__": cls.__qualname__})
    return _RECORDING_CLASSES[cls]


def _recording_copy(path: Path, data: dict[str, Any], values: Any, log: Path) -> Any:
    recorder = _Recorder(path, log)

    def copy(value: Any, raw: Any, key: str, pattern: str) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out = object.__new__(_recording_class(type(value)))
            for f in dataclasses.fields(value):
                present = isinstance(raw, dict) and f.name in raw
                child = copy(getattr(value, f.name), raw[f.name] if present else _ABSENT,
                             _join(key, f.name), _join(pattern, f.name))
                object.__setattr__(out, f.name, child)
            object.__setattr__(out, "_prereg_where", (recorder, pattern))
            return out
        if isinstance(value, dict):
            tables = bool(value) and all(dataclasses.is_dataclass(v) for v in value.values())
            out = _RecordingDict()
            for k, v in value.items():
                sub = raw.get(k, _ABSENT) if isinstance(raw, dict) else _ABSENT
                dict.__setitem__(out, k, copy(v, sub, _join(key, k), _join(pattern, "*" if tables else k)))
            out._prereg_where = (recorder, pattern)
            out._prereg_tables = tables
            return out
        if isinstance(value, tuple) and any(dataclasses.is_dataclass(v) for v in value):
            return tuple(copy(v, raw[i] if isinstance(raw, list) and i < len(raw) else _ABSENT,
                              f"{key}[{i}]", _join(pattern, "[]")) for i, v in enumerate(value))
        if raw is not _ABSENT:
            recorder.write("declared", key, pattern)
        return value

    return copy(values, data, "", "")


_ABSENT = object()


def toml_leaf_keys(path: str | Path) -> list[str]:
    """Every leaf key of a TOML file (tables opened, arrays of tables indexed), read straight from its bytes."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    out: list[str] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else k)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]")
        else:
            out.append(key)

    walk(data, "")
    return sorted(out)


def read_log(log: str | Path) -> dict[str, dict[str, Any]]:
    """A reads log by file: ``{prereg: {"declared": {key: pattern}, "read": {pattern, ...}}}``."""
    files: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(Path(log).read_text(encoding="utf-8").splitlines(), 1):
        try:
            entry = json.loads(line)
            slot = files.setdefault(entry["prereg"], {"declared": {}, "read": set()})
            if entry["kind"] == "declared":
                slot["declared"][entry["key"]] = entry["pattern"]
            else:
                slot["read"].add(entry["key"])
        except (ValueError, KeyError, TypeError):
            raise PreregError(f"{log}: line {number} is not a prereg reads entry; remove the log and run again") from None
    return files


def unread_keys(log: str | Path, prereg: str | Path) -> list[str]:
    """The leaf keys of ``prereg`` that the processes writing ``log`` declared and never read, sorted.

    A prereg the log never mentions is an error: nothing loaded it with recording on.
    """
    files = read_log(log)
    slot = files.get(str(Path(prereg).resolve()))
    if slot is None:
        raise PreregError(f"{log}: no process loaded {prereg} with {READS_ENV} set; nothing was recorded")
    return sorted(key for key, pattern in slot["declared"].items() if pattern not in slot["read"])
