"""The transformers backend: local folders, hub ids pinned to a commit sha, and the bundled models."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import random
import re
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
    physical cores) is capped by the CPUs that other processes leave idle: the
    usable CPUs less the 1-minute load average, rounded, at least 1.  On a shared
    machine OpenMP threads wait at every parallel region for a preempted sibling,
    and one thread finishes sooner than two.  The count changes the schedule of
    the arithmetic, not the model's inputs; the RES model-phase benchmark compares
    the records of both settings.
    """
    default = torch.get_num_threads()
    if any(os.environ.get(name, "").strip() for name in THREAD_VARIABLES):
        return default
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or default
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):
        return default
    return max(1, min(default, round(usable - busy)))


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
    ):
        torch = _torch()
        if batch_size < 1:
            raise ModelError(f"batch_size must be >= 1, got {batch_size}")
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
        torch = _torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(folder)
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
        try:
            handles.append(decoder.register_forward_pre_hook(count_step))
            for index in chosen:
                handles.append(blocks[index].register_forward_hook(make_hook(index)))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def close(self) -> None:
        self.model = None  # drop the weights; the object is unusable afterwards

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
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, **self._last_only)
        logits = out.logits[:, -1, :].to(dtype=torch.float32)
        cache = self._cache_of(out)
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
