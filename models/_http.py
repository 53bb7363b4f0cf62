"""OpenAI-compatible HTTP backend: chat completions from a served model (vLLM, ollama, llama.cpp, ``transformers serve``).

Only the standard library is used (a socket per request, ``http.client`` to parse the answer), so the
backend needs no extra.

What the backend does, and the choices behind it:

- Requests are ``POST {base_url}/chat/completions``, non-streaming, greedy
  (``temperature: 0``), ``max_tokens`` = ``settings.max_new_tokens``, the
  settings' stop strings in ``stop``.  ``settings=None`` means
  :meth:`OpenAIChatModel.default_settings` (``max_tokens_default`` tokens).
  ``max_new_tokens=0`` sends nothing and answers ``finish_reason="none"``.
  The body is UTF-8 JSON; a prompt holding a lone surrogate is sent with JSON
  escapes instead, so the wire never carries invalid UTF-8.
- ``repetition_penalty`` and ``no_repeat_ngram_size`` are not part of the
  OpenAI API.  Some servers honour them (vLLM: ``repetition_penalty``), some
  reject unknown fields (``transformers serve`` answers 422), some silently drop
  them (a run would then believe a penalty was applied).  So a request carries
  them only when they differ from the defaults *and* the model was built with
  ``send_penalties=True``; otherwise non-default values raise
  :class:`CapabilityError` before anything is sent.
- Prompts are chats; the server applies its own chat template, so
  :meth:`render_chat` is the canonical JSON of the messages that are sent.
  Choice scoring is not available (servers ignore ``logprobs``).
- Each prompt's failure becomes a coded :class:`Response` (see ``ERROR_CODES``);
  nothing but caller misuse raises.  Only failures to *establish* a connection
  are retried (``connect_retries`` times, backoff ``retry_backoff * 2**k``
  seconds, never past the deadline); a timeout, an HTTP error or a connection
  lost after the request was sent is never retried.
- ``timeout`` is one wall-clock deadline for the whole exchange: connecting, the
  TLS handshake, sending, the status line and headers, and the body.  Every
  receive waits at most for the time left, so a server that trickles bytes
  cannot stretch it (``timeout``).  Name resolution is the system resolver's
  and is not bounded by it (use an IP address for a strict bound).
- The body may hold at most ``max_response_bytes`` bytes (default 4 MiB); the
  status line, headers and chunk framing may add at most 64 KiB more.  A larger
  answer is ``response_too_large`` and is never read whole: a declared
  ``Content-Length`` over the limit is refused before the body is read, any
  other body as soon as the limit is passed.
- A body shorter than its ``Content-Length``, a chunked body without its last
  chunk, a ``Content-Length`` that is not one decimal number, an answer that is
  not HTTP, a body that is not strict UTF-8 or not JSON (including JSON nested
  too deeply to parse) is ``malformed_response``, even when the bytes that did
  arrive parse.  An empty body is ``malformed_response`` too (``empty_response``
  is a well-formed answer with no choices or no content).
- Redirects (3xx) are not followed: they are ``http_error`` naming the target,
  and no request goes to it.  429 and 5xx are ``http_error`` and not retried.
  A connection reset or closed before the answer is ``connection_error``.
- The API key is read once, at construction, from the environment variable
  named ``api_key_env`` and sent as ``Authorization: Bearer``.  It must be at
  least 8 characters without control characters: it is scrubbed (replaced by
  ``***``, as it stands, percent-encoded and JSON-escaped) from everything the
  backend returns or stores, generated text included, and a shorter key would
  mangle ordinary text.  Error details are scrubbed *before* they are cut to
  length; descriptions hold no server-provided headers, and the ``/models``
  entry is stored and hashed only after scrubbing.
- A served model cannot prove its weights.  An explicit immutable ``revision``
  (40-hex commit sha or ``sha256:<64 hex>``) is recorded as given; otherwise the
  revision is ``sha256:`` of the canonical JSON of ``{base_url, model,
  models_entry}``, where ``models_entry`` is the server's ``GET
  {base_url}/models`` entry for the model (``null`` when not listed or not
  reachable), scrubbed of the key, without the volatile keys ``created``,
  ``status`` and ``permission``.  That revision identifies the endpoint, not
  the weights.  An entry whose canonical JSON exceeds 16 KiB is hashed but
  stored only as its size and sha256.
- A pool of endpoints (``openai:MODEL@URL1,URL2,...``: replicas of one
  model, one URL each) sends each prompt to the endpoint a stable hash of the
  prompt picks (sha256 of the canonical JSON of its messages, modulo the number
  of endpoints), so a unit goes to the same endpoint in every run and session.
  Each endpoint has its own ``max_concurrency`` requests in flight.  On a
  ``connection_error`` the prompt goes to the next endpoint in the pool's
  order, within what is left of its one deadline; nothing else fails over.
  Each response names the endpoint that gave it (``Response.endpoint``; the
  last one tried when none did).  At the first ``describe`` every endpoint's
  ``/models`` must list the model with the same entry (volatile keys aside);
  otherwise the pool is refused with :class:`ModelError` before any prompt is
  sent.  The revision is then ``sha256:`` of ``{base_urls, model,
  models_entry}``.  A router in front of the replicas is one URL to this
  backend: the router's answer is recorded, not which replica gave it.

The backend class is here; the transport (deadline, size limit, retries) is
``_http_transport``, the request and answer schema ``_http_schema``, the API
key's reading and scrubbing ``_http_key``, and the coded failure they raise
``_http_failure``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from ._base import (
    CHAT,
    CapabilityError,
    GenerationSettings,
    LanguageModel,
    Message,
    ModelDescription,
    ModelError,
    Prompt,
    Response,
)
from ._http_failure import _Failure
from ._http_key import DETAIL_LIMIT, KeyScrubber, read_api_key
from ._http_schema import (
    _parse_completion,
    chat_messages,
    completion_request,
    penalty_fields,
)
from ._http_transport import DEFAULT_MAX_RESPONSE_BYTES, Answer, Endpoint, request

__all__ = ["OpenAIChatModel", "canonical_json"]

_SPEC = re.compile(r"^openai:(?P<model>[^@\s]+)@(?P<base_url>https?://\S+)$")
_POOL_LIMIT = 64  # endpoints in one pool, at most
_IMMUTABLE_REVISION = re.compile(r"^(?:[0-9a-f]{40}|sha256:[0-9a-f]{64})$")
#: Keys of a ``/models`` entry that change between calls or over a server's life (vLLM's ``created``
#: is the time of the request); they are left out of the endpoint revision.
_VOLATILE_MODEL_KEYS = frozenset({"created", "status", "permission"})
_DETAIL_MAX = 1000  # characters of a whole error detail
_ENTRY_LIMIT = 16 * 1024  # characters of a /models entry's canonical JSON stored in a description


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the form that is hashed and rendered."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class OpenAIChatModel(LanguageModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    # Chats only: the server applies its own template, so rendered text cannot be sent as the model would see it,
    # and servers return no logits of given labels.
    capabilities = frozenset({CHAT})

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        *,
        api_key_env: str | None = None,
        timeout: float = 600.0,
        max_concurrency: int = 4,
        connect_retries: int = 3,
        retry_backoff: float = 0.5,
        revision: str | None = None,
        max_tokens_default: int = 8192,
        send_penalties: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        """
        Args:
            base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (http or https, no credentials in it); a
                list of them, or one string of them joined by commas, is a pool of replicas of the model.
            model: the served model name sent in each request (what the server's ``/models`` lists).
            api_key_env: name of the environment variable holding the API key; None sends no key.
            timeout: seconds allowed for one request, from connecting to the last byte of the answer.
            max_concurrency: requests in flight at once for a batch of prompts, per endpoint.
            connect_retries: retries after a failure to connect (refused, unreachable, unresolved).
            retry_backoff: seconds before the first retry; doubled for each further one.
            revision: an immutable revision of the served weights, if known (40-hex sha or sha256:<hex>).
            max_tokens_default: ``max_tokens`` when ``score_and_generate`` gets ``settings=None``.
            send_penalties: send non-default ``repetition_penalty`` / ``no_repeat_ngram_size`` (non-standard
                fields the server must honour); when False such settings raise CapabilityError.
            max_response_bytes: the largest answer body accepted; a larger one is ``response_too_large``.
        """
        urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
        if not urls or len(urls) > _POOL_LIMIT:
            raise ModelError(f"base_url must name 1 to {_POOL_LIMIT} endpoints, got {len(urls)}")
        endpoints = [_endpoint(url) for url in urls]
        urls = [url.rstrip("/") for url in urls]
        if len(set(urls)) != len(urls):
            repeated = next(u for u in urls if urls.count(u) > 1)
            raise ModelError(f"base_url names the endpoint {repeated!r} twice; give each replica once")
        if not isinstance(model, str) or not model:
            raise ModelError("model (the served model name) must be a non-empty string")
        if not _positive_finite(timeout):
            raise ModelError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        if not _integer(max_concurrency) or max_concurrency < 1:
            raise ModelError(f"max_concurrency must be an integer >= 1, got {max_concurrency!r}")
        if not _integer(connect_retries) or connect_retries < 0 \
                or not (_positive_finite(retry_backoff) or retry_backoff == 0):
            raise ModelError("connect_retries must be an integer >= 0 and retry_backoff a finite number of "
                             f"seconds >= 0, got {connect_retries!r}, {retry_backoff!r}")
        if not _integer(max_tokens_default) or max_tokens_default < 0:
            raise ModelError(f"max_tokens_default must be an integer >= 0, got {max_tokens_default!r}")
        if not _integer(max_response_bytes) or max_response_bytes < 1:
            raise ModelError(f"max_response_bytes must be an integer >= 1, got {max_response_bytes!r}")
        if revision is not None and not _IMMUTABLE_REVISION.match(revision):
            raise ModelError(f"revision must be immutable: a 40-hex commit sha or sha256:<64 hex>, got {revision!r}; "
                             "omit it to record a hash of the endpoint instead")
        api_key = read_api_key(api_key_env)

        #: The endpoints, in the pool's order (one for a single server).
        self.base_urls = tuple(urls)
        #: What the run records as the model's location: the URL, or the pool's URLs joined by commas.
        self.base_url = ",".join(self.base_urls)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_concurrency = max_concurrency
        self.connect_retries = connect_retries
        self.retry_backoff = float(retry_backoff)
        self.max_tokens_default = max_tokens_default
        self.send_penalties = send_penalties
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key
        self._scrubber = KeyScrubber(api_key)
        self._revision = revision
        self._endpoints = tuple(endpoints)
        self._slots = tuple(threading.BoundedSemaphore(max_concurrency) for _ in endpoints)
        self._description: ModelDescription | None = None
        self._describe_lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> OpenAIChatModel:
        """Build from ``openai:MODEL@BASE_URL``; ``options`` are the constructor's keyword arguments.

        Options the registry passes to every backend with the value None are ignored.
        """
        match = _SPEC.match(spec)
        if not match:
            raise ModelError(f"malformed served-model spec {spec!r}; expected openai:MODEL@BASE_URL (or "
                             "openai:MODEL@URL1,URL2,... for a pool of replicas), e.g. "
                             "openai:my-model@http://127.0.0.1:8000/v1")
        accepted = ("api_key_env", "timeout", "max_concurrency", "connect_retries", "retry_backoff",
                    "revision", "max_tokens_default", "send_penalties", "max_response_bytes")
        unknown = sorted(k for k, v in options.items() if k not in accepted and v is not None)
        if unknown:
            raise ModelError(f"options {unknown} do not apply to a served model; accepted: {', '.join(accepted)}")
        kwargs = {k: v for k, v in options.items() if k in accepted and v is not None}
        return cls(match["base_url"], match["model"], **kwargs)

    def __repr__(self) -> str:
        key = f", api_key_env={self.api_key_env!r}" if self.api_key_env else ""
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}{key})"

    # -- contract ---------------------------------------------------------------------------------

    def default_settings(self) -> GenerationSettings:
        """Greedy settings with ``max_tokens_default`` new tokens (used when ``settings`` is None)."""
        return GenerationSettings(max_new_tokens=self.max_tokens_default)

    def describe(self) -> ModelDescription:
        """Served model name, base URL and revision; the first call asks the server's ``/models`` once."""
        with self._describe_lock:
            if self._description is None:
                extra: dict[str, Any] = {"chat_template": "applied by the server"}
                if self._revision is not None:
                    revision = self._revision
                    extra["revision_basis"] = "given"
                else:
                    entry, listing = self._pool_entry() if len(self._endpoints) > 1 else self._models_entry(0)
                    if len(self._endpoints) > 1:
                        basis: dict[str, Any] = {"base_urls": list(self.base_urls), "model": self.model,
                                                 "models_entry": entry}
                    else:
                        basis = {"base_url": self.base_url, "model": self.model, "models_entry": entry}
                    revision = "sha256:" + _sha256(canonical_json(basis))
                    stored: Any = entry
                    if entry is not None:
                        text = canonical_json(entry)
                        if len(text) > _ENTRY_LIMIT:
                            stored = f"omitted: {len(text)} characters of canonical JSON, sha256 {_sha256(text)}"
                    what = "endpoints (base_urls" if len(self._endpoints) > 1 else "endpoint (base_url"
                    extra.update(revision_basis=f"{what}, model, /models entry); not the weights",
                                 models_entry=stored, models_listing=listing)
                self._description = ModelDescription(
                    id=self.model,
                    revision=revision,
                    backend="openai-http",
                    device=self.base_url,
                    source=",".join(f"{url}/chat/completions" for url in self.base_urls),
                    extra=extra,
                )
            return self._description

    def render_chat(self, chat: Sequence[Message]) -> str:
        """The canonical JSON of the messages sent; the server applies its own chat template to them."""
        return canonical_json(chat_messages(chat))

    def score_and_generate(
        self,
        prompts: Sequence[Prompt],
        choices: Sequence[str] | None = None,
        settings: GenerationSettings | None = None,
    ) -> list[Response]:
        """One greedy chat completion per prompt, up to ``max_concurrency`` at once per endpoint, in prompt order."""
        if choices is not None:
            raise CapabilityError(
                f"{type(self).__name__} cannot score choices: OpenAI-compatible servers do not return the logits "
                "of given labels (logprobs are ignored or limited to sampled tokens); score choices with a local "
                "transformers model, or generate and parse the answer"
            )
        if settings is None:
            settings = self.default_settings()
        if isinstance(prompts, (str, bytes)):
            raise ModelError("prompts must be a list of chats, not one string: served models take chats "
                             '(lists of {"role": ..., "content": ...} messages) and apply their own template')
        chats = [chat_messages(prompt, index) for index, prompt in enumerate(prompts)]
        body_extra = penalty_fields(settings, self.send_penalties)
        if settings.max_new_tokens == 0:
            return [Response(index=i, finish_reason="none") for i in range(len(chats))]

        first = [self.endpoint_of(chat) for chat in chats]

        def one(index: int) -> Response:
            return self._complete(index, completion_request(self.model, chats[index], settings, body_extra),
                                  first[index])

        if len(chats) <= 1 or (self.max_concurrency == 1 and len(self._endpoints) == 1):
            return [one(i) for i in range(len(chats))]
        # One queue per endpoint, each worked by up to max_concurrency threads: a prompt waiting for a busy
        # endpoint never holds up the prompts of an idle one.
        queues = [[i for i in range(len(chats)) if first[i] == at] for at in range(len(self._endpoints))]
        with contextlib.ExitStack() as stack:
            futures = {}
            for at, queue in enumerate(queues):
                if queue:
                    pool = stack.enter_context(ThreadPoolExecutor(
                        max_workers=min(self.max_concurrency, len(queue)), thread_name_prefix=f"openai-http-{at}"))
                    futures.update((i, pool.submit(one, i)) for i in queue)
            return [futures[i].result() for i in range(len(chats))]

    def endpoint_of(self, chat: Sequence[Message]) -> int:
        """The index of the endpoint a chat goes to first: a stable hash of its messages, modulo the pool's size."""
        if len(self._endpoints) == 1:
            return 0
        digest = hashlib.sha256(canonical_json(chat_messages(chat)).encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") % len(self._endpoints)

    # -- helpers ----------------------------------------------------------------------------------

    def _complete(self, index: int, body: dict[str, Any], first: int = 0) -> Response:
        """One prompt's response from endpoint ``first``, or from the next ones on a connection error, all within
        one deadline of ``timeout`` seconds; the response names the endpoint that gave it (or was tried last)."""
        with self._slots[first]:  # the endpoint's own queue: its workers never outnumber its slots
            deadline = time.monotonic() + self.timeout
            response = self._exchange(index, body, first, self.timeout)
        response = dataclasses.replace(response, endpoint=self.base_urls[first])
        count = len(self._endpoints)
        for step in range(1, count):
            if response.error != "connection_error":
                break
            at = (first + step) % count
            # Waiting for a free request slot of the next endpoint counts against the deadline too.
            if not self._slots[at].acquire(timeout=max(0.0, deadline - time.monotonic())):
                break
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                response = dataclasses.replace(self._exchange(index, body, at, left), endpoint=self.base_urls[at])
            finally:
                self._slots[at].release()
        return response

    def _exchange(self, index: int, body: dict[str, Any], at: int, timeout: float) -> Response:
        scrub = self._scrubber.scrub
        try:
            answer = self._request("POST", "/chat/completions", body, at, timeout)
            if 300 <= answer.status < 400:
                target = scrub(answer.location or "no Location header")[:DETAIL_LIMIT]
                raise _Failure("http_error", f"HTTP {answer.status} {scrub(answer.reason)[:100]}: redirect "
                               f"to {target!r} not followed; use the final URL as base_url")
            if not 200 <= answer.status < 300:
                raise _Failure("http_error", f"HTTP {answer.status} {scrub(answer.reason)[:100]}: "
                               f"{self._scrubber.excerpt(answer.body)!r}")
            response = _parse_completion(index, answer.body, self._scrubber.excerpt)
            return dataclasses.replace(response, text=scrub(response.text))
        except _Failure as failure:
            return Response(index=index, finish_reason="error", error=failure.code,
                            error_detail=scrub(failure.detail)[:_DETAIL_MAX])
        except Exception as exc:  # noqa: BLE001 -- a bug or an unforeseen transport error: coded, never raised
            return Response(index=index, finish_reason="error", error="backend_error",
                            error_detail=scrub(f"{type(exc).__name__}: {exc}")[:_DETAIL_MAX])

    def _pool_entry(self) -> tuple[dict[str, Any], str]:
        """The ``/models`` entry every endpoint of the pool lists for the model, and how the look-up went; raises
        :class:`ModelError` naming the first endpoint that does not list it or lists another entry."""
        first: dict[str, Any] | None = None
        for at, url in enumerate(self.base_urls):
            entry, listing = self._models_entry(at)
            if entry is None:
                raise ModelError(f"the pool's endpoint {url} does not list the model {self.model!r} ({listing} at "
                                 f"{url}/models); every endpoint of a pool must serve the same model")
            if first is None:
                first = entry
            elif entry != first:
                key = next(k for k in sorted(set(first) | set(entry)) if first.get(k) != entry.get(k))
                was, now = str(first.get(key))[:80], str(entry.get(key))[:80]
                raise ModelError(f"the pool's endpoints disagree on the model {self.model!r}: /models key {key!r} is "
                                 f"{was!r} at {self.base_urls[0]} and {now!r} at {url}; every endpoint of a pool must "
                                 "serve the same model")
        assert first is not None
        return first, f"listed by all {len(self.base_urls)} endpoints"

    def _models_entry(self, at: int) -> tuple[dict[str, Any] | None, str]:
        """The ``/models`` entry of endpoint ``at`` for this model, scrubbed, without volatile keys; and how the
        look-up went."""
        try:
            answer = self._request("GET", "/models", None, at, self.timeout)
        except _Failure as failure:
            return None, f"unavailable ({failure.code})"
        except Exception as exc:  # noqa: BLE001 -- describing never fails on what a server sends
            return None, f"unavailable (backend_error: {type(exc).__name__})"
        if not 200 <= answer.status < 300:
            return None, f"unavailable (HTTP {answer.status})"
        try:
            data = json.loads(answer.body.decode("utf-8"))["data"]
            entries = [e for e in data if isinstance(e, dict) and e.get("id") == self.model]
            entry = None
            if entries:
                entry = self._scrubber.scrub_value({k: v for k, v in entries[0].items()
                                                    if k not in _VOLATILE_MODEL_KEYS})
                canonical_json(entry).encode("utf-8")  # NaN, infinity or a lone surrogate cannot be hashed
        except (ValueError, KeyError, TypeError, RecursionError):  # UnicodeError is a ValueError
            return None, "unavailable (malformed_response)"
        if entry is None:
            return None, "model not listed"
        return entry, "listed"

    def _request(self, method: str, path: str, body: dict[str, Any] | None, at: int, timeout: float) -> Answer:
        """One exchange with endpoint ``at`` within one deadline of ``timeout`` seconds; raises ``_Failure``."""
        return request(self._endpoints[at], method, path, body, api_key=self._api_key, timeout=timeout,
                       max_response_bytes=self.max_response_bytes, connect_retries=self.connect_retries,
                       retry_backoff=self.retry_backoff)


def _endpoint(base_url: Any) -> Endpoint:
    """The checked parts of one base URL; raises :class:`ModelError` naming what is wrong with it."""
    if not isinstance(base_url, str) or not base_url.isascii() or any(c.isspace() or not c.isprintable()
                                                                        for c in base_url):
        raise ModelError(f"base_url must be ASCII without spaces or control characters (percent-encode "
                         f"others), got {base_url!r}")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
    if parts.username is not None or parts.password is not None:
        raise ModelError("base_url must not carry credentials; put the API key in an environment variable "
                         "and pass its name as api_key_env")
    if parts.query or parts.fragment:
        raise ModelError(f"base_url must not have a query or fragment, got {base_url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ModelError(f"base_url has an invalid port: {base_url!r}") from exc
    return Endpoint(scheme=parts.scheme, host=parts.hostname, port=port or (443 if parts.scheme == "https" else 80),
                    netloc=parts.netloc, path=parts.path.rstrip("/"))


def _positive_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

