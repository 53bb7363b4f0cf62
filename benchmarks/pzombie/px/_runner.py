"""Running a prompt set through the PX-Engine: calibration first, a frozen state, then one record per prompt.

Isolation modes (``isolation=``):

``"fork"`` (full rigor on CPU)
    A pristine loader process is *spawned*; it loads the weights and never
    computes.  It forks one child for the calibration phase, which sends the
    frozen calibrator state (and the calibration records) back over a pipe,
    and then one fresh child per measured prompt, each starting from that
    frozen state.  A process that has run a multi-threaded torch operation
    cannot fork children that compute (the OpenMP pool does not survive a
    fork), which is why the loader stays pristine and why it is spawned
    rather than forked from the caller.
``"spawn"`` (full rigor on CUDA, where a forked child cannot use the device)
    Every phase (calibration, then each prompt) runs in a freshly spawned
    process that loads the weights itself.  On CPU this is "reload per prompt".
``"inprocess"`` (quick runs)
    Everything runs in the calling process; each prompt still starts from its
    own copy of the frozen state.  Timeouts are not enforced in this mode.

A prompt that times out, whose child dies, or that raises becomes a record
with an error code (:data:`PX_ERROR_CODES`) instead of a crash.  A failure to
load the model or to calibrate stops the run with :class:`PxError`: without a
frozen state nothing can be measured.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.core import tuning
from models import (
    BUNDLED,
    GenerationSettings,
    LanguageModel,
    bundled_folder,
    load_model,
)

from ._calibrator import AutoCalibrator, CalibratorState
from ._config import PRESETS, PxConfig, PxError
from ._engine import PxRecord, run_one

ISOLATION_MODES = ("fork", "spawn", "inprocess")


@dataclass(frozen=True)
class ModelSpec:
    """How a process obtains the model: ``load_model(name, **options)``, or ``factory(**options)``.

    ``factory`` must be a module-level callable (it is pickled into spawned processes).
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    factory: Callable[..., LanguageModel] | None = None

    def load(self) -> LanguageModel:
        # The process tuning of a run's model load (benchmarks.core.tuning), in the process that loads it.
        with tuning.collector_paused() if tuning.enabled() else contextlib.nullcontext():
            if self.factory is not None:
                return self.factory(**dict(self.options))
            return load_model(self.name, **dict(self.options))


@dataclass(frozen=True)
class PxPrompt:
    """One prompt: an id unique within the run and the user message (sent as a one-turn chat)."""

    id: str
    text: str


@dataclass
class PxRun:
    """What :func:`run_prompts` returns: the frozen state, every record, and how the run was made."""

    preset: str
    isolation: str
    config: dict[str, Any]  # PxConfig.as_dict()
    config_sha256: str
    settings: dict[str, Any]  # GenerationSettings as a dict (max_new_tokens, stop, penalties)
    frozen_state: dict[str, Any]  # CalibratorState.as_dict(), handed unchanged to every measured prompt
    frozen_state_sha256: str
    model: dict[str, Any]  # ModelDescription.as_dict() of the model as the computing process loaded it
    calibration_records: list[PxRecord]
    records: list[PxRecord]  # measured prompts, in input order
    seconds_calibration: float
    seconds_total: float

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k not in ("calibration_records", "records")}
        data["calibration_records"] = [r.as_dict() for r in self.calibration_records]
        data["records"] = [r.as_dict() for r in self.records]
        return data


@dataclass(frozen=True)
class _Job:
    preset: str
    config: PxConfig
    settings: GenerationSettings
    isolation: str
    cuda_alloc_conf: str | None = None  # PYTORCH_CUDA_ALLOC_CONF of every process that loads the model
    empty_cache: bool = False  # torch.cuda.empty_cache() before every generation


def _allocator(job: _Job) -> None:
    """In a process that has not loaded the model yet: the CUDA allocator's settings (read at its first use)."""
    if job.cuda_alloc_conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = job.cuda_alloc_conf


def _as_prompts(prompts: Iterable[Any], what: str) -> list[PxPrompt]:
    out: list[PxPrompt] = []
    for item in prompts:
        if isinstance(item, PxPrompt):
            out.append(item)
        elif isinstance(item, Mapping) and "text" in item and ("id" in item or "prompt_id" in item):
            out.append(PxPrompt(str(item.get("id", item.get("prompt_id"))), str(item["text"])))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            out.append(PxPrompt(str(item[0]), str(item[1])))
        elif hasattr(item, "text") and (hasattr(item, "id") or hasattr(item, "prompt_id")):
            out.append(PxPrompt(str(getattr(item, "id", None) or item.prompt_id), str(item.text)))
        else:
            raise PxError(f"{what}: cannot read {item!r} as a prompt; pass PxPrompt(id, text), a mapping with "
                          "'id' (or 'prompt_id') and 'text', or an (id, text) pair")
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise PxError(f"{what}: prompt ids must be unique; repeated: {sorted({i for i in ids if ids.count(i) > 1})}")
    return out


