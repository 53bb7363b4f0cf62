"""``preregbench merge OUT SHARD_DIR...``: join the shards of one run into one run directory, then decide it.

Each ``SHARD_DIR`` is the run directory a session with ``--shard K/N`` wrote
(:mod:`benchmarks.core.shard`).  Before anything is written the merge checks,
and refuses with one line naming the first conflicting shard, field or unit:

* every input is a finished shard: a run directory whose identity names a
  shard, whose session ended complete (``report.json``), whose files still
  match its ``manifest.json``, and whose every ledger line reads back and
  carries the shard's identity;
* the shards are of one run: the same protocol, preregistration hash, model,
  revision, device, fixture hashes and settings, and the same number of
  shards N; the preregistration is this checkout's, and this checkout builds
  the same fixtures and settings from it;
* the shards partition the run's units exactly: no unit recorded twice, no
  unit that is not one of the run's, none recorded by a shard it does not
  belong to, none missing.

It then writes ``OUT`` (``RESULTS/PROTOCOL/RUN_ID``, which must not exist)
as one run: the union of the records in the order an unsharded run records
them, each carrying the run's identity (the shard's without ``shard``),
``fixtures.json``, ``provenance.json`` listing every shard (host, times,
packages, hardware, git, ledger sha256) and starting at the earliest shard's
start, what the protocol keeps beside its records, and the shards'
``resumes.json`` entries.  The directory is built beside ``OUT`` and renamed
into place, so a refused or failed merge leaves nothing.  Last, the run's
rule and completeness tests run on it as on any run (nothing is measured:
every unit is recorded), writing the summary, result files and reports.

Exit status: that of ``preregbench run`` on the merged run (0 passed, 1 gate
failed, 2 broken); 4 when the merge is refused (nothing written).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pytest

from . import registry, runcmd
from ._canonical import FileReadError, atomic_write_json, read_json_file
from .commandline import CommandParser, run_command, usage_line
from .errors import PreregbenchError, one_line
from .ledger import LedgerError, read_identities, read_ledger
from .manifest import MANIFEST_FILE, ManifestError, file_sha256, manifest_differences, manifest_files
from .modelrun import RECORDED_REVISION
from .protocol import Protocol, UsageProblem
from .provenance import Provenance, ProvenanceError, read_provenance
from .run import RESUMES_FILE, ProtocolRun, identity_conflicts
from .rundir import PROVENANCE_FILE, REPORT_FILE, Run, RunDirError, check_run_dir
from .session import RUN_ID_PATTERN
from .shard import Shard, ShardError, canonical_order, parse_shard, split

DESCRIPTION = __doc__.split("\n\n", 1)[1].rstrip()
EXIT_REFUSED = 4


class MergeRefused(PreregbenchError, ValueError):
    """The shards cannot be merged; the message names the first conflicting shard, field or unit."""


@dataclass
class ShardRun:
    """One input of a merge: a shard's run directory, as read."""

    dir: Path
    provenance: Provenance
    identity: dict[str, Any]
    shard: Shard

    @property
    def name(self) -> str:
        return str(self.dir)


def _read_shard(folder: Path) -> ShardRun:
    if os.path.islink(folder) or not folder.is_dir():
        raise MergeRefused(f"{folder} is not a run directory; give the directories the shards wrote "
                           "(RESULTS/PROTOCOL/RUN_ID)")
    try:
        provenance = read_provenance(folder / PROVENANCE_FILE)
    except (ProvenanceError, OSError) as exc:
        raise MergeRefused(f"{folder}: {one_line(exc)}") from None
    if provenance is None:
        raise MergeRefused(f"{folder} holds no {PROVENANCE_FILE}, so it is no finished run; give the directories the "
                           "shards wrote (RESULTS/PROTOCOL/RUN_ID)")
    identity = dict(provenance.identity or {})
    if "shard" not in identity:
        raise MergeRefused(f"{folder} is not a shard (its identity names none); merge joins runs made with "
                           "--shard K/N")
    try:
        shard = parse_shard(str(identity["shard"]), flag="shard")
    except ShardError as exc:
        raise MergeRefused(f"{folder}: {exc}") from None
    return ShardRun(folder, provenance, identity, shard)


#: Identity keys only a shard carries: which shard, and the batch size its split follows.
SHARD_KEYS = ("shard", "batch_size")


def _unsharded(identity: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in identity.items() if k not in SHARD_KEYS}


