"""The bundled offline models: the safetensors cache reproduces the GGUF-loaded model, and Gemma's fixed template."""

from __future__ import annotations

import json

import pytest
import torch

from models import BUNDLED, GenerationSettings, ModelError, bundled_folder, load_gguf, load_model

FIXED_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Three things to pack for a rainy hike:",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_cached_model_logits_equal_the_gguf_model(name: str) -> None:
    folder, sha = bundled_folder(name)
    manifest = json.loads((folder / "preregbench-bundled.json").read_text())
    assert manifest["gguf_sha256"] == sha and folder.name == sha
    gguf_model, tokenizer = load_gguf(BUNDLED[name].gguf())
    cached = load_model(name)
    worst = 0.0
    with torch.inference_mode():
        for text in FIXED_PROMPTS:
            enc = tokenizer(text, return_tensors="pt")
            reference = gguf_model(**enc).logits
            mine = cached.model(**enc).logits
            assert reference.shape == mine.shape
            worst = max(worst, float((reference - mine).abs().max()))
    print(f"{name}: max |logit difference| cached vs GGUF = {worst:.2e}")
    assert worst <= 1e-4
    assert cached.describe().revision == f"sha256:{sha}"


def test_gemma_uses_the_declared_turn_template() -> None:
    gemma = load_model("gemma-3-270m", batch_size=2)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
    assert gemma.render_chat(chat) == (
        "<bos><start_of_turn>user\nBe brief.\n\nName a colour.<end_of_turn>\n<start_of_turn>model\n"
    )
    described = gemma.describe()
    assert described.chat_template == "registry"
    assert 106 in gemma.stop_token_ids and described.special_tokens["stop:<end_of_turn>"] == 106
    responses = gemma.score_and_generate([chat, [{"role": "user", "content": "Say yes."}]], ["A", "B"],
                                         GenerationSettings(max_new_tokens=5))
    for response in responses:
        assert response.ok and response.scores is not None
        assert 1 <= len(response.token_ids) <= 5
        assert response.finish_reason == ("stop" if response.token_ids[-1] in gemma.stop_token_ids else "length")
    with pytest.raises(ModelError, match="pinned by its GGUF file"):
        load_model("gemma-3-270m", revision="main")
