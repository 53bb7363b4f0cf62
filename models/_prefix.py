"""The shared-prefix KV cache of the transformers backend: a batch's prefill computed on top of cached columns.

:class:`PrefixCache` owns the cached prefixes (keys and values of every decoder layer), the probes that say
which layouts the CPU attention kernel treats alike, and the plans that choose which columns of a batch are
computed.  The backend (``_hf.TransformersModel``) asks it for each batch's prefill and runs the plain prefill
when it declines.  Only that backend builds a cache, after it has imported torch and transformers; the methods
import them where they use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._base import ModelError

#: ``shared_prefix`` modes of :class:`TransformersModel` (None: every batch runs one plain prefill).
SHARED_PREFIX_MODES = ("layout", "once")


@dataclass(eq=False)  # compared by identity: two entries may share key and ids under other pad counts
class _PrefixEntry:
    """Cached keys and values of the first ``len(ids)`` real tokens of a prompt, for every decoder layer.

    ``key`` says under which layout they were computed: ``("layout", width, ...)`` for a row of a left-padded
    batch of that width, with ``pad`` the row's pad count; ``("once", ...)`` for the tokens alone (batch 1,
    positions 0..n-1, ``pad`` None).  ``layers`` holds one (keys, values) pair a layer, each
    ``[1, kv_heads, len(ids), head_dim]``.
    """

    key: tuple
    ids: tuple[int, ...]
    layers: list[tuple[Any, Any]]
    nbytes: int
    pad: int | None = None


#: The fewest token rows a thread that a pass of the shared-prefix path may multiply: the CPU BLAS takes another
#: kernel for very short matrices, whose sums round differently (measured with torch 2.13's MKL on SmolLM2's
#: shapes: 1-3 rows differ from 4 or more at 1 thread; at 2 threads 1-3, 5-7 and 9-11 differ, 12 and more agree).
_MIN_GEMM_ROWS = 8


def _sdpa_query_block(queries: int) -> int:
    """Rows per query block of torch's CPU flash-attention kernel (``FlashAttentionKernel.cpp``) for a pass of
    ``queries`` query positions."""
    return 256 if queries >= 768 else 64 if queries >= 192 else 32


def _same_query_blocks(width: int, queries: int) -> bool:
    """Whether the last ``queries`` of ``width`` query positions get the same attention arithmetic in a pass of
    their own as in one pass over all ``width``.  The kernel multiplies each block of query rows with one matrix
    product; a block of 1-3 rows goes to another BLAS kernel and rounds differently.  Every block other than the
    last is full (32 rows or more), so the condition is on the last block of each pass: 4 rows or more in both,
    or exactly the same rows (the same size: both blocks end at the last position).  A pass of fewer than 4
    query positions is never taken (one position, measured, rounds differently even against a last block of
    one row)."""
    if queries < 4:
        return False
    last = [n % _sdpa_query_block(n) or _sdpa_query_block(n) for n in (width, queries)]
    return last[1] == last[0] if last[0] < 4 else last[1] >= 4


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cache_of(out: Any) -> Any:
    """The KV cache a forward returned (``cache`` in transformers 5, ``past_key_values`` before)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


