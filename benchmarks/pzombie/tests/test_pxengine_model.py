"""The PX-Engine on the bundled Gemma 3 270M (float32, CPU): telemetry, presets, hooks and isolation modes.

The tests that load Gemma are in the slow group (a new cache converts its GGUF first); the default run
checks the engine's presets and hook removal on random-weight models of each layer layout
(``test_pxengine.py``) and the child outcomes here."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from benchmarks.pzombie.engine import engine_config
from benchmarks.pzombie.px import (
    ACTIVE_MANIFOLD,
    BASELINE,
    AutoCalibrator,
    ModelSpec,
    PxError,
    generation_settings,
    kurtosis,
    run_one,
)
from benchmarks.pzombie.px import run_prompts as _run_prompts
from benchmarks.pzombie.px._engine import Tracer, decoder_layers
from benchmarks.pzombie.px._runner import _in_child
from benchmarks.pzombie.spec import PREREG
from models import load_model

from ._models import faulty_gemma, faulty_generate

CONFIG = engine_config("270M")
CALIBRATION = [("cal-1", "Name a colour."), ("cal-2", "Describe the sea in one sentence."), ("cal-3", "What is a verb?")]
PROMPTS = [
    ("math-1", "What is 19 * 27?"),
    ("logic-1", "All whales are mammals and all mammals breathe air. Do whales breathe air?"),
    ("creative-1", "Write a haiku about a forgotten robot."),
]
TOKENS = 3
VOLATILE = ("pid", "seconds", "isolation")  # fields that legitimately differ between isolation modes


def run_prompts(*args, **kwargs):
    """The engine's run_prompts with the preregistered per-prompt timeout."""
    return _run_prompts(*args, timeout_s=PREREG.values.run.prompt_timeout_s, **kwargs)


@pytest.fixture(scope="module")
def gemma():
    model = load_model("gemma-3-270m")
    yield model
    model.close()


@pytest.fixture(scope="module")
def calibrated(gemma):
    """Frozen calibrators per preset, made once for the module (sessions copy them, so tests cannot leak)."""
    cache: dict[str, AutoCalibrator] = {}

    def get(preset: str) -> AutoCalibrator:
        if preset not in cache:
            cache[preset] = _calibrate(gemma, preset)
        return cache[preset]

    return get


def _calibrate(gemma, preset: str) -> AutoCalibrator:
    calibrator = AutoCalibrator.warmed_up(CONFIG)
    for pid, text in CALIBRATION:
        run_one(gemma, pid, text, calibrator, preset=preset, settings=generation_settings(preset, TOKENS, CONFIG),
                phase="calibration", isolation="inprocess", state_sha256="")
    calibrator.freeze()
    return calibrator


def _no_hooks(gemma) -> bool:
    decoder = gemma.model.model
    return not decoder._forward_pre_hooks and all(not layer._forward_hooks for layer in decoder.layers)


def _strip(record) -> dict:
    return {k: v for k, v in record.as_dict().items() if k not in VOLATILE}


@pytest.mark.slow
def test_kurtosis_with_and_without_cache_agree(gemma, calibrated):
    """The decode loop reuses the KV cache; full recomputation of every prefix gives the same sequence (1e-4 rel)."""
    import torch  # here, not at import: a P-Zombie run collects this module and never needs torch for it

    calibrator = calibrated(BASELINE)
    text = "Explain why the sky looks blue during the day."
    settings = generation_settings(BASELINE, 8, CONFIG)
    record = run_one(gemma, "p", text, calibrator.session(), preset=BASELINE, settings=settings, phase="measured",
                     isolation="inprocess", state_sha256="")
    assert record.ok and record.steps == record.new_tokens >= 6
    prompt_ids = gemma.encode(gemma.render_chat([{"role": "user", "content": text}]))
    uncached = []

    def grab(event):
        uncached.append(kurtosis(event.hidden[0, -1]))

    with torch.inference_mode(), gemma.taps(grab, layers=[CONFIG.recur_start - 1]):
        for step in range(record.steps):
            ids = torch.tensor([prompt_ids + record.token_ids[:step]])
            gemma.model(input_ids=ids, use_cache=False)
    assert len(uncached) == len(record.kurtosis)
    worst = max(abs(a - b) / abs(b) for a, b in zip(record.kurtosis, uncached))
    print(f"kurtosis cached vs uncached over {record.steps} steps: max relative difference {worst:.2e}")
    assert worst <= 1e-4


