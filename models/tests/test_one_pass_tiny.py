"""The one-pass path (left-padded batch, head on the last position, cached decoding) against a plain path, on a
tiny llama built from a config with random weights: no download, no real weights, a default-run test."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from models import GenerationSettings, ModelError
from models._hf import TransformersModel

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


@pytest.mark.parametrize("threads", [0, -2, "many", True, "auto"])
def test_bad_thread_counts_are_refused(threads) -> None:
    with pytest.raises(ModelError, match="threads must be"):
        tiny_model(threads)


def saved_tiny_model(folder: Path):
    """The tiny model, its weights and tokenizer saved into ``folder`` for ``from_local``."""
    made = tiny_model()
    made.model.save_pretrained(folder, safe_serialization=True)
    made.tokenizer.save_pretrained(folder)
    return made


@pytest.mark.parametrize("penalised", [False, True])
def test_decoding_without_the_cache_equals_the_cached_path_on_padded_batches(penalised: bool) -> None:
    """``use_cache=False`` runs the model over the whole sequence at every step: on a padded batch it gives the same
    greedy tokens as decoding from the cache, and the same as each prompt alone without padding or cache."""
    model = tiny_model()
    texts = prompts()
    extra = {"repetition_penalty": 1.3, "no_repeat_ngram_size": 2} if penalised else {}
    cached = model.generate(texts, GenerationSettings(max_new_tokens=6, **extra))
    uncached = model.generate(texts, GenerationSettings(max_new_tokens=6, use_cache=False, **extra))
    assert [r.token_ids for r in uncached] == [r.token_ids for r in cached]
    assert [r.finish_reason for r in uncached] == [r.finish_reason for r in cached]
    if not penalised:
        for text, response in zip(texts, uncached):
            assert list(response.token_ids) == plain(model, text, 6)[1], text


def test_decoding_without_the_cache_runs_the_whole_sequence_each_step() -> None:
    """The uncached path hands the model every position at every step (what a forward hook sees), the cached one
    only the newest position after the prefill."""
    model = tiny_model()
    text = prompts(1)[0]
    seen: dict[bool, list[int]] = {True: [], False: []}
    for use_cache in (True, False):
        hook = model.model.model.layers[0].register_forward_hook(
            lambda module, args, out, use_cache=use_cache: seen[use_cache].append(
                (out[0] if isinstance(out, tuple) else out).shape[1]))
        try:
            model.generate([text], GenerationSettings(max_new_tokens=4, use_cache=use_cache))
        finally:
            hook.remove()
    length = len(model.encode(text))
    assert seen[True][0] == seen[False][0] == length
    assert seen[True][1:] == [1] * (len(seen[True]) - 1)
    assert seen[False] == list(range(length, length + len(seen[False])))
