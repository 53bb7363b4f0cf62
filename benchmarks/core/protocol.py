"""The protocol shape: a protocol declares its science, core runs it.

A protocol package subclasses :class:`Protocol` once, in its own module,
declaring only what is particular to it: the preregistration schema, its
options, its units (fixture items), how one batch of units is measured into
typed records, its metrics, summary extras, extra result files and figures,
and its deviations beyond the shared ones.  Everything else is written here
once for every protocol:

* the run settings, resolved from the command line and the preregistration
  (:class:`ProtocolRun`), and the *identity* of a run: model, revision,
  device, preregistration hash, fixture hashes and settings.  Every ledger
  line carries that identity, so a resume with another model, revision,
  fixture set or settings is refused before anything is written, whatever
  sidecar files exist;
* the measurement under the run lock (one xdist worker measures, the others
  read), the ledger with resume, provenance written before the first unit;
* the fixtures file, the summary, the result files and figures;
* the generated rule and completeness tests and the session fixtures
  (:mod:`benchmarks.core._generated`), and the usage checks at collection
  (:mod:`benchmarks.core.modelrun`).

See ``benchmarks/core/WRITING_A_PROTOCOL.md`` for a walk-through.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Generic, Hashable, Iterable, Mapping, Sequence, TypeVar

import pytest

from ._canonical import _plain, sha256_json
from .ledger import IDENTITY_KEY, Ledger, LedgerError, read_identities, read_ledger
from .prereg import ClassificationSpec, Prereg, header_record, load_prereg, unrecorded
from .progress import Progress
from .provenance import Provenance, ProvenanceError, read_provenance
from .rules import Classification, RuleError
from .rundir import PROVENANCE_FILE, Run

U = TypeVar("U")
R = TypeVar("R")

FIXTURES_FILE = "fixtures.json"
SUMMARY_SCHEMA_VERSION = 1
FIXTURES_SCHEMA_VERSION = 1


class UsageProblem(ValueError):
    """A run was asked for something it cannot do; the message is one line saying what to do instead."""


class ResumeRefused(UsageProblem):
    """A session asked to resume a run that was started with another model, revision, fixture set or settings."""


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class Option:
    """One protocol option, registered as ``--<protocol>-<name>`` in the ``preregbench`` group.

    ``choices`` may be a sequence or a zero-argument callable returning one
    (for registries that fill at import); ``minimum`` bounds numbers; ``repeat``
    collects every use into a list; ``alias`` keeps an older spelling working
    for one release.
    """

    name: str
    help: str
    type: type = str
    default: Any = None
    choices: Sequence[Any] | Callable[[], Sequence[Any]] | None = None
    minimum: float | None = None
    repeat: bool = False
    alias: str | None = None

    def flag(self, protocol: str) -> str:
        return f"--{protocol}-{self.name}"

    def dest(self, protocol: str) -> str:
        return f"{protocol}_{self.name}".replace("-", "_")

    def check(self, protocol: str, value: Any) -> Any:
        """The value, or a :class:`UsageProblem` naming the valid ones."""
        if value is None or self.repeat:
            return value
        flag = self.flag(protocol)
        if self.choices is not None:
            valid = list(self.choices() if callable(self.choices) else self.choices)
            if value not in valid:
                raise UsageProblem(f"{flag} {value!r} is not valid; choose one of: {', '.join(map(str, valid))}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageProblem(f"{flag} must be a finite number, got {value}; give a number such as 30")
        if self.minimum is not None and value < self.minimum:
            raise UsageProblem(f"{flag} must be at least {self.minimum:g}, got {value:g}")
        return value


@dataclass(frozen=True)
class ModelChoice:
    """The preregistered model of a run: hub id (or registry name) and the revision to resolve."""

    id: str
    revision: str | None = None


# --------------------------------------------------------------------------- the protocol


class Protocol(Generic[U, R]):
    """Base of every protocol.  Subclass it in ``benchmarks/<name>/protocol.py`` and instantiate it once.

    Class attributes a subclass sets:

    * ``prereg_schema``: the frozen dataclass ``prereg.toml`` is validated against;
    * ``record_type``: the ledger record (a frozen dataclass with ``SCHEMA_VERSION``);
    * ``record_key``: the record field that names its unit;
    * ``options``: the protocol's own :class:`Option` s;
    * ``rule_blocks``: prereg keys of the classifications the run decides (default: every
      ``ClassificationSpec`` field, in declaration order); ``breakdown_blocks``: classifications
      reported beside them, whose rule tests skip (naming the metric) where a metric they read is
      undefined instead of breaking the run;
    * ``title``: the name used in messages (default: the folder name);
    * ``summary_file``: where the summary goes (default ``summary.json``);
    * ``figures``: file names of the figures :meth:`write_figures` writes (the reports' figures come from
      :meth:`report_figures`).

    Methods a subclass overrides are grouped below: settings, units, measurement, results.
    """

    prereg_schema: ClassVar[type]
    record_type: ClassVar[type]
    record_key: ClassVar[str] = "unit_id"
    options: ClassVar[tuple[Option, ...]] = ()
    rule_blocks: ClassVar[tuple[str, ...] | None] = None
    breakdown_blocks: ClassVar[tuple[str, ...]] = ()
    title: ClassVar[str | None] = None
    summary_file: ClassVar[str] = "summary.json"
    figures: ClassVar[tuple[str, ...]] = ()
    #: Keyword under which a scripted model receives the run's answer key (see :meth:`scripted_answer`).
    scripted_keyword: ClassVar[str] = "gold"

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder or Path(inspect.getfile(type(self))).parent).resolve()
        self.name = self.folder.name
        self.prereg: Prereg = load_prereg(self.folder / "prereg.toml", self.prereg_schema)
        self.spec = self.prereg.values
        blocks = [f.name for f in dataclasses.fields(self.spec) if isinstance(getattr(self.spec, f.name), ClassificationSpec)]
        chosen = list(self.rule_blocks) if self.rule_blocks is not None else [b for b in blocks if b not in self.breakdown_blocks]
        unknown = sorted(set(chosen + list(self.breakdown_blocks)) - set(blocks))
        if unknown:
            raise TypeError(f"{type(self).__name__}: {unknown} are not classification blocks of {self.prereg.path}")
        thresholds = getattr(self.spec, "thresholds", None) or {}  # the table itself: each rule reads what it names
        compiled = {key: getattr(self.spec, key).build(thresholds) for key in blocks}
        #: The classifications the run decides, by prereg key, in declaration order.
        self.classifications: dict[str, Classification] = {key: compiled[key] for key in chosen}
        #: Classifications reported as a breakdown (undefined inputs skip rather than break).
        self.breakdowns: dict[str, Classification] = {key: compiled[key] for key in self.breakdown_blocks}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    @property
    def label(self) -> str:
        return self.title or self.name

    # ----------------------------------------------------------------- settings (collection time, every process)

    def preregistered_model(self, scale: str | None) -> ModelChoice:
        """The model a run uses when ``--model`` is not given (default: the prereg's ``[model]`` table)."""
        model = self.spec.model
        return ModelChoice(model.id, getattr(model, "revision", None))

    def default_device(self) -> str:
        return self.spec.model.device

    def configure(self, run: "ProtocolRun") -> Any:
        """This run's protocol settings from ``run.option(...)``; raise :class:`UsageProblem` on a bad value.

        The result is a frozen dataclass or a mapping of JSON values; it enters the run's identity.
        """
        return {}

    def settings_record(self, settings: Any) -> dict[str, Any]:
        """The JSON form of the settings (identity, provenance, summary)."""
        return dict(_plain(settings)) if settings is not None else {}

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The protocol options that reproduce a recorded run's settings (``settings_record``), for ``verify`` to
        rebuild the run's own fixture sets; default: none (the default options)."""
        return {}

    def recognize_model(self, name: str) -> None:
        """Register a model name that the protocol builds on demand (e.g. parametrized scripted workers)."""

    def resume_problems(self, run: "ProtocolRun") -> list[str]:
        """Reasons the existing run directory cannot be resumed beyond core's identity check (reading only),
        e.g. a protocol's own state file written by another run; each is refused before any test."""
        return []

    def deviations(self, run: "ProtocolRun") -> list[str]:
        """Ways this run departs from the preregistration beyond the shared ones (model, device)."""
        return []

    def seeds(self, run: "ProtocolRun") -> dict[str, int]:
        return unrecorded(getattr(self.spec, "seeds", None) or {})  # recorded, not used: each seed is read where it seeds

    # ----------------------------------------------------------------- units

    def fixture_sets(self, run: "ProtocolRun") -> dict[str, Any]:
        """The fixture sets this run uses, by name: the JSON records each set consists of.

        A set registered in ``fixtures.FIXTURE_SETS`` goes under its registered name (its frozen hash is
        then the one recorded); other material the units are built from (generated pairs, a probe's
        episodes) goes under a name of the protocol's own, so that it enters the run's identity too.
        """
        raise NotImplementedError(f"{type(self).__name__} must say which fixture sets it uses")

    def fixture_extras(self, run: "ProtocolRun") -> dict[str, Any]:
        """Further facts about the fixtures written into ``fixtures.json`` (audits, variant names)."""
        return {}

    def units(self, run: "ProtocolRun") -> Sequence[U]:
        """Every unit of the run, in a fixed order."""
        raise NotImplementedError(f"{type(self).__name__} must list its units")

    def unit_key(self, unit: U) -> str:
        """The ledger key of a unit (the value its record carries in ``record_key``)."""
        return getattr(unit, self.record_key)

    def ledger_name(self, run: "ProtocolRun") -> str:
        """The ledger's path inside the run directory."""
        return "records.jsonl"

    def find_ledger(self, run_dir: Path) -> Path | None:
        """The ledger of the finished run in ``run_dir`` (for tools that read a run without a session), or None."""
        path = Path(run_dir) / "records.jsonl"
        return path if path.is_file() else None

    def paired_outcomes(self, records: Sequence[R]) -> dict[str, dict[str, bool]]:
        """Per-unit binary outcomes two runs are compared on (``preregbench compare``):
        measure name -> unit key -> success.  Empty: the protocol declares none."""
        return {}

    def paired_clusters(self, records: Sequence[R]) -> dict[str, Hashable]:
        """Unit key -> the cluster it shares structure with, for the units of :meth:`paired_outcomes` whose
        outcomes are not independent (CWR: replicas of one base pair).  ``preregbench compare`` gives a
        measure whose units carry a cluster a cluster-aware interval.  Empty: every unit is independent."""
        return {}

    def paired_statistics(self, records_a: Sequence[R], records_b: Sequence[R]) -> list[dict[str, Any]]:
        """Statistics of two runs on the same fixtures that are not per-unit successes (P-Zombie's eta^2 and
        R^2), each compared by the protocol's own paired method: a list of rows with ``measure``, ``units``,
        ``value_a``, ``value_b``, ``difference`` and ``interval`` (``low``, ``high``, ``confidence``,
        ``method``), plus whatever the method rests on (resamples, seed).  Empty: none."""
        return []

    # ----------------------------------------------------------------- measurement

    def model_options(self, run: "ProtocolRun") -> dict[str, Any]:
        """Keyword options for ``models.load_model``: for a local or hub model the device, dtype, batch size
        and torch seed; for a served model (``openai:MODEL@URL``) the revision label and the key's variable."""
        if run.model.startswith("openai:"):
            served = {"revision": run.revision, "api_key_env": run.api_key_env}
            return {k: v for k, v in served.items() if v}
        options: dict[str, Any] = {"device": run.device}
        model = getattr(self.spec, "model", None)
        for key in ("dtype", "batch_size"):
            if hasattr(model, key):
                options[key] = getattr(model, key)
        seeds = getattr(self.spec, "seeds", None) or {}
        if "torch" in seeds:
            options["seed"] = seeds["torch"]  # the loader seeds torch, Python's random and NumPy with it
        if run.revision:
            options["revision"] = run.revision
        return options

    def chat(self, run: "ProtocolRun", unit: U) -> list[dict[str, str]]:
        """The chat a unit sends (also how a scripted model's answer key is looked up)."""
        raise NotImplementedError(f"{type(self).__name__} must build a chat per unit to use the default measurement")

    def scripted_answer(self, run: "ProtocolRun", unit: U) -> Any:
        """What a scripted model is told about a unit (the gold label, the true checks, ...)."""
        raise NotImplementedError(f"{type(self).__name__} does not run scripted models")

    def answer_key(self, run: "ProtocolRun") -> "AnswerKey":
        return AnswerKey()

    def load_model(self, run: "ProtocolRun") -> Any:
        """Load the run's model; a scripted model gets the run's answer key, filled from every unit's rendered chat."""
        import models

        if models.model_kind(run.model) == "scripted":
            key = self.answer_key(run)
            model = models.load_model(run.model, **{self.scripted_keyword: key})
            for unit in run.units:
                key.add(model.render_chat(self.chat(run, unit)), self.scripted_answer(run, unit))
            return model
        return models.load_model(run.model, **self.model_options(run))

    def check_model(self, run: "ProtocolRun", model: Any) -> None:
        """Refuse a model the protocol cannot measure (called after loading, before anything is written)."""

    def batch_size(self, run: "ProtocolRun") -> int:
        return int(getattr(getattr(self.spec, "model", None), "batch_size", 1) or 1)

    def batches(self, run: "ProtocolRun", todo: Sequence[U]) -> Iterable[Sequence[U]]:
        step = max(1, self.batch_size(run))
        for start in range(0, len(todo), step):
            yield todo[start:start + step]

    def measure(self, run: "ProtocolRun", model: Any, batch: Sequence[U]) -> Sequence[R]:
        """Measure one batch of units with the model into records (one per unit, in order)."""
        raise NotImplementedError(f"{type(self).__name__} must measure a batch")

    def started(self, run: "ProtocolRun", description: Mapping[str, Any]) -> None:
        """Called once provenance is written, before the first unit (e.g. to write a sidecar file)."""

    def provenance_extra(self, run: "ProtocolRun") -> dict[str, Any]:
        return {}

    def run_units(self, run: "ProtocolRun", todo: Sequence[U], append: Callable[[R], None]) -> None:
        """Measure ``todo``: load the model, start the run, measure batch by batch, append every record.

        A protocol that drives its model itself (in child processes, say) overrides this, calls
        ``run.start(description)`` before its first record and ``append`` once per unit.
        """
        if type(self).report_figures is not Protocol.report_figures and _loads_weights(run.model):
            from .report import draw_figures_ahead

            # Loading torch and the weights keeps one core busy for seconds: a forked copy of this process
            # readies matplotlib on the other and draws the report's figures when the report is written.
            draw_figures_ahead(self, run.location)
        model = self.load_model(run)
        # What exists now (the model, its libraries' modules) outlives the measurement: frozen out of
        # the cycle collector's generations, it is not walked again by every full collection the
        # batches trigger (each one a walk over torch's and transformers' object graphs, about 0.1 s on
        # a 2-core machine).  Unfrozen when the measurement ends, so a long-lived process (a test
        # worker running many protocols) collects it as before.
        gc.freeze()
        try:
            self.check_model(run, model)
            run.start(model.describe().as_dict())
            for batch in self.batches(run, todo):
                for record in self.measure(run, model, batch):
                    append(record)
        finally:
            gc.unfreeze()
            model.close()

    # ----------------------------------------------------------------- results

    def metrics(self, run: "ProtocolRun", records: Sequence[R]) -> dict[str, Any]:
        """Every metric of the run, flat; an undefined value is None or NaN (a rule reading it cannot decide)."""
        raise NotImplementedError(f"{type(self).__name__} must compute its metrics")

    def summary(self, run: "ProtocolRun", records: Sequence[R], measured: Mapping[str, Any]) -> dict[str, Any]:
        """Protocol-specific keys added to the summary."""
        return {}

    def result_files(self, run: "ProtocolRun", records: Sequence[R],
                     measured: Mapping[str, Any]) -> dict[str, Callable[[], Any]]:
        """Further JSON result files: name -> builder, each written once per run."""
        return {}

    def write_figures(self, run: "ProtocolRun", records: Sequence[R], measured: Mapping[str, Any]) -> None:
        """Write the files named in ``figures`` into the run directory."""

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        """The figures of the run's ``report.html`` and ``report.md``: a list of
        :class:`benchmarks.core.report.Figure`, drawn from the files of the finished run directory ``run_dir``
        (its summary is ``summary``) with :func:`benchmarks.core.report.pyplot`.  Default: none."""
        return []

    def round_report(self, folder: Path, formats: str) -> list[Path] | None:
        """``preregbench report`` on a folder that is no run directory: write the protocol's report over a
        round of its runs held in ``folder`` (``formats`` is html, md or both) and return the written paths,
        or None when ``folder`` is not such a round.  Default: None."""
        return None


def _loads_weights(name: str) -> bool:
    """Whether model ``name`` is one the transformers backend loads (bundled, a local folder, a hub id)."""
    import models

    try:
        return models.check_model_name(name) in {"bundled", "local", "hub"}
    except Exception:  # an unknown name fails in load_model with its own message
        return False


def finite(values: Mapping[str, Any]) -> dict[str, float]:
    """The metrics a rule may read: numbers only; None, NaN and infinities are left out, so that a rule
    reading one cannot decide (and says so) instead of passing silently."""
    return {k: float(v) for k, v in values.items()
            if isinstance(v, (int, float)) and math.isfinite(float(v))}


def json_metrics(values: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics as JSON can hold them: NaN and infinities become None."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in sorted(values.items())}


class AnswerKey:
    """Rendered prompt -> what a scripted model is told about that unit.  Calling it answers a prompt."""

    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    def add(self, prompt: str, answer: Any) -> None:
        self.entries[prompt] = answer

    def lookup(self, prompt: str) -> Any:
        try:
            return self.entries[prompt]
        except KeyError:
            import models

            raise models.ModelError("scripted model: the prompt is not one of this run's units") from None

    def __call__(self, prompt: str) -> Any:
        return self.lookup(prompt)


# --------------------------------------------------------------------------- one run of a protocol


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

    Built once per pytest session and process (``from_config``), or directly
    for tools and tests that work on a run directory outside pytest.
    """

    def __init__(self, protocol: Protocol[U, R], run: Run, *, model: str | None = None, device: str | None = None,
                 scale: str | None = None, revision: str | None = None, options: Mapping[str, Any] | None = None,
                 api_key_env: str | None = None):
        self.protocol = protocol
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
        self._ledger: Ledger | None = None
        self._started = False
        #: The pytest config of the session (for the progress line past output capture); None outside pytest.
        self.config: Any = None
        #: This session's measurement progress (:mod:`benchmarks.core.progress`); None when nothing is measured.
        self.progress: Progress | None = None

    # ----------------------------------------------------------------- from pytest

    @classmethod
    def from_config(cls, protocol: Protocol, config: Any) -> "ProtocolRun":
        """The run of ``protocol`` for this pytest session (one per process, cached on the config)."""
        from .plugin import benchmark_run

        cache = config.stash.setdefault(_RUNS, {})
        if protocol.name not in cache:
            from .modelrun import pinned_revision

            options = {o.name: _getoption(config, o.dest(protocol.name), o.default) for o in protocol.options}
            cache[protocol.name] = cls(
                protocol, benchmark_run(config, protocol.folder),
                model=config.getoption("benchmark_model"), device=config.getoption("benchmark_device"),
                scale=config.getoption("benchmark_scale"), revision=pinned_revision(config, protocol.name),
                options=options, api_key_env=_getoption(config, "benchmark_api_key_env", None),
            )
            cache[protocol.name].config = config
        return cache[protocol.name]

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
        return {
            "protocol": self.protocol.name,
            "model": self.model,
            "revision": revision if revision is not None else self.revision,
            "device": self.device,
            "prereg_sha256": self.protocol.prereg.sha256,
            "fixtures": self.fixture_hashes,
            "settings": self.settings_record,
        }

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
            extra={"settings": self.settings_record, **self.protocol.provenance_extra(self)},
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
        from .progress import Progress, terminal_emitter

        emit, tty = terminal_emitter(self.config) if self.config is not None else (None, False)
        self.progress = Progress(self.run.dir, self.protocol.name, self.run.run_id, total, done, emit=emit, tty=tty)

    def measure_all(self) -> list[R]:
        """Every unit's record: measured now for the units not yet in the ledger, under the run's lock."""
        protocol = self.protocol
        units = self.units
        with self.lock("measure"):
            self.check_resume()
            self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
            with Ledger(self.ledger_path, protocol.record_type, protocol.record_key) as ledger:
                todo = [u for u in units if protocol.unit_key(u) not in ledger]
                wanted = {protocol.unit_key(u) for u in todo}
                if not todo:
                    self.write_fixtures()
                else:
                    self._ledger = ledger
                    self._start_progress(len(units), len(units) - len(todo))
                    self.phase("loading model")
                    try:
                        protocol.run_units(self, todo, lambda record: self._append(ledger, record, wanted))
                    finally:
                        self._ledger = None
                        self._started = False
        return read_ledger(self.ledger_path, protocol.record_type)

    def record(self, description: Mapping[str, Any], records: Iterable[R]) -> list[R]:
        """Record ``records`` as measured by the model ``description`` (for tools and self-checks that
        build records without a model): the same checks, provenance, identity and ledger as a measurement."""
        protocol = self.protocol
        with self.lock("measure"):
            self.check_resume()
            self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
            with Ledger(self.ledger_path, protocol.record_type, protocol.record_key) as ledger:
                wanted = {protocol.unit_key(u) for u in self.units} - set(ledger.done)
                self._ledger = ledger
                try:
                    self.start(description)
                    for item in records:
                        self._append(ledger, item, wanted)
                finally:
                    self._ledger = None
                    self._started = False
        return self.records()

    def _append(self, ledger: Ledger, record: R, wanted: set[str]) -> None:
        if not self._started:
            raise RuntimeError(f"{self.protocol.name}: a record was appended before run.start(description)")
        key = getattr(record, self.protocol.record_key)
        if key not in wanted:
            raise ValueError(f"{self.protocol.name}: record {key!r} is not a unit this session measures")
        ledger.append(record)
        if self.progress is not None:
            self.progress.advance()

    def records(self) -> list[R]:
        """The records of a finished run (no measurement)."""
        return read_ledger(self.ledger_path, self.protocol.record_type)

    def recorded_identities(self) -> list[dict[str, Any] | None]:
        return read_identities(self.ledger_path)

    # ----------------------------------------------------------------- results

    def outcomes(self, measured: Mapping[str, Any]) -> dict[str, tuple[Any, str | None]]:
        """Each decided classification's outcome (or None) and the problem when it cannot be decided."""
        values = finite(measured)
        out = {}
        for key, block in {**self.protocol.classifications, **self.protocol.breakdowns}.items():
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
        decided = {protocol.classifications[k].name for k in protocol.classifications}
        summary = {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "protocol": protocol.name,
            "run_id": self.run_id,
            "status": "complete" if all(outcomes[n][0] is not None for n in decided) else "not_classifiable",
            "classifications": {name: (o.label if o else None) for name, (o, _) in outcomes.items()},
            "outcomes": {name: (o.as_dict() if o else None) for name, (o, _) in outcomes.items()},
            "classification_problems": {name: p for name, (_, p) in outcomes.items() if p},
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

    def write_results(self, records: Sequence[R], measured: Mapping[str, Any]) -> dict[str, Path]:
        """The summary, the protocol's result files and figures, each written once per run; name -> path."""
        protocol = self.protocol
        self.phase("writing results")
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


_RUNS = pytest.StashKey[dict]()


def _getoption(config: Any, dest: str, default: Any) -> Any:
    value = config.getoption(dest, default=None)
    return default if value is None else value


__all__ = [
    "AnswerKey",
    "FIXTURES_FILE",
    "IDENTITY_KEY",
    "ModelChoice",
    "Option",
    "Protocol",
    "ProtocolRun",
    "ResumeRefused",
    "UsageProblem",
    "finite",
    "identity_conflicts",
    "json_metrics",
]
