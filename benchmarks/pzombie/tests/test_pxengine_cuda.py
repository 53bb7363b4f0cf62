"""The PX-Engine on CUDA: spawn isolation and bfloat16 on a small random-weight Gemma 3 built from a config.

Marked ``gpu``: excluded from the default run and skipped (with the reason) where CUDA is missing.
Run with ``pytest benchmarks/pzombie/tests/test_pxengine_cuda.py -m gpu``; no weights are downloaded (the bundled
Gemma's tokenizer is the only file used).
"""

from __future__ import annotations

import pytest

from benchmarks.pzombie.engine import engine_config
from benchmarks.pzombie.px import (
    ACTIVE_MANIFOLD,
    BASELINE,
    ModelSpec,
    generation_settings,
    kurtosis,
    run_prompts,
)

from ._models import tiny_gemma

pytestmark = pytest.mark.gpu

CONFIG = engine_config("270M", recur_start=2, final_layers=1, window_base=2, window_min=1, window_max=3)
CALIBRATION = [("cal-1", "Name a colour."), ("cal-2", "What is a verb?")]
PROMPTS = [("math-1", "What is 19 * 27?"), ("creative-1", "Write a haiku about a forgotten robot.")]


@pytest.mark.parametrize("preset", [ACTIVE_MANIFOLD, BASELINE])
def test_spawn_isolation_in_bfloat16_on_cuda(preset):
    spec = ModelSpec("tiny-gemma3", {"device": "cuda", "dtype": "bfloat16"}, factory=tiny_gemma)
    run = run_prompts(spec, PROMPTS, preset=preset, config=CONFIG, settings=generation_settings(preset, 4, CONFIG),
                      isolation="spawn", calibration_prompts=CALIBRATION, timeout_s=300)
    assert run.model["device"].startswith("cuda") and run.model["dtype"] == "bfloat16"
    assert len(run.calibration_records) == 2 and run.frozen_state["frozen"]
    assert len({r.pid for r in run.records}) == len(PROMPTS)
    for record in run.records:
        assert record.ok, record.error_detail
        assert record.steps == record.new_tokens >= 1
        assert all(k is not None for k in record.kurtosis)
        assert (record.loops_run > 0) == (preset == ACTIVE_MANIFOLD)
        assert record.start_state_sha256 == run.frozen_state_sha256


def test_kurtosis_on_cuda_matches_the_cpu():
    import torch

    cpu, gpu = tiny_gemma("cpu", "float32"), tiny_gemma("cuda", "float32")
    ids = torch.tensor([cpu.encode(cpu.render_chat([{"role": "user", "content": "What is 7 factorial?"}]))])
    values = []
    for model in (cpu, gpu):
        seen: list[float] = []

        def grab(event, seen=seen):
            seen.append(kurtosis(event.hidden[0, -1]))

        with torch.inference_mode(), model.taps(grab, layers=[1]):
            model.model(input_ids=ids.to(model.model.device))
        values.append(seen[0])
    assert values[1] == pytest.approx(values[0], rel=1e-3)
