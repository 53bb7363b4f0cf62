"""CUDA paths of the transformers backend, on a small random-weight model built from a config.

Marked ``gpu``: excluded from the default run, and skipped (with the reason) where CUDA is missing.
Run with ``pytest models/tests/test_cuda.py -m gpu`` on a machine with a GPU; no weights are downloaded.
"""

from __future__ import annotations

import copy

import pytest

from models import GenerationSettings, TapEvent, bundled_tokenizer_folder
from models._hf import TransformersModel

pytestmark = pytest.mark.gpu

PROMPTS = ["Reply A or B. Which comes first?", "A short prompt", "A somewhat longer prompt about tides and harbours, A or B?"]


def tiny_pair():
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder, _ = bundled_tokenizer_folder("smollm2-135m-instruct")  # only its tokenizer is used
    config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(0)
    cpu_model = LlamaForCausalLM(config)
    gpu_model = copy.deepcopy(cpu_model).to("cuda")
    make = lambda model: TransformersModel(model, AutoTokenizer.from_pretrained(folder), model_id="tiny-llama-from-config",
                                           revision="sha256:" + "0" * 64, source="from_config", batch_size=2)
    return make(cpu_model), make(gpu_model)


def test_cuda_one_pass_matches_cpu():
    cpu, gpu = tiny_pair()
    assert gpu.describe().device.startswith("cuda")
    settings = GenerationSettings(max_new_tokens=4)
    on_cpu = cpu.score_and_generate(PROMPTS, ["A", "B"], settings)
    on_gpu = gpu.score_and_generate(PROMPTS, ["A", "B"], settings)
    for a, b in zip(on_cpu, on_gpu):
        assert b.scores.logits == pytest.approx(a.scores.logits, abs=1e-3)
        assert len(b.token_ids) == len(a.token_ids) == 4


def test_cuda_bfloat16_and_taps():
    import torch

    _, gpu = tiny_pair()
    gpu.model.to(torch.bfloat16)
    seen: list[TapEvent] = []
    with gpu.taps(seen.append, layers=[1]):
        responses = gpu.score_and_generate(PROMPTS, ["A", "B"], GenerationSettings(max_new_tokens=3))
    assert all(len(r.token_ids) == 3 for r in responses)
    assert {e.hidden.device.type for e in seen} == {"cuda"}
    assert sum(len(layer._forward_hooks) for layer in gpu.model.model.layers) == 0
