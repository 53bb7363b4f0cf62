"""The transformers backend on the bundled SmolLM2: one-pass scoring and generation, taps, hub cache path.

The tests that load SmolLM2 are in the slow group (a new cache converts its GGUF first); the one-pass
path is also checked in the default run on a tiny random model (``test_one_pass_tiny.py``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch

from models import GenerationSettings, ModelError, ModelUnavailableError, TapEvent, bundled_folder, load_model, resolve_revision

TOPICS = ["the tide", "a lighthouse keeper", "prime numbers", "a bakery at dawn", "the moon", "winter trains",
          "a lost key", "photosynthesis", "a chess opening", "river deltas", "old maps", "a violin",
          "desert rain", "compound interest", "a paper boat", "glaciers", "city pigeons", "the number zero",
          "a quiet library", "volcano soil"]


def chats(n: int) -> list[list[dict[str, str]]]:
    """Chats of different lengths, so that a batch is really left-padded."""
    out = []
    for i in range(n):
        filler = " Think about it carefully." * (i % 5)
        out.append([{"role": "user", "content": f"Answer A or B.{filler} Is {TOPICS[i % len(TOPICS)]} more about A) nature or B) people?"}])
    return out


def reference_scores(model, texts: list[str], ids: tuple[int, ...]) -> list[list[float]]:
    """Separate scoring: one unpadded prompt at a time, full forward without cache."""
    rows = []
    with torch.inference_mode():
        for text in texts:
            enc = model.tokenizer(text, return_tensors="pt", add_special_tokens=False)
            logits = model.model(**enc, use_cache=False).logits[0, -1, :]
            rows.append([float(logits[i]) for i in ids])
    return rows


def reference_generate(model, texts: list[str], batch_size: int, settings: GenerationSettings) -> list[list[int]]:
    """Separate generation: transformers' own greedy generate() on the same left-padded batches."""
    out = []
    tok = model.tokenizer
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            enc = tok(texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            generated = model.model.generate(
                **enc, do_sample=False, max_new_tokens=settings.max_new_tokens,
                repetition_penalty=settings.repetition_penalty, no_repeat_ngram_size=settings.no_repeat_ngram_size,
                eos_token_id=list(model.stop_token_ids), pad_token_id=tok.pad_token_id,
            )
            for row in generated[:, enc.input_ids.shape[1]:].tolist():
                tokens = []
                for token in row:
                    tokens.append(token)
                    if token in model.stop_token_ids:
                        break
                out.append(tokens)
    return out


@pytest.mark.parametrize("batch_size", [1, 16])
@pytest.mark.parametrize("settings", [
    GenerationSettings(max_new_tokens=6),
    GenerationSettings(max_new_tokens=6, repetition_penalty=1.15, no_repeat_ngram_size=3),
], ids=["plain", "penalized"])
@pytest.mark.slow
def test_one_pass_equals_separate_scoring_and_generate(smollm, batch_size: int, settings: GenerationSettings) -> None:
    prompts = chats(20)
    texts = [smollm.render_chat(c) for c in prompts]
    smollm.batch_size = batch_size
    try:
        responses = smollm.score_and_generate(prompts, ["A", "B"], settings)
    finally:
        smollm.batch_size = 16
    ids = responses[0].scores.token_ids
    expected_scores = reference_scores(smollm, texts, ids)
    expected_tokens = reference_generate(smollm, texts, batch_size, settings)
    worst = 0.0
    for response, scores, tokens in zip(responses, expected_scores, expected_tokens):
        worst = max(worst, *(abs(a - b) for a, b in zip(response.scores.logits, scores)))
        assert list(response.token_ids) == tokens, f"prompt {response.index}: greedy tokens differ"
        assert response.text == smollm.tokenizer.decode(tokens, skip_special_tokens=True)
        assert response.finish_reason == ("stop" if tokens[-1] in smollm.stop_token_ids else "length")
    print(f"batch {batch_size}: max |logit difference| {worst:.2e}")
    assert worst <= 1e-4


@pytest.mark.slow
def test_responses_keep_prompt_order_and_count_prompt_tokens(smollm) -> None:
    prompts = chats(5)
    responses = smollm.score(prompts, ["A", "B"])
    assert [r.index for r in responses] == list(range(5))
    assert all(r.text == "" and r.token_ids == () and r.finish_reason == "none" for r in responses)
    for prompt, response in zip(prompts, responses):
        assert response.prompt_tokens == len(smollm.encode(smollm.render_chat(prompt)))
        assert response.scores.margin == response.scores.logits[0] - response.scores.logits[1]
        assert response.scores.choice == ("A" if response.scores.margin >= 0 else "B")


@pytest.mark.slow
def test_bad_labels_and_stop_tokens_are_refused(smollm) -> None:
    with pytest.raises(ModelError, match="share a first token"):
        smollm.score(chats(1), ["12345", "12346"])
    with pytest.raises(ModelError, match="at least two labels"):
        smollm.score(chats(1), ["A"])
    with pytest.raises(ModelError, match="is not a single token"):
        smollm.generate(chats(1), GenerationSettings(max_new_tokens=2, stop=("two words",)))


@pytest.mark.slow
def test_description_is_complete(smollm) -> None:
    folder, sha = bundled_folder("smollm2-135m-instruct")
    described = smollm.describe()
    assert described.revision == f"sha256:{sha}"
    assert described.dtype == "float32" and described.device == "cpu"
    assert described.parameters > 100_000_000
    assert described.special_tokens["eos"] == smollm.tokenizer.eos_token_id
    assert described.special_tokens["pad"] is not None
    assert described.chat_template == "model"
    assert not smollm.model.training


@pytest.mark.slow
def test_taps_observe_each_step_and_are_removed(smollm) -> None:
    layers = smollm.model.model.layers
    events: list[TapEvent] = []

    def record(event: TapEvent) -> None:
        events.append(event)

    prompts = chats(2)
    with smollm.taps(record, layers=[0, 29]):
        assert all(len(layers[i]._forward_hooks) == 1 for i in (0, 29))
        responses = smollm.generate(prompts, GenerationSettings(max_new_tokens=4))
    assert all(len(layer._forward_hooks) == 0 for layer in layers)
    assert len(smollm.model.model._forward_pre_hooks) == 0
    steps = max(len(r.token_ids) for r in responses)
    assert sorted({e.step for e in events}) == list(range(steps))
    prefill = [e for e in events if e.step == 0]
    assert [e.layer for e in prefill] == [0, 29]
    assert prefill[0].hidden.shape[:2] == (2, max(r.prompt_tokens for r in responses))
    assert all(e.hidden.shape == (2, 1, 576) for e in events if e.step > 0)


@pytest.mark.slow
def test_taps_are_removed_when_the_block_raises(smollm) -> None:
    layers = smollm.model.model.layers
    with pytest.raises(RuntimeError, match="boom"):
        with smollm.taps(lambda event: None):
            assert sum(len(layer._forward_hooks) for layer in layers) == len(layers)
            raise RuntimeError("boom")
    assert sum(len(layer._forward_hooks) for layer in layers) == 0


@pytest.mark.slow
def test_modifying_taps_patch_the_residual_stream(smollm) -> None:
    prompts = chats(1)
    base = smollm.score(prompts, ["A", "B"])[0].scores.logits
    with smollm.taps(lambda event: event.hidden.clone(), layers=[10], modify=True):
        same = smollm.score(prompts, ["A", "B"])[0].scores.logits
    assert same == pytest.approx(base, abs=1e-5)
    with smollm.taps(lambda event: event.hidden * 0.5, layers=[10], modify=True):
        patched = smollm.score(prompts, ["A", "B"])[0].scores.logits
    assert max(abs(a - b) for a, b in zip(patched, base)) > 0.1
    with pytest.raises(ModelError, match="modify=False"):
        with smollm.taps(lambda event: event.hidden, layers=[10]):
            smollm.score(prompts, ["A", "B"])
    assert sum(len(layer._forward_hooks) for layer in smollm.model.model.layers) == 0


def _blob_cache(root: Path, repo_id: str, files: Path, sha: str) -> None:
    """A hub cache laid out as huggingface_hub writes it: blobs, snapshots/<sha> symlinks, refs/main."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / sha
    snapshot.mkdir(parents=True)
    for path in sorted(files.iterdir()):
        if not path.is_file():
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        blob = repo / "blobs" / digest
        if not blob.exists():
            os.link(path, blob) if path.stat().st_dev == blob.parent.stat().st_dev else blob.write_bytes(path.read_bytes())
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)


@pytest.mark.slow
def test_offline_hub_cache_resolves_main_to_its_commit(smollm, tmp_path: Path) -> None:
    folder, _ = bundled_folder("smollm2-135m-instruct")
    sha = hashlib.sha1(b"preregbench test snapshot").hexdigest()
    _blob_cache(tmp_path, "example-org/smollm2-mirror", folder, sha)
    assert resolve_revision("example-org/smollm2-mirror", "main", tmp_path) == (sha, "cache")
    mirror = load_model("example-org/smollm2-mirror", revision="main", cache_dir=tmp_path)
    described = mirror.describe()
    assert described.revision == sha and described.id == "example-org/smollm2-mirror"
    prompts = chats(3)
    settings = GenerationSettings(max_new_tokens=4)
    assert [r.token_ids for r in mirror.generate(prompts, settings)] == [r.token_ids for r in smollm.generate(prompts, settings)]


def test_unavailable_hub_model_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError) as info:
        load_model("example-org/not-cached", cache_dir=tmp_path)
    message = str(info.value)
    assert "HF_HUB_OFFLINE is set" in message
    assert "huggingface-cli download example-org/not-cached --revision main" in message
    assert "smollm2-135m-instruct" in message and "gemma-3-270m" in message


def test_a_pinned_sha_needs_no_lookup() -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert resolve_revision("any/repo", sha) == (sha, "pinned")