def _check_one_run(shards: list[ShardRun], protocol: Protocol) -> None:
    first = shards[0]
    for other in shards[1:]:
        conflicts = identity_conflicts(_unsharded(first.identity), _unsharded(other.identity))
        if conflicts:
            raise MergeRefused(f"{other.name} is not a shard of the run {first.name} belongs to: {conflicts[0]} "
                               "(first shard -> this one); merge only the shards of one run")
        if other.shard.count != first.shard.count:
            raise MergeRefused(f"{other.name} is shard {other.shard}, {first.name} is shard {first.shard}: the shards "
                               "of one run share one N")
    recorded = first.identity.get("prereg_sha256")
    if recorded != protocol.prereg.sha256:
        raise MergeRefused(f"the shards ran under a preregistration with sha256 {str(recorded)[:12]}, but "
                           f"{protocol.prereg.path} here has {protocol.prereg.sha256[:12]} (prereg_sha256); merge "
                           "with the checkout the shards ran")


def _check_finished(shard: ShardRun, protocol: Protocol) -> None:
    """The shard's session ended complete and its files are those it wrote."""
    folder = shard.dir
    try:
        report = read_json_file(folder / REPORT_FILE)
        manifest = read_json_file(folder / MANIFEST_FILE)
    except (FileReadError, OSError) as exc:
        raise MergeRefused(f"{folder} is no finished shard ({one_line(exc)}); resume it with its --run-id and "
                           "--shard first") from None
    entry = (((report or {}).get("benchmark") or {}).get("protocols") or {}).get(protocol.name) \
        if isinstance(report, dict) else None
    if not isinstance(entry, dict) or entry.get("status") != "complete" or entry.get("shard") != str(shard.shard):
        status = entry.get("status") if isinstance(entry, dict) else "no verdict"
        raise MergeRefused(f"{folder}: shard {shard.shard} did not end complete ({status}, per {REPORT_FILE}); resume "
                           "it with its --run-id and --shard first")
    listed = manifest_files(manifest)
    if listed is None:
        raise MergeRefused(f"{folder}: {MANIFEST_FILE} is not a manifest; the shard cannot be checked")
    try:
        differences = manifest_differences(folder, listed)
    except (ManifestError, OSError) as exc:
        raise MergeRefused(f"{folder}: {one_line(exc)}") from None
    if differences:
        first = differences[0]
        what = {"missing": "is missing", "unlisted": "is not in its manifest"}.get(first.kind, "differs from its manifest")
        raise MergeRefused(f"{folder}: {first.path} {what} ({MANIFEST_FILE}); the shard was changed after its session "
                           "ended, so it cannot be merged")


def _records(shard: ShardRun, protocol: Protocol, run: ProtocolRun) -> list[Any]:
    ledger = shard.dir / protocol.ledger_name(run)
    try:
        records = read_ledger(ledger, protocol.record_type, protocol.record_key)
        identities = read_identities(ledger)
    except (LedgerError, OSError) as exc:
        raise MergeRefused(f"{shard.name}: {one_line(exc)}") from None
    for number, identity in enumerate(identities, start=1):
        if identity != shard.identity:
            raise MergeRefused(f"{ledger}: line {number} carries another identity than the shard's provenance "
                               "(identity); the shard cannot be merged")
    return records


def _partition(shards: list[ShardRun], records: dict[int, list[Any]], protocol: Protocol,
               run: ProtocolRun) -> dict[str, Any]:
    """Unit key -> record, when the shards' records are exactly the run's units, each from its own shard."""
    count = shards[0].shard.count
    try:
        owners = {protocol.unit_key(u): k for k, units in split(protocol, run, run.units, count).items() for u in units}
    except ShardError as exc:
        raise MergeRefused(str(exc)) from None
    held: dict[str, Any] = {}
    where: dict[str, ShardRun] = {}
    for index, shard in enumerate(shards):
        for record in records[index]:
            key = getattr(record, protocol.record_key)
            if key in where:
                raise MergeRefused(f"unit {key!r} is recorded by both {where[key].name} (shard {where[key].shard}) and "
                                   f"{shard.name} (shard {shard.shard}); give each shard once")
            if key not in owners:
                raise MergeRefused(f"unit {key!r} of {shard.name} is not a unit of the run; the shard holds a "
                                   "foreign record")
            if owners[key] != shard.shard.index:
                raise MergeRefused(f"unit {key!r} of {shard.name} belongs to shard {owners[key]}/{count}, not to "
                                   f"{shard.shard}")
            held[key] = record
            where[key] = shard
    given = {s.shard.index for s in shards}
    for key in canonical_order(protocol, run, run.units):
        if key not in held:
            owner = owners[key]
            why = (f"shard {owner}/{count} is not among the inputs" if owner not in given
                   else f"shard {owner}/{count} did not record it")
            raise MergeRefused(f"unit {key!r} is recorded by no shard ({why}); measure it before merging")
    return held


