"""Importers: an inspect_ai log or lm-evaluation-harness output into an import directory of this suite.

An import directory holds two files:

* ``samples.jsonl``: one line per sample and epoch (:class:`ImportedSample`),
  primitive fields only, in the log's sample order (sample, then epoch);
* ``import.json``: where the samples came from: the source file's name,
  size and sha256, the format, task and task version, the model and its
  revision where the log records one, package versions, the git revision,
  the log's creation time and its earliest sample time, and the log's own
  aggregate figures.

Both readers refuse, with one line naming the file and what is wrong
(:class:`ImportRefused`), before anything is written: a file that is not a
log of the format, a truncated or corrupted log, a log of several tasks
where none is chosen, a sample id recorded twice, and a log whose samples
disagree with its own header (lm-evaluation-harness: a sample's doc, prompt
or target hash, the task hash over all samples, the aggregate metric;
inspect_ai: the header's sample ids and counts, the per-sample reductions and
the aggregate accuracy).  An errored sample is imported with its error and
no scores: it is counted as an error, never dropped.

inspect_ai is an optional dependency (the ``inspect`` extra); its logs are
read through ``inspect_ai.log.read_eval_log``.  lm-evaluation-harness never
is: its results JSON and samples JSONL are read as plain files through the
suite's bounded reader (:mod:`benchmarks.core.bounded`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from benchmarks.core import (LedgerError, PreregbenchError, atomic_write_bytes, atomic_write_json, canonical_json,
                             read_ledger, sha256_json)
from benchmarks.core import bounded
from benchmarks.core.bounded import OverLimitError

from .spec import HEADER_FILE, HEADER_SCHEMA_VERSION, SAMPLES_FILE, ImportedSample, score_number

#: Numeric agreement asked of a log's aggregate figure and the same figure recomputed from its samples.
TOLERANCE = 1e-9


class ImportRefused(PreregbenchError, ValueError):
    """A log that cannot be imported; the message is one line naming the file and what is wrong."""


# --------------------------------------------------------------------------- shared


def _sha256_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _plain(value: Any) -> Any:
    """``value`` as JSON data (pydantic models dumped, tuples as lists, other objects as text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump(mode="json", exclude_none=True))
    return str(value)


def _input_sha256(value: Any) -> str:
    """sha256 of the canonical JSON of an input (a text's canonical JSON is its JSON string, spelled directly)."""
    if isinstance(value, str):
        try:
            return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()
        except UnicodeEncodeError:  # a lone surrogate: as sha256_json spells it
            pass
    return sha256_json(value)


