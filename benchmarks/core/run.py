"""One run of a protocol: its settings, identity, run directory, ledger and results.

:class:`ProtocolRun` is what a protocol's methods receive as ``run``.  It
resolves the run's settings from the options and the preregistration, gives
the run its *identity* (model, revision, device, preregistration hash,
fixture hashes, settings: every ledger line carries it, so a resume with
another of them is refused before anything is written), measures the units
not yet recorded under the run's lock, and writes the fixtures file, the
summary and the result files.  The pytest plugin builds one per session and
process (:func:`benchmarks.core._generated.run_of`); tools build one directly.

What the process does to run faster (the collector, the heap, threads, figures
drawn ahead) is not decided here: a run carries a :class:`RunTuning` whose
default does nothing, and the runner hands it the one it chose
(:mod:`benchmarks.core.tuning`).
"""

from __future__ import annotations

import contextlib
import platform
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from ._canonical import canonical_json, sha256_json
from .ledger import Ledger, LedgerError, read_identities, read_ledger
from .prereg import header_record, unrecorded
from .progress import Progress, terminal_emitter
from .protocol import Protocol, ResumeRefused, UsageProblem, finite, json_metrics
from .provenance import Provenance, ProvenanceError, read_provenance
from .rules import RuleError
from .rundir import PROVENANCE_FILE, Run
from .shard import Shard, ShardError, split

U = TypeVar("U")
R = TypeVar("R")

FIXTURES_FILE = "fixtures.json"
#: What each resumed session found when it measured recorded units again with their batch (see ``measure_all``).
RESUMES_FILE = "resumes.json"
SUMMARY_SCHEMA_VERSION = 1
FIXTURES_SCHEMA_VERSION = 1


class RunTuning:
    """What a process does around a run's model to go faster; this base does nothing.

    The runner (:mod:`benchmarks.core.tuning`) subclasses it.  Nothing it does
    may change a record: only where memory comes from, how the collector walks,
    how many threads compute, what another process draws meanwhile.
    """

    def model_options(self, run: "ProtocolRun", options: dict[str, Any]) -> dict[str, Any]:
        """The keyword options of ``models.load_model`` for this process (``threads="auto"`` resolved)."""
        if options.get("threads") == "auto":
            options = {**options, "threads": None}
        return options

    def before_model_load(self, run: "ProtocolRun") -> None:
        """Called once before the run loads its model."""

    @contextlib.contextmanager
    def loading_model(self, run: "ProtocolRun") -> Iterator[None]:
        """Wraps the model's load."""
        yield

    def model_loaded(self, run: "ProtocolRun", model: Any) -> None:
        """Called with the loaded model, before anything is measured."""

    @contextlib.contextmanager
    def measuring(self, run: "ProtocolRun") -> Iterator[None]:
        """Wraps the measurement of the units once the model is loaded."""
        yield

    def record(self) -> dict[str, Any]:
        """What was done, as JSON data for ``provenance.json`` (empty: nothing)."""
        return {}