def _shard_entry(shard: ShardRun, protocol: Protocol, run: ProtocolRun) -> dict[str, Any]:
    p = shard.provenance
    ledger = shard.dir / protocol.ledger_name(run)
    return {
        "shard": str(shard.shard),
        "run_dir": str(shard.dir.resolve()),
        "run_id": p.run_id,
        "host": (p.extra or {}).get("host"),
        "started_at": p.started_at,
        "resumed_at": list(p.resumed_at),
        "finished_at": p.finished_at,
        "packages": dict(p.packages),
        "hardware": dict(p.hardware),
        "git": dict(p.git),
        "runner_sha256": p.runner_sha256,
        "model": dict(p.model),
        "ledger_sha256": file_sha256(ledger)[1],
        "deviations": list(p.deviations),
    }


def _resumes(shards: list[ShardRun]) -> list[dict[str, Any]]:
    """Every shard's ``resumes.json`` entries, each naming its shard (a difference there is the run's deviation)."""
    out = []
    for shard in shards:
        path = shard.dir / RESUMES_FILE
        if not path.exists():
            continue
        try:
            entries = read_json_file(path)
        except (FileReadError, OSError) as exc:
            raise MergeRefused(f"{shard.name}: {one_line(exc)}") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise MergeRefused(f"{path} is not a list of resume entries; the shard cannot be merged")
        out.extend({**entry, "shard": str(shard.shard)} for entry in entries)
    return out


def _target(out: Path, protocol: Protocol) -> tuple[Path, str]:
    """(results folder, run id) of ``OUT``, which must be ``RESULTS/PROTOCOL/RUN_ID`` and not exist yet."""
    out = Path(os.path.abspath(out))
    if os.path.lexists(out):
        raise MergeRefused(f"{out} exists; give a new run directory RESULTS/{protocol.name}/RUN_ID")
    if out.parent.name != protocol.name:
        raise MergeRefused(f"{out} is not RESULTS/{protocol.name}/RUN_ID (a run directory lies in a folder named "
                           "after its protocol); give such a path")
    if not RUN_ID_PATTERN.match(out.name):
        raise MergeRefused(f"{out.name!r} is not a run id; use 1 to 64 letters, digits, '.', '_' and '-', starting "
                           "with a letter or digit")
    try:
        check_run_dir(out.parent.parent, protocol.name, out.name)
    except RunDirError as exc:
        raise MergeRefused(str(exc)) from None
    return out.parent.parent, out.name


def prepare(out: Path, shard_dirs: Sequence[Path]) -> tuple[Protocol, ProtocolRun, list[ShardRun], list[Any]]:
    """Every check of the merge (nothing written): the protocol, the merged run (under its final path), the
    shards in shard order and the records in the order an unsharded run records them."""
    if not shard_dirs:
        raise MergeRefused("give at least one shard directory")
    seen: dict[Path, Path] = {}
    for folder in shard_dirs:
        real = Path(os.path.realpath(folder))
        if real in seen:
            raise MergeRefused(f"{folder} is given twice (as {seen[real]}); give each shard once")
        seen[real] = Path(folder)
    shards = sorted((_read_shard(Path(d)) for d in shard_dirs), key=lambda s: s.shard)
    name = str(shards[0].identity.get("protocol"))
    protocol = registry.find(name) if registry.valid_name(name) else None
    if protocol is None:
        raise MergeRefused(f"{shards[0].name} is a run of {name!r}, which is no protocol registered here "
                           "(preregbench list)")
    _check_one_run(shards, protocol)
    results, run_id = _target(out, protocol)
    identity = _unsharded(shards[0].identity)
    started = min(s.provenance.started_at for s in shards)
    options = dict(protocol.options_from_settings(identity.get("settings") or {}))
    batch_size = shards[0].identity.get("batch_size")
    if any(o.name == "batch-size" for o in protocol.options) and batch_size is not None:
        options["batch-size"] = batch_size  # the shards' split follows their batches
    try:
        run = ProtocolRun(protocol, Run(protocol.name, run_id, results, started, protocol.folder),
                          model=identity.get("model"), device=identity.get("device"),
                          scale=protocol.scale_from_settings(identity.get("settings") or {}),
                          revision=identity.get("revision"), options=options)
        here = run.identity(identity.get("revision"))
        batches_here = protocol.batch_size(run)
    except PreregbenchError as exc:
        raise MergeRefused(f"the run of the shards cannot be rebuilt here: {one_line(exc)}") from None
    if batches_here != batch_size:
        raise MergeRefused(f"the shards measured batches of {batch_size} unit(s), this checkout batches the run by "
                           f"{batches_here} (batch_size), so their split cannot be checked here")
    conflicts = identity_conflicts(identity, json.loads(json.dumps(here)))
    if conflicts:
        raise MergeRefused(f"this checkout builds another run than the shards ran: {conflicts[0]} (recorded -> here); "
                           "merge with the checkout the shards ran")
    records: dict[int, list[Any]] = {}
    for index, shard in enumerate(shards):
        _check_finished(shard, protocol)
        records[index] = _records(shard, protocol, run)
    held = _partition(shards, records, protocol, run)
    ordered = [held[key] for key in canonical_order(protocol, run, run.units)]
    return protocol, run, shards, ordered


