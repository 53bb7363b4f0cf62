"""The transformers backend: local folders, hub ids pinned to a commit sha, and the bundled models.

:class:`TransformersModel` loads, describes, renders chats, and runs one prefill a batch (plain, or through its
optional shared-prefix cache, ``_prefix.PrefixCache``) followed by greedy decoding.  Hub revisions and folder
hashes come from ``_hub``.
"""

from __future__ import annotations

import contextlib
import inspect
import random
from pathlib import Path
from typing import Any, Iterator, Sequence

from ._base import (
    ACTIVATION_TAPS,
    CHAT,
    LABEL_LOGITS,
    TEXT,
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
from ._hub import folder_hash, pinned_options, weights_unavailable
from ._prefix import PrefixCache, cache_of

def load_tokenizer(folder: str | Path) -> Any:
    """transformers' tokenizer of a local folder (``AutoTokenizer``)."""
    from transformers import AutoTokenizer  # transformers is heavy and optional: imported by a load only

    return AutoTokenizer.from_pretrained(folder)


# == The backend =================================================================================================


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


def _dtype(torch: Any, name: str | None) -> Any:
    if name is None:
        return torch.float32
    options = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in options:
        raise ModelError(f"dtype {name!r} is not supported; choose one of: {', '.join(options)}")
    return options[name]


def _device(torch: Any, name: str | None) -> str:
    name = name or "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} was requested but torch.cuda.is_available() is False; use --device cpu")
    if not (name == "cpu" or name.startswith("cuda")):
        raise ModelError(f"device {name!r} is not supported; choose cpu or cuda")
    return name


def _cache_option(name: str, doc: str) -> property:
    """A model attribute that reads and sets the attribute ``name`` of the model's ``prefix_cache``."""
    return property(lambda self: getattr(self.prefix_cache, name),
                    lambda self, value: setattr(self.prefix_cache, name, value), doc=doc)


class TransformersModel(LanguageModel):
    """A causal LM run in-process with transformers: float32 on the CPU by default, eval mode, greedy."""

    # Taps need decoder layers at ``.model.layers`` (the architectures the suite loads); another layout is refused
    # by ``taps`` itself, since the class cannot know the architecture before the weights are read.
    capabilities = frozenset({LABEL_LOGITS, CHAT, TEXT, ACTIVATION_TAPS})

    # The constructor's shared-prefix options, held by the prefix cache.
    shared_prefix = _cache_option("mode", "One of SHARED_PREFIX_MODES, or None: every batch takes the plain prefill.")
    shared_prefix_min = _cache_option("min_columns", "The least number of cached columns worth a second forward.")
    shared_prefix_bytes = _cache_option("max_bytes", "The byte budget of the cached prefixes.")

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
        threads: int | None = None,
        shared_prefix: str | None = None,
        shared_prefix_min: int = 32,
        shared_prefix_bytes: int = 256 << 20,
    ):
        torch = _torch()
        if batch_size < 1:
            raise ModelError(f"batch_size must be >= 1, got {batch_size}")
        accepted = inspect.signature(model.forward).parameters
        # transformers 5 renamed past_key_values to cache; older releases know only the former.
        self._cache_arg = "cache" if "cache" in accepted else "past_key_values"
        self._last_only = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
        # The optional shared-prefix cache (see _prefill); it refuses a bad mode or minimum here.
        self.prefix_cache = PrefixCache(model, cache_arg=self._cache_arg, last_only=self._last_only, mode=shared_prefix,
                                        min_columns=shared_prefix_min, max_bytes=shared_prefix_bytes)
        # process level (see the section at the top of this module)
        self.threads: int | None = None
        self.set_threads(threads)
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
        torch = _torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        sha, how, kwargs = pinned_options(repo_id, revision or "main", cache_dir)
        try:
            model = AutoModelForCausalLM.from_pretrained(repo_id, dtype=_dtype(torch, dtype), use_safetensors=True, **kwargs)
            tokenizer = AutoTokenizer.from_pretrained(repo_id, **kwargs)
        except OSError as exc:
            raise weights_unavailable(repo_id, sha, exc) from exc
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

    @property
    def prefix_stats(self) -> dict[str, int]:
        """What the batches did with the shared-prefix cache (``PrefixCache.stats``)."""
        return self.prefix_cache.stats

    def forget_prefixes(self) -> None:
        """Drop every cached prefix and pad-probe verdict and zero ``prefix_stats``: the next batch starts as in a
        fresh process."""
        self.prefix_cache.forget()

    def close(self) -> None:
        self.model = None  # drop the weights; the object is unusable afterwards
        self.prefix_cache.close()

    # -- internals --------------------------------------------------------------------------------

    # process level (see the section at the top of this module)
    def set_threads(self, count: int | None) -> None:
        """The intra-op thread count set around each call (None: torch's own count is left alone).

        Choosing a count for the machine is the runner's business (``benchmarks.core.tuning`` gives a protocol
        that asks for ``threads="auto"`` the CPUs other processes leave idle); the count changes the schedule of
        the arithmetic, not the model's inputs.
        """
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise ModelError(f"threads must be a positive int or None, got {count!r} (a runner resolves "
                             "threads='auto' to a count)")
        self.threads = count

    @contextlib.contextmanager
    def _thread_count(self, torch: Any) -> Iterator[None]:
        before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

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

        The prefix cache computes the batch on top of cached columns when its mode, the model, the device and the
        batch allow it and its plan saves work (:meth:`PrefixCache.prefill`); otherwise, and always inside taps,
        the plain prefill: one forward over the whole padded batch, logits at the last position only.
        """
        torch = _torch()
        shared = self.prefix_cache.prefill(input_ids, mask, positions, allowed=not self._tap_depth)
        if shared is not None:
            return shared
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         **self._last_only)
        return out.logits[:, -1, :].to(dtype=torch.float32), cache_of(out)

    def _uncached(self, sequences: Any, mask: Any) -> Any:
        """Last-position float32 logits of a forward over the whole left-padded ``sequences``, caching nothing."""
        torch = _torch()
        positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)
        out = self.model(input_ids=sequences, attention_mask=mask, position_ids=positions, use_cache=False,
                         **self._last_only)
        return out.logits[:, -1, :].to(dtype=torch.float32)

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
        # One prefill serves the choice logits and the first greedy token; decoding reuses its cache (unless
        # settings.use_cache is False: then every step runs over the whole sequence and nothing is cached).
        if settings.use_cache:
            logits, cache = self._prefill(input_ids, mask, positions)
        else:
            logits, cache = self._uncached(input_ids, mask), None
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
                if not settings.use_cache:
                    logits = self._uncached(sequences, mask)
                    continue
                positions = positions[:, -1:] + 1
                out = self.model(input_ids=next_tokens[:, None], attention_mask=mask, position_ids=positions,
                                 use_cache=True, **{self._cache_arg: cache})
                logits = out.logits[:, -1, :].to(dtype=torch.float32)
                cache = cache_of(out)
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