@pytest.mark.slow
def test_baseline_leaves_logits_bit_identical_and_active_manifold_changes_them(gemma, calibrated):
    import torch

    calibrator = calibrated(BASELINE)
    layers = decoder_layers(gemma)
    ids = torch.tensor([gemma.encode(gemma.render_chat([{"role": "user", "content": "What is 7 factorial?"}]))])
    taps = range(CONFIG.recur_start - 1, len(layers))
    with torch.inference_mode():
        plain = gemma.model(input_ids=ids).logits
        observer = Tracer(calibrator.session(), preset=BASELINE, z_td=0.0, num_layers=len(layers), layers=layers, observe=True)
        with gemma.taps(observer, layers=taps, modify=False):
            observed = gemma.model(input_ids=ids).logits
        active = Tracer(calibrator.session(), preset=ACTIVE_MANIFOLD, z_td=0.0, num_layers=len(layers), layers=layers, observe=True)
        with gemma.taps(active, layers=taps, modify=True):
            patched = gemma.model(input_ids=ids).logits
    assert observer.steps[0].routing is not None  # the observer did route
    assert torch.equal(plain, observed)
    assert float((plain - patched).abs().max()) > 1e-2
    # The whole BASELINE generation equals the unpatched model's greedy generation.
    settings = generation_settings(BASELINE, 8, CONFIG)
    chat = [{"role": "user", "content": "Name three rivers."}]
    record = run_one(gemma, "p", "Name three rivers.", calibrator.session(), preset=BASELINE, settings=settings,
                     phase="measured", isolation="inprocess", state_sha256="")
    assert list(gemma.generate([chat], settings)[0].token_ids) == record.token_ids
    assert _no_hooks(gemma)


@pytest.mark.slow
def test_hooks_are_removed_after_every_run_and_after_a_failure(gemma, calibrated):
    for preset in (ACTIVE_MANIFOLD, BASELINE):
        calibrator = calibrated(preset)
        record = run_one(gemma, "p", "What is 2 + 2?", calibrator.session(), preset=preset,
                         settings=generation_settings(preset, 3, CONFIG), phase="measured", isolation="inprocess",
                         state_sha256="")
        assert record.ok and _no_hooks(gemma)
        assert (record.loops_run > 0) == (preset == ACTIVE_MANIFOLD)
    broken = AutoCalibrator(engine_config("270M", recur_start=17))  # no room for a window: raises inside the taps
    with pytest.raises(PxError, match="leave no window"):
        run_one(gemma, "p", "Hello", broken, preset=BASELINE, settings=generation_settings(BASELINE, 2, CONFIG),
                phase="calibration", isolation="inprocess", state_sha256="")
    assert _no_hooks(gemma)