def identity_conflicts(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``key: recorded -> current`` for every identity entry that differs (a None revision is not compared)."""
    out = []
    for key in sorted(set(recorded) | set(current)):
        old, new = recorded.get(key), current.get(key)
        if key == "revision" and (old is None or new is None):
            continue
        if key == "settings" and isinstance(old, Mapping) and isinstance(new, Mapping):
            out.extend(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k))
        elif key == "fixtures" and isinstance(old, Mapping) and isinstance(new, Mapping) and sorted(old) == sorted(new):
            out.extend(f"fixture set {k}: sha256 {str(old[k])[:12]} -> {str(new[k])[:12]}" for k in sorted(old) if old[k] != new[k])
        elif old != new:
            out.append(f"{key}: {old!r} -> {new!r}")
    return out


class ProtocolRun(Generic[U, R]):
    """One run of one protocol in this process: its settings, identity, run directory and results.

    Built once per pytest session and process (``_generated.run_of``), or directly
    for tools and tests that work on a run directory outside pytest.
    """

    def __init__(self, protocol: Protocol[U, R], run: Run, *, model: str | None = None, device: str | None = None,
                 scale: str | None = None, revision: str | None = None, options: Mapping[str, Any] | None = None,
                 api_key_env: str | None = None, shard: Shard | None = None):
        self.protocol = protocol
        #: The shard this session measures (``--shard K/N``), or None for the whole run.
        self.shard = shard
        if shard is not None and protocol.unshardable:
            raise UsageProblem(f"--shard {shard}: {protocol.label} cannot be sharded ({protocol.unshardable}); "
                               "run it without --shard")
        self.run = run
        self.scale = scale
        #: Name of the environment variable holding a served model's API key (never its value).
        self.api_key_env = api_key_env
        self._options = dict(options or {})
        for option in protocol.options:
            self._options[option.name] = option.check(protocol.name, self._options.get(option.name, option.default))
        preregistered = protocol.preregistered_model(scale)
        self.preregistered = preregistered
        self.model = model or preregistered.id
        self.device = device or protocol.default_device()
        #: The revision requested (``--revision``) or pinned at collection; the loaded model's is recorded.
        self.revision = revision
        self.settings = protocol.configure(self)
        self.settings_record = protocol.settings_record(self.settings)
        self._fixture_sets: dict[str, Any] | None = None
        self._fixture_hashes: dict[str, str] | None = None
        self._units: list[U] | None = None
        self._shard_units: list[U] | None = None
        #: Further facts for ``provenance.json``'s ``extra`` (a merged run lists its shards here).
        self.provenance_more: dict[str, Any] = {}
        self._ledger: Ledger | None = None
        self._started = False
        self._remeasured: dict[str, R] = {}
        #: The pytest config of the session (for the progress line past output capture); None outside pytest.
        self.config: Any = None
        #: This session's measurement progress (:mod:`benchmarks.core.progress`); None when nothing is measured.
        self.progress: Progress | None = None
        #: What the process does around the model to go faster (the runner sets its own; default: nothing).
        self.tuning: RunTuning = RunTuning()

    # ----------------------------------------------------------------- settings

    def option(self, name: str) -> Any:
        """The value of the protocol option ``name`` (its default when not given)."""
        if name not in self._options:
            known = ", ".join(o.name for o in self.protocol.options) or "none"
            raise KeyError(f"{self.protocol.name} has no option {name!r} (options: {known})")
        return self._options[name]

    @property
    def deviations(self) -> list[str]:
        """Every way this run departs from the preregistration (shared ones first)."""
        found = []
        if self.model != self.preregistered.id:
            found.append(f"model {self.model!r} instead of the preregistered {self.preregistered.id!r}")
        if self.device != self.protocol.default_device():
            found.append(f"device {self.device!r} instead of {self.protocol.default_device()!r}")
        differing = sorted({k for entry in self._resumes() for k in entry.get("differing", [])})
        if differing:
            found.append(f"a resumed session measured {len(differing)} recorded unit(s) again with their batch and "
                         f"got other values than the ledger holds (first: {differing[0]!r}; see {RESUMES_FILE})")
        return found + list(self.protocol.deviations(self))

    @property
    def fixture_sets(self) -> dict[str, Any]:
        if self._fixture_sets is None:
            self._fixture_sets = dict(self.protocol.fixture_sets(self))
        return self._fixture_sets

    @property
    def fixture_hashes(self) -> dict[str, str]:
        if self._fixture_hashes is None:
            self._fixture_hashes = {name: sha256_json(rows) for name, rows in sorted(self.fixture_sets.items())}
        return dict(self._fixture_hashes)

    def identity(self, revision: str | None = None) -> dict[str, Any]:
        """What every record of this run carries: model, revision, device, prereg, fixtures and settings."""
        identity = {
            "protocol": self.protocol.name,
            "model": self.model,
            "revision": revision if revision is not None else self.revision,
            "device": self.device,
            "prereg_sha256": self.protocol.prereg.sha256,
            "fixtures": self.fixture_hashes,
            "settings": self.settings_record,
        }
        if self.shard is not None:  # a shard resumes only as the same shard; a merged run carries neither key
            identity["shard"] = str(self.shard)
            identity["batch_size"] = self.protocol.batch_size(self)  # the split follows the run's batches
        return identity

    # ----------------------------------------------------------------- the run directory

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def dir(self) -> Path:
        return self.run.dir

    @property
    def location(self) -> Path:
        """The run directory's path, without creating it."""
        return self.run.results_dir / self.run.protocol / self.run.run_id

    def path(self, name: str) -> Path:
        return self.run.path(name)

    def once(self, name: str, compute: Callable[[], Any]) -> Any:
        return self.run.once(name, compute)

    def read_json(self, name: str) -> Any:
        return self.run.read_json(name)

    def write_json(self, name: str, value: Any) -> Path:
        return self.run.write_json(name, value)

    def lock(self, name: str):
        return self.run.lock(name)

    def load_provenance(self) -> Provenance | None:
        return self.run.load_provenance()

    @property
    def ledger_path(self) -> Path:
        return self.location / self.protocol.ledger_name(self)

    # ----------------------------------------------------------------- resume checks

    def check_resume(self, revision: str | None = None) -> None:
        """Refuse (:class:`ResumeRefused`) when the run directory holds records or provenance of another run.

        Reads only; nothing is written.  Every ledger line carries its
        identity, so the check holds whether or not sidecar files exist.
        """
        if not self.location.is_dir():
            return
        current = self.identity(revision)
        where = f"run {self.run_id}"
        try:
            identities = read_identities(self.ledger_path)
        except (LedgerError, OSError) as exc:
            raise ResumeRefused(f"{where} cannot be resumed: {exc}") from None
        for number, recorded in enumerate(identities, start=1):
            if recorded is None:
                raise ResumeRefused(f"{where}: line {number} of {self.ledger_path.name} carries no run identity, so its "
                                    "origin cannot be checked; start a new run (leave out --run-id)")
            conflicts = identity_conflicts(recorded, current)
            if conflicts:
                raise ResumeRefused(f"{where} was started with other settings ({'; '.join(conflicts)}); resume it with the "
                                    "same options, or leave out --run-id to start a new run")
        try:
            stored = read_provenance(self.location / PROVENANCE_FILE)
        except (ProvenanceError, OSError) as exc:
            raise ResumeRefused(f"{where} cannot be resumed: {exc}") from None
        if stored is not None:
            recorded = stored.identity or {}
            conflicts = identity_conflicts(recorded, current) if recorded else []
            if conflicts:
                raise ResumeRefused(f"{where} was started with other settings ({'; '.join(conflicts)}, per "
                                    f"{PROVENANCE_FILE}); resume it with the same options, or leave out --run-id")
        problems = self.protocol.resume_problems(self)
        if problems:
            raise ResumeRefused(f"{where} cannot be resumed: {'; '.join(problems)}; leave out --run-id to start a new run")

    # ----------------------------------------------------------------- units and measurement

    @property
    def units(self) -> list[U]:
        if self._units is None:
            units = list(self.protocol.units(self))
            keys = [self.protocol.unit_key(u) for u in units]
            if len(set(keys)) != len(keys):
                dupes = sorted({k for k in keys if keys.count(k) > 1})
                raise ValueError(f"{self.protocol.name}: unit keys must be unique; repeated: {dupes[:5]}")
            self._units = units
        return self._units

    @property
    def shard_units(self) -> list[U]:
        """The units this session measures: the whole run's, or those of its shard (:mod:`benchmarks.core.shard`),
        in the order an unsharded run measures them.  A shard that holds no unit is a :class:`UsageProblem`."""
        if self._shard_units is None:
            if self.shard is None:
                self._shard_units = self.units
            else:
                try:
                    mine = split(self.protocol, self, self.units, self.shard.count)[self.shard.index]
                except ShardError as exc:
                    raise UsageProblem(str(exc)) from None
                if not mine:
                    raise UsageProblem(f"--shard {self.shard}: this shard holds no unit of the run ({len(self.units)} "
                                       "units); use fewer shards")
                self._shard_units = mine
        return self._shard_units

    def write_fixtures(self) -> dict[str, Any]:
        """``fixtures.json``: every fixture set's records and sha256, plus the protocol's extras (once per run)."""
        return self.once(FIXTURES_FILE, lambda: {
            "schema_version": FIXTURES_SCHEMA_VERSION,
            "protocol": self.protocol.name,
            "sets": {name: {"sha256": sha256_json(rows), "records": rows} for name, rows in sorted(self.fixture_sets.items())},
            **self.protocol.fixture_extras(self),
        })

    def start(self, description: Mapping[str, Any]) -> None:
        """Before the first unit of this session: refuse a foreign revision, write provenance, stamp the ledger."""
        if self._ledger is None:
            raise RuntimeError("ProtocolRun.start() is called by a measurement in progress (inside measure_all)")
        revision = str(description.get("revision") or "")
        self.check_resume(revision)
        identity = self.identity(revision)
        self.write_fixtures()
        self.run.record_provenance(
            model=description,
            seeds=self.protocol.seeds(self),
            prereg=self.protocol.prereg,
            fixtures=self.fixture_hashes,
            identity=identity,
            deviations=self.deviations,
            extra={"settings": self.settings_record, **self.protocol.provenance_extra(self),
                   **({"shard": str(self.shard), "host": platform.node()} if self.shard is not None else {}), **self.provenance_more},
            tuning=self.tuning.record(),
        )
        self._ledger.identity = identity
        self._started = True
        self.protocol.started(self, description)
        self.phase("measuring")

    def phase(self, name: str) -> None:
        """Name the phase this session's measurement is in (``progress.json`` and the terminal line);
        a protocol may call it for its own phases (``calibrating``)."""
        if self.progress is not None:
            self.progress.phase(name)

    def _start_progress(self, total: int, done: int) -> None:
        emit, tty = terminal_emitter(self.config) if self.config is not None else (None, False)
        self.progress = Progress(self.run.dir, self.protocol.name, self.run.run_id, total, done, emit=emit, tty=tty)

    def measure_all(self) -> list[R]:
        """Every unit's record: measured now for the units not yet in the ledger, under the run's lock."""
        protocol = self.protocol
        units = self.shard_units
        with self.lock("measure"):
            self.check_resume()
            self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
            with Ledger(self.ledger_path, protocol.record_type, protocol.record_key) as ledger:
                recorded = ledger.done
                wanted = {protocol.unit_key(u) for u in units} - recorded
                if not wanted:
                    self.write_fixtures()
                else:
                    todo = protocol.resume_units(self, units, recorded) if recorded else list(units)
                    again = {protocol.unit_key(u) for u in todo} & recorded
                    self._remeasured = {}
                    self._ledger = ledger
                    self._start_progress(len(units), len(units) - len(wanted))
                    self.phase("loading model")
                    try:
                        protocol.run_units(self, todo, lambda record: self._append(ledger, record, wanted, again))
                    finally:
                        self._ledger = None
                        self._started = False
                    if again:
                        self._check_remeasured(ledger)
        return read_ledger(self.ledger_path, protocol.record_type, protocol.record_key)

    def _check_remeasured(self, ledger: Ledger) -> None:
        """Compare the recorded units this resumed session measured again (to measure the rest of their batch as
        an uninterrupted run does) with what the ledger holds; every comparison is kept in ``resumes.json``, and a
        difference is a deviation of the run."""
        key = self.protocol.record_key
        held = {getattr(r, key): r for r in ledger if getattr(r, key) in self._remeasured}
        differing = sorted(k for k, r in self._remeasured.items() if k not in held or not _same(held[k], r))
        history = self._resumes()
        history.append({"remeasured": sorted(self._remeasured), "differing": differing})
        self.write_json(RESUMES_FILE, history)
        self._remeasured = {}

    def _resumes(self) -> list[dict[str, Any]]:
        """What earlier resumed sessions of this run compared (``resumes.json``; empty when none did)."""
        return self.read_json(RESUMES_FILE) if self.path(RESUMES_FILE).exists() else []

    def record(self, description: Mapping[str, Any], records: Iterable[R]) -> list[R]:
        """Record ``records`` as measured by the model ``description`` (for tools and self-checks that
        build records without a model): the same checks, provenance, identity and ledger as a measurement."""
        protocol = self.protocol
        with self.lock("measure"):
            self.check_resume()
            self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
            with Ledger(self.ledger_path, protocol.record_type, protocol.record_key) as ledger:
                wanted = {protocol.unit_key(u) for u in self.shard_units} - set(ledger.done)
                self._ledger = ledger
                try:
                    self.start(description)
                    for item in records:
                        self._append(ledger, item, wanted)
                finally:
                    self._ledger = None
                    self._started = False
        return self.records()

    def _append(self, ledger: Ledger, record: R, wanted: set[str], again: frozenset = frozenset()) -> None:
        if not self._started:
            raise RuntimeError(f"{self.protocol.name}: a record was appended before run.start(description)")
        key = getattr(record, self.protocol.record_key)
        if key in again:  # measured again with its batch; compared with the ledger when the session ends
            self._remeasured[key] = record
            return
        if key not in wanted:
            raise ValueError(f"{self.protocol.name}: record {key!r} is not a unit this session measures")
        ledger.append(record)
        if self.progress is not None:
            self.progress.advance()

    def records(self) -> list[R]:
        """The records of a finished run (no measurement)."""
        return read_ledger(self.ledger_path, self.protocol.record_type, self.protocol.record_key)

    def recorded_identities(self) -> list[dict[str, Any] | None]:
        return read_identities(self.ledger_path)

    # ----------------------------------------------------------------- results

    def outcomes(self, measured: Mapping[str, Any]) -> dict[str, tuple[Any, str | None]]:
        """Each decided classification's outcome (or None) and the problem when it cannot be decided."""
        values = finite(measured)
        undecided = self.protocol.undecided(self)
        out = {}
        for key, block in {**self.protocol.classifications, **self.protocol.breakdowns}.items():
            if block.name in undecided:  # not decided by this run's settings
                out[block.name] = (None, undecided[block.name])
                continue
            try:
                out[block.name] = (block.evaluate(values), None)
            except RuleError as exc:
                out[block.name] = (None, str(exc))
        return out

    def build_summary(self, records: Sequence[R], measured: Mapping[str, Any]) -> dict[str, Any]:
        """The summary: what was decided and from what, then the protocol's own keys."""
        protocol = self.protocol
        provenance = self.load_provenance()
        outcomes = self.outcomes(measured)
        undecided = protocol.undecided(self)
        decided = {protocol.classifications[k].name for k in protocol.classifications} - set(undecided)
        summary = {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "protocol": protocol.name,
            "run_id": self.run_id,
            "status": "complete" if all(outcomes[n][0] is not None for n in decided) else "not_classifiable",
            "classifications": {name: (o.label if o else None) for name, (o, _) in outcomes.items()},
            "outcomes": {name: (o.as_dict() if o else None) for name, (o, _) in outcomes.items()},
            "classification_problems": {name: p for name, (_, p) in outcomes.items() if p},
            **({"undecided": dict(undecided)} if undecided else {}),
            "rule_order": {b.name: b.labels for b in {**protocol.classifications, **protocol.breakdowns}.values()},
            "thresholds": unrecorded(getattr(protocol.spec, "thresholds", None) or {}),
            "metrics": json_metrics(measured),
            "settings": self.settings_record,
            "deviations": self.deviations,
            "fixtures_sha256": self.fixture_hashes,
            "prereg_sha256": protocol.prereg.sha256,
            "preregistration": header_record(protocol.prereg),  # the [protocol] header: title, date, seed document
            "model": dict(provenance.model) if provenance else None,
            "runner_sha256": provenance.runner_sha256 if provenance else None,
            "packages": dict(provenance.packages) if provenance else None,
            "hardware": dict(provenance.hardware) if provenance else None,
            "git": dict(provenance.git) if provenance else None,
            "started_at": provenance.started_at if provenance else None,
            "records": {"file": protocol.ledger_name(self), "count": len(records)},
        }
        extras = protocol.summary(self, records, measured)
        clash = sorted(set(extras) & set(summary))
        if clash:
            raise ValueError(f"{protocol.name}: summary keys {clash} are written by core; name the protocol's otherwise")
        summary.update(extras)
        return summary

    def build_shard_summary(self, records: Sequence[R]) -> dict[str, Any]:
        """The summary of a shard: what it measured and under which identity, and no classification (its units are
        part of a run that is decided once its shards are merged)."""
        protocol = self.protocol
        provenance = self.load_provenance()
        names = [b.name for b in {**protocol.classifications, **protocol.breakdowns}.values()]
        return {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "protocol": protocol.name,
            "run_id": self.run_id,
            "status": "shard",
            "shard": str(self.shard),
            "classifications": {name: None for name in names},
            "classification_problems": {name: f"shard {self.shard}: decided after merge" for name in names},
            "settings": self.settings_record,
            "deviations": self.deviations,
            "fixtures_sha256": self.fixture_hashes,
            "prereg_sha256": protocol.prereg.sha256,
            "preregistration": header_record(protocol.prereg),
            "model": dict(provenance.model) if provenance else None,
            "started_at": provenance.started_at if provenance else None,
            "records": {"file": protocol.ledger_name(self), "count": len(records), "units_of_run": len(self.units)},
        }

    def write_results(self, records: Sequence[R], measured: Mapping[str, Any]) -> dict[str, Path]:
        """The summary, the protocol's result files and figures, each written once per run; name -> path.
        A shard writes its summary only (:meth:`build_shard_summary`)."""
        protocol = self.protocol
        self.phase("writing results")
        if self.shard is not None:
            self.once(protocol.summary_file, lambda: self.build_shard_summary(records))
            self.phase("finished")
            return {protocol.summary_file: self.path(protocol.summary_file)}
        self.once(protocol.summary_file, lambda: self.build_summary(records, measured))
        written = {protocol.summary_file: self.path(protocol.summary_file)}
        for name, build in protocol.result_files(self, records, measured).items():
            self.once(name, build)
            written[name] = self.path(name)
        if protocol.figures:
            with self.lock("figures"):
                if not all(self.path(name).exists() for name in protocol.figures):
                    protocol.write_figures(self, records, measured)
            written.update({name: self.path(name) for name in protocol.figures})
        self.phase("finished")
        return written


__all__ = [
    "FIXTURES_FILE",
    "ProtocolRun",
    "RunTuning",
    "identity_conflicts",
]


def _same(held: Any, again: Any) -> bool:
    """Whether a unit measured again gave the record the ledger holds, compared as the ledger writes records
    (canonical JSON); a record the ledger could not have written (a NaN, say) is not the same."""
    try:
        return canonical_json(held) == canonical_json(again)
    except (TypeError, ValueError):
        return False