# -- the work itself (runs in whichever process computes) -----------------------------------------


def _calibrate(model: LanguageModel, prompts: Sequence[PxPrompt], job: _Job) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    calibrator = AutoCalibrator.warmed_up(job.config)
    records = []
    for prompt in prompts:
        before = calibrator.state.sha256()
        record = run_one(model, prompt.id, prompt.text, calibrator, preset=job.preset, settings=job.settings,
                         phase="calibration", isolation=job.isolation, state_sha256=before,
                         empty_cache=job.empty_cache)
        records.append(record.as_dict())
    return calibrator.freeze().as_dict(), records


def _measure(model: LanguageModel, prompt: PxPrompt, state: dict[str, Any], job: _Job) -> dict[str, Any]:
    frozen = CalibratorState.from_dict(state)
    sha = frozen.sha256()
    try:
        session = AutoCalibrator(job.config, frozen).session()
        record = run_one(model, prompt.id, prompt.text, session, preset=job.preset, settings=job.settings,
                         phase="measured", isolation=job.isolation, state_sha256=sha, empty_cache=job.empty_cache)
    except Exception as exc:  # noqa: BLE001 - a prompt that breaks the engine or the model is counted, not fatal
        record = _error_record(prompt, job, "backend_error", f"{type(exc).__name__}: {exc}", sha)
    return record.as_dict()


def _error_record(prompt: PxPrompt, job: _Job, code: str, detail: str, sha: str) -> PxRecord:
    return PxRecord(prompt_id=prompt.id, preset=job.preset, phase="measured", isolation=job.isolation, error=code,
                    error_detail=detail, zones=list(job.config.zones), finish_reason="error", pid=os.getpid(),
                    start_state_sha256=sha)


# -- child processes ------------------------------------------------------------------------------