def _line(body: Mapping[str, Any]) -> bytes:
    """One ``samples.jsonl`` line: the canonical JSON of a record of plain values (as the suite's ledger writes it:
    sorted keys, compact, non-ASCII kept, escaped only where a lone surrogate leaves no UTF-8 form)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
                + "\n").encode("ascii")


def _unit(sample_id: str, epoch: int) -> str:
    return f"{sample_id}#{epoch}"


def _source(path: Path) -> dict[str, Any]:
    digest, size = _sha256_file(path)
    return {"name": path.name, "sha256": digest, "bytes": size}


def _earliest(times: Iterable[str | None]) -> str | None:
    parsed = [(t, _parse_time(t)) for t in times if t]
    parsed = [(t, p) for t, p in parsed if p is not None]
    return min(parsed, key=lambda pair: pair[1])[0] if parsed else None


def _parse_time(text: str) -> _dt.datetime | None:
    try:
        value = _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)


def _check_unique(samples: Sequence[ImportedSample], where: str) -> None:
    seen: set[str] = set()
    for sample in samples:
        if sample.unit in seen:
            raise ImportRefused(f"{where}: sample {sample.sample_id!r} epoch {sample.epoch} appears twice; a log "
                                "records each sample and epoch once")
        seen.add(sample.unit)


def _header(fmt: str, source: Mapping[str, Any], samples: Sequence[ImportedSample], **fields: Any) -> dict[str, Any]:
    ids = list(dict.fromkeys(s.sample_id for s in samples))
    return {
        "schema_version": HEADER_SCHEMA_VERSION,
        "format": fmt,
        "source": dict(source),
        "samples": len(ids),
        "units": len(samples),
        "epochs": max((s.epoch for s in samples), default=0),
        "errored": sum(s.error is not None for s in samples),
        "scorers": sorted({name for s in samples for name in s.scores}),
        "earliest_sample_at": _earliest(s.started_at for s in samples),
        **fields,
    }


# --------------------------------------------------------------------------- inspect_ai


def _inspect_log_reader() -> Any:
    try:
        from inspect_ai.log import read_eval_log  # optional heavy dependency, read only when an inspect log is imported
    except ImportError:
        raise ImportRefused("reading an inspect_ai log needs inspect_ai; install the 'inspect' extra "
                            "(pip install 'preregbench[inspect]')") from None
    return read_eval_log


def _check_archive(path: Path, where: str) -> None:
    """Refuse an ``.eval`` log (a zip archive) whose members unpack to more than a JSON file the suite reads whole:
    the reader would hold all of it, and a few kilobytes of archive can unpack to gigabytes.  A member never
    yields more than the size its header declares (the zip reader stops there and checks the CRC)."""
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ImportRefused(f"{where}: not a readable inspect_ai log (truncated or corrupted?): not a zip archive "
                            f"({' '.join(str(exc).split())[:200]})") from None
    if unpacked > bounded.LIMITS.file_bytes:
        raise ImportRefused(f"{where}: its members unpack to {bounded.size_text(unpacked)}, over the limit of "
                            f"{bounded.size_text(bounded.LIMITS.file_bytes)} for what the suite reads whole; split "
                            "the evaluation into several logs")


def _value_mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def import_inspect(path: str | os.PathLike[str], task: str | None = None) -> tuple[dict[str, Any], list[ImportedSample]]:
    """The header and samples of the inspect_ai log ``path`` (``.eval`` or ``.json``); :class:`ImportRefused`
    (one line) when it cannot be read or disagrees with itself."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise ImportRefused(f"{where}: no such file")
    if path.suffix not in (".eval", ".json"):
        raise ImportRefused(f"{where}: an inspect_ai log ends in .eval or .json")
    size = path.stat().st_size
    if path.suffix == ".json" and size > bounded.LIMITS.file_bytes:
        raise ImportRefused(f"{where}: {bounded.size_text(size)} is over the limit of "
                            f"{bounded.size_text(bounded.LIMITS.file_bytes)} for a JSON file the suite reads whole")
    read_eval_log = _inspect_log_reader()
    if path.suffix == ".eval":
        _check_archive(path, where)
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # the reader raises many kinds for a damaged file: name it in one line
        message = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ImportRefused(f"{where}: not a readable inspect_ai log (truncated or corrupted?): "
                            f"{type(exc).__name__}: {message}") from None
    spec = log.eval
    if task is not None and spec.task != task:
        raise ImportRefused(f"{where}: the log is of task {spec.task!r}, not {task!r}")
    if not log.samples:
        raise ImportRefused(f"{where}: the log holds no samples (was it written with log_samples=False?)")
    samples = []
    for sample in log.samples:
        sample_id = str(sample.id)
        error = sample.error.message if sample.error is not None else None
        scores = {} if error is not None else {name: _plain(score.value) for name, score in (sample.scores or {}).items()}
        data_input = _plain(sample.input)
        completion = sample.output.completion if sample.output is not None else None
        samples.append(ImportedSample(
            unit=_unit(sample_id, int(sample.epoch)), sample_id=sample_id, epoch=int(sample.epoch), task=spec.task,
            input_sha256=_input_sha256(data_input), input=data_input, target=_plain(sample.target),
            answer=None if error is not None else completion, scores=scores,
            error=" ".join(str(error).split())[:2000] if error is not None else None,
            metadata=_plain(sample.metadata or {}), started_at=_plain(getattr(sample, "started_at", None)),
        ))
    _check_unique(samples, where)
    _check_inspect_header(log, samples, where)
    revision = spec.revision
    header = _header(
        "inspect", _source(path), samples,
        task=spec.task, task_version=_plain(spec.task_version), model=spec.model,
        model_revision=_plain((spec.model_args or {}).get("revision")) if isinstance(spec.model_args, dict) else None,
        packages=_plain(spec.packages or {}), git_revision=getattr(revision, "commit", None) if revision else None,
        created_at=_plain(spec.created), status=log.status,
        log_metrics={score.name: {name: metric.value for name, metric in score.metrics.items()}
                     for score in (log.results.scores if log.results else [])},
    )
    return header, samples


