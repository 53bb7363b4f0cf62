"""The shared-prefix prefill (``TransformersModel(shared_prefix=...)``) against the plain one-pass prefill, on the
tiny random llama of ``test_one_pass_tiny.py``: no download, no real weights, a default-run test.

``layout`` must give the plain path's responses exactly (every field, the choice logits to the bit); ``once`` the
same generated ids and fields, the choice logits within 1e-5.  Each case also checks that the path really ran
(``prefix_stats``), so a silent fall-back to the plain path cannot pass for it.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from models import GenerationSettings, ModelError, Response
from models._prefix import cache_of
from models.tests.test_one_pass_tiny import LABELS, WORDS, tiny_model

SETTINGS = GenerationSettings(max_new_tokens=5)


def plain_model(batch_size: int = 4) -> object:
    # one thread: a tiny model's matrix products on two threads wait for each other on a busy machine
    return tiny_model(threads=1, batch_size=batch_size)


def shared_model(mode: str, batch_size: int = 4) -> object:
    model = plain_model(batch_size)
    model.shared_prefix = mode
    model.shared_prefix_min = 3  # the tiny prompts are a few words long
    return model


def words(draw: random.Random, n: int) -> str:
    return " ".join(draw.choice(WORDS) for _ in range(n))


def with_prefix(prefix: str, lengths: list[int], seed: int = 5) -> list[str]:
    draw = random.Random(seed)
    return [f"{prefix} {words(draw, n)}" for n in lengths]


PREFIX = words(random.Random(11), 12)
CASES = {
    # a shared prefix, ragged suffixes (so the rows are left-padded by different amounts)
    "shared": with_prefix(PREFIX, [1, 4, 2, 7, 3, 5, 6, 2]),
    # suffixes from 1 to 14 words: pads of up to 13 columns, some of them longer than a row's own suffix
    "ragged": with_prefix(PREFIX, [14, 1, 9, 2, 12, 3, 1, 6]),
    # suffixes of 1-3 words: the best split would leave fewer than 4 query positions (see _same_query_blocks)
    "short suffixes": with_prefix(PREFIX, [1, 2, 3, 1, 2, 3, 1, 2]),
    # one prompt is the prefix plus one token, the others longer
    "prefix plus one": [f"{PREFIX} A"] + with_prefix(PREFIX, [3, 6, 2, 5, 4, 1, 8], seed=9),
    # nothing shared beyond chance: the plain path
    "no shared prefix": [words(random.Random(i), 3 + (5 * i) % 11) for i in range(8)],
}


def assert_same_as_plain(mode: str, got: list[Response], plain: list[Response]) -> None:
    assert len(got) == len(plain)
    for new, old in zip(got, plain):
        assert list(new.token_ids) == list(old.token_ids)
        worst = max(abs(a - b) for a, b in zip(new.scores.logits, old.scores.logits))
        assert worst <= 1e-5, (mode, worst)
        if mode == "layout":
            assert new == old  # every field, the logits to the bit
        else:
            assert dataclasses.replace(new, scores=None) == dataclasses.replace(old, scores=None)
            assert new.scores.token_ids == old.scores.token_ids


@pytest.mark.parametrize("mode", ["layout", "once"])
@pytest.mark.parametrize("case", list(CASES))
def test_shared_prefix_gives_the_plain_responses(mode: str, case: str) -> None:
    texts = CASES[case]
    plain = plain_model().score_and_generate(texts, LABELS, SETTINGS)
    model = shared_model(mode)
    for call in range(2):  # the second call finds the first one's prefixes cached
        assert_same_as_plain(mode, model.score_and_generate(texts, LABELS, SETTINGS), plain)
    stats = model.prefix_stats
    if case == "no shared prefix":
        assert stats["tail_rows"] == 0 and stats["entries_stored"] == 0
    else:
        # both batches of the second call (at least) ran rows on top of cached columns
        assert stats["shared_batches"] >= 2 and stats["tail_rows"] > 0 and stats["cached_columns"] > 0, stats


@pytest.mark.parametrize("mode", ["layout", "once"])
def test_cached_prefixes_are_reused_only_for_the_same_tokens(mode: str) -> None:
    first = CASES["shared"]
    # the same lengths and layout, one token of the prefix changed: only the columns before it may be reused
    tokens = PREFIX.split()
    tokens[4] = "river" if tokens[4] != "river" else "stone"
    changed = [text.replace(PREFIX, " ".join(tokens), 1) for text in first]
    other = with_prefix(words(random.Random(23), 12), [1, 4, 2, 7, 3, 5, 6, 2])
    plain = plain_model()
    model = shared_model(mode)
    assert_same_as_plain(mode, model.score_and_generate(first, LABELS, SETTINGS),
                         plain.score_and_generate(first, LABELS, SETTINGS))
    stored = model.prefix_stats["entries_stored"]
    assert stored > 0
    hits = model.prefix_stats["entry_hits"]
    assert_same_as_plain(mode, model.score_and_generate(first, LABELS, SETTINGS),
                         plain.score_and_generate(first, LABELS, SETTINGS))
    assert model.prefix_stats["entry_hits"] > hits  # reused ...
    assert model.prefix_stats["entries_stored"] == stored  # ... and nothing recomputed
    for texts in (changed, other):
        before = model.prefix_stats["entries_stored"]
        assert_same_as_plain(mode, model.score_and_generate(texts, LABELS, SETTINGS),
                             plain.score_and_generate(texts, LABELS, SETTINGS))
        assert model.prefix_stats["entries_stored"] > before  # a new prefix, computed afresh


def test_a_stale_prefix_would_be_caught() -> None:
    """The comparison above can fail: an entry planted under the right layout with wrong values changes the
    logits far beyond the tolerance."""
    texts = CASES["shared"]
    plain = plain_model().score_and_generate(texts, LABELS, SETTINGS)
    model = shared_model("layout")
    model.score_and_generate(texts, LABELS, SETTINGS)
    for entry in model.prefix_cache.entries:
        entry.layers = [(keys * 0.5, values) for keys, values in entry.layers]
    got = model.score_and_generate(texts, LABELS, SETTINGS)
    assert max(abs(a - b) for new, old in zip(got, plain) for a, b in zip(new.scores.logits, old.scores.logits)) > 1e-3


def test_rows_of_other_pad_counts_take_an_entry_only_where_the_kernel_agrees() -> None:
    """An entry is keyed by the batch width, not the pad count: rows padded differently take one row's cached
    columns where the pad probe says the attention kernel rounds them alike, and run in full where it does
    not; either way every response is the plain path's to the bit ("ragged" needs both).  With the probe
    replaced by one that accepts every pad count, the same batches come out different: the probe is what keeps
    the bits."""
    texts = CASES["ragged"] + CASES["shared"]
    plain = plain_model().score_and_generate(texts, LABELS, SETTINGS)
    model = shared_model("layout")
    for _ in range(2):
        assert model.score_and_generate(texts, LABELS, SETTINGS) == plain
    verdicts = list(model.prefix_cache.pad_verdicts.values())
    assert model.prefix_stats["other_pad_rows"] > 0 and True in verdicts and False in verdicts, model.prefix_stats

    careless = shared_model("layout")
    careless.prefix_cache.pads_agree = lambda width, length, pad, others: set(others)
    got = careless.score_and_generate(texts, LABELS, SETTINGS)
    assert max(abs(a - b) for new, old in zip(got, plain) for a, b in zip(new.scores.logits, old.scores.logits)) > 0


def test_the_pad_probe_passes_only_pad_counts_the_model_rounds_alike() -> None:
    """The probe against the model itself: the tiny llama's keys and values for the same prefix, computed in
    passes of one width under two pad counts, must be identical wherever ``pads_agree`` says so.  Widths from
    14 to 41 with pads of up to 13 put the prefix in full and in partial query blocks, so both verdicts
    occur and some rejected pairs really differ."""
    model = shared_model("layout")
    prefix = model.encode(PREFIX)
    suffix = model.encode(words(random.Random(31), 40))
    decoder = model.model.get_decoder()
    pad_id = model.tokenizer.pad_token_id
    length = len(prefix)

    def prefix_columns(pad: int, width: int) -> list:
        row = prefix + suffix[:width - pad - length]
        ids = torch.tensor([[pad_id] * pad + row])
        mask = torch.tensor([[0] * pad + [1] * len(row)])
        out = decoder(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).masked_fill(mask == 0, 1),
                      use_cache=True)
        return [t[0, :, pad:pad + length] for layer in cache_of(out).layers for t in (layer.keys, layer.values)]

    outcomes = {(True, True): 0, (False, True): 0, (False, False): 0}
    with torch.inference_mode(), model._thread_count(torch):
        for width in range(length + 2, 42):
            pads = list(range(0, min(width - length - 1, 14)))
            columns = {pad: prefix_columns(pad, width) for pad in pads}
            for ref in pads[:4]:
                agreeing = model.prefix_cache.pads_agree(width, length, ref, pads)
                for pad in pads:
                    same = all(torch.equal(a, b) for a, b in zip(columns[ref], columns[pad]))
                    assert same or pad not in agreeing, (width, ref, pad)
                    outcomes[(pad in agreeing, same)] += 1
    assert outcomes[(True, True)] and outcomes[(False, False)], outcomes


def test_the_pad_probe_leaves_the_random_state_alone() -> None:
    model = shared_model("layout")
    state = torch.random.get_rng_state()
    agreeing = model.prefix_cache.pads_agree(40, 12, 0, [1, 2, 3, 9])
    assert torch.equal(torch.random.get_rng_state(), state)
    assert model.prefix_stats["pad_probes"] == 1
    assert model.prefix_cache.pads_agree(40, 12, 0, [3, 9, 0]) == (agreeing & {3, 9}) | {0}  # cached verdicts, its own pad
    assert model.prefix_stats["pad_probes"] == 1  # no second probe


def test_taps_see_the_plain_prefill() -> None:
    """Inside taps every prefill is the plain one: the same steps and the same hidden states as a model without
    the option (what P-Zombie counts and reads)."""
    texts = CASES["shared"]
    seen: dict[str, list] = {}
    for name, model in (("plain", plain_model()), ("once", shared_model("once"))):
        model.score_and_generate(texts, LABELS, SETTINGS)  # a cached prefix exists for the once model
        before = dict(model.prefix_stats)
        events: list = []

        def record(event) -> None:
            events.append((event.layer, event.step, tuple(event.hidden.shape), event.hidden.sum().item()))

        with model.taps(record, layers=[0, 1]):
            model.score_and_generate(texts, LABELS, SETTINGS)
        seen[name] = events
        if name == "once":
            assert model.prefix_stats["tail_rows"] == before["tail_rows"]
            assert model.prefix_stats["full_rows"] == before["full_rows"] + len(texts)
    assert seen["once"] == seen["plain"]


def test_sliding_window_models_keep_the_plain_path() -> None:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    plain = plain_model()
    config = Gemma3TextConfig(vocab_size=len(plain.tokenizer), hidden_size=64, intermediate_size=96,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                              sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                              max_position_embeddings=64, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    torch.manual_seed(1)
    from models._hf import TransformersModel

    gemma = TransformersModel(Gemma3ForCausalLM(config), plain.tokenizer, model_id="tiny-gemma3", revision="random",
                              source="config", batch_size=4, shared_prefix="layout", shared_prefix_min=3)
    gemma.score_and_generate(CASES["shared"], LABELS, SETTINGS)
    gemma.score_and_generate(CASES["shared"], LABELS, SETTINGS)
    assert gemma.prefix_stats["tail_rows"] == 0 and gemma.prefix_stats["entries_stored"] == 0
    assert gemma.prefix_stats["full_rows"] == 16


def test_forget_prefixes_starts_afresh() -> None:
    model = shared_model("layout")
    model.score_and_generate(CASES["shared"], LABELS, SETTINGS)
    assert model.prefix_stats["entries_stored"] > 0 and model.prefix_cache.pad_verdicts
    model.forget_prefixes()
    assert model.prefix_cache.entries == [] and model.prefix_cache.pad_verdicts == {}
    assert set(model.prefix_stats.values()) == {0}


@pytest.mark.parametrize("options", [{"shared_prefix": "always"}, {"shared_prefix": "layout", "shared_prefix_min": 0}])
def test_bad_shared_prefix_options_are_refused(options: dict) -> None:
    from models._hf import TransformersModel

    plain = plain_model()
    with pytest.raises(ModelError, match="shared_prefix"):
        TransformersModel(plain.model, plain.tokenizer, model_id="tiny", revision="random", source="config", **options)


def test_the_cpu_kernels_round_as_the_layout_rules_assume() -> None:
    """What ``shared_prefix="layout"`` relies on, checked on this machine's torch: a matrix product's rows do not
    depend on how many rows it has from ``_MIN_GEMM_ROWS`` per thread up, and where ``_same_query_blocks`` says
    so, attention over the last positions alone equals the same rows of one pass over all positions.  If a torch
    or BLAS release changes either, this fails before a RES run's records could."""
    import torch.nn.functional as F

    from models._prefix import _MIN_GEMM_ROWS, _same_query_blocks

    generator = torch.Generator().manual_seed(0)
    before = torch.get_num_threads()
    try:
        with torch.inference_mode():
            weight = torch.randn(96, 64, generator=generator)
            x = torch.randn(300, 64, generator=generator)
            for threads in sorted({1, before}):
                torch.set_num_threads(threads)
                whole = x @ weight.T
                for rows in range(_MIN_GEMM_ROWS * threads, 300, 7):
                    assert torch.equal(x[:rows] @ weight.T, whole[:rows]), (threads, rows)
            torch.set_num_threads(1)
            for width in (97, 193, 195, 242):
                q, k, v = (torch.randn(1, 2, width, 64, generator=generator) for _ in range(3))
                mask = torch.ones(width, width, dtype=torch.bool).tril()[None, None]
                full = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                checked = 0
                for queries in sorted({*range(1, 40), *(b + d for b in (64, 96, 128, 192) for d in range(-2, 6))}):
                    if queries < width and _same_query_blocks(width, queries):
                        tail = F.scaled_dot_product_attention(q[:, :, -queries:], k, v, attn_mask=mask[:, :, -queries:])
                        assert torch.equal(tail, full[:, :, -queries:]), (width, queries)
                        checked += 1
                assert checked >= 2
    finally:
        torch.set_num_threads(before)