def _quiet() -> None:
    """No progress bars in worker processes (they would interleave on the caller's terminal)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - the model's own loader reports the missing package
        pass


def _child_entry(target: Callable[..., Any], args: tuple, conn: Any) -> None:
    try:
        result = ("ok", target(*args))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent as text
        result = ("error", traceback.format_exc(limit=8))
    try:
        conn.send(result)
    finally:
        conn.close()


def _in_child(ctx: Any, target: Callable[..., Any], args: tuple, timeout_s: float) -> tuple[str, Any]:
    """Run ``target(*args)`` in a child of ``ctx``; ("ok", value) | ("error", traceback) | ("timeout"|"child_crashed", detail)."""
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child_entry, args=(target, args, send))
    process.start()
    send.close()
    outcome: tuple[str, Any]
    try:
        if receive.poll(timeout_s):
            try:
                outcome = receive.recv()
            except EOFError:
                process.join()
                outcome = ("child_crashed", f"the child process exited with code {process.exitcode} before answering")
        else:
            process.kill()
            outcome = ("timeout", f"no answer within {timeout_s:g} s; the child process was killed")
    finally:
        receive.close()
        process.join()
    return outcome


def _prepare_bundled(name: str) -> str:
    return str(bundled_folder(name)[0])


def _spawn_calibrate(spec: ModelSpec, prompts: Sequence[PxPrompt], job: _Job) -> tuple[dict, list, dict]:
    _quiet()
    _allocator(job)
    model = spec.load()
    state, records = _calibrate(model, prompts, job)
    return state, records, model.describe().as_dict()


def _spawn_describe(spec: ModelSpec, job: _Job) -> dict[str, Any]:
    _quiet()
    _allocator(job)
    return spec.load().describe().as_dict()


def _spawn_measure(spec: ModelSpec, prompt: PxPrompt, state: dict[str, Any], job: _Job) -> dict[str, Any]:
    _quiet()
    _allocator(job)
    return _measure(spec.load(), prompt, state, job)


def _loader_main(spec: ModelSpec, job: _Job, calibration: Sequence[PxPrompt], prompts: Sequence[PxPrompt],
                 state: dict[str, Any] | None, timeout_s: float, conn: Any) -> None:
    """The pristine loader: load, never compute, fork a child per phase and per prompt, forward the results."""
    _quiet()
    _allocator(job)
    try:
        fork = multiprocessing.get_context("fork")
        if spec.factory is None and spec.name in BUNDLED:
            # Building a missing bundled cache computes (dequantization); a child does it so this process
            # stays pristine and can still fork children that compute.
            kind, value = _in_child(fork, _prepare_bundled, (spec.name,), max(timeout_s, 1800.0))
            if kind != "ok":
                conn.send(("failed", f"preparing the bundled model {spec.name} failed ({kind}): {value}"))
                return
        model = spec.load()
        conn.send(("description", model.describe().as_dict()))
        if state is None:
            kind, value = _in_child(fork, _calibrate, (model, calibration, job), timeout_s * max(1, len(calibration)))
            if kind != "ok":
                conn.send(("failed", f"calibration {kind}: {value}"))
                return
            state, records = value
        else:
            records = []
        conn.send(("calibrated", state, records))
        sha = CalibratorState.from_dict(state).sha256()
        for prompt in prompts:
            kind, value = _in_child(fork, _measure, (model, prompt, state, job), timeout_s)
            if kind == "ok":
                conn.send(("record", value))
            else:
                code = kind if kind in ("timeout", "child_crashed") else "backend_error"
                conn.send(("record", _error_record(prompt, job, code, str(value), sha).as_dict()))
        conn.send(("done", None))
    except BaseException:  # noqa: BLE001 - reported to the caller, which raises
        conn.send(("failed", traceback.format_exc(limit=8)))
    finally:
        conn.close()


# -- the public entry point -----------------------------------------------------------------------


def calibration_summary(state: Mapping[str, Any], description: Mapping[str, Any], records: Sequence[PxRecord],
                        config: PxConfig, settings: GenerationSettings, seconds: float) -> dict[str, Any]:
    """What ``on_calibrated`` receives: everything needed to record (and later resume) a calibrated run."""
    frozen = CalibratorState.from_dict(state)
    return {
        "frozen_state": frozen.as_dict(),
        "frozen_state_sha256": frozen.sha256(),
        "model": dict(description),
        "calibration_records": [r.as_dict() for r in records],
        "config": config.as_dict(),
        "config_sha256": config.sha256(),
        "settings": asdict(settings),
        "seconds_calibration": seconds,
    }


def run_prompts(
    model: LanguageModel | ModelSpec | str,
    prompts: Iterable[Any],
    *,
    preset: str,
    config: PxConfig,
    settings: GenerationSettings,
    isolation: str = "fork",
    calibration_prompts: Iterable[Any] = (),
    on_record: Callable[[PxRecord], None] | None = None,
    on_calibrated: Callable[[dict[str, Any]], None] | None = None,
    frozen_state: Mapping[str, Any] | None = None,
    timeout_s: float,
    cuda_alloc_conf: str | None = None,
    empty_cache: bool = False,
) -> PxRun:
    """Calibrate on ``calibration_prompts`` (in order, before anything is measured), freeze the calibrator, then
    run every prompt from that frozen state under ``isolation``; ``on_record`` sees each measured record as soon
    as it exists, in input order.

    ``model``: a loaded :class:`~models.LanguageModel` (``inprocess`` only), a :class:`ModelSpec`, or a registry
    name.  ``frozen_state``: a state from an earlier run with the same config (skips calibration, e.g. to resume).
    ``on_calibrated``: called once in this process when the frozen state exists (after calibration, or at once
    with a given ``frozen_state``) and before the first measured record, with the JSON-ready dict of
    :func:`calibration_summary` (frozen state and its hash, model description, calibration records, config,
    settings, calibration wall time), so that a run killed while measuring keeps them.
    ``timeout_s``: the wall-clock limit of one prompt in an isolated process (the preregistered
    ``[run] prompt_timeout_s``); a prompt past it becomes a ``timeout`` record.
    ``cuda_alloc_conf``: ``PYTORCH_CUDA_ALLOC_CONF`` set in every process that loads the model, before it loads (in
    this process too with ``inprocess`` and a :class:`ModelSpec`); ``empty_cache``: ``torch.cuda.empty_cache()``
    before every generation.  Both for CUDA runs (the prereg's ``[run]`` operational settings).
    """
    if preset not in PRESETS:
        raise PxError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if isolation not in ISOLATION_MODES:
        raise PxError(f"unknown isolation {isolation!r}; choose one of {', '.join(ISOLATION_MODES)}")
    if timeout_s <= 0:
        raise PxError(f"timeout_s must be > 0, got {timeout_s}")
    if isinstance(model, str):
        model = ModelSpec(model)
    if isolation != "inprocess" and not isinstance(model, ModelSpec):
        raise PxError(f"isolation {isolation!r} loads the model in fresh processes: pass a ModelSpec(name, options) "
                      "(or a registry name), not a loaded model; or use isolation='inprocess'")
    if isolation == "fork" and "fork" not in multiprocessing.get_all_start_methods():
        raise PxError("isolation 'fork' needs a platform with fork(); use 'spawn'")
    measured = _as_prompts(prompts, "prompts")
    calibration = _as_prompts(calibration_prompts, "calibration_prompts")
    if frozen_state is not None:
        checked = CalibratorState.from_dict(frozen_state)
        if not checked.frozen:
            raise PxError("frozen_state is not frozen; pass the frozen_state of a finished calibration")
        AutoCalibrator(config, checked)  # raises when it belongs to another configuration
        frozen_state = checked.as_dict()
    job = _Job(preset, config, settings, isolation, cuda_alloc_conf, empty_cache)
    started = time.perf_counter()
    records: list[PxRecord] = []
    calibration_records: list[PxRecord] = []
    description: dict[str, Any] = {}
    state = dict(frozen_state) if frozen_state is not None else None
    calibrated_at = started

    def announce() -> None:
        if on_calibrated is not None:
            on_calibrated(calibration_summary(state, description, calibration_records, config, settings,
                                              calibrated_at - started))

    def deliver(data: dict[str, Any]) -> None:
        record = PxRecord.from_dict(data)
        records.append(record)
        if on_record is not None:
            on_record(record)

    if isolation == "inprocess":
        if isinstance(model, ModelSpec):
            _allocator(job)
        loaded = model.load() if isinstance(model, ModelSpec) else model
        description = loaded.describe().as_dict()
        if state is None:
            state, cal = _calibrate(loaded, calibration, job)
            calibration_records = [PxRecord.from_dict(r) for r in cal]
        calibrated_at = time.perf_counter()
        announce()
        for prompt in measured:
            deliver(_measure(loaded, prompt, state, job))
    elif isolation == "spawn":
        ctx = multiprocessing.get_context("spawn")
        if state is None:
            kind, value = _in_child(ctx, _spawn_calibrate, (model, calibration, job), timeout_s * max(1, len(calibration)))
            if kind != "ok":
                raise PxError(f"calibration failed ({kind}): {value}")
            state, cal, description = value
            calibration_records = [PxRecord.from_dict(r) for r in cal]
        elif on_calibrated is not None:
            kind, value = _in_child(ctx, _spawn_describe, (model, job), timeout_s)
            if kind != "ok":
                raise PxError(f"loading the model failed ({kind}): {value}")
            description = value
        calibrated_at = time.perf_counter()
        announce()
        sha = CalibratorState.from_dict(state).sha256()
        for prompt in measured:
            kind, value = _in_child(ctx, _spawn_measure, (model, prompt, state, job), timeout_s)
            if kind == "ok":
                deliver(value)
            else:
                code = kind if kind in ("timeout", "child_crashed") else "backend_error"
                deliver(_error_record(prompt, job, code, str(value), sha).as_dict())
        if not description:
            description = {"id": model.name, "note": "not described: calibration was skipped (frozen_state given)"}
    else:
        ctx = multiprocessing.get_context("spawn")
        receive, send = ctx.Pipe(duplex=False)
        loader = ctx.Process(target=_loader_main, args=(model, job, calibration, measured, state, timeout_s, send))
        loader.start()
        send.close()
        try:
            while True:
                if not receive.poll(timeout_s * (2 + len(calibration))):
                    raise PxError(f"the loader process sent nothing for {timeout_s * (2 + len(calibration)):g} s")
                try:
                    message = receive.recv()
                except EOFError:
                    loader.join()
                    raise PxError(f"the loader process exited with code {loader.exitcode} before finishing") from None
                kind = message[0]
                if kind == "description":
                    description = message[1]
                elif kind == "calibrated":
                    state = message[1]
                    calibration_records = [PxRecord.from_dict(r) for r in message[2]]
                    calibrated_at = time.perf_counter()
                    announce()
                elif kind == "record":
                    deliver(message[1])
                elif kind == "failed":
                    raise PxError(f"the isolated run failed in the loader process: {message[1]}")
                elif kind == "done":
                    break
        finally:
            receive.close()
            if loader.is_alive():
                loader.kill()
            loader.join()
    frozen = CalibratorState.from_dict(state)
    return PxRun(
        preset=preset, isolation=isolation, config=config.as_dict(), config_sha256=config.sha256(),
        settings=asdict(settings), frozen_state=frozen.as_dict(), frozen_state_sha256=frozen.sha256(),
        model=description, calibration_records=calibration_records, records=records,
        seconds_calibration=calibrated_at - started, seconds_total=time.perf_counter() - started,
    )
