"""Probe directories: the per-probe metadata file, the directory names and the reader of one or several probes.

A probe directory holds ``units.jsonl`` (one :class:`~benchmarks.ladder.spec.UnitRecord`
per episode, append-only, fsync per line, resumable) and ``metadata.json`` (one
:class:`ProbeMetadata`).  A v2 probe directory's name starts with ``v2-``, a
v1 one's with ``v1-``; :func:`read_probes` refuses to return v1 and v2 probes
together, so no table or statistic can pool them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Literal, Mapping, Sequence

from benchmarks.core import atomic_write_json, read_ledger
from benchmarks.core._typed import TypedDataError, from_dict

from .probe import probe_dir_name
from .spec import RECORD_FIELDS, UNITS_FILE, VARIANTS, LadderError, UnitRecord

METADATA_FILE = "metadata.json"

__all__ = ["METADATA_FILE", "RECORD_FIELDS", "UNITS_FILE", "VARIANTS", "Probe", "ProbeMetadata", "UnitRecord",
           "find_probes", "outcome_counts", "probe_dir_name", "read_metadata", "read_probe", "read_probes",
           "write_metadata"]


@dataclass(frozen=True)
class ProbeMetadata:
    """What a probe ran: ``metadata.json`` beside its ledger."""

    SCHEMA_VERSION: ClassVar[int] = 1

    probe: str  # the probe directory's name
    rung: str
    model_revision: str
    generator_variant: Literal["v1", "v2"]
    generator_state: str
    state_hash: str
    dials: dict[str, Any]  # the state's dial constants, verbatim
    seed: int
    condition: Literal["autonomous"]
    units_per_tier: int
    tiers: tuple[int, ...]
    max_tokens: int
    timeout_s: float
    prereg_sha256: str
    retune_of: str | None  # the probe this one retunes (its directory name), else null
    deviations: tuple[str, ...]  # every way the probe departs from the preregistration

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_version"] = self.SCHEMA_VERSION
        return data


def write_metadata(folder: Path, metadata: ProbeMetadata) -> None:
    """Write ``metadata.json``; a probe resumed with different settings is refused."""
    target = folder / METADATA_FILE
    if target.exists():
        previous = read_metadata(folder)
        if previous != metadata:
            raise LadderError(
                f"{folder} was started with different settings ({_diff(previous, metadata)}); "
                "resume it with the same rung, state, seed and limits, or start a new run"
            )
        return
    atomic_write_json(target, metadata.as_json())


def _diff(old: ProbeMetadata, new: ProbeMetadata) -> str:
    a, b = asdict(old), asdict(new)
    return ", ".join(f"{k}: {a[k]!r} -> {b[k]!r}" for k in a if a[k] != b[k])


def read_metadata(folder: Path) -> ProbeMetadata:
    path = Path(folder) / METADATA_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LadderError(f"{folder} holds no {METADATA_FILE}; it is not a probe directory") from None
    except OSError as exc:
        raise LadderError(f"{path}: cannot be read ({exc.strerror or exc}); check its permissions") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LadderError(f"{path}: not UTF-8 at byte {exc.start}; the probe's metadata is damaged; "
                          "restore it from a copy") from None
    except json.JSONDecodeError as exc:
        raise LadderError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); the probe's "
                          "metadata is damaged; restore it from a copy") from None
    if not isinstance(data, dict):
        raise LadderError(f"{path}: holds a JSON {type(data).__name__}, not an object; restore it from a copy")
    if data.pop("schema_version", None) != ProbeMetadata.SCHEMA_VERSION:
        raise LadderError(f"{path}: schema_version is not {ProbeMetadata.SCHEMA_VERSION}")
    try:
        metadata = from_dict(ProbeMetadata, data)
    except TypedDataError as exc:
        raise LadderError(f"{path}: field '{exc.key}': {exc.problem}") from exc
    prefix = Path(folder).name.split("-", 1)[0]
    if prefix != metadata.generator_variant:
        raise LadderError(
            f"{folder}: the directory name says {prefix!r} but its metadata records generator variant "
            f"{metadata.generator_variant!r}; probe directories carry their variant as prefix"
        )
    return metadata


@dataclass(frozen=True)
class Probe:
    """A probe read back: its metadata and its unit records."""

    folder: Path
    metadata: ProbeMetadata
    units: tuple[UnitRecord, ...]


def read_probe(folder: Path) -> Probe:
    folder = Path(folder)
    metadata = read_metadata(folder)
    units = tuple(read_ledger(folder / UNITS_FILE, UnitRecord))
    for unit in units:
        if (unit.generator_variant, unit.state_hash, unit.seed) != (
            metadata.generator_variant, metadata.state_hash, metadata.seed
        ):
            raise LadderError(f"{folder}: unit {unit.unit_id} was not produced by this probe's generator state/seed")
    return Probe(folder, metadata, units)


def read_probes(folders: Iterable[Path]) -> list[Probe]:
    """Read several probes for one table; v1 and v2 probes never come back together."""
    probes = [read_probe(Path(f)) for f in folders]
    variants = sorted({p.metadata.generator_variant for p in probes})
    if len(variants) > 1:
        by = {v: [p.folder.name for p in probes if p.metadata.generator_variant == v] for v in variants}
        raise LadderError(
            "refusing to pool generator v1 with v2 probes (the non-merge rule): "
            + "; ".join(f"{v}: {', '.join(names)}" for v, names in by.items())
            + "; read each variant separately"
        )
    return probes


def find_probes(root: Path) -> list[Path]:
    """Every probe directory (one holding metadata.json) under ``root``, sorted."""
    return sorted(p.parent for p in Path(root).rglob(METADATA_FILE))


def outcome_counts(units: Sequence[UnitRecord] | Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for unit in units:
        outcome = unit["outcome"] if isinstance(unit, Mapping) else unit.outcome
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts
