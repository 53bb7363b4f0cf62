"""The runner's process tuning (``benchmarks.core.tuning``) around a real transformers model: the thread count a
protocol asking for ``threads="auto"`` gets, and the cycle collector paused while a model or tokenizer loads.

The model is the tiny llama of ``models/tests/test_one_pass_tiny.py`` (random weights from a config, no download).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.core import tuning
from models import load_tokenizer
from models._hf import TransformersModel
from models.tests.test_one_pass_tiny import saved_tiny_model, tiny_model


def load_paused(load: Callable[[], Any]) -> Any:
    """``load()`` as a run's tuning wraps its model load."""
    with tuning.ProcessTuning().loading_model(None):
        return load()


class _Run:
    """What the tuning reads of a run."""

    model = "tiny-llama"


def test_auto_threads_keep_an_explicit_setting_and_stay_in_range(monkeypatch: pytest.MonkeyPatch) -> None:
    default = torch.get_num_threads()
    for name in tuning.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert 1 <= tuning.cpu_threads(default) <= default
    monkeypatch.setattr(tuning, "busy_cpus", lambda: 0.0)
    assert tuning.cpu_threads(default) == min(default, len(os.sched_getaffinity(0)))
    monkeypatch.setattr(tuning, "busy_cpus", lambda: 64.0)
    assert tuning.cpu_threads(default) == 1
    monkeypatch.setattr(tuning, "busy_cpus", lambda: None)
    assert tuning.cpu_threads(default) == default  # nothing to go by: torch's count
    monkeypatch.setenv("OMP_NUM_THREADS", str(default))
    monkeypatch.setattr(tuning, "busy_cpus", lambda: 64.0)
    assert tuning.cpu_threads(default) == default  # the user's setting, whatever the load


@pytest.mark.parametrize("busy, expected", [(64.0, 1), (0.0, None)])
def test_a_run_asking_for_auto_threads_gets_the_idle_cpus_once_its_model_loaded(
        monkeypatch: pytest.MonkeyPatch, busy: float, expected: int | None) -> None:
    for name in tuning.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tuning, "busy_cpus", lambda: busy)
    tuned = tuning.ProcessTuning()
    options = tuned.model_options(_Run(), {"device": "cpu", "threads": "auto"})
    assert options == {"device": "cpu", "threads": None}  # the backend never sees "auto"
    model = tiny_model(options["threads"])
    assert model.threads is None
    tuned.model_loaded(_Run(), model)
    count = expected or min(torch.get_num_threads(), len(os.sched_getaffinity(0)))
    assert model.threads == count and tuned.record()["threads"] == count
    untuned = tuning.Untuned()
    assert untuned.model_options(_Run(), {"threads": "auto"}) == {"threads": None}  # off: torch's own count


def test_a_run_not_asking_for_auto_threads_keeps_the_backend_count() -> None:
    tuned = tuning.ProcessTuning()
    options = tuned.model_options(_Run(), {"device": "cpu", "threads": 1})
    model = tiny_model(options["threads"])
    tuned.model_loaded(_Run(), model)
    assert model.threads == 1 and "threads" not in tuned.record()


@pytest.mark.skipif(not Path(tuning.PROC_STAT).is_file(), reason="no /proc/stat on this system (Linux only)")
def test_busy_cpus_counts_a_spinning_process_now(tmp_path: Path) -> None:
    """Another process that never stops running is counted in every sample, whatever the load average says."""
    spinner = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline().strip() == "spinning"
        assert tuning.busy_cpus(samples=5, interval=0.001) >= 1.0
    finally:
        spinner.kill()
        spinner.wait()


def test_busy_cpus_falls_back_to_the_load_average(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unreadable = tmp_path / "stat"
    unreadable.write_text("cpu  1 2 3\nno such field here\n")
    monkeypatch.setattr(tuning, "PROC_STAT", str(unreadable))
    monkeypatch.setattr("os.getloadavg", lambda: (1.5, 0.0, 0.0))
    assert tuning.busy_cpus(samples=2, interval=0.0) == 1.5
    unreadable.write_text("cpu  1 2 3\nprocs_running 4\nprocs_blocked 0\n")
    assert tuning.busy_cpus(samples=2, interval=0.0) == 3.0  # four runnable, less the reading thread


def collections_during_load(load: Callable[[], Any], enabled_before: bool) -> tuple[Any, list[int], bool]:
    """``load()`` with the collector on (threshold 1, so nearly every allocation would start a collection) or
    off: what it returned, the generations of the collections started while a ``from_pretrained`` was on the
    stack, and whether the collector was on afterwards.  The collector is left as it was found."""
    import gc

    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        # a collection started while transformers builds the model, reads its weights or its tokenizer
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "from_pretrained":
            frame = frame.f_back
        if phase == "start" and frame is not None:
            collections.append(info["generation"])

    threshold = gc.get_threshold()
    enabled = gc.isenabled()
    gc.set_threshold(1, 1, 1)
    (gc.enable if enabled_before else gc.disable)()
    gc.callbacks.append(count)
    try:
        loaded = load()
        return loaded, list(collections), gc.isenabled()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
        (gc.enable if enabled else gc.disable)()


@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_paused_load_runs_no_cycle_collection_and_leaves_the_collector_as_it_was(
        tmp_path: Path, enabled_before: bool) -> None:
    made = saved_tiny_model(tmp_path)
    loaded, during, state_after = collections_during_load(
        lambda: load_paused(lambda: TransformersModel.from_local(tmp_path, revision="random")), enabled_before)
    assert during == []  # building the model and loading its weights ran no collection
    assert state_after is enabled_before
    assert loaded.encode("the river") == made.encode("the river")


@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_paused_tokenizer_load_runs_no_cycle_collection_and_leaves_the_collector_as_it_was(
        tmp_path: Path, enabled_before: bool) -> None:
    made = saved_tiny_model(tmp_path)
    tokenizer, during, state_after = collections_during_load(lambda: load_paused(lambda: load_tokenizer(tmp_path)),
                                                             enabled_before)
    assert during == []  # reading the tokenizer files ran no collection
    assert state_after is enabled_before
    assert tokenizer("the river")["input_ids"] == made.tokenizer("the river")["input_ids"]


@pytest.mark.parametrize("frozen_before", [False, True])
def test_what_a_paused_load_made_goes_to_the_oldest_generation_unless_others_hold_frozen_objects(
        tmp_path: Path, frozen_before: bool) -> None:
    import gc

    made = saved_tiny_model(tmp_path)
    enabled = gc.isenabled()
    gc.collect()
    gc.enable()
    if frozen_before:
        gc.freeze()  # what exists now, the test process's objects, is held frozen by "another caller"
    frozen = gc.get_freeze_count()
    try:
        loaded = load_paused(lambda: TransformersModel.from_local(tmp_path, revision="random"))
        young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
        frozen_after = gc.get_freeze_count()
    finally:
        gc.unfreeze()
        (gc.enable if enabled else gc.disable)()
    # another caller's frozen objects stay frozen (a few die by reference count while the model loads)
    assert frozen_after > frozen // 2 if frozen_before else frozen_after == frozen == 0
    if frozen_before:
        assert young > 100  # left in the young generations, where the load made them (about 600 here)
    else:
        assert young < 100  # the load's objects wait in no young generation (about 1,300 without the move)
    assert loaded.encode("the river") == made.encode("the river")
