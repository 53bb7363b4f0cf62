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

See ``docs/writing-a-protocol.md`` for a walk-through.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generic, Hashable, Iterable, Mapping, Sequence, TypeVar

import models

from ._canonical import _plain
from .errors import PreregbenchError
from .prereg import ClassificationSpec, Prereg, PreregError, load_prereg, unrecorded
from .rules import Classification

if TYPE_CHECKING:  # annotations only: the run module builds on this one
    from .run import ProtocolRun

U = TypeVar("U")
R = TypeVar("R")

class UsageProblem(PreregbenchError, ValueError):
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
      :meth:`report_figures`);
    * ``needs``: what the protocol needs from a model, capability (``models.CAPABILITIES``) -> what the
      protocol does with it; a run whose model lacks one is refused before any work (:meth:`capability_problem`).

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
    #: What the protocol needs from a model: capability -> what the protocol does with it, a phrase that follows
    #: "it" in the refusal ("scores the logits of its label tokens"), in the order the refusal names them.
    #: Default: what the shape's measurement pattern needs (render each unit's chat, send the text).
    needs: ClassVar[Mapping[str, str]] = {
        models.CHAT: "renders each unit's chat with the model's own chat template",
        models.TEXT: "sends the rendered prompt text",
    }

    #: Files of a run directory that the protocol's rescorer executes, each a byte copy of a repository file:
    #: path in the run directory -> path in the repository.  ``preregbench verify`` runs the rescorer only when
    #: every file :meth:`executed_files` names is one of these and equals the repository's file at the run's
    #: commit.  Default: none (the rescorer executes nothing of the run directory).
    shipped_code: ClassVar[Mapping[str, str]] = {}

    #: Whether the units are data the run directory itself holds (the samples of an imported log) rather than
    #: built by a seeded generator: ``preregbench verify`` then rebuilds the fixture sets from the run directory
    #: (read only) instead of from a scratch folder.
    data_in_run_dir: ClassVar[bool] = False

    #: Record fields that two measurements of the same unit may give differently without a different result
    #: (wall time, which endpoint of a pool answered): left out where records of two runs are compared as equal
    #: (shards merged against an unsharded run, say).  Default: none.
    volatile_fields: ClassVar[tuple[str, ...]] = ()

    #: Why the protocol's runs cannot be split with ``--shard K/N``, or None when they can (the default).
    unshardable: ClassVar[str | None] = None

    def merged(self, run: "ProtocolRun", shard_dirs: Sequence[Path]) -> None:
        """``preregbench merge``: after the merged run's records are written, bring into its directory what the
        shards measured besides their records (each shard's run directory in ``shard_dirs``, in shard order),
        raising :class:`UsageProblem` (one line) where they disagree.  Default: nothing (core writes the
        ledger, fixtures and provenance, and :meth:`started` writes the protocol's sidecar files)."""

    def data_created(self, run_dir: Path) -> tuple[str, str] | None:
        """When the data the run decides first existed, if before the run (an imported log's creation time), as
        (ISO 8601 time, what it is); ``preregbench verify`` reports a prereg committed after it as EXPLORATORY.
        Default: None (the data is measured by the run itself)."""
        return None

    def importers(self) -> Mapping[str, Callable[..., Any]]:
        """Log formats this protocol imports for ``preregbench import FORMAT SOURCE --out DIR``: format -> a
        callable ``(source, out, task=None)`` that writes the import directory and returns its header, raising a
        one-line :class:`PreregbenchError` for a log it cannot read.  Default: none."""
        return {}

    def import_scaffold(self, name: str, log: str | Path, folder: str, fmt: str | None = None,
                        task: str | None = None) -> dict[str, str]:
        """The files of a new protocol folder ``name`` (written at ``folder``) whose prereg is drawn from the log
        ``log`` (``preregbench new NAME --from-import LOG``): relative path -> text; :class:`UsageProblem` (one
        line) for a log it cannot read.  Default: :class:`UsageProblem` (the protocol imports no logs)."""
        raise UsageProblem(f"{self.label} scaffolds no protocol from a log")

    def executed_files(self, run_dir: Path) -> list[str]:
        """The paths in ``run_dir`` that the protocol's rescorer executes, as the run directory names them; each
        must be a key of :attr:`shipped_code` for ``preregbench verify`` to run the rescorer.  Default: the
        :attr:`shipped_code` files the run directory holds."""
        return sorted(name for name in self.shipped_code if os.path.lexists(Path(run_dir) / name))

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
        strange = sorted(set(self.needs) - set(models.CAPABILITIES))
        if strange:
            raise TypeError(f"{type(self).__name__}.needs names {strange}, which are not model capabilities; choose "
                            f"from {', '.join(models.CAPABILITIES)}")
        thresholds = getattr(self.spec, "thresholds", None) or {}  # the table itself: each rule reads what it names
        compiled = {key: getattr(self.spec, key).build(thresholds) for key in blocks}
        #: The classifications the run decides, by prereg key, in declaration order.
        self.classifications: dict[str, Classification] = {key: compiled[key] for key in chosen}
        #: Classifications reported as a breakdown (undefined inputs skip rather than break).
        self.breakdowns: dict[str, Classification] = {key: compiled[key] for key in self.breakdown_blocks}
        self._check_rule_metrics()

    def _check_rule_metrics(self) -> None:
        """Refuse a rule that reads a metric :meth:`metric_names` does not list (at collection, before any work)."""
        declared = self.metric_names()
        if declared is None:
            return
        declared = frozenset(declared)
        for key, classification in {**self.classifications, **self.breakdowns}.items():
            for rule in classification.rules:
                unknown = [name for name in rule.metrics if name not in declared]
                if unknown:
                    close = difflib.get_close_matches(unknown[0], sorted(declared), n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    raise PreregError(
                        f"{self.prereg.path}: rule {rule.label} of [{key}] reads the metric {unknown[0]!r}, which "
                        f"{self.label} does not compute; {hint}correct the rule (the metrics are "
                        f"{type(self).__name__}.metric_names())")

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

    def preregistered_scales(self) -> tuple[str, ...]:
        """The scales ``--scale`` takes, in the prereg's order (``--scale all`` runs each); default: none."""
        return ()

    def scale_from_settings(self, settings: Mapping[str, Any]) -> str | None:
        """The ``--scale`` of a recorded run's settings (``settings_record``), for ``verify`` and ``merge`` to
        rebuild the run; default: None (no scale)."""
        return None

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The protocol options that reproduce a recorded run's settings (``settings_record``), for ``verify`` to
        rebuild the run's own fixture sets; default: none (the default options)."""
        return {}

    def capability_problem(self, model: str, capabilities: Iterable[str]) -> str | None:
        """Why the model ``model``, which has ``capabilities``, cannot run this protocol (one line), or None.

        The line says what the protocol does with each capability it lacks, names the model and its kind and the
        backends that have every capability the protocol needs (``models.backends_with``).
        """
        has = frozenset(capabilities)
        missing = [name for name in self.needs if name not in has]
        if not missing:
            return None
        doing = " and ".join(self.needs[name] for name in missing)
        kind = models.kind_name(models.check_model_name(model))
        instead = models.backends_with(self.needs)
        use = f"use {' or '.join(instead)}" if instead else "no backend of this suite has all of them"
        return f"it {doing}, which {model} ({kind}) cannot do (it lacks {', '.join(missing)}); {use}"

    def recognize_model(self, name: str) -> None:
        """Register a model name that the protocol builds on demand (e.g. parametrized scripted workers)."""

    def resume_problems(self, run: "ProtocolRun") -> list[str]:
        """Reasons the existing run directory cannot be resumed beyond core's identity check (reading only),
        e.g. a protocol's own state file written by another run; each is refused before any test."""
        return []

    def deviations(self, run: "ProtocolRun") -> list[str]:
        """Ways this run departs from the preregistration beyond the shared ones (model, device)."""
        return []

    def undecided(self, run: "ProtocolRun") -> dict[str, str]:
        """Classifications this run cannot decide by its settings (a run of one of two conditions cannot decide
        their comparison): classification name -> why, one line.  Their rule tests skip with that reason, the
        summary leaves them undecided, and the run is complete without them.  Default: none."""
        return {}

    def seeds(self, run: "ProtocolRun") -> dict[str, int]:
        """Every seed the run uses, by the generator it seeds, for provenance.  Default: the prereg's ``[seeds]``
        table, and where it names a ``torch`` seed the two generators the model loader seeds with it too
        (``python_random``, ``numpy``: a local model seeds Python's ``random``, NumPy and torch before each call)."""
        seeds = unrecorded(getattr(self.spec, "seeds", None) or {})  # recorded, not used: each is read where it seeds
        if isinstance(seeds.get("torch"), int):
            seeds.setdefault("python_random", seeds["torch"])
            seeds.setdefault("numpy", seeds["torch"])
        return seeds

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

    def pairing_problem(self, records_a: Sequence[R], records_b: Sequence[R]) -> str | None:
        """Why two runs' units cannot be paired, naming the first difference (a unit only one run holds, an input
        that differs), checked by ``preregbench compare`` before anything else; None when they can be.  Default:
        None (the fixture hashes decide)."""
        return None

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
        if models.model_kind(run.model) == "scripted":
            key = self.answer_key(run)
            model = models.load_model(run.model, **{self.scripted_keyword: key})
            for unit in run.units:
                key.add(model.render_chat(self.chat(run, unit)), self.scripted_answer(run, unit))
            return model
        return models.load_model(run.model, **run.tuning.model_options(run, self.model_options(run)))

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

    def resume_units(self, run: "ProtocolRun", units: Sequence[U], recorded: frozenset) -> list[U]:
        """The units a session hands to :meth:`run_units` when the ledger holds ``recorded`` (their keys)
        already: every batch of the whole run (``batches(run, units)``) that holds a unit not yet recorded,
        whole, so that each unit is measured in the batch (with the padding) an uninterrupted run gives it.
        The recorded units of such a batch are measured again and compared with the ledger, not appended.
        When the chosen batches, batched again, would not come out the same (a protocol whose batching
        depends on more than the units' order), only the units not yet recorded are measured."""
        chosen = [list(batch) for batch in self.batches(run, list(units))
                  if any(self.unit_key(u) not in recorded for u in batch)]
        whole = [u for batch in chosen for u in batch]
        if [list(batch) for batch in self.batches(run, whole)] != chosen:
            return [u for u in units if self.unit_key(u) not in recorded]
        return whole

    def run_units(self, run: "ProtocolRun", todo: Sequence[U], append: Callable[[R], None]) -> None:
        """Measure ``todo``: load the model, start the run, measure batch by batch, append every record.

        A protocol that drives its model itself (in child processes, say) overrides this, calls
        ``run.start(description)`` before its first record and ``append`` once per unit.  The run's
        tuning (:class:`benchmarks.core.run.RunTuning`) wraps the load and the measurement.
        """
        run.tuning.before_model_load(run)
        with run.tuning.loading_model(run):
            model = self.load_model(run)
        run.tuning.model_loaded(run, model)
        try:
            with run.tuning.measuring(run):
                # Checked from the registry entry at collection already; the built model has the last word (a
                # stand-in without ``capabilities`` is not checked).
                problem = self.capability_problem(run.model, getattr(model, "capabilities", self.needs))
                if problem:
                    raise UsageProblem(f"{self.label} cannot run: {problem}")
                self.check_model(run, model)
                run.start(model.describe().as_dict())
                for batch in self.batches(run, todo):
                    for record in self.measure(run, model, batch):
                        append(record)
        finally:
            model.close()

    # ----------------------------------------------------------------- results

    def metrics(self, run: "ProtocolRun", records: Sequence[R]) -> dict[str, Any]:
        """Every metric of the run, flat; an undefined value is None or NaN (a rule reading it cannot decide)."""
        raise NotImplementedError(f"{type(self).__name__} must compute its metrics")

    def metric_names(self) -> Iterable[str] | None:
        """The name of every metric :meth:`metrics` returns, whatever the records.  When given, a rule of the
        preregistration that reads any other name is refused when the protocol is loaded (one line naming the
        rule and the name, exit 4), instead of ending a finished measurement undecided.  Default: None (not
        declared; such a rule is only found when it is evaluated)."""
        return None

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

    def scale_report(self, parent: Path, runs: Mapping[str, Path]) -> list[Path]:
        """After ``--scale all`` (:mod:`benchmarks.core.scales`): write the protocol's report across its scales
        into the group directory ``parent`` (``runs``: scale -> run directory, in the prereg's order; a scale
        that did not finish may have none) and return the written paths.  Default: nothing."""
        return []

    def round_report(self, folder: Path, formats: str) -> list[Path] | None:
        """``preregbench report`` on a folder that is no run directory: write the protocol's report over a
        round of its runs held in ``folder`` (``formats`` is html, md or both) and return the written paths,
        or None when ``folder`` is not such a round.  Default: None."""
        return None

    # ----------------------------------------------------------------- planned power (``python -m benchmarks.core.design``)

    def design_arguments(self, parser: Any) -> None:
        """Add the protocol's own options of ``python -m benchmarks.core.design PROTOCOL`` to ``parser`` (an
        ``argparse.ArgumentParser``).  Default: none."""

    def design_tables(self, args: Any) -> tuple[list[Any], list[str]]:
        """The planned-power tables of this protocol (:class:`benchmarks.core.design.Table`) and notes printed
        after them, for the parsed design options ``args``.  Default: :class:`UsageProblem` (no design)."""
        raise UsageProblem(f"{self.label} has no planned-power tables")


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
            raise models.ModelError("scripted model: the prompt is not one of this run's units") from None

    def __call__(self, prompt: str) -> Any:
        return self.lookup(prompt)


__all__ = [
    "AnswerKey",
    "ModelChoice",
    "Option",
    "Protocol",
    "ResumeRefused",
    "UsageProblem",
    "finite",
    "json_metrics",
]