def write(protocol: Protocol, run: ProtocolRun, shards: list[ShardRun], records: list[Any]) -> Path:
    """Write the merged run directory (built beside it, renamed into place); its path."""
    final = run.location
    staging = final.parent.parent / f".merge-{protocol.name}-{run.run_id}-{os.getpid()}"
    if os.path.lexists(staging):
        raise MergeRefused(f"{staging} exists (left by a merge that was killed); remove it and merge again")
    built = ProtocolRun(protocol, Run(protocol.name, run.run_id, staging, run.run.started_at, protocol.folder),
                        model=run.model, device=run.device, scale=run.scale, revision=run.revision,
                        options={o.name: run.option(o.name) for o in protocol.options})
    built.provenance_more = {"merged_from": [_shard_entry(s, protocol, run) for s in shards]}
    try:
        resumes = _resumes(shards)
        if resumes:
            built.dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(built.path(RESUMES_FILE), resumes)
        first = shards[0].provenance
        built.record(dict(first.model), records)
        protocol.merged(built, [s.dir for s in shards])
        for lock in built.dir.rglob(".*.lock"):
            lock.unlink()
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(built.dir, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


class _Recorded:
    """Plugin of the deciding session: the merged run's revision is the recorded one (the model is not needed)."""

    def __init__(self, revision: str):
        self.revision = revision

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[RECORDED_REVISION] = self.revision


def decide_arguments(protocol: Protocol, run: ProtocolRun) -> list[str]:
    """The ``preregbench run`` arguments that decide the merged run (same model, device and options)."""
    args = ["--results-dir", str(run.run.results_dir), "--run-id", run.run_id, "--model", run.model,
            "--device", run.device]
    for option in protocol.options:
        value = run.option(option.name)
        if value is None or value == option.default:
            continue
        for item in (value if option.repeat else [value]):
            args += [option.flag(protocol.name), str(item)]
    if importlib.util.find_spec("xdist") is not None:
        args += ["-n", "0"]  # one process: the plugin that supplies the recorded revision lives in this one
    return args


def merge(out: Path, shard_dirs: Sequence[Path], *, decide: bool = True) -> int:
    try:
        protocol, run, shards, records = prepare(out, shard_dirs)
        final = write(protocol, run, shards, records)
    except (MergeRefused, UsageProblem) as exc:
        return usage_line("preregbench merge", one_line(exc, limit=2000))
    print(f"preregbench merge: {len(records)} records of {len(shards)} shard(s) written to {final}")
    if not decide:
        return 0
    revision = str(json.loads((final / PROVENANCE_FILE).read_text(encoding="utf-8"))["model"].get("revision") or "")
    return runcmd.run([str(protocol.folder), *decide_arguments(protocol, run)], plugins=[_Recorded(revision)])


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("out", help="the merged run directory to write: RESULTS/PROTOCOL/RUN_ID (must not exist)")
    parser.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="the run directory of every shard")
    parser.add_argument("--no-decide", action="store_true", help="write the merged run without running its rule "
                        "tests (run them later with preregbench run PROTOCOL --run-id RUN_ID --results-dir RESULTS "
                        "and the shards' options)")


def command(args: argparse.Namespace) -> int:
    return merge(Path(args.out), [Path(d) for d in args.shards], decide=not args.no_decide)


def main(argv: list[str] | None = None) -> int:
    return run_command("preregbench merge", DESCRIPTION, add_arguments, command, argv)


__all__ = ["DESCRIPTION", "MergeRefused", "merge", "prepare", "write"]