class PrefixCache:
    """Cached prefixes of one causal LM and the plans that reuse them.

    ``mode`` is one of :data:`SHARED_PREFIX_MODES`, or None (every batch takes the plain prefill);
    ``min_columns`` the least number of cached columns worth a second forward; ``max_bytes`` the byte budget
    of the cached prefixes.  ``cache_arg`` is the name under which the model's forward takes a KV cache and
    ``last_only`` the keyword arguments that make it keep the last position's logits alone (empty when it
    cannot).  ``stats`` counts what each batch did.
    """

    def __init__(
        self,
        model: Any,
        *,
        cache_arg: str,
        last_only: dict[str, int],
        mode: str | None = None,
        min_columns: int = 32,
        max_bytes: int = 256 << 20,
    ):
        if mode is not None and mode not in SHARED_PREFIX_MODES:
            raise ModelError(f"shared_prefix must be None or one of {', '.join(SHARED_PREFIX_MODES)}, "
                             f"got {mode!r}")
        if min_columns < 1:
            raise ModelError(f"shared_prefix_min must be >= 1, got {min_columns}")
        self.model = model
        self.cache_arg = cache_arg
        self.last_only = last_only
        self.mode = mode
        self.min_columns = min_columns
        self.max_bytes = max_bytes
        self.stats = {"batches": 0, "shared_batches": 0, "full_rows": 0, "tail_rows": 0,
                      "cached_columns": 0, "prefix_forwards": 0, "entries_stored": 0, "entry_hits": 0,
                      "pad_probes": 0, "other_pad_rows": 0}
        self.entries: list[_PrefixEntry] = []
        # (width, length, pad, other pad, context) -> whether the attention kernel gives the first ``length``
        # real positions the same bits under both pad counts (see pads_agree)
        self.pad_verdicts: dict[tuple, bool] = {}
        self._eligible: bool | None = None

    def forget(self) -> None:
        """Drop every cached prefix and pad-probe verdict and zero ``stats``: the next batch starts as in a fresh
        process."""
        self.entries = []
        self.pad_verdicts = {}
        for name in self.stats:
            self.stats[name] = 0

    def close(self) -> None:
        """Let go of the model and the cached prefixes."""
        self.model = None
        self.entries = []

    # -- prefill ----------------------------------------------------------------------------------

    def prefill(self, input_ids: Any, mask: Any, positions: Any, *, allowed: bool = True) -> tuple[Any, Any] | None:
        """Last-position float32 logits (one row a prompt, batch order) and the KV cache of a left-padded batch,
        computed on top of cached columns; None when the batch takes the plain prefill (one forward over the
        whole padded batch, counted here as such): when ``allowed`` is false, when the model, device or batch
        does not allow this path (see :meth:`_usable`), or when the plan saves and stores nothing.

        Rows whose first columns are cached run only their remaining columns; see :meth:`_plan_layout` and
        :meth:`_plan_once`.  The decoder stack runs on the row subsets, the output head once on every row's last
        position (as the plain prefill does: the head's matrix product rounds differently with fewer than 4
        rows).  The cache handed to decoding keeps the plain layout: every row ``[pads | prompt]`` over the
        batch's padded width, with the same attention mask and position ids as the plain prefill.
        """
        import torch

        self.stats["batches"] += 1
        n, width = input_ids.shape
        plan = None
        if allowed and self._usable(input_ids):
            pads = (width - mask.sum(dim=-1)).tolist()
            rows = [row[pad:] for row, pad in zip(input_ids.tolist(), pads)]
            plan = (self._plan_layout if self.mode == "layout" else self._plan_once)(rows, pads, width)
        if plan is None:
            self.stats["full_rows"] += n
            return None
        from transformers import DynamicCache

        full, tail, split, entries, store = plan
        decoder = self.model.get_decoder()
        parts = []  # (last hidden state, cache) of each forward: the full rows first, then the others
        if full:
            index = torch.tensor(full, device=input_ids.device)
            out = decoder(input_ids=input_ids[index], attention_mask=mask[index], position_ids=positions[index],
                          use_cache=True)
            cache = cache_of(out)
            parts.append((out.last_hidden_state[:, -1:, :], cache))
            stored = {}
            for row, (key, ids) in store.items():
                j, pad = full.index(row), pads[row]
                stored[row] = self._store(key, ids, [(layer.keys[j:j + 1, :, pad:pad + len(ids)],
                                                      layer.values[j:j + 1, :, pad:pad + len(ids)])
                                                     for layer in cache.layers], pad)
            # a row waiting for an entry (the index of the full row storing it) takes the one stored just now
            entries = {row: stored[entry] if isinstance(entry, int) else entry for row, entry in entries.items()}
        if tail:
            index = torch.tensor(tail, device=input_ids.device)
            layers = []
            for number, (keys0, values0) in enumerate(entries[tail[0]].layers):
                keys = keys0.new_zeros((len(tail), keys0.shape[1], split, keys0.shape[3]))
                values = values0.new_zeros((len(tail), values0.shape[1], split, values0.shape[3]))
                for j, row in enumerate(tail):
                    pad = pads[row]
                    if split > pad:  # columns 0..pad-1 are padding: masked, their zeros never weigh
                        cached_keys, cached_values = entries[row].layers[number]
                        keys[j, :, pad:] = cached_keys[0, :, :split - pad]
                        values[j, :, pad:] = cached_values[0, :, :split - pad]
                layers.append((keys, values))
            out = decoder(input_ids=input_ids[index, split:], attention_mask=mask[index],
                          position_ids=positions[index, split:], use_cache=True,
                          **{self.cache_arg: DynamicCache(layers)})
            parts.append((out.last_hidden_state[:, -1:, :], cache_of(out)))
            self.stats["shared_batches"] += 1
            self.stats["cached_columns"] += split * len(tail)
        self.stats["full_rows"] += len(full)
        self.stats["tail_rows"] += len(tail)
        head = self.model.get_output_embeddings()
        if len(parts) == 1:
            hidden, cache = parts[0]
            return head(hidden)[:, -1, :].to(dtype=torch.float32), cache
        order = torch.tensor(full + tail, device=input_ids.device)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(n, device=input_ids.device)
        (hidden_a, cache_a), (hidden_b, cache_b) = parts
        layers = [(torch.cat([a.keys, b.keys])[inverse], torch.cat([a.values, b.values])[inverse])
                  for a, b in zip(cache_a.layers, cache_b.layers)]
        return head(torch.cat([hidden_a, hidden_b])[inverse])[:, -1, :].to(dtype=torch.float32), DynamicCache(layers)

    def _usable(self, input_ids: Any) -> bool:
        """Whether this batch may take the shared-prefix path: a mode is set, the batch has two rows or more,
        the model is on the CPU, and its cache is a plain full-attention ``DynamicCache`` (no sliding-window or
        hybrid layers, such as Gemma 3's)."""
        if self.mode is None or input_ids.shape[0] < 2:
            return False
        if input_ids.device.type != "cpu" or not self.last_only:
            return False
        if self.mode == "layout" and getattr(self.model.config, "_attn_implementation", None) != "sdpa":
            return False  # the layout rules (see _plan_layout) are those of torch's CPU sdpa kernel
        if self._eligible is None:
            self._eligible = self._plain_full_attention()
        return self._eligible

    def _plain_full_attention(self) -> bool:
        """A llama-style causal LM: every cache layer a full-attention ``DynamicLayer`` (transformers' own layer
        types for this config; Gemma 3's sliding-window layers are not), and logits that are the output head
        on the decoder's last hidden state, bit for bit (a probe of three tokens; no soft-capping or scaling)."""
        import torch

        try:
            from transformers import DynamicCache
            from transformers.cache_utils import DynamicLayer

            if self.cache_arg != "cache" or not all(
                    type(layer) is DynamicLayer for layer in DynamicCache(config=self.model.config).layers):
                return False
            device = next(self.model.parameters()).device
            probe = torch.tensor([[0, 1, 2]], device=device) % self.model.config.get_text_config().vocab_size
            with torch.inference_mode():
                logits = self.model(input_ids=probe, use_cache=False, **self.last_only).logits
                hidden = self.model.get_decoder()(input_ids=probe, use_cache=False).last_hidden_state
                return torch.equal(logits, self.model.get_output_embeddings()(hidden[:, -1:, :]))
        except Exception:  # another cache API or model layout: keep the plain path
            return False

    # -- entries and probes -----------------------------------------------------------------------

    def _context(self) -> tuple:
        """What besides the layout the cached columns depend on: attention implementation and thread count."""
        import torch

        return (getattr(self.model.config, "_attn_implementation", None), torch.get_num_threads())

    def _find(self, key: tuple, ids: Sequence[int],
              layout: tuple[int, int] | None = None) -> tuple[_PrefixEntry | None, int]:
        """The cached entry under ``key`` sharing the most leading tokens with ``ids``, and that count.  With
        ``layout`` = (width, pad count), the layout mode, only an entry computed under that pad count or one the
        attention kernel treats alike in a pass of that width (:meth:`pads_agree`) is taken."""
        best, length = None, 0
        for entry in self.entries:
            if entry.key == key:
                common = _common_length(entry.ids, ids)
                if common > length and (layout is None or self._pad_fits(layout, entry)):
                    best, length = entry, common
        return best, length

    def _pad_fits(self, layout: tuple[int, int], entry: _PrefixEntry) -> bool:
        width, pad = layout
        return pad in self.pads_agree(width, len(entry.ids), entry.pad, [pad])

    def pads_agree(self, width: int, length: int, pad: int, others: Sequence[int]) -> set[int]:
        """Those of ``others`` under which this process's attention kernel gives a row's first ``length`` real
        positions the same bits as under ``pad``, in a pass over ``width`` columns.

        The kernel's arithmetic for a query row can depend on where the row sits in its block of queries: with
        torch 2.13's CPU flash attention, rows in a block's trailing partial group round differently, so a
        prefix that reaches into the last, partial block of the pass gets other bits under another pad count.
        Rather than encode one library build's blocking, each (width, length, pad pair, thread count, attention)
        is probed once: one ``scaled_dot_product_attention`` call over random queries, keys and values that hold
        the same ``length`` real columns under each pad count, masked as a left-padded causal batch is (pad
        columns and pad query rows masked), compared to the bit on those columns.  A layer's other operations
        treat each position alike wherever it sits, so a layer that agrees on every column agrees in every
        layer.  The probe draws from its own generator; the global random state is untouched.
        """
        import torch

        context = self._context()
        todo = sorted({p for p in others if p != pad and (width, length, pad, p, context) not in self.pad_verdicts})
        if todo:
            config = self.model.config.get_text_config()
            heads = min(config.num_attention_heads, 4)  # the kernel runs each head alike; four keep the probe cheap
            dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
            pads = [pad, *todo]
            generator = torch.Generator().manual_seed(width * 7919 + length)
            with torch.inference_mode():
                qkv = torch.randn(3, len(pads), heads, width, dim, generator=generator)
                real = qkv[:, 0, :, pad:pad + length].clone()
                column = torch.arange(width)
                masks = []
                for i, p in enumerate(pads):
                    qkv[:, i, :, p:p + length] = real
                    masks.append((column[None, :] >= p) & (column[None, :] <= column[:, None]) & (column[:, None] >= p))
                out = torch.nn.functional.scaled_dot_product_attention(
                    qkv[0], qkv[1], qkv[2], attn_mask=torch.stack(masks)[:, None], scale=dim ** -0.5)
                first = out[0, :, pad:pad + length]
                for i, p in enumerate(todo, start=1):
                    self.pad_verdicts[(width, length, pad, p, context)] = bool(torch.equal(first, out[i, :, p:p + length]))
            self.stats["pad_probes"] += 1
        return {p for p in others if p == pad or self.pad_verdicts[(width, length, pad, p, context)]}

    def _store(self, key: tuple, ids: Sequence[int], layers: list[tuple[Any, Any]],
               pad: int | None = None) -> _PrefixEntry:
        """Cache copies of ``layers`` under ``key``, ``ids`` and ``pad``; beyond ``max_bytes`` the least recently
        used entries go (the new one stays)."""
        layers = [(k.clone(), v.clone()) for k, v in layers]
        entry = _PrefixEntry(key, tuple(ids), layers, sum(k.nbytes + v.nbytes for k, v in layers), pad)
        self.entries = [e for e in self.entries if not (e.key == key and e.ids == entry.ids and e.pad == pad)]
        self.entries.append(entry)
        while len(self.entries) > 1 and sum(e.nbytes for e in self.entries) > self.max_bytes:
            self.entries.pop(0)
        self.stats["entries_stored"] += 1
        return entry

    def _touch(self, entry: _PrefixEntry) -> None:
        if entry in self.entries:
            self.entries.remove(entry)
            self.entries.append(entry)
        self.stats["entry_hits"] += 1

    # -- plans ------------------------------------------------------------------------------------

    def _plan_layout(self, rows: list[list[int]], pads: list[int], width: int) -> tuple | None:
        """Reuse only columns computed under the same layout: the same batch width, and a pad count the attention
        kernel treats alike.

        The plain prefill's arithmetic for a row does not depend on the other rows of the batch, only on the
        row's tokens, the batch width and where its tokens sit among the attention kernel's blocks of query
        rows (measured with torch 2.13 on the CPU: the width sets the blocking, and a prefix reaching into the
        pass's last, partial block rounds differently under different pad counts, by up to ~4e-5 in SmolLM2's
        logits; elsewhere the pad count changes no bit).  An entry is therefore keyed by the width, records the
        pad count it was computed under, and holds exactly the columns that a plain prefill computes for such
        a row; a row of another pad count takes it only when :meth:`pads_agree` has found the kernel to give
        the entry's columns the same bits under both pad counts.  A row with no such entry covering at least
        three quarters of the batch's longest common token prefix (``L``, when ``L`` reaches ``min_columns``)
        runs in full, as in the plain prefill but with a subset of the rows, and leaves its first ``L`` tokens
        cached; a row whose pad count agrees with such a row's waits for that entry.  The other rows run only
        columns ``split..width-1`` on top of their cached columns, ``split`` chosen to save the most columns
        among those that keep the attention kernel's query blocks equivalent (:func:`_same_query_blocks`) and
        every matrix product at ``_MIN_GEMM_ROWS`` rows a thread or more.
        Returns (full rows, tail rows, split, {tail row: its entry, or the index of the full row that stores it
        in this batch}, {full row: (key, ids) to store}), or None when nothing is saved or stored.
        """
        context = self._context()
        common = rows[0]
        for row in rows[1:]:
            common = common[:_common_length(common, row)]
        keep = len(common) if len(common) >= self.min_columns else 0
        key = ("layout", width, *context)
        found = [self._find(key, row, (width, pad)) for row, pad in zip(rows, pads)]
        matched = [length for _, length in found]
        store: dict[int, tuple[tuple, tuple[int, ...]]] = {}
        waiting: dict[int, int] = {}  # row -> the full row whose stored entry it takes
        needs = [bool(keep) and 4 * matched[b] < 3 * keep for b in range(len(rows))]
        for b in range(len(rows)):
            if not needs[b]:
                continue
            source = next((s for s in store if pads[b] in self.pads_agree(width, keep, pads[s], [pads[b]])), None)
            if source is None:
                store[b] = (key, tuple(common))
                # one probe for the pad counts of the rows still to place, against this row's
                self.pads_agree(width, keep, pads[b], [pads[c] for c in range(b + 1, len(rows)) if needs[c]])
            else:
                waiting[b] = source  # a full row of an agreeing pad count stores the prefix this batch
                matched[b] = keep
        candidates = [b for b in range(len(rows)) if b not in store and matched[b]]
        threads = context[1]
        best, split = 0, 0
        for reach in sorted({min(pads[b] + matched[b], width - 1) for b in candidates}):
            while reach >= self.min_columns and not _same_query_blocks(width, width - reach):
                reach -= 1
            count = sum(pads[b] + matched[b] >= reach for b in candidates)
            if reach >= self.min_columns and count * (width - reach) >= _MIN_GEMM_ROWS * threads \
                    and reach * count > best:
                best, split = reach * count, reach
        tail = [b for b in candidates if pads[b] + matched[b] >= split] if split else []
        if len(rows) - len(tail) and (len(rows) - len(tail)) * width < _MIN_GEMM_ROWS * threads:
            return None  # the full rows alone would be too few for the matrix products to round as in one batch
        if not tail and not store:
            return None
        for b in tail:
            if b not in waiting:
                self._touch(found[b][0])
            if (pads[waiting[b]] if b in waiting else found[b][0].pad) != pads[b]:
                self.stats["other_pad_rows"] += 1
        full = [b for b in range(len(rows)) if b not in tail]
        return full, tail, split, {b: waiting[b] if b in waiting else found[b][0] for b in tail}, store

    def _plan_once(self, rows: list[list[int]], pads: list[int], width: int) -> tuple | None:
        """The prefix computed once, alone: batch 1, positions 0..L-1, no padding (``L``: the batch's longest common
        token prefix, at most ``width - 1``), kept under its exact token ids.  Every row then runs only columns
        ``L..width-1``.  The same mathematics as the plain prefill, not the same arithmetic: the prefix's columns
        are summed in another grouping than in the padded batch, so logits move in the last bits (see the RES
        README's model-phase section for the measured size)."""
        import torch

        common = rows[0]
        for row in rows[1:]:
            common = common[:_common_length(common, row)]
        length = min(len(common), width - 1)
        if length < self.min_columns:
            return None
        ids = tuple(common[:length])
        key = ("once", *self._context())
        entry = next((e for e in self.entries if e.key == key and e.ids == ids), None)
        if entry is None:
            device = next(self.model.parameters()).device
            out = self.model.get_decoder()(input_ids=torch.tensor([ids], device=device),
                                           position_ids=torch.arange(length, device=device)[None], use_cache=True)
            self.stats["prefix_forwards"] += 1
            entry = self._store(key, ids, [(layer.keys, layer.values) for layer in cache_of(out).layers])
        else:
            self._touch(entry)
        tail = list(range(len(rows)))
        return [], tail, length, {b: entry for b in tail}, {}
