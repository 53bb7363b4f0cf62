"""The one-pass path (left-padded batch, head on the last position, cached decoding) against a plain path, on a
tiny llama built from a config with random weights: no download, no real weights, a default-run test."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from models import GenerationSettings, ModelError
from models import _hf
from models._hf import THREAD_VARIABLES, TransformersModel, cpu_threads

WORDS = ["A", "B", "C", "D", "the", "a", "river", "stone", "moves", "slowly", "under", "over", "bright", "cold",
         "answer", "question", "is", "not", "and", "or", "then", "why", "who", "one", "two", "three"]
LABELS = ["A", "B", "C", "D", "river", "stone"]


def tiny_model(threads: int | str | None = None, batch_size: int = 4) -> TransformersModel:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(["<pad>", "<eos>", *WORDS])}
    backend = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         initializer_range=0.3, tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
                         bos_token_id=None)
    torch.manual_seed(1234)
    model = LlamaForCausalLM(config)
    return TransformersModel(model, tokenizer, model_id="tiny-llama", revision="random", source="config",
                             batch_size=batch_size, threads=threads)


def prompts(n: int = 7) -> list[str]:
    """Prompts of 2 to 14 words, so that every batch is left-padded."""
    draw = random.Random(7)
    return [" ".join(draw.choice(WORDS) for _ in range(2 + (5 * i) % 13)) for i in range(n)]


def plain(model: TransformersModel, text: str, max_new_tokens: int) -> tuple[list[float], list[int]]:
    """One prompt alone: no padding, no cache, logits at every position, the whole sequence again per token."""
    ids = model.encode(text)
    label_ids = [model.encode(label)[0] for label in LABELS]
    tokens: list[int] = []
    scores: list[float] = []
    with torch.inference_mode():
        for step in range(max_new_tokens):
            logits = model.model(input_ids=torch.tensor([ids + tokens]), use_cache=False).logits
            assert logits.shape[1] == len(ids) + len(tokens)  # the head ran at every position
            last = logits[0, -1]
            if step == 0:
                scores = [float(last[i]) for i in label_ids]
            tokens.append(int(last.argmax()))
            if tokens[-1] in model.stop_token_ids:
                break
    return scores, tokens


@pytest.mark.parametrize("threads", [None, 1])
def test_one_pass_equals_the_plain_path_on_padded_batches(threads: int | None) -> None:
    model = tiny_model(threads)
    texts = prompts()
    lengths = {len(model.encode(t)) for t in texts}
    assert len(lengths) > 3  # the batches really are padded
    settings = GenerationSettings(max_new_tokens=5)
    responses = model.score_and_generate(texts, LABELS, settings)
    worst = 0.0
    for text, response in zip(texts, responses):
        scores, tokens = plain(model, text, settings.max_new_tokens)
        worst = max(worst, *(abs(a - b) for a, b in zip(response.scores.logits, scores)))
        assert list(response.token_ids) == tokens, text
        assert response.prompt_tokens == len(model.encode(text))
    assert worst <= 1e-5


def test_thread_count_is_set_for_the_call_and_restored() -> None:
    before = torch.get_num_threads()
    model = tiny_model(threads=1)
    seen: list[int] = []
    handle = model.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    try:
        model.score_and_generate(prompts(2), LABELS, GenerationSettings(max_new_tokens=2))
    finally:
        handle.remove()
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_auto_threads_keep_an_explicit_setting_and_stay_in_range(monkeypatch: pytest.MonkeyPatch) -> None:
    default = torch.get_num_threads()
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert 1 <= cpu_threads(torch) <= default
    assert 1 <= tiny_model("auto").threads <= default
    monkeypatch.setattr("models._hf.busy_cpus", lambda: 0.0)
    assert cpu_threads(torch) == min(default, len(os.sched_getaffinity(0)))
    monkeypatch.setattr("models._hf.busy_cpus", lambda: 64.0)
    assert cpu_threads(torch) == 1
    monkeypatch.setattr("models._hf.busy_cpus", lambda: None)
    assert cpu_threads(torch) == default  # nothing to go by: torch's count
    monkeypatch.setenv("OMP_NUM_THREADS", str(default))
    monkeypatch.setattr("models._hf.busy_cpus", lambda: 64.0)
    assert cpu_threads(torch) == default  # the user's setting, whatever the load


@pytest.mark.skipif(not Path(_hf.PROC_STAT).is_file(), reason="no /proc/stat on this system (Linux only)")
def test_busy_cpus_counts_a_spinning_process_now(tmp_path: Path) -> None:
    """Another process that never stops running is counted in every sample, whatever the load average says."""
    spinner = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline().strip() == "spinning"
        assert _hf.busy_cpus(samples=5, interval=0.001) >= 1.0
    finally:
        spinner.kill()
        spinner.wait()


def test_busy_cpus_falls_back_to_the_load_average(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unreadable = tmp_path / "stat"
    unreadable.write_text("cpu  1 2 3\nno such field here\n")
    monkeypatch.setattr(_hf, "PROC_STAT", str(unreadable))
    monkeypatch.setattr("os.getloadavg", lambda: (1.5, 0.0, 0.0))
    assert _hf.busy_cpus(samples=2, interval=0.0) == 1.5
    unreadable.write_text("cpu  1 2 3\nprocs_running 4\nprocs_blocked 0\n")
    assert _hf.busy_cpus(samples=2, interval=0.0) == 3.0  # four runnable, less the reading thread


@pytest.mark.parametrize("threads", [0, -2, "many", True])
def test_bad_thread_counts_are_refused(threads) -> None:
    with pytest.raises(ModelError, match="threads must be"):
        tiny_model(threads)


def saved_tiny_model(folder: Path):
    """The tiny model, its weights and tokenizer saved into ``folder`` for ``from_local``."""
    made = tiny_model()
    made.model.save_pretrained(folder, safe_serialization=True)
    made.tokenizer.save_pretrained(folder)
    return made


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
def test_a_load_runs_no_cycle_collection_and_leaves_the_collector_as_it_was(
        tmp_path: Path, enabled_before: bool) -> None:
    made = saved_tiny_model(tmp_path)
    loaded, during, state_after = collections_during_load(
        lambda: TransformersModel.from_local(tmp_path, revision="random"), enabled_before)
    assert during == []  # building the model and loading its weights ran no collection
    assert state_after is enabled_before
    assert loaded.encode("the river") == made.encode("the river")


@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_tokenizer_load_runs_no_cycle_collection_and_leaves_the_collector_as_it_was(
        tmp_path: Path, enabled_before: bool) -> None:
    from models import load_tokenizer

    made = saved_tiny_model(tmp_path)
    tokenizer, during, state_after = collections_during_load(lambda: load_tokenizer(tmp_path), enabled_before)
    assert during == []  # reading the tokenizer files ran no collection
    assert state_after is enabled_before
    assert tokenizer("the river")["input_ids"] == made.tokenizer("the river")["input_ids"]


@pytest.mark.parametrize("frozen_before", [False, True])
def test_what_a_load_made_goes_to_the_oldest_generation_unless_others_hold_frozen_objects(
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
        loaded = TransformersModel.from_local(tmp_path, revision="random")
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
