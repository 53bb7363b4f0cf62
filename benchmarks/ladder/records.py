"""Probe ledgers: the 23-field unit record, the per-probe metadata file, probe directories and the reader.

A probe directory holds ``units.jsonl`` (one :class:`UnitRecord` per episode,
append-only, fsync per line, resumable) and ``metadata.json`` (one
:class:`ProbeMetadata`).  A v2 probe directory's name starts with ``v2-``, a
v1 one's with ``v1-``; :func:`read_probes` refuses to return v1 and v2 probes
together, so no table or statistic can pool them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Iterable, Literal, Mapping, Sequence

from benchmarks.core import atomic_write_json, read_ledger
from benchmarks.core._typed import TypedDataError, from_dict

from .protocol import LadderError

UNITS_FILE = "units.jsonl"
METADATA_FILE = "metadata.json"
VARIANTS = ("v1", "v2")


@dataclass(frozen=True)
class UnitRecord:
    """One probe unit (one episode shown to the worker once): a line of ``units.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    unit_id: str  # "t<tier>-<index:03d>": the ledger key
    rung: str  # the model as named on the command line (registry name, openai:MODEL@URL, ...)
    model_revision: str  # immutable revision of that model (commit sha or sha256 content hash)
    generator_variant: Literal["v1", "v2"]  # never pooled across
    generator_state: str  # name of the frozen generator state
    state_hash: str  # sha256 of that state's dial constants
    seed: int  # the probe's tuning seed
    condition: Literal["autonomous"]  # the worker alone
    supervisor: None  # always null: no supervisor sits in a probe
    tier: int  # 1-5, the irreversibility gradient
    family: str  # the task family of that tier
    episode_index: int  # index of the episode within its tier for this seed
    depth: int  # the episode's declared composition depth k
    checks: int  # number of checks the verdict depends on
    episode_sha256: str  # sha256 of the canonical JSON of the worker-visible fact dictionary
    ground_truth: Literal["approve", "reject"]  # the generator's verdict, confirmed by the evaluator
    prompt_sha256: str  # sha256 of the canonical JSON of the chat sent
    response_text: str  # the raw answer text ("" when none came)
    finish_reason: str  # stop, length, error or none, as the backend reported it
    error_code: str | None  # the backend's coded failure (timeout, http_error, ...), else null
    decision: Literal["approve", "reject"] | None  # parse_decision(response_text); null when errored or unparsed
    outcome: Literal["correct", "wrong", "unparsed", "errored", "timeout"]  # the coded outcome the shares count
    latency_s: float  # wall-clock seconds the backend took for this unit


RECORD_FIELDS = tuple(f.name for f in fields(UnitRecord))
assert len(RECORD_FIELDS) == 23, RECORD_FIELDS


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


def probe_dir_name(variant: str, state: str, seed: int) -> str:
    """``v2-<state>-seed<seed>``; the variant prefix is added unless the state name already carries it."""
    if variant not in VARIANTS:
        raise LadderError(f"generator variant must be one of {VARIANTS}, got {variant!r}")
    stem = state if state.startswith(f"{variant}-") else f"{variant}-{state}"
    return f"{stem}-seed{seed}"


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
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LadderError(f"{folder} holds no {METADATA_FILE}; it is not a probe directory") from None
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