@pytest.mark.slow
def test_fork_and_inprocess_give_the_same_records_from_one_frozen_state(gemma, monkeypatch):
    settings = generation_settings(ACTIVE_MANIFOLD, TOKENS, CONFIG)
    seen, events = [], []

    def on_record(record):
        seen.append(record)
        events.append(("record", record.prompt_id))

    faults = [("raise", "RAISE-NOW please"), ("crash", "CRASH-NOW please")]
    forked = run_prompts(ModelSpec("gemma-3-270m", factory=faulty_gemma), PROMPTS + faults, preset=ACTIVE_MANIFOLD,
                         config=CONFIG, settings=settings, isolation="fork", calibration_prompts=CALIBRATION,
                         on_record=on_record, on_calibrated=lambda summary: events.append(("calibrated", summary)))
    local = run_prompts(gemma, PROMPTS, preset=ACTIVE_MANIFOLD, config=CONFIG, settings=settings,
                        isolation="inprocess", calibration_prompts=CALIBRATION)
    assert forked.frozen_state == local.frozen_state and forked.frozen_state["frozen"]
    assert [r.prompt_id for r in seen] == [p for p, _ in PROMPTS + faults] and seen == forked.records
    assert [e[0] for e in events] == ["calibrated"] + ["record"] * len(PROMPTS + faults)
    summary = events[0][1]
    assert summary["frozen_state_sha256"] == forked.frozen_state_sha256 and summary["model"] == forked.model
    assert [r["prompt_id"] for r in summary["calibration_records"]] == [p for p, _ in CALIBRATION]
    measured = forked.records[:len(PROMPTS)]
    assert [_strip(a) for a in measured] == [_strip(b) for b in local.records]
    assert [_strip(a) for a in forked.calibration_records] == [_strip(b) for b in local.calibration_records]
    pids = {r.pid for r in forked.records}
    assert len(pids) == len(PROMPTS + faults) and os.getpid() not in pids  # one fresh process per prompt
    assert {r.start_state_sha256 for r in forked.records} == {forked.frozen_state_sha256}
    assert all(r.ok and r.steps == r.new_tokens and r.loops_run > 0 for r in measured)
    for record in measured:
        assert len(record.input_token_ids) == record.input_tokens
        assert record.token_diversity == len(set(record.input_token_ids)) / len(record.input_token_ids)
    assert forked.model["revision"] == gemma.describe().revision
    # A prompt that raises or whose process dies is a coded record; the prompts after it still run.
    raised, crashed = forked.records[len(PROMPTS):]
    assert (raised.error, crashed.error) == ("backend_error", "child_crashed")
    assert "injected failure" in raised.error_detail and "code 3" in crashed.error_detail
    assert all(r.zone_entropy is None and r.finish_reason == "error" for r in (raised, crashed))
    # No measured prompt changes what another sees: reversed order, same record per prompt.
    reverse = run_prompts(gemma, PROMPTS[::-1], preset=ACTIVE_MANIFOLD, config=CONFIG, settings=settings,
                          isolation="inprocess", frozen_state=local.frozen_state)
    assert {r.prompt_id: _strip(r) for r in reverse.records} == {r.prompt_id: _strip(r) for r in local.records}
    # In-process, a raising prompt is coded the same way.
    monkeypatch.setattr(gemma, "generate", faulty_generate(gemma.generate))
    coded = run_prompts(gemma, faults[:1], preset=ACTIVE_MANIFOLD, config=CONFIG, settings=settings,
                        isolation="inprocess", frozen_state=local.frozen_state)
    assert coded.records[0].error == "backend_error"
    monkeypatch.undo()
    # Spawn (a fresh process that reloads the weights) gives the same record too.
    announced = []
    spawned = run_prompts(ModelSpec("gemma-3-270m"), PROMPTS[:1], preset=ACTIVE_MANIFOLD, config=CONFIG,
                          settings=settings, isolation="spawn", frozen_state=local.frozen_state,
                          on_calibrated=announced.append)
    assert announced[0]["frozen_state_sha256"] == local.frozen_state_sha256
    assert announced[0]["model"]["revision"] == gemma.describe().revision
    assert _strip(spawned.records[0]) == _strip(local.records[0]) and spawned.records[0].pid != os.getpid()


def _sleep_long() -> None:
    time.sleep(120)


def test_child_outcomes_timeout_crash_error_ok():
    """The isolation primitive: every way a child can end maps to one outcome kind (no model needed)."""
    fork = multiprocessing.get_context("fork")
    started = time.perf_counter()
    assert _in_child(fork, _sleep_long, (), 0.5)[0] == "timeout"
    assert time.perf_counter() - started < 30
    kind, detail = _in_child(fork, os._exit, (3,), 30)
    assert kind == "child_crashed" and "code 3" in detail
    kind, detail = _in_child(fork, int, ("not a number",), 30)
    assert kind == "error" and "ValueError" in detail
    assert _in_child(fork, int, ("42",), 30) == ("ok", 42)


@pytest.mark.slow
def test_misuse_is_reported(gemma):
    settings = generation_settings(BASELINE, 2, CONFIG)
    with pytest.raises(PxError, match="pass a ModelSpec"):
        run_prompts(gemma, PROMPTS, preset=BASELINE, config=CONFIG, settings=settings, isolation="fork")
    with pytest.raises(PxError, match="unknown isolation"):
        run_prompts(gemma, PROMPTS, preset=BASELINE, config=CONFIG, settings=settings, isolation="thread")
    with pytest.raises(PxError, match="prompt ids must be unique"):
        run_prompts(gemma, PROMPTS + PROMPTS[:1], preset=BASELINE, config=CONFIG, settings=settings, isolation="inprocess")
    with pytest.raises(PxError, match="not frozen"):
        run_prompts(gemma, PROMPTS, preset=BASELINE, config=CONFIG, settings=settings, isolation="inprocess",
                    frozen_state=AutoCalibrator(CONFIG).state.as_dict())
    with pytest.raises(PxError, match="(?s)loader process.*no-such-model"):
        run_prompts("no-such-model", PROMPTS[:1], preset=BASELINE, config=CONFIG, settings=settings, isolation="fork")
