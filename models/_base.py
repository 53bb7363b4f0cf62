"""The one contract every backend implements, and the records it returns."""

from __future__ import annotations

import abc
import contextlib
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Iterator, Literal, Mapping, Sequence, Union

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = Mapping[str, str]
#: A chat (list of messages) or a prompt text that is already rendered.
Prompt = Union[str, Sequence[Message]]

FinishReason = Literal["stop", "length", "error", "none"]

#: Codes of a generation that could not be obtained; rules count them, runs never crash on them.
ERROR_CODES = (
    "timeout",  # the server did not answer within the timeout
    "connection_error",  # no connection could be made (after the configured retries)
    "http_error",  # the server answered with a non-2xx status
    "malformed_response",  # the answer was not the JSON shape the API promises
    "empty_response",  # the answer had no choices / no message content
    "response_too_large",  # the answer body exceeded the backend's size limit (never read whole)
    "backend_error",  # the backend raised while producing this item
    "answer_too_long",  # longer than the protocol's preregistered max_answer_chars; only its start is kept
)


#: The capability vocabulary.  A backend lists what it can do in :attr:`LanguageModel.capabilities`; a protocol
#: lists what it needs, and a run whose model lacks any of it is refused before any work.
LABEL_LOGITS = "label_logits"
CHAT = "chat"
TEXT = "text"
ACTIVATION_TAPS = "activation_taps"
#: Each capability and what a model that has it does.
CAPABILITIES: Mapping[str, str] = MappingProxyType({
    LABEL_LOGITS: "returns the logits of given choice labels' first tokens (score_and_generate with choices)",
    CHAT: "takes chats (lists of role/content messages) and applies its own chat template; render_chat shows "
          "what it makes of one",
    TEXT: "takes a prompt that is already rendered to text",
    ACTIVATION_TAPS: "runs forward hooks on its decoder layers (taps)",
})


class ModelError(Exception):
    """Root of the models package's errors (misuse, unavailable weights, bad registry entries)."""


class ModelUnavailableError(ModelError):
    """The weights cannot be had here; the message says how to obtain them and what runs offline."""


class UnknownModelError(ModelError, KeyError):
    """A registry name that does not exist; the message lists close matches and available names."""

    def __str__(self) -> str:
        return str(self.args[0])


class CapabilityError(ModelError):
    """The backend cannot do what was asked (e.g. activation taps on a served model)."""


@dataclass(frozen=True)
class ModelDescription:
    """What was run.  Goes into every run's provenance."""

    id: str  # registry name, hub id, local path or served model name
    revision: str  # immutable: a 40-hex commit sha or sha256:<hex> content hash
    backend: str  # "transformers", "openai-http", "scripted"
    dtype: str | None = None  # torch dtype name for local models
    device: str | None = None  # "cpu", "cuda:0", or the server's base URL for served models
    parameters: int | None = None  # parameter count, where known
    tokenizer: str | None = None  # tokenizer class name
    special_tokens: Mapping[str, int | None] = field(default_factory=dict)  # bos, eos, pad and stop ids
    chat_template: str | None = None  # "model" (its own), "registry" (declared fixed template) or None
    source: str | None = None  # where the weights came from (cache path, GGUF file, URL)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ChoiceScores:
    """Logits of each choice label's first token at the final prompt position."""

    labels: tuple[str, ...]
    token_ids: tuple[int, ...]  # the first token of each label, encoded without special tokens
    logits: tuple[float, ...]  # raw logits (before any generation-time processing)

    @property
    def margin(self) -> float:
        """Logit of the first label minus the best other label (for A/B: logit[A] - logit[B])."""
        return self.logits[0] - max(self.logits[1:])

    @property
    def choice(self) -> str:
        """The highest-logit label; a tie goes to the earlier label (margin >= 0 counts as the first)."""
        best = max(range(len(self.logits)), key=lambda i: (self.logits[i], -i))
        return self.labels[best]


@dataclass(frozen=True)
class Response:
    """One prompt's outcome: choice scores and/or a generation, or a coded error."""

    index: int  # position of the prompt in the request
    scores: ChoiceScores | None = None
    text: str = ""  # generated text, special tokens skipped
    token_ids: tuple[int, ...] = ()  # generated token ids, stop token included when one ended it
    finish_reason: FinishReason = "none"  # "stop" (stop token), "length" (bound reached), "error", "none"
    error: str | None = None  # one of ERROR_CODES when the generation could not be obtained
    error_detail: str | None = None  # human-readable detail (never credentials)
    prompt_tokens: int | None = None
    endpoint: str | None = None  # a served model's base URL that answered (or was tried last); None when local

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class GenerationSettings:
    """Greedy decoding settings shared by every backend."""

    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()  # extra stop strings / tokens besides the model's eos
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    #: Whether decoding reuses the key/value cache of earlier positions (the default).  False: every step runs the
    #: model over the whole sequence so far (local transformers models; a backend without such a cache ignores it).
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            raise ModelError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        if self.repetition_penalty <= 0:
            raise ModelError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.no_repeat_ngram_size < 0:
            raise ModelError(f"no_repeat_ngram_size must be >= 0, got {self.no_repeat_ngram_size}")


@dataclass(frozen=True)
class TapEvent:
    """One decoder layer's output (the residual stream after that layer) during one forward step."""

    layer: int  # decoder layer index
    step: int  # 0 for the prefill, then one per decode step
    hidden: Any  # torch tensor [batch, new positions, hidden size]


TapCallback = Callable[[TapEvent], Any]


class LanguageModel(abc.ABC):
    """A model the protocols can query.  Implementations: transformers, OpenAI-compatible HTTP, scripted."""

    #: What the backend can do (names of :data:`CAPABILITIES`), known from its class without building it.  The
    #: default is the contract's promise: ``score_and_generate`` takes chats and rendered text and scores choices;
    #: a backend that cannot keep all of it narrows the set (a served model), one with taps widens it.
    capabilities: ClassVar[frozenset[str]] = frozenset({LABEL_LOGITS, CHAT, TEXT})

    @abc.abstractmethod
    def describe(self) -> ModelDescription:
        """What is being run: id, immutable revision, dtype, device, sizes, token ids."""

    @abc.abstractmethod
    def render_chat(self, chat: Sequence[Message]) -> str:
        """The exact prompt text the model sees for ``chat``, with the generation prompt appended."""

    @abc.abstractmethod
    def score_and_generate(
        self,
        prompts: Sequence[Prompt],
        choices: Sequence[str] | None = None,
        settings: GenerationSettings = GenerationSettings(),
    ) -> list[Response]:
        """Choice scores (if ``choices``) and a greedy generation of up to ``settings.max_new_tokens``.

        Local backends do both in one left-padded batched prefill whose KV cache
        the decoding continues from; no prompt is encoded twice.
        """

    def score(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[Response]:
        """Choice scores only."""
        return self.score_and_generate(prompts, choices, GenerationSettings(max_new_tokens=0))

    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GenerationSettings()) -> list[Response]:
        """Greedy generation only."""
        return self.score_and_generate(prompts, None, settings)

    @contextlib.contextmanager
    def taps(self, callback: TapCallback, layers: Sequence[int] | None = None, *, modify: bool = False) -> Iterator[None]:
        """Observe (or, with ``modify``, replace) decoder-layer outputs while the block runs."""
        raise CapabilityError(f"{type(self).__name__} has no activation taps; they need a local transformers model")
        yield  # pragma: no cover

    def close(self) -> None:
        """Release resources (a server connection pool, GPU memory)."""

    def __enter__(self) -> "LanguageModel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
