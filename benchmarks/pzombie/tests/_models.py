"""Model factories the engine tests hand to isolated processes (``ModelSpec(factory=...)``).

They live apart from the test modules so that a spawned loader, which imports
the factory's module to unpickle it, imports only ``models`` and this file.
"""

from __future__ import annotations

import os
from dataclasses import replace

from models import (
    GEMMA3_CHAT_TEMPLATE,
    GenerationSettings,
    LanguageModel,
    bundled_tokenizer_folder,
    load_model,
    load_tokenizer,
)
from models._hf import TransformersModel


def faulty_gemma(**options) -> LanguageModel:
    """The bundled Gemma whose generate() fails on marker prompts: CRASH-NOW exits the process, RAISE-NOW raises."""
    model = load_model("gemma-3-270m", **options)
    model.generate = faulty_generate(model.generate)
    return model


def faulty_generate(original):
    def generate(prompts, settings=None):
        text = prompts[0] if isinstance(prompts[0], str) else str(prompts[0])
        if "CRASH-NOW" in text:
            os._exit(3)
        if "RAISE-NOW" in text:
            raise RuntimeError("injected failure")
        return original(prompts, settings or GenerationSettings())

    return generate


def tiny_gemma(device: str = "cpu", dtype: str = "float32") -> LanguageModel:
    """A six-layer Gemma 3 with seeded random weights (the same in every process) and the bundled tokenizer."""
    import torch  # reason: torch and transformers load only where a model is built
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    folder, _ = bundled_tokenizer_folder("gemma-3-270m")  # only the tokenizer: no weights converted
    config = Gemma3TextConfig(vocab_size=262144, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                              num_attention_heads=4, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
                              sliding_window=64)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).to(dtype=getattr(torch, dtype), device=device)
    return TransformersModel(model, load_tokenizer(folder), model_id="tiny-gemma3-from-config",
                             revision="sha256:" + "0" * 64, source="from_config", chat_template=GEMMA3_CHAT_TEMPLATE,
                             stop_tokens=("<end_of_turn>",))


def env_echo_gemma(**options) -> LanguageModel:
    """The tiny Gemma, whose every answer is the PYTORCH_CUDA_ALLOC_CONF its process found (empty when unset)."""
    model = tiny_gemma(**options)
    original = model.generate

    def generate(prompts, settings=None):
        found = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        return [replace(r, text=found) for r in original(prompts, settings or GenerationSettings())]

    model.generate = generate
    return model