def _check_inspect_header(log: Any, samples: Sequence[ImportedSample], where: str) -> None:
    """Refuse a log whose samples disagree with its header: sample ids, counts, reductions, accuracy."""
    ids = list(dict.fromkeys(s.sample_id for s in samples))
    declared = getattr(log.eval.dataset, "sample_ids", None)
    if declared:
        declared = [str(i) for i in declared]
        extra = [i for i in ids if i not in set(declared)]
        if extra:
            raise ImportRefused(f"{where}: sample {extra[0]!r} is not among the header's sample ids; the samples were "
                                "changed after the header was written")
    results = log.results
    if results is not None and results.total_samples and results.total_samples != len(samples):
        raise ImportRefused(f"{where}: the header counts {results.total_samples} samples, the log holds {len(samples)}")
    by_sample: dict[str, dict[str, list[float]]] = {}
    for sample in samples:
        for name, value in sample.scores.items():
            number = score_number(value)
            if number is not None:
                by_sample.setdefault(name, {}).setdefault(sample.sample_id, []).append(number)
    for reduction in getattr(log, "reductions", None) or []:
        if reduction.reducer not in (None, "mean"):
            continue
        per_sample = by_sample.get(reduction.scorer, {})
        for entry in reduction.samples:
            recorded = score_number(_plain(entry.value))
            values = per_sample.get(str(entry.sample_id))
            if recorded is None or not values:
                continue
            if abs(_value_mean(values) - recorded) > TOLERANCE:
                raise ImportRefused(f"{where}: sample {str(entry.sample_id)!r}: its {reduction.scorer} scores average "
                                    f"{_value_mean(values):g}, the log's reductions record {recorded:g}; the samples "
                                    "were changed after the header was written")
    for score in (results.scores if results is not None else []):
        metric = score.metrics.get("accuracy")
        per_sample = by_sample.get(score.name)
        if metric is None or score.reducer not in (None, "mean") or not per_sample:
            continue
        recomputed = _value_mean([_value_mean(v) for v in per_sample.values()])
        if abs(recomputed - metric.value) > TOLERANCE:
            raise ImportRefused(f"{where}: the header's {score.name} accuracy is {metric.value:g}, its samples give "
                                f"{recomputed:g}; the samples were changed after the header was written")


# --------------------------------------------------------------------------- lm-evaluation-harness


_RESULTS = re.compile(r"results_(?P<stamp>.+)\.json\Z")


def _lm_eval_results_file(path: Path) -> Path:
    """The results JSON of an lm-eval output: ``path`` itself, or the one ``results_*.json`` under it (at most
    two folders down: ``--output_path`` holds a folder per model)."""
    if path.is_file():
        if not _RESULTS.match(path.name):
            raise ImportRefused(f"{path}: not an lm-evaluation-harness results file (results_<time>.json)")
        return path
    if not path.is_dir():
        raise ImportRefused(f"{path}: no such file or folder")
    found = sorted(p for pattern in ("results_*.json", "*/results_*.json") for p in path.glob(pattern) if p.is_file())
    if not found:
        raise ImportRefused(f"{path}: holds no lm-evaluation-harness results_*.json (run lm_eval with --output_path "
                            "and --log_samples)")
    if len(found) > 1:
        shown = ", ".join(str(p.relative_to(path)) for p in found[:3])
        raise ImportRefused(f"{path}: holds {len(found)} results files ({shown}); give the results_*.json of the run "
                            "to import")
    return found[0]


