"""Preregistered decisions over an existing evaluation: the samples of an imported log, decided by frozen rules.

A run reads an import directory (``preregbench import inspect LOG --out DIR``
or ``preregbench import lm-eval OUTPUT --out DIR``) given with
``--imported-source DIR``: its samples are the run's units, the log's scores
its measurements.  No model runs (the run's model is the stand-in
``imported-log``, which refuses to load).  The records, the run identity, the
generated rule and completeness tests, the rescorer, ``verify`` and
``compare`` work as for any protocol.  The run directory keeps everything a
later check needs: the records carry every imported field, ``fixtures.json``
the import header (source sha256, model, creation time), so ``verify`` reads
the run directory alone (:attr:`ImportedProtocol.data_in_run_dir`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import weakref
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import models
from benchmarks.core import ModelChoice, Option, Protocol, ProtocolRun, UsageProblem, read_ledger
from benchmarks.core import LedgerError, bounded

from .importers import IMPORTERS, ImportRefused, import_log, read_import
from .scaffold import files as scaffold_files
from .metrics import (binary_outcomes, decide, first_difference, interval_methods, metric_names, metrics_of,
                      paired_mean_bootstrap)
from .spec import HERE, IMPORTED_MODEL, DecidedSample, ImportedPrereg, ImportedSample

#: The fixture set of an imported run: what identifies each unit (id, epoch, input hash, target), not the answers.
FIXTURE_SET = "imported-samples"


def _no_model(**_: Any) -> Any:
    raise models.ModelError(f"{IMPORTED_MODEL} runs no model: it stands for the samples of an imported log, read "
                            "by the protocol 'imported'")


if models.model_kind(IMPORTED_MODEL) is None:
    models.register_model(IMPORTED_MODEL, "imported", "the samples of an imported log; no model runs (protocol imported)",
                          _no_model, capabilities=())


def _parse_time(text: Any) -> _dt.datetime | None:
    try:
        value = _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)


class ImportedProtocol(Protocol[ImportedSample, DecidedSample]):
    """The samples of one imported evaluation, decided by the rules of ``prereg.toml``."""

    prereg_schema = ImportedPrereg
    record_type = DecidedSample
    record_key = "unit"
    unshardable = "its samples were measured by the imported evaluation already; there is nothing to split"
    needs: Mapping[str, str] = {}
    options = (Option("source", "the import directory (written by preregbench import ... --out DIR) whose samples "
                                "the run decides; not needed to re-read a finished run"),
               Option("baseline", "an import directory of a baseline run on the same samples (another model, say): "
                                  "the rules may then read baseline_<metric> and difference with its paired "
                                  "interval"))
    #: The units are data the run directory holds (the imported samples), not generated: ``verify`` rebuilds the
    #: fixture set from the run directory's own records.
    data_in_run_dir = True

    def __init__(self, folder: str | Path | None = None):
        super().__init__(folder)
        self._loaded: "weakref.WeakKeyDictionary[ProtocolRun, tuple[dict[str, Any], list[ImportedSample]]]" = \
            weakref.WeakKeyDictionary()
        self._baselines: "weakref.WeakKeyDictionary[ProtocolRun, Any]" = weakref.WeakKeyDictionary()

    # ----------------------------------------------------------------- the import a run reads

    def preregistered_model(self, scale: str | None) -> ModelChoice:
        return ModelChoice(self.spec.model.id)

    def default_device(self) -> str:
        return self.spec.model.device

    def _import_of(self, run: ProtocolRun) -> tuple[dict[str, Any], list[ImportedSample]]:
        """(header, samples) of the run: from ``--<protocol>-source``, else from a finished run directory."""
        if run in self._loaded:
            return self._loaded[run]
        source = run.option("source")
        if source is not None:
            try:
                loaded = read_import(source)
            except ImportRefused as exc:
                raise UsageProblem(f"--{self.name}-source: {exc}") from None
        else:
            loaded = self._from_run_dir(run.location)
        self._loaded[run] = loaded
        return loaded

    def _baseline_of(self, run: ProtocolRun) -> tuple[dict[str, Any], dict[str, ImportedSample]] | None:
        """(header, samples by unit) of the baseline import (``--<protocol>-baseline``), None without one; a
        finished run's from its ``fixtures.json`` header (the samples are then in its records)."""
        if run in self._baselines:
            return self._baselines[run]
        source = run.option("baseline")
        found: Any = None
        if source is not None:
            try:
                header, samples = read_import(source)
            except ImportRefused as exc:
                raise UsageProblem(f"--{self.name}-baseline: {exc}") from None
            found = (header, {s.unit: s for s in samples})
        elif run.option("source") is None and (run.location / "fixtures.json").is_file():
            header = self.import_header(run.location, "baseline")
            found = (header, {}) if header is not None else None
        self._baselines[run] = found
        return found

    def _from_run_dir(self, run_dir: Path) -> tuple[dict[str, Any], list[ImportedSample]]:
        fixtures = run_dir / "fixtures.json"
        if not fixtures.is_file():
            raise UsageProblem(f"give --{self.name}-source DIR, an import directory written by preregbench import "
                               "inspect|lm-eval SOURCE --out DIR")
        header = self.import_header(run_dir)
        try:
            records = read_ledger(run_dir / "records.jsonl", DecidedSample, "unit")
        except (LedgerError, OSError) as exc:
            raise UsageProblem(f"{run_dir}: the run's records cannot be read: {exc}") from None
        names = [f.name for f in dataclasses.fields(ImportedSample)]
        return header, [ImportedSample(**{n: getattr(r, n) for n in names}) for r in records]

    def import_header(self, run_dir: Path, key: str = "import") -> dict[str, Any] | None:
        """The import header a finished run recorded in its ``fixtures.json`` (``key`` "baseline": the baseline's,
        None when the run had none)."""
        path = Path(run_dir) / "fixtures.json"
        try:
            if path.stat().st_size > bounded.LIMITS.file_bytes:
                raise bounded.OverLimitError(f"{path}: {bounded.size_text(path.stat().st_size)} is over the reading "
                                             f"limit of {bounded.size_text(bounded.LIMITS.file_bytes)}")
            text = path.read_text(encoding="utf-8")
            header = bounded.loads(text, str(path)).get(key)
        except (OSError, ValueError, AttributeError) as exc:
            raise UsageProblem(f"{path}: the run's import header cannot be read: {exc}") from None
        if key == "baseline" and header is None:
            return None
        if not isinstance(header, dict):
            raise UsageProblem(f"{path}: records no {key} header")
        return header

    def configure(self, run: ProtocolRun) -> dict[str, Any]:
        if run.model != IMPORTED_MODEL:
            raise UsageProblem(f"it runs no model but reads an imported log; leave out --model {run.model} (its model "
                               f"is {IMPORTED_MODEL})")
        header, samples = self._import_of(run)
        source = self.spec.source
        if header.get("format") != source.format:
            raise UsageProblem(f"the import is of format {header.get('format')}, the prereg names {source.format}")
        tasks = sorted({s.task for s in samples})
        if tasks != [source.task]:
            raise UsageProblem(f"the import holds task(s) {', '.join(tasks) or 'none'}, the prereg names "
                               f"{source.task!r}")
        if not any(source.scorer in s.scores for s in samples):
            known = sorted({name for s in samples for name in s.scores})
            raise UsageProblem(f"no sample carries the preregistered scorer {source.scorer!r}; the log's scorers are "
                               f"{', '.join(known) or 'none'}")
        baseline = self._baseline_of(run)
        if baseline is not None and baseline[1]:
            base_header, base_samples = baseline
            if base_header.get("format") != header.get("format"):
                raise UsageProblem(f"the baseline is of format {base_header.get('format')}, the import of "
                                   f"{header.get('format')}")
            problem = first_difference(samples, list(base_samples.values()))
            if problem:
                raise UsageProblem(f"the baseline cannot be paired with the import (A: the import, B: the "
                                   f"baseline): {problem}")
        return {"format": header["format"], "task": source.task, "source_sha256": header["source"]["sha256"],
                "baseline_sha256": baseline[0]["source"]["sha256"] if baseline is not None else None}

    def deviations(self, run: ProtocolRun) -> list[str]:
        header, _ = self._import_of(run)
        if header.get("status") not in (None, "success"):
            return [f"the log's status is {header.get('status')!r}, not 'success'"]
        return []

    def seeds(self, run: ProtocolRun) -> dict[str, int]:
        """The one seed an imported run's figures use: the paired bootstrap ``preregbench compare`` draws for a
        score that is not 0 or 1."""
        return {"paired_bootstrap": 0}

    def data_created(self, run_dir: Path) -> tuple[str, str] | None:
        """When the run's data first existed (for ``verify``'s prospective check): the earlier of the log's
        creation time and its earliest sample time, and what that time is."""
        try:
            header = self.import_header(run_dir)
        except UsageProblem:
            return None
        found = [(t, what) for t, what in ((header.get("created_at"), "created"),
                                           (header.get("earliest_sample_at"), "first sample started"))
                 if _parse_time(t) is not None]
        if not found:
            return None
        time, what = min(found, key=lambda pair: _parse_time(pair[0]))
        return str(time), f"the imported {header.get('format')} log {header['source']['name']} ({what})"

    # ----------------------------------------------------------------- units

    def units(self, run: ProtocolRun) -> list[ImportedSample]:
        return list(self._import_of(run)[1])

    def unit_key(self, unit: ImportedSample) -> str:
        return unit.unit

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        return {FIXTURE_SET: [{"unit": s.unit, "sample_id": s.sample_id, "epoch": s.epoch, "task": s.task,
                               "input_sha256": s.input_sha256, "target": s.target} for s in run.units]}

    def fixture_extras(self, run: ProtocolRun) -> dict[str, Any]:
        baseline = self._baseline_of(run)
        return {"import": self._import_of(run)[0], "baseline": baseline[0] if baseline is not None else None}

    # ----------------------------------------------------------------- measurement: reading the import

    def run_units(self, run: ProtocolRun, todo: Sequence[ImportedSample], append: Callable[[DecidedSample], None]) -> None:
        header, _ = self._import_of(run)
        run.start({
            "id": header.get("model") or "unknown",
            # A log seldom records an immutable model revision; what the run decides is the log itself, so the
            # run's revision is the sha256 of the imported file, and the model revision the log records is kept.
            "revision": header["source"]["sha256"],
            "backend": "imported",
            "log_format": header.get("format"),
            "log_model_revision": header.get("model_revision"),
        })
        baseline = self._baseline_of(run)
        for sample in todo:
            append(decide(sample, self.spec.source, baseline[1][sample.unit] if baseline is not None else None))

    # ----------------------------------------------------------------- results

    def metrics(self, run: ProtocolRun, records: Sequence[DecidedSample]) -> dict[str, Any]:
        return metrics_of(records, self.spec.source)

    def metric_names(self) -> tuple[str, ...]:
        return metric_names(self.spec.source)

    def summary(self, run: ProtocolRun, records: Sequence[DecidedSample], measured: Mapping[str, Any]) -> dict[str, Any]:
        return {"import": self._import_of(run)[0], "interval_methods": interval_methods(records, self.spec.source)}

    # ----------------------------------------------------------------- compare

    def pairing_problem(self, records_a: Sequence[DecidedSample], records_b: Sequence[DecidedSample]) -> str | None:
        """Why two imported runs cannot be compared sample by sample (the first difference), or None."""
        return first_difference(records_a, records_b)

    def paired_outcomes(self, records: Sequence[DecidedSample]) -> dict[str, dict[str, bool]]:
        return binary_outcomes(records, self.spec.source)

    def paired_clusters(self, records: Sequence[DecidedSample]) -> dict[str, Any]:
        sizes: dict[str, int] = {}
        for record in records:
            sizes[record.cluster] = sizes.get(record.cluster, 0) + 1
        if all(size == 1 for size in sizes.values()):
            return {}
        return {r.unit: r.cluster for r in records}

    def paired_statistics(self, records_a: Sequence[DecidedSample], records_b: Sequence[DecidedSample]) -> list[dict[str, Any]]:
        source = self.spec.source
        if binary_outcomes(records_a, source) and binary_outcomes(records_b, source):
            return []  # binary scores: compared unit by unit (McNemar, paired interval)
        found = paired_mean_bootstrap({r.unit: r for r in records_a}, {r.unit: r for r in records_b},
                                      source.confidence)
        if not found["units"]:
            return []
        return [{"measure": f"{source.scorer} mean", "units": found["units"], "value_a": found["value_a"],
                 "value_b": found["value_b"], "difference": found["difference"],
                 "interval": {"low": found["low"], "high": found["high"], "confidence": source.confidence,
                              "method": "paired-cluster-bootstrap", "clusters": found["clusters"]},
                 "resamples": found["resamples"], "seed": found["seed"]}]

    # ----------------------------------------------------------------- importers (preregbench import)

    def importers(self) -> dict[str, Callable[..., dict[str, Any]]]:
        return {fmt: (lambda source, out, task=None, _fmt=fmt: import_log(_fmt, source, out, task)) for fmt in IMPORTERS}

    def import_scaffold(self, name: str, log: str | Path, folder: str, fmt: str | None = None,
                        task: str | None = None) -> dict[str, str]:
        """The files of a protocol folder ``name`` over samples like those of ``log`` (``preregbench new NAME
        --from-import LOG``): relative path -> text.  ``fmt`` defaults to what the path looks like: a folder or a
        ``results_*.json`` is lm-eval output, a ``.eval`` or ``.json`` file an inspect_ai log."""
        log = Path(log)
        if fmt is None:
            fmt = "lm-eval" if log.is_dir() or log.name.startswith("results_") else "inspect"
        if fmt not in IMPORTERS:
            raise UsageProblem(f"unknown log format {fmt!r}; choose one of: {', '.join(IMPORTERS)}")
        try:
            header, samples = IMPORTERS[fmt](log, task)
            return scaffold_files(header, samples, name, folder)
        except ValueError as exc:  # ImportRefused, or a log without any score
            raise UsageProblem(" ".join(str(exc).split())) from None


PROTOCOL = ImportedProtocol(HERE)

__all__ = ["FIXTURE_SET", "ImportedProtocol", "PROTOCOL"]
