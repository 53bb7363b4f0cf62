"""The transformers backend: local folders, hub ids pinned to a commit sha, and the bundled models."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import inspect
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ._base import (
    CapabilityError,
    ChoiceScores,
    GenerationSettings,
    LanguageModel,
    Message,
    ModelDescription,
    ModelError,
    ModelUnavailableError,
    Prompt,
    Response,
    TapCallback,
    TapEvent,
)

_SHA1 = re.compile(r"^[0-9a-f]{40}$")
OFFLINE_ALTERNATIVES = "smollm2-135m-instruct, gemma-3-270m"


def _torch():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ModelError(
            "the transformers backend needs torch and transformers: install the 'models' extra "
            "(pip install torch==2.13.0 && pip install -e '.[models]')"
        ) from exc
    return torch


@contextlib.contextmanager
def _collector_paused():
    """The cycle collector off while a model loads: importing torch and transformers and building the
    model make millions of long-lived objects, and every full collection they trigger walks all of them
    (about 0.5 s of a SmolLM2 load on a 2-core machine) to find almost no garbage.  A load is one bounded
    step, so nothing accumulates; the collector is on again afterwards if it was on before.

    Those objects would still sit in the youngest generation, and the first allocations after the load
    would walk them twice, in a young and then a middle collection (about 0.3 s for SmolLM2).  So they go
    straight to the oldest generation (``gc.freeze`` then ``gc.unfreeze``, which moves every tracked object
    there without a walk), unless something else holds frozen objects, which the unfreeze would release."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def load_tokenizer(folder: str | Path) -> Any:
    """transformers' tokenizer of a local folder (``AutoTokenizer``), loaded with the cycle collector paused:
    reading a large vocabulary's ``tokenizer.json`` (Gemma's 262,144 entries) makes about a million objects,
    and each full collection that triggers walks everything the process holds (seven of them for Gemma's,
    in a process that has imported torch and transformers)."""
    with _collector_paused():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(folder)


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_cache_dir(cache_dir: str | Path | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    return home / "hub"


def cached_revision(repo_id: str, revision: str, cache_dir: str | Path | None = None) -> str | None:
    """The commit sha that the local hub cache records for ``revision`` (a branch or tag), if its snapshot exists."""
    repo = hub_cache_dir(cache_dir) / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / revision
    if not ref.is_file():
        return None
    sha = ref.read_text().strip()
    if _SHA1.match(sha) and (repo / "snapshots" / sha).is_dir():
        return sha
    return None


def resolve_revision(repo_id: str, revision: str = "main", cache_dir: str | Path | None = None) -> tuple[str, str]:
    """Resolve ``revision`` to an immutable commit sha: (sha, "pinned" | "hub" | "cache").

    Online the hub answers (10 s timeout); offline, or when the hub fails, the
    local cache's ``refs/<revision>`` does.  Neither: :class:`ModelUnavailableError`.
    """
    if _SHA1.match(revision):
        return revision, "pinned"
    hub_problem = "HF_HUB_OFFLINE is set"
    if not hub_offline():
        try:
            from huggingface_hub import HfApi

            return HfApi().model_info(repo_id, revision=revision, timeout=10).sha, "hub"
        except Exception as exc:  # network down, unknown repo, gated model: all end in the cache look-up
            hub_problem = f"the hub did not answer ({type(exc).__name__})"
    sha = cached_revision(repo_id, revision, cache_dir)
    if sha is not None:
        return sha, "cache"
    cache = hub_cache_dir(cache_dir)
    raise ModelUnavailableError(
        f"{repo_id}@{revision}: cannot resolve the revision to a commit sha: {hub_problem}, and the local cache "
        f"{cache} has no models--{repo_id.replace('/', '--')}/refs/{revision} with its snapshot. Get the weights on "
        f"a machine with hub access (huggingface-cli download {repo_id} --revision {revision}) and copy that "
        f"models--... folder into {cache}, or pass a local model folder with --model PATH. Offline, the bundled "
        f"models run without any download: {OFFLINE_ALTERNATIVES}."
    )


def folder_hash(folder: Path) -> str:
    """``sha256:<hex>`` over every file of a model folder (relative path and content)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def _dtype(torch: Any, name: str | None) -> Any:
    if name is None:
        return torch.float32
    options = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in options:
        raise ModelError(f"dtype {name!r} is not supported; choose one of: {', '.join(options)}")
    return options[name]


#: Environment variables through which a user fixes the intra-op thread count (torch reads them at import).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_threads(torch: Any) -> int:
    """Intra-op threads for a CPU model when the caller asks for ``threads="auto"``.

    An explicit setting wins: with ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` set,
    torch's own count (which follows them) is kept.  Otherwise torch's count (the
    physical cores) is capped by the CPUs that other processes leave idle now: the
    usable CPUs less :func:`busy_cpus`, rounded, at least 1.  On a shared machine
    OpenMP threads wait at every parallel region for a preempted sibling, and one
    thread finishes sooner than two.  The count changes the schedule of the
    arithmetic, not the model's inputs; the RES model-phase benchmark compares the
    records of both settings.
    """
    default = torch.get_num_threads()
    if any(os.environ.get(name, "").strip() for name in THREAD_VARIABLES):
        return default
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or default
    busy = busy_cpus()
    if busy is None:
        return default
    return max(1, min(default, round(usable - busy)))


#: Where the kernel counts the runnable tasks of the whole machine (Linux).
PROC_STAT = "/proc/stat"


def busy_cpus(samples: int = 20, interval: float = 0.005) -> float | None:
    """How many CPUs other processes keep busy now: the runnable tasks besides this one, averaged over ``samples``
    reads of ``procs_running`` in /proc/stat ``interval`` seconds apart (0.1 s in all).

    The 1-minute load average is the fallback where /proc/stat cannot be read (None when neither can).  It
    trails the machine by a minute: right after another job ends it still counts that job, and a run started
    then took one thread on idle cores.
    """
    counts = []
    try:
        for i in range(samples):
            if i:
                time.sleep(interval)
            with open(PROC_STAT, "rb") as handle:
                text = handle.read()
            start = text.index(b"\nprocs_running ") + len(b"\nprocs_running ")
            counts.append(max(0, int(text[start:text.index(b"\n", start)]) - 1))  # less this thread, running
    except (OSError, ValueError):
        counts = []
    if counts:
        return sum(counts) / len(counts)
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


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


def _device(torch: Any, name: str | None) -> str:
    name = name or "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} was requested but torch.cuda.is_available() is False; use --device cpu")
    if not (name == "cpu" or name.startswith("cuda")):
        raise ModelError(f"device {name!r} is not supported; choose cpu or cuda")
    return name


class TransformersModel(LanguageModel):
    """A causal LM run in-process with transformers: float32 on the CPU by default, eval mode, greedy."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_id: str,
        revision: str,
        source: str,
        chat_template: str | None = None,
        stop_tokens: Sequence[str] = (),
        batch_size: int = 8,
        seed: int = 0,
        threads: int | str | None = None,
        shared_prefix: str | None = None,
        shared_prefix_min: int = 32,
        shared_prefix_bytes: int = 256 << 20,
    ):
        torch = _torch()
        if batch_size < 1:
            raise ModelError(f"batch_size must be >= 1, got {batch_size}")
        if shared_prefix is not None and shared_prefix not in SHARED_PREFIX_MODES:
            raise ModelError(f"shared_prefix must be None or one of {', '.join(SHARED_PREFIX_MODES)}, "
                             f"got {shared_prefix!r}")
        if shared_prefix_min < 1:
            raise ModelError(f"shared_prefix_min must be >= 1, got {shared_prefix_min}")
        if threads == "auto":
            on_cpu = next(model.parameters()).device.type == "cpu"
            threads = cpu_threads(torch) if on_cpu else None
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise ModelError(f"threads must be a positive int, 'auto' or None, got {threads!r}")
        # Intra-op threads set around each score_and_generate call (None: torch's count is left alone).
        self.threads = threads
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.revision = revision
        self.source = source
        self.batch_size = batch_size
        self.seed = seed
        self._template = chat_template
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token_id is None:
                raise ModelError(f"{model_id}: the tokenizer has neither a pad nor an eos token to pad with")
            tokenizer.pad_token = tokenizer.eos_token
        self.stop_token_ids = tuple(sorted({tokenizer.eos_token_id, *(self._single_token(t) for t in stop_tokens)} - {None}))
        accepted = inspect.signature(model.forward).parameters
        # transformers 5 renamed past_key_values to cache; older releases know only the former.
        self._cache_arg = "cache" if "cache" in accepted else "past_key_values"
        self._last_only = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
        # Shared-prefix prefill (see _prefill): the mode, the least number of cached columns worth a second
        # forward, the byte budget of the cached prefixes, and counters of what each batch did.
        self.shared_prefix = shared_prefix
        self.shared_prefix_min = shared_prefix_min
        self.shared_prefix_bytes = shared_prefix_bytes
        self.prefix_stats = {"batches": 0, "shared_batches": 0, "full_rows": 0, "tail_rows": 0,
                             "cached_columns": 0, "prefix_forwards": 0, "entries_stored": 0, "entry_hits": 0,
                             "pad_probes": 0, "other_pad_rows": 0}
        self._prefixes: list[_PrefixEntry] = []
        self._prefix_eligible: bool | None = None
        # (width, length, pad, other pad, context) -> whether the attention kernel gives the first ``length``
        # real positions the same bits under both pad counts (see _pads_agree)
        self._pad_verdicts: dict[tuple, bool] = {}
        self._tap_depth = 0
        self._seed_all(torch)

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def from_local(
        cls,
        folder: Path,
        *,
        revision: str | None = None,
        model_id: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        **options: Any,
    ) -> "TransformersModel":
        """Load a model folder (config, safetensors weights, tokenizer); its revision is a content hash."""
        folder = Path(folder)
        with _collector_paused():
            torch = _torch()
            from transformers import AutoModelForCausalLM, AutoTokenizer

            if not (folder / "config.json").is_file():
                raise ModelUnavailableError(f"{folder} is not a model folder (no config.json)")
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=_dtype(torch, dtype), use_safetensors=True)
            tokenizer = AutoTokenizer.from_pretrained(folder)
            model.to(_device(torch, device))
            return cls(model, tokenizer, model_id=model_id or str(folder), revision=revision or folder_hash(folder),
                       source=str(folder), **options)

    @classmethod
    def from_hub(
        cls,
        repo_id: str,
        *,
        revision: str | None = None,
        cache_dir: str | Path | None = None,
        device: str | None = None,
        dtype: str | None = None,
        **options: Any,
    ) -> "TransformersModel":
        """Load ``repo_id`` pinned to the commit sha that ``revision`` (default ``main``) resolves to."""
        with _collector_paused():
            torch = _torch()
            from transformers import AutoModelForCausalLM, AutoTokenizer

            sha, how = resolve_revision(repo_id, revision or "main", cache_dir)
            local_only = hub_offline() or how == "cache"
            kwargs = {"revision": sha, "cache_dir": str(cache_dir) if cache_dir else None, "local_files_only": local_only}
            try:
                model = AutoModelForCausalLM.from_pretrained(repo_id, dtype=_dtype(torch, dtype), use_safetensors=True, **kwargs)
                tokenizer = AutoTokenizer.from_pretrained(repo_id, **kwargs)
            except OSError as exc:
                raise ModelUnavailableError(
                    f"{repo_id}@{sha}: the weights are not available ({exc}); offline, the bundled models run "
                    f"without any download: {OFFLINE_ALTERNATIVES}"
                ) from exc
            model.to(_device(torch, device))
            return cls(model, tokenizer, model_id=repo_id, revision=sha, source=f"hub:{repo_id}@{sha} ({how})", **options)

    # -- contract ---------------------------------------------------------------------------------

    def describe(self) -> ModelDescription:
        tok = self.tokenizer
        first = next(self.model.parameters())
        return ModelDescription(
            id=self.model_id,
            revision=self.revision,
            backend="transformers",
            dtype=str(first.dtype).replace("torch.", ""),
            device=str(first.device),
            parameters=sum(p.numel() for p in self.model.parameters()),
            tokenizer=type(tok).__name__,
            special_tokens={
                "bos": tok.bos_token_id,
                "eos": tok.eos_token_id,
                "pad": tok.pad_token_id,
                **{f"stop:{tok.convert_ids_to_tokens(i)}": i for i in self.stop_token_ids},
            },
            chat_template="registry" if self._template else ("model" if tok.chat_template else None),
            source=self.source,
            extra={
                "layers": getattr(self.model.config, "num_hidden_layers", None),
                "hidden_size": getattr(self.model.config, "hidden_size", None),
                "batch_size": self.batch_size,
                "seed": self.seed,
            },
        )

    def render_chat(self, chat: Sequence[Message]) -> str:
        if not self._template and not self.tokenizer.chat_template:
            raise ModelError(
                f"{self.model_id} ships no chat template and its registry entry declares none; "
                "pass rendered prompt text instead of a chat"
            )
        return self.tokenizer.apply_chat_template(
            [dict(m) for m in chat], chat_template=self._template, tokenize=False, add_generation_prompt=True
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (how prompts and labels are encoded)."""
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def score_and_generate(
        self,
        prompts: Sequence[Prompt],
        choices: Sequence[str] | None = None,
        settings: GenerationSettings = GenerationSettings(),
    ) -> list[Response]:
        torch = _torch()
        texts = [p if isinstance(p, str) else self.render_chat(p) for p in prompts]
        choice_ids = self._choice_ids(choices) if choices else None
        self._seed_all(torch)
        responses: list[Response] = []
        with torch.inference_mode(), self._thread_count(torch):
            for start in range(0, len(texts), self.batch_size):
                responses.extend(self._run_batch(texts[start : start + self.batch_size], start, choices, choice_ids, settings))
        return responses

    @contextlib.contextmanager
    def taps(self, callback: TapCallback, layers: Sequence[int] | None = None, *, modify: bool = False) -> Iterator[None]:
        decoder = getattr(self.model, "model", None)
        if getattr(decoder, "layers", None) is None:  # multimodal wrappers (Gemma 3 4B, Gemma 3n) keep the text stack here
            decoder = getattr(decoder, "language_model", decoder)
        blocks = getattr(decoder, "layers", None)
        if blocks is None:
            raise CapabilityError(f"{type(self.model).__name__} exposes no decoder layers at .model.layers "
                                  "or .model.language_model.layers")
        chosen = list(range(len(blocks))) if layers is None else list(layers)
        for index in chosen:
            if not 0 <= index < len(blocks):
                raise ModelError(f"tap layer {index} is out of range: the model has {len(blocks)} decoder layers")
        step = [-1]

        def count_step(module: Any, args: Any) -> None:
            step[0] += 1

        def make_hook(index: int):
            def hook(module: Any, args: Any, output: Any) -> Any:
                hidden = output[0] if isinstance(output, tuple) else output
                result = callback(TapEvent(layer=index, step=step[0], hidden=hidden))
                if result is None:
                    return None
                if not modify:
                    raise ModelError("a tap callback returned a value but taps(..., modify=False); pass modify=True to patch")
                return (result, *output[1:]) if isinstance(output, tuple) else result

            return hook

        handles = []
        # Inside taps every prefill is the plain one: a tap sees each prompt token once, in one pass a batch,
        # and the decoder's pre-hook counts one step per pass (what P-Zombie reads).
        self._tap_depth += 1
        try:
            handles.append(decoder.register_forward_pre_hook(count_step))
            for index in chosen:
                handles.append(blocks[index].register_forward_hook(make_hook(index)))
            yield
        finally:
            self._tap_depth -= 1
            for handle in handles:
                handle.remove()

    def forget_prefixes(self) -> None:
        """Drop every cached prefix and pad-probe verdict and zero ``prefix_stats``: the next batch starts as in a
        fresh process."""
        self._prefixes = []
        self._pad_verdicts = {}
        for name in self.prefix_stats:
            self.prefix_stats[name] = 0

    def close(self) -> None:
        self.model = None  # drop the weights; the object is unusable afterwards
        self._prefixes = []

    # -- internals --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _thread_count(self, torch: Any) -> Iterator[None]:
        before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    @staticmethod
    def _cache_of(out: Any) -> Any:
        cache = getattr(out, "cache", None)
        return cache if cache is not None else out.past_key_values

    def _seed_all(self, torch: Any) -> None:
        random.seed(self.seed)
        torch.manual_seed(self.seed)
        try:
            import numpy as np

            np.random.seed(self.seed % (2**32))
        except ImportError:  # pragma: no cover
            pass

    def _single_token(self, token: str) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            ids = self.encode(token)
            if len(ids) != 1:
                raise ModelError(f"stop token {token!r} is not a single token of {self.model_id} (encodes to {ids})")
            token_id = ids[0]
        return int(token_id)

    def _choice_ids(self, choices: Sequence[str]) -> tuple[int, ...]:
        if len(choices) < 2:
            raise ModelError(f"choice scoring needs at least two labels, got {list(choices)}")
        ids = []
        for label in choices:
            encoded = self.encode(label)
            if not encoded:
                raise ModelError(f"choice label {label!r} encodes to no tokens")
            ids.append(encoded[0])
        if len(set(ids)) != len(ids):
            raise ModelError(f"choice labels {list(choices)} share a first token ({ids}); they cannot be told apart")
        return tuple(ids)

    def _stop_ids(self, settings: GenerationSettings) -> set[int]:
        return set(self.stop_token_ids) | {self._single_token(s) for s in settings.stop}

    def _processors(self, settings: GenerationSettings) -> Any:
        from transformers import LogitsProcessorList, NoRepeatNGramLogitsProcessor, RepetitionPenaltyLogitsProcessor

        processors = LogitsProcessorList()
        if settings.repetition_penalty != 1.0:
            processors.append(RepetitionPenaltyLogitsProcessor(settings.repetition_penalty))
        if settings.no_repeat_ngram_size > 0:
            processors.append(NoRepeatNGramLogitsProcessor(settings.no_repeat_ngram_size))
        return processors

    # -- prefill --------------------------------------------------------------------------------

    def _prefill(self, input_ids: Any, mask: Any, positions: Any) -> tuple[Any, Any]:
        """Last-position float32 logits (one row a prompt, batch order) and the KV cache of a left-padded batch.

        Plain: one forward over the whole padded batch.  With ``shared_prefix`` set (and the model, device and
        call allowing it, see :meth:`_shared_prefix_usable`), rows whose first columns are already cached run
        only their remaining columns; see :meth:`_plan_layout` and :meth:`_plan_once`.  The decoder stack runs
        on the row subsets, the output head once on every row's last position (as the plain prefill does: the
        head's matrix product rounds differently with fewer than 4 rows).  The cache handed to decoding keeps
        the plain layout: every row ``[pads | prompt]`` over the batch's padded width, with the same attention
        mask and position ids as the plain prefill.
        """
        torch = _torch()
        self.prefix_stats["batches"] += 1
        n, width = input_ids.shape
        plan = None
        if self._shared_prefix_usable(input_ids):
            pads = (width - mask.sum(dim=-1)).tolist()
            rows = [row[pad:] for row, pad in zip(input_ids.tolist(), pads)]
            plan = (self._plan_layout if self.shared_prefix == "layout" else self._plan_once)(rows, pads, width)
        if plan is None:
            self.prefix_stats["full_rows"] += n
            out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                             **self._last_only)
            return out.logits[:, -1, :].to(dtype=torch.float32), self._cache_of(out)
        from transformers import DynamicCache

        full, tail, split, entries, store = plan
        decoder = self.model.get_decoder()
        parts = []  # (last hidden state, cache) of each forward: the full rows first, then the others
        if full:
            index = torch.tensor(full, device=input_ids.device)
            out = decoder(input_ids=input_ids[index], attention_mask=mask[index], position_ids=positions[index],
                          use_cache=True)
            cache = self._cache_of(out)
            parts.append((out.last_hidden_state[:, -1:, :], cache))
            stored = {}
            for row, (key, ids) in store.items():
                j, pad = full.index(row), pads[row]
                stored[row] = self._store_prefix(key, ids, [(layer.keys[j:j + 1, :, pad:pad + len(ids)],
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
                          **{self._cache_arg: DynamicCache(layers)})
            parts.append((out.last_hidden_state[:, -1:, :], self._cache_of(out)))
            self.prefix_stats["shared_batches"] += 1
            self.prefix_stats["cached_columns"] += split * len(tail)
        self.prefix_stats["full_rows"] += len(full)
        self.prefix_stats["tail_rows"] += len(tail)
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

    def _shared_prefix_usable(self, input_ids: Any) -> bool:
        """Whether this batch may take the shared-prefix path: the option is on, no taps are active, the model
        is on the CPU, and its cache is a plain full-attention ``DynamicCache`` (no sliding-window or hybrid
        layers, such as Gemma 3's)."""
        if self.shared_prefix is None or self._tap_depth or input_ids.shape[0] < 2:
            return False
        if input_ids.device.type != "cpu" or not self._last_only:
            return False
        if self.shared_prefix == "layout" and getattr(self.model.config, "_attn_implementation", None) != "sdpa":
            return False  # the layout rules (see _plan_layout) are those of torch's CPU sdpa kernel
        if self._prefix_eligible is None:
            self._prefix_eligible = self._plain_full_attention()
        return self._prefix_eligible

    def _plain_full_attention(self) -> bool:
        """A llama-style causal LM: every cache layer a full-attention ``DynamicLayer`` (transformers' own layer
        types for this config; Gemma 3's sliding-window layers are not), and logits that are the output head
        on the decoder's last hidden state, bit for bit (a probe of three tokens; no soft-capping or scaling)."""
        torch = _torch()
        try:
            from transformers import DynamicCache
            from transformers.cache_utils import DynamicLayer

            if self._cache_arg != "cache" or not all(
                    type(layer) is DynamicLayer for layer in DynamicCache(config=self.model.config).layers):
                return False
            device = next(self.model.parameters()).device
            probe = torch.tensor([[0, 1, 2]], device=device) % self.model.config.get_text_config().vocab_size
            with torch.inference_mode():
                logits = self.model(input_ids=probe, use_cache=False, **self._last_only).logits
                hidden = self.model.get_decoder()(input_ids=probe, use_cache=False).last_hidden_state
                return torch.equal(logits, self.model.get_output_embeddings()(hidden[:, -1:, :]))
        except Exception:  # another cache API or model layout: keep the plain path
            return False

    def _prefix_context(self) -> tuple:
        """What besides the layout the cached columns depend on: attention implementation and thread count."""
        torch = _torch()
        return (getattr(self.model.config, "_attn_implementation", None), torch.get_num_threads())

    def _find_prefix(self, key: tuple, ids: Sequence[int],
                     layout: tuple[int, int] | None = None) -> tuple[_PrefixEntry | None, int]:
        """The cached entry under ``key`` sharing the most leading tokens with ``ids``, and that count.  With
        ``layout`` = (width, pad count), the layout mode, only an entry computed under that pad count or one the
        attention kernel treats alike in a pass of that width (:meth:`_pads_agree`) is taken."""
        best, length = None, 0
        for entry in self._prefixes:
            if entry.key == key:
                common = _common_length(entry.ids, ids)
                if common > length and (layout is None or self._pad_fits(layout, entry)):
                    best, length = entry, common
        return best, length

    def _pad_fits(self, layout: tuple[int, int], entry: _PrefixEntry) -> bool:
        width, pad = layout
        return pad in self._pads_agree(width, len(entry.ids), entry.pad, [pad])

    def _pads_agree(self, width: int, length: int, pad: int, others: Sequence[int]) -> set[int]:
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
        torch = _torch()
        context = self._prefix_context()
        todo = sorted({p for p in others if p != pad and (width, length, pad, p, context) not in self._pad_verdicts})
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
                    self._pad_verdicts[(width, length, pad, p, context)] = bool(torch.equal(first, out[i, :, p:p + length]))
            self.prefix_stats["pad_probes"] += 1
        return {p for p in others if p == pad or self._pad_verdicts[(width, length, pad, p, context)]}

    def _store_prefix(self, key: tuple, ids: Sequence[int], layers: list[tuple[Any, Any]],
                      pad: int | None = None) -> _PrefixEntry:
        """Cache copies of ``layers`` under ``key``, ``ids`` and ``pad``; beyond ``shared_prefix_bytes`` the least
        recently used entries go (the new one stays)."""
        layers = [(k.clone(), v.clone()) for k, v in layers]
        entry = _PrefixEntry(key, tuple(ids), layers, sum(k.nbytes + v.nbytes for k, v in layers), pad)
        self._prefixes = [e for e in self._prefixes if not (e.key == key and e.ids == entry.ids and e.pad == pad)]
        self._prefixes.append(entry)
        while len(self._prefixes) > 1 and sum(e.nbytes for e in self._prefixes) > self.shared_prefix_bytes:
            self._prefixes.pop(0)
        self.prefix_stats["entries_stored"] += 1
        return entry

    def _touch(self, entry: _PrefixEntry) -> None:
        if entry in self._prefixes:
            self._prefixes.remove(entry)
            self._prefixes.append(entry)
        self.prefix_stats["entry_hits"] += 1

    def _plan_layout(self, rows: list[list[int]], pads: list[int], width: int) -> tuple | None:
        """Reuse only columns computed under the same layout: the same batch width, and a pad count the attention
        kernel treats alike.

        The plain prefill's arithmetic for a row does not depend on the other rows of the batch, only on the
        row's tokens, the batch width and where its tokens sit among the attention kernel's blocks of query
        rows (measured with torch 2.13 on the CPU: the width sets the blocking, and a prefix reaching into the
        pass's last, partial block rounds differently under different pad counts, by up to ~4e-5 in SmolLM2's
        logits; elsewhere the pad count changes no bit).  An entry is therefore keyed by the width, records the
        pad count it was computed under, and holds exactly the columns that a plain prefill computes for such
        a row; a row of another pad count takes it only when :meth:`_pads_agree` has found the kernel to give
        the entry's columns the same bits under both pad counts.  A row with no such entry covering at least
        three quarters of the batch's longest common token prefix (``L``, when ``L`` reaches
        ``shared_prefix_min``) runs in full, as in the plain prefill but with a subset of the rows, and leaves
        its first ``L`` tokens cached; a row whose pad count agrees with such a row's waits for that entry.  The
        other rows run only columns ``split..width-1`` on top of their cached columns, ``split`` chosen to save
        the most columns among those that keep the attention kernel's query blocks equivalent
        (:func:`_same_query_blocks`) and every matrix product at ``_MIN_GEMM_ROWS`` rows a thread or more.
        Returns (full rows, tail rows, split, {tail row: its entry, or the index of the full row that stores it
        in this batch}, {full row: (key, ids) to store}), or None when nothing is saved or stored.
        """
        context = self._prefix_context()
        common = rows[0]
        for row in rows[1:]:
            common = common[:_common_length(common, row)]
        keep = len(common) if len(common) >= self.shared_prefix_min else 0
        key = ("layout", width, *context)
        found = [self._find_prefix(key, row, (width, pad)) for row, pad in zip(rows, pads)]
        matched = [length for _, length in found]
        store: dict[int, tuple[tuple, tuple[int, ...]]] = {}
        waiting: dict[int, int] = {}  # row -> the full row whose stored entry it takes
        needs = [bool(keep) and 4 * matched[b] < 3 * keep for b in range(len(rows))]
        for b in range(len(rows)):
            if not needs[b]:
                continue
            source = next((s for s in store if pads[b] in self._pads_agree(width, keep, pads[s], [pads[b]])), None)
            if source is None:
                store[b] = (key, tuple(common))
                # one probe for the pad counts of the rows still to place, against this row's
                self._pads_agree(width, keep, pads[b], [pads[c] for c in range(b + 1, len(rows)) if needs[c]])
            else:
                waiting[b] = source  # a full row of an agreeing pad count stores the prefix this batch
                matched[b] = keep
        candidates = [b for b in range(len(rows)) if b not in store and matched[b]]
        threads = context[1]
        best, split = 0, 0
        for reach in sorted({min(pads[b] + matched[b], width - 1) for b in candidates}):
            while reach >= self.shared_prefix_min and not _same_query_blocks(width, width - reach):
                reach -= 1
            count = sum(pads[b] + matched[b] >= reach for b in candidates)
            if reach >= self.shared_prefix_min and count * (width - reach) >= _MIN_GEMM_ROWS * threads \
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
                self.prefix_stats["other_pad_rows"] += 1
        full = [b for b in range(len(rows)) if b not in tail]
        return full, tail, split, {b: waiting[b] if b in waiting else found[b][0] for b in tail}, store

    def _plan_once(self, rows: list[list[int]], pads: list[int], width: int) -> tuple | None:
        """The prefix computed once, alone: batch 1, positions 0..L-1, no padding (``L``: the batch's longest common
        token prefix, at most ``width - 1``), kept under its exact token ids.  Every row then runs only columns
        ``L..width-1``.  The same mathematics as the plain prefill, not the same arithmetic: the prefix's columns
        are summed in another grouping than in the padded batch, so logits move in the last bits (see the RES
        README's model-phase section for the measured size)."""
        torch = _torch()
        common = rows[0]
        for row in rows[1:]:
            common = common[:_common_length(common, row)]
        length = min(len(common), width - 1)
        if length < self.shared_prefix_min:
            return None
        ids = tuple(common[:length])
        key = ("once", *self._prefix_context())
        entry = next((e for e in self._prefixes if e.key == key and e.ids == ids), None)
        if entry is None:
            device = next(self.model.parameters()).device
            out = self.model.get_decoder()(input_ids=torch.tensor([ids], device=device),
                                           position_ids=torch.arange(length, device=device)[None], use_cache=True)
            self.prefix_stats["prefix_forwards"] += 1
            entry = self._store_prefix(key, ids, [(layer.keys, layer.values) for layer in self._cache_of(out).layers])
        else:
            self._touch(entry)
        tail = list(range(len(rows)))
        return [], tail, length, {b: entry for b in tail}, {}

    def _run_batch(
        self,
        texts: Sequence[str],
        offset: int,
        choices: Sequence[str] | None,
        choice_ids: tuple[int, ...] | None,
        settings: GenerationSettings,
    ) -> list[Response]:
        torch = _torch()
        device = next(self.model.parameters()).device
        enc = self.tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids = enc.input_ids.to(device)
        mask = enc.attention_mask.to(device)
        positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)
        # One prefill serves the choice logits and the first greedy token; decoding reuses its cache.
        logits, cache = self._prefill(input_ids, mask, positions)
        n = len(texts)
        scores = [None] * n
        if choice_ids is not None:
            picked = logits[:, list(choice_ids)].tolist()
            scores = [ChoiceScores(tuple(choices), choice_ids, tuple(row)) for row in picked]
        generated: list[list[int]] = [[] for _ in range(n)]
        finish = ["none"] * n
        if settings.max_new_tokens > 0:
            stop_ids = self._stop_ids(settings)
            processors = self._processors(settings)
            pad = self.tokenizer.pad_token_id
            done = torch.zeros(n, dtype=torch.bool, device=device)
            sequences = input_ids
            finish = ["length"] * n
            for step in range(settings.max_new_tokens):
                step_scores = processors(sequences, logits) if processors else logits
                next_tokens = step_scores.argmax(dim=-1)
                next_tokens = torch.where(done, torch.full_like(next_tokens, pad), next_tokens)
                sequences = torch.cat([sequences, next_tokens[:, None]], dim=-1)
                for row, token in enumerate(next_tokens.tolist()):
                    if not done[row]:
                        generated[row].append(token)
                        if token in stop_ids:
                            done[row] = True
                            finish[row] = "stop"
                if bool(done.all()) or step == settings.max_new_tokens - 1:
                    break
                mask = torch.cat([mask, mask.new_ones((n, 1))], dim=-1)
                positions = positions[:, -1:] + 1
                out = self.model(input_ids=next_tokens[:, None], attention_mask=mask, position_ids=positions,
                                 use_cache=True, **{self._cache_arg: cache})
                logits = out.logits[:, -1, :].to(dtype=torch.float32)
                cache = self._cache_of(out)
        prompt_lengths = enc.attention_mask.sum(dim=-1).tolist()
        return [
            Response(
                index=offset + row,
                scores=scores[row],
                text=self.tokenizer.decode(generated[row], skip_special_tokens=True) if generated[row] else "",
                token_ids=tuple(generated[row]),
                finish_reason=finish[row],
                prompt_tokens=int(prompt_lengths[row]),
            )
            for row in range(n)
        ]