def _read_json(path: Path) -> Any:
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ImportRefused(f"{where}: cannot be read ({exc.strerror or exc})") from None
    try:
        bounded.check_file_size(fd, where)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read()
    except OverLimitError as exc:
        raise ImportRefused(str(exc)) from None
    finally:
        os.close(fd)
    try:
        return bounded.loads(data.decode("utf-8"), where)
    except OverLimitError as exc:
        raise ImportRefused(str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportRefused(f"{where}: not JSON (truncated or corrupted?): {' '.join(str(exc).split())}") from None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _answer(filtered: Any) -> str | None:
    """What the model answered: for log-likelihood requests the index of the most likely choice, for generation
    the generated text, else the canonical JSON of the filtered responses."""
    if isinstance(filtered, list) and filtered and all(isinstance(r, list) and len(r) == 2 for r in filtered):
        try:
            scores = [float(r[0]) for r in filtered]
        except (TypeError, ValueError):
            scores = None
        if scores:
            return str(max(range(len(scores)), key=scores.__getitem__))
    if isinstance(filtered, list) and len(filtered) == 1 and isinstance(filtered[0], str):
        return filtered[0]
    if isinstance(filtered, str):
        return filtered
    return canonical_json(_plain(filtered)) if filtered is not None else None


def _lm_eval_sample(raw: Any, task: str, where: str) -> tuple[ImportedSample, str]:
    """One sample line: the imported sample and the line's hash triple (doc + prompt + target)."""
    if not isinstance(raw, dict):
        raise ImportRefused(f"{where}: not a sample object")
    try:
        doc_id, doc, target, arguments = raw["doc_id"], raw["doc"], raw["target"], raw["arguments"]
        metric_names = raw["metrics"]
        hashes = (raw["doc_hash"], raw["prompt_hash"], raw["target_hash"])
    except KeyError as exc:
        raise ImportRefused(f"{where}: lacks the field {exc.args[0]!r} of an lm-evaluation-harness sample") from None
    requests = list(arguments.values()) if isinstance(arguments, dict) else list(arguments or [])
    first = requests[0] if requests else None
    prompt = (first.get("arg_0") if isinstance(first, dict) else first[0] if isinstance(first, list) and first else None)
    if not isinstance(prompt, str):
        raise ImportRefused(f"{where}: holds no prompt (arguments)")
    doc_text = json.dumps(doc, indent=2, ensure_ascii=False)
    for name, expected, actual in (("doc", hashes[0], _sha(doc_text)), ("prompt", hashes[1], _sha(prompt)),
                                   ("target", hashes[2], _sha(str(target)))):
        if expected != actual:
            raise ImportRefused(f"{where}: doc_id {doc_id}: its {name} does not hash to the recorded {name}_hash; "
                                "the sample was changed after the log was written")
    if not isinstance(metric_names, list) or not all(isinstance(m, str) and m in raw for m in metric_names):
        raise ImportRefused(f"{where}: doc_id {doc_id}: 'metrics' names a value the sample lacks")
    sample_id = str(doc_id)
    sample = ImportedSample(
        unit=_unit(sample_id, 1), sample_id=sample_id, epoch=1, task=task, input_sha256=_input_sha256(prompt),
        input=prompt, target=_plain(target), answer=_answer(raw.get("filtered_resps")),
        scores={m: _plain(raw[m]) for m in metric_names}, error=None,
        metadata={k: v for k, v in doc.items() if isinstance(v, (str, int, float, bool)) or v is None}
        if isinstance(doc, dict) else {},
        started_at=None,
    )
    return sample, hashes[0] + hashes[1] + hashes[2]


def _lm_eval_samples(path: Path, task: str) -> tuple[list[ImportedSample], str]:
    """Every sample of a samples JSONL file, and the task hash over them (lm-eval's ``task_hashes``)."""
    samples, chained = [], hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ImportRefused(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        lines = bounded.Lines(fd, str(path))
        for number, line in lines:
            where = f"{path}: line {number}"
            try:
                raw = bounded.loads(line.decode("utf-8"), where, check_every_number=True)
            except OverLimitError as exc:
                raise ImportRefused(str(exc)) from None
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ImportRefused(f"{where}: not JSON (corrupted?): {' '.join(str(exc).split())}") from None
            sample, triple = _lm_eval_sample(raw, task, where)
            samples.append(sample)
            chained.update(triple.encode("utf-8"))
        if lines.tail:
            raise ImportRefused(f"{path}: ends in a torn line of {len(lines.tail)} bytes (the file is truncated)")
    except OverLimitError as exc:
        raise ImportRefused(str(exc)) from None
    finally:
        os.close(fd)
    return samples, chained.hexdigest()


def import_lm_eval(path: str | os.PathLike[str], task: str | None = None) -> tuple[dict[str, Any], list[ImportedSample]]:
    """The header and samples of lm-evaluation-harness output (``--output_path`` folder, a model folder in it, or a
    ``results_*.json``; its ``--log_samples`` JSONL beside it); :class:`ImportRefused` (one line) otherwise."""
    results_path = _lm_eval_results_file(Path(path))
    results = _read_json(results_path)
    where = str(results_path)
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict) or "config" not in results:
        raise ImportRefused(f"{where}: not an lm-evaluation-harness results file (no 'results' and 'config')")
    tasks = sorted(results["results"])
    if task is None:
        if len(tasks) != 1:
            raise ImportRefused(f"{where}: the run holds {len(tasks)} tasks ({', '.join(tasks)}); choose one with --task")
        task = tasks[0]
    elif task not in tasks:
        raise ImportRefused(f"{where}: the run holds no task {task!r} (it holds {', '.join(tasks)})")
    stamp = _RESULTS.match(results_path.name).group("stamp")
    samples_path = results_path.with_name(f"samples_{task}_{stamp}.jsonl")
    if not samples_path.is_file():
        raise ImportRefused(f"{where}: no samples file {samples_path.name} beside it (run lm_eval with --log_samples)")
    samples, task_hash = _lm_eval_samples(samples_path, task)
    if not samples:
        raise ImportRefused(f"{samples_path}: holds no samples")
    _check_unique(samples, str(samples_path))
    recorded_hash = (results.get("task_hashes") or {}).get(task)
    if recorded_hash and recorded_hash != task_hash:
        raise ImportRefused(f"{samples_path}: its samples do not hash to the task hash {recorded_hash[:12]} the "
                            f"results file records; samples were added, removed or reordered after the run")
    _check_lm_eval_aggregates(results["results"][task], results.get("n-samples", {}).get(task), samples, where)
    config = results.get("config") or {}
    model_args = config.get("model_args")
    pretrained = model_args.get("pretrained") if isinstance(model_args, dict) else None
    if pretrained is None and isinstance(model_args, str):
        found = re.search(r"pretrained=([^,]+)", model_args)
        pretrained = found.group(1) if found else None
    date = results.get("date")
    created = (_dt.datetime.fromtimestamp(float(date), _dt.timezone.utc).isoformat()
               if isinstance(date, (int, float)) else None)
    source = _source(samples_path)
    source["results"] = _source(results_path)
    header = _header(
        "lm-eval", source, samples,
        task=task, task_version=_plain((results.get("versions") or {}).get(task)),
        model=str(pretrained or results.get("model_name") or config.get("model") or "unknown"),
        model_revision=_plain(config.get("model_sha") or config.get("model_revision")),
        packages={k: v for k, v in (("lm_eval", results.get("lm_eval_version")),
                                    ("transformers", results.get("transformers_version"))) if v},
        git_revision=_plain(results.get("git_hash")), created_at=created, status="success",
        log_metrics={task: {k: v for k, v in results["results"][task].items() if isinstance(v, (int, float))}},
    )
    return header, samples


def _check_lm_eval_aggregates(aggregate: Mapping[str, Any], counts: Any, samples: Sequence[ImportedSample],
                              where: str) -> None:
    """The results file's per-task figures against its samples: the sample count and every mean metric."""
    effective = counts.get("effective") if isinstance(counts, dict) else None
    if isinstance(effective, int) and effective != len(samples):
        raise ImportRefused(f"{where}: the results count {effective} samples, the samples file holds {len(samples)}")
    for key, value in aggregate.items():
        metric, _, filter_name = key.partition(",")
        if not filter_name or "_stderr" in metric or not isinstance(value, (int, float)):
            continue
        values = [s.scores.get(metric) for s in samples]
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            continue
        mean = math.fsum(values) / len(values)
        if abs(mean - value) > TOLERANCE:
            raise ImportRefused(f"{where}: the results give {metric} {value:g}, the samples average {mean:g}; the "
                                "samples were changed after the results were written")


# --------------------------------------------------------------------------- the import directory


IMPORTERS = {"inspect": import_inspect, "lm-eval": import_lm_eval}


def write_import(out: str | os.PathLike[str], header: Mapping[str, Any], samples: Sequence[ImportedSample]) -> Path:
    """Write the import directory ``out`` (created; it must not hold an import already)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ImportRefused(f"{out}: exists and is not an empty folder; choose a new --out")
    out.mkdir(parents=True, exist_ok=True)
    version = ImportedSample.SCHEMA_VERSION
    atomic_write_bytes(out / SAMPLES_FILE, b"".join(_line({**sample.__dict__, "schema_version": version})
                                                    for sample in samples))
    atomic_write_json(out / HEADER_FILE, dict(header))
    return out


def import_log(fmt: str, source: str | os.PathLike[str], out: str | os.PathLike[str], task: str | None = None) -> dict[str, Any]:
    """Read ``source`` in format ``fmt`` and write the import directory ``out``; the header written."""
    if fmt not in IMPORTERS:
        raise ImportRefused(f"unknown log format {fmt!r}; choose one of: {', '.join(IMPORTERS)}")
    header, samples = IMPORTERS[fmt](source, task)
    write_import(out, header, samples)
    return header





def read_import(folder: str | os.PathLike[str]) -> tuple[dict[str, Any], list[ImportedSample]]:
    """The header and samples of an import directory, through the suite's bounded readers; :class:`ImportRefused`
    (one line) when it is not one."""
    folder = Path(folder)
    if not (folder / HEADER_FILE).is_file() or not (folder / SAMPLES_FILE).is_file():
        raise ImportRefused(f"{folder}: not an import directory (it needs {HEADER_FILE} and {SAMPLES_FILE}; write one "
                            "with preregbench import)")
    header = _read_json(folder / HEADER_FILE)
    if not isinstance(header, dict) or header.get("schema_version") != HEADER_SCHEMA_VERSION:
        raise ImportRefused(f"{folder / HEADER_FILE}: not an import header of schema version {HEADER_SCHEMA_VERSION}")
    try:
        samples = read_ledger(folder / SAMPLES_FILE, ImportedSample, "unit")
    except (LedgerError, OSError, ValueError) as exc:
        raise ImportRefused(" ".join(str(exc).split())) from None
    return header, samples

__all__ = ["IMPORTERS", "ImportRefused", "import_inspect", "import_lm_eval", "import_log", "read_import", "write_import"]
