"""Typed loading of ``benchmarks/<protocol>/prereg.toml``.

A protocol declares its preregistration as a frozen dataclass; the pieces
every protocol shares (the header, a classification block) are declared here.
The loader rejects unknown and missing keys, checks every type, and hashes
the file's bytes, so that the object a rule reads is exactly what was frozen.
"""

from __future__ import annotations

import datetime as _dt
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from ._canonical import sha256_bytes
from ._typed import TypedDataError, from_dict
from .rules import Classification, Condition, Rule, RuleError

T = TypeVar("T")


class PreregError(ValueError):
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
        return Classification(self.name, tuple(rules), self.passing, dict(thresholds))


@dataclass(frozen=True)
class Prereg(Generic[T]):
    """A loaded preregistration: the typed values, the file and the sha256 of its bytes."""

    path: Path
    sha256: str
    values: T


def load_prereg(path: str | Path, spec: type[T]) -> Prereg[T]:
    """Load and validate ``path`` against the dataclass ``spec``.

    Any classification block is compiled to check that every condition parses
    and names a declared threshold; errors name the file and the key.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PreregError(f"{path}: cannot read the preregistration ({exc.strerror})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PreregError(f"{path}: not valid TOML: {exc}") from exc
    try:
        values = from_dict(spec, data)
    except TypedDataError as exc:
        raise PreregError(f"{path}: key '{exc.key}': {exc.problem}") from exc
    header = getattr(values, "protocol", None)
    if isinstance(header, ProtocolHeader) and header.name != path.parent.name:
        raise PreregError(
            f"{path}: key 'protocol.name' is {header.name!r} but the file lives in the folder "
            f"{path.parent.name!r}; they must agree"
        )
    for key, block in _classification_blocks(values):
        try:
            block.build(_thresholds(values))
        except RuleError as exc:
            raise PreregError(f"{path}: key '{key}': {exc}") from exc
    return Prereg(path=path, sha256=sha256_bytes(raw), values=values)


def classification(prereg: Prereg, key: str = "classification") -> Classification:
    """Compile the classification block named ``key`` with the prereg's thresholds."""
    block = getattr(prereg.values, key)
    return block.build(_thresholds(prereg.values))


def _thresholds(values: object) -> dict[str, float]:
    return dict(getattr(values, "thresholds", {}) or {})


def _classification_blocks(values: object):
    for name in getattr(values, "__dataclass_fields__", {}):
        block = getattr(values, name)
        if isinstance(block, ClassificationSpec):
            yield name, block
