"""The bundled offline models: the safetensors cache reproduces the GGUF-loaded model, the tokenizer-only
folder holds the converted tokenizer's files, and Gemma's fixed template.

The checks that load a bundled model's weights are in the slow group (a new cache converts each GGUF
first, a minute or more); the default run reads only the tokenizers."""

from __future__ import annotations

import json

import pytest
import torch

from models import (
    BUNDLED,
    GEMMA3_CHAT_TEMPLATE,
    GenerationSettings,
    ModelError,
    bundled_folder,
    bundled_tokenizer_folder,
    load_gguf,
    load_model,
    load_tokenizer,
)

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


GEMMA_CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
GEMMA_RENDERED = "<bos><start_of_turn>user\nBe brief.\n\nName a colour.<end_of_turn>\n<start_of_turn>model\n"


def test_gemma_turn_template_renders_from_the_tokenizer_alone() -> None:
    """The registry's Gemma template on the bundled tokenizer (no weights converted), and the pin refused first."""
    folder, sha = bundled_tokenizer_folder("gemma-3-270m")
    tokenizer = load_tokenizer(folder)
    rendered = tokenizer.apply_chat_template(GEMMA_CHAT, chat_template=GEMMA3_CHAT_TEMPLATE, tokenize=False,
                                             add_generation_prompt=True)
    assert rendered == GEMMA_RENDERED
    assert tokenizer.convert_tokens_to_ids("<end_of_turn>") == 106
    with pytest.raises(ModelError, match=f"pinned by its GGUF file \\(sha256:{sha}\\)"):
        load_model("gemma-3-270m", revision="main")  # refused from the file's hash, before any conversion


def test_the_tokenizer_folder_holds_no_weights_and_counts_like_the_tokenizer(tmp_path, monkeypatch) -> None:
    """On an empty cache the tokenizer-only folder is written from the GGUF: tokenizer files, no weights."""
    monkeypatch.setenv("PREREGBENCH_CACHE", str(tmp_path / "cache"))
    folder, sha = bundled_tokenizer_folder("smollm2-135m-instruct")
    assert folder == tmp_path / "cache" / "tokenizers" / sha
    assert (folder / "tokenizer.json").is_file() and not list(folder.glob("*.safetensors"))
    assert not (tmp_path / "cache" / "bundled").exists()
    assert json.loads((folder / "preregbench-bundled.json").read_text())["gguf_sha256"] == sha
    assert bundled_tokenizer_folder("smollm2-135m-instruct") == (folder, sha)  # the second call reuses it
    text = "Count these tokens: 3 + 4 = 7, café!"
    expected = len(load_tokenizer(folder)(text, add_special_tokens=False).input_ids)
    from tokenizers import Tokenizer

    assert len(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text, add_special_tokens=False).ids) == expected


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_tokenizer_folder_equals_the_converted_tokenizer(name: str, tmp_path, monkeypatch) -> None:
    """The tokenizer read alone from the GGUF is the one the full conversion saves, file for file."""
    converted, sha = bundled_folder(name)
    monkeypatch.setenv("PREREGBENCH_CACHE", str(tmp_path / "cache"))
    alone, same_sha = bundled_tokenizer_folder(name)
    assert same_sha == sha and alone != converted
    files = sorted(p.name for p in alone.iterdir() if p.name != "preregbench-bundled.json")
    assert "tokenizer.json" in files
    for file in files:
        assert (alone / file).read_bytes() == (converted / file).read_bytes(), file


@pytest.mark.slow
def test_gemma_uses_the_declared_turn_template() -> None:
    gemma = load_model("gemma-3-270m", batch_size=2)
    chat = GEMMA_CHAT
    assert gemma.render_chat(chat) == GEMMA_RENDERED
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


def test_a_gguf_conversion_draws_no_progress_bars_and_leaves_the_setting_as_it_was() -> None:
    """A conversion runs with transformers' progress bars off (they would land in a test's captured stderr) and
    puts the setting back, on or off, as it found it."""
    from transformers.utils import logging as hf_logging

    from models._bundled import _no_progress_bars

    for before in (True, False):
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()
        with _no_progress_bars():
            assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.is_progress_bar_enabled() is before
    hf_logging.enable_progress_bar()


def test_a_carried_tokenizer_folder_stands_in_for_the_bundled_package(tmp_path, monkeypatch) -> None:
    """PREREGBENCH_TOKENIZERS/<name>/ (what scripts/gpu-check.sh carries to a machine without the bundled packages)
    is the tokenizer folder of that bundled name, with its tokenizer.json's sha256; other names are unaffected."""
    import hashlib
    import shutil

    from models import bundled_tokenizer_folder

    source, _ = bundled_tokenizer_folder("smollm2-135m-instruct")
    carried = tmp_path / "tokenizers" / "smollm2-135m-instruct"
    carried.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, carried / name)
    monkeypatch.setenv("PREREGBENCH_TOKENIZERS", str(tmp_path / "tokenizers"))
    folder, sha = bundled_tokenizer_folder("smollm2-135m-instruct")
    assert folder == carried
    assert sha == hashlib.sha256((carried / "tokenizer.json").read_bytes()).hexdigest()
    assert bundled_tokenizer_folder("gemma-3-270m")[0] != tmp_path / "tokenizers" / "gemma-3-270m"
