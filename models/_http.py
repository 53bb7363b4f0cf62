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
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import io
import json
import math
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, urlsplit

from ._base import (
    CapabilityError,
    GenerationSettings,
    LanguageModel,
    Message,
    ModelDescription,
    ModelError,
    Prompt,
    Response,
)

_SPEC = re.compile(r"^openai:(?P<model>[^@\s]+)@(?P<base_url>https?://\S+)$")
_IMMUTABLE_REVISION = re.compile(r"^(?:[0-9a-f]{40}|sha256:[0-9a-f]{64})$")
#: Keys of a ``/models`` entry that change between calls or over a server's life (vLLM's ``created``
#: is the time of the request); they are left out of the endpoint revision.
_VOLATILE_MODEL_KEYS = frozenset({"created", "status", "permission"})
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # a body larger than this is ``response_too_large``
_HEAD_ALLOWANCE = 64 * 1024  # bytes of status line, headers and chunk framing allowed beyond the body
_READ_STEP = 64 * 1024  # bytes asked of the answer per read
_ERROR_BODY_BYTES = 16 * 1024  # bytes of a non-2xx body read for its excerpt
_EXCERPT_BYTES = 4096  # bytes of a body decoded for an excerpt (more than _DETAIL_LIMIT characters need)
_DETAIL_LIMIT = 300  # characters of a server's body quoted in an error detail
_DETAIL_MAX = 1000  # characters of a whole error detail
_ENTRY_LIMIT = 16 * 1024  # characters of a /models entry's canonical JSON stored in a description
_MIN_KEY_LENGTH = 8  # shorter keys cannot be scrubbed from generated text without mangling it
_DEFAULT_PENALTIES = GenerationSettings()


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the form that is hashed and rendered."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _Failure(Exception):
    """A coded per-request failure (code from ``ERROR_CODES``)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclasses.dataclass(frozen=True)
class _Answer:
    """One HTTP answer as the backend keeps it: never its headers, only what the caller needs."""

    status: int
    reason: str
    body: bytes
    location: str | None = None  # the Location header of a redirect


class _Wire(io.RawIOBase):
    """The socket as a raw stream: every receive waits at most until the deadline, and the total is bounded.

    ``http.client`` parses the answer from a buffered reader over this stream, so no read of its own
    (status line, headers, body, chunk sizes) can outlast the deadline or pull more than ``limit`` bytes.
    """

    def __init__(self, sock: socket.socket, deadline: float, limit: int, timed_out: Any) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._limit = limit
        self._timed_out = timed_out  # () -> _Failure
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        self._sock.settimeout(left)
        count = self._sock.recv_into(buffer)
        self.received += count
        if self.received > self._limit:
            raise _Failure("response_too_large", f"the answer exceeds {self._limit} bytes with its headers "
                           "and framing (max_response_bytes plus 64 KiB)")
        return count


class _Source:
    """What ``http.client.HTTPResponse`` reads from: a buffered reader over a :class:`_Wire`."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(self._wire)


class OpenAIChatModel(LanguageModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(
        self,
        base_url: str,
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
            base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (http or https, no credentials in it).
            model: the served model name sent in each request (what the server's ``/models`` lists).
            api_key_env: name of the environment variable holding the API key; None sends no key.
            timeout: seconds allowed for one request, from connecting to the last byte of the answer.
            max_concurrency: requests in flight at once for a batch of prompts.
            connect_retries: retries after a failure to connect (refused, unreachable, unresolved).
            retry_backoff: seconds before the first retry; doubled for each further one.
            revision: an immutable revision of the served weights, if known (40-hex sha or sha256:<hex>).
            max_tokens_default: ``max_tokens`` when ``score_and_generate`` gets ``settings=None``.
            send_penalties: send non-default ``repetition_penalty`` / ``no_repeat_ngram_size`` (non-standard
                fields the server must honour); when False such settings raise CapabilityError.
            max_response_bytes: the largest answer body accepted; a larger one is ``response_too_large``.
        """
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
            _ = parts.port
        except ValueError as exc:
            raise ModelError(f"base_url has an invalid port: {base_url!r}") from exc
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
        api_key = None
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise ModelError(f"the environment variable {api_key_env} (api_key_env) is not set or empty; "
                                 "set it to the API key, or omit api_key_env for a server without keys")
            if len(api_key) < _MIN_KEY_LENGTH:
                raise ModelError(f"the API key in {api_key_env} has {len(api_key)} characters; it needs at least "
                                 f"{_MIN_KEY_LENGTH} (it is scrubbed from generated text, where a short key would "
                                 "mangle ordinary words); omit api_key_env if the server needs no key")
            if not api_key.isprintable() or any(c.isspace() for c in api_key) or not _latin1(api_key):
                raise ModelError(f"the API key in {api_key_env} contains spaces, control or non-Latin-1 "
                                 "characters, which cannot travel in an Authorization header; check the variable")

        self.base_url = base_url.rstrip("/")
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
        self._secrets = _secret_forms(api_key)
        self._revision = revision
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._netloc = parts.netloc
        self._path = parts.path.rstrip("/")
        self._description: ModelDescription | None = None
        self._describe_lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> OpenAIChatModel:
        """Build from ``openai:MODEL@BASE_URL``; ``options`` are the constructor's keyword arguments.

        Options the registry passes to every backend with the value None are ignored.
        """
        match = _SPEC.match(spec)
        if not match:
            raise ModelError(f"malformed served-model spec {spec!r}; expected openai:MODEL@BASE_URL, "
                             "e.g. openai:my-model@http://127.0.0.1:8000/v1")
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
                    entry, listing = self._models_entry()
                    basis = {"base_url": self.base_url, "model": self.model, "models_entry": entry}
                    revision = "sha256:" + _sha256(canonical_json(basis))
                    stored: Any = entry
                    if entry is not None:
                        text = canonical_json(entry)
                        if len(text) > _ENTRY_LIMIT:
                            stored = f"omitted: {len(text)} characters of canonical JSON, sha256 {_sha256(text)}"
                    extra.update(revision_basis="endpoint (base_url, model, /models entry); not the weights",
                                 models_entry=stored, models_listing=listing)
                self._description = ModelDescription(
                    id=self.model,
                    revision=revision,
                    backend="openai-http",
                    device=self.base_url,
                    source=f"{self.base_url}/chat/completions",
                    extra=extra,
                )
            return self._description

    def render_chat(self, chat: Sequence[Message]) -> str:
        """The canonical JSON of the messages sent; the server applies its own chat template to them."""
        return canonical_json(self._messages(chat))

    def score_and_generate(
        self,
        prompts: Sequence[Prompt],
        choices: Sequence[str] | None = None,
        settings: GenerationSettings | None = None,
    ) -> list[Response]:
        """One greedy chat completion per prompt, up to ``max_concurrency`` at once, in prompt order."""
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
        chats = [self._messages(prompt, index) for index, prompt in enumerate(prompts)]
        body_extra = self._penalty_fields(settings)
        if settings.max_new_tokens == 0:
            return [Response(index=i, finish_reason="none") for i in range(len(chats))]

        def one(index: int) -> Response:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": chats[index],
                "max_tokens": settings.max_new_tokens,
                "temperature": 0,
                "stream": False,
                **body_extra,
            }
            if settings.stop:
                body["stop"] = list(settings.stop)
            return self._complete(index, body)

        if len(chats) <= 1 or self.max_concurrency == 1:
            return [one(i) for i in range(len(chats))]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(chats)),
                                thread_name_prefix="openai-http") as pool:
            return list(pool.map(one, range(len(chats))))

    # -- helpers ----------------------------------------------------------------------------------

    def _messages(self, prompt: Any, index: int | None = None) -> list[dict[str, str]]:
        where = "" if index is None else f" (prompt {index})"
        if isinstance(prompt, (str, bytes)):
            raise ModelError(
                f"served models take chats, not rendered prompt text{where}: pass a list of "
                '{"role": ..., "content": ...} messages; the server applies its own chat template'
            )
        if not isinstance(prompt, Sequence) or not prompt:
            raise ModelError(f"a chat must be a non-empty list of messages{where}, got {type(prompt).__name__}")
        messages = []
        for message in prompt:
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str) \
                    or not isinstance(message.get("content"), str):
                raise ModelError(f"each message needs string 'role' and 'content'{where}, got {message!r}")
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in message.items()):
                raise ModelError(f"message fields must be strings{where}, got {message!r}")
            messages.append(dict(message))
        return messages

    def _penalty_fields(self, settings: GenerationSettings) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if settings.repetition_penalty != _DEFAULT_PENALTIES.repetition_penalty:
            fields["repetition_penalty"] = settings.repetition_penalty
        if settings.no_repeat_ngram_size != _DEFAULT_PENALTIES.no_repeat_ngram_size:
            fields["no_repeat_ngram_size"] = settings.no_repeat_ngram_size
        if fields and not self.send_penalties:
            raise CapabilityError(
                f"{sorted(fields)} are not part of the OpenAI API and servers treat them differently (honour, "
                "reject or silently drop); build the model with send_penalties=True if this server honours them"
            )
        return fields


    def _scrub(self, text: str) -> str:
        """``text`` with every form of the API key replaced by ``***``."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def _scrub_value(self, value: Any) -> Any:
        """A parsed JSON value with the key scrubbed from every string in it, keys of objects included."""
        if isinstance(value, str):
            return self._scrub(value)
        if isinstance(value, list):
            return [self._scrub_value(v) for v in value]
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub_value(v) for k, v in value.items()}
        return value

    def _excerpt(self, raw: bytes) -> str:
        """The start of a body for an error detail: decoded, scrubbed, *then* cut to ``_DETAIL_LIMIT`` characters."""
        return self._scrub(raw[:_EXCERPT_BYTES].decode("utf-8", "replace"))[:_DETAIL_LIMIT]

    def _complete(self, index: int, body: dict[str, Any]) -> Response:
        try:
            answer = self._request("POST", "/chat/completions", body)
            if 300 <= answer.status < 400:
                target = self._scrub(answer.location or "no Location header")[:_DETAIL_LIMIT]
                raise _Failure("http_error", f"HTTP {answer.status} {self._scrub(answer.reason)[:100]}: redirect "
                               f"to {target!r} not followed; use the final URL as base_url")
            if not 200 <= answer.status < 300:
                raise _Failure("http_error", f"HTTP {answer.status} {self._scrub(answer.reason)[:100]}: "
                               f"{self._excerpt(answer.body)!r}")
            response = _parse_completion(index, answer.body, self._excerpt)
            return dataclasses.replace(response, text=self._scrub(response.text))
        except _Failure as failure:
            return Response(index=index, finish_reason="error", error=failure.code,
                            error_detail=self._scrub(failure.detail)[:_DETAIL_MAX])
        except Exception as exc:  # noqa: BLE001 -- a bug or an unforeseen transport error: coded, never raised
            return Response(index=index, finish_reason="error", error="backend_error",
                            error_detail=self._scrub(f"{type(exc).__name__}: {exc}")[:_DETAIL_MAX])

    def _models_entry(self) -> tuple[dict[str, Any] | None, str]:
        """The server's ``/models`` entry for this model, scrubbed, without volatile keys; and how the look-up went."""
        try:
            answer = self._request("GET", "/models", None)
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
                entry = self._scrub_value({k: v for k, v in entries[0].items() if k not in _VOLATILE_MODEL_KEYS})
                canonical_json(entry).encode("utf-8")  # NaN, infinity or a lone surrogate cannot be hashed
        except (ValueError, KeyError, TypeError, RecursionError):  # UnicodeError is a ValueError
            return None, "unavailable (malformed_response)"
        if entry is None:
            return None, "model not listed"
        return entry, "listed"

    def _connect(self, deadline: float, timed_out: Any) -> socket.socket:
        """A connected (and, for https, TLS-wrapped) socket; refused connections are retried within the deadline."""
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out("connecting")
            try:
                sock = socket.create_connection((self._host, self._port), timeout=left)
            except TimeoutError:  # socket.timeout is TimeoutError
                raise timed_out("connecting") from None
            except OSError as exc:  # refused, unreachable, name not resolved: nothing was sent
                wait = self.retry_backoff * 2 ** attempt
                if attempt >= self.connect_retries or time.monotonic() + wait >= deadline:
                    spare = "" if attempt >= self.connect_retries else " (no time left for another within timeout)"
                    raise _Failure("connection_error", f"cannot connect to {self._host}:{self._port} after "
                                   f"{attempt + 1} attempt(s){spare}: {type(exc).__name__}: {exc}") from None
                time.sleep(wait)
                attempt += 1
                continue
            if self._scheme != "https":
                return sock
            try:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                return ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
            except TimeoutError:
                sock.close()
                raise timed_out("in the TLS handshake") from None
            except (ssl.SSLError, OSError) as exc:  # a TLS failure does not go away on retry
                sock.close()
                raise _Failure("connection_error", f"TLS handshake with {self._host}:{self._port} failed: "
                               f"{type(exc).__name__}: {exc}") from None

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> _Answer:
        """One exchange within one deadline of ``timeout`` seconds; raises ``_Failure``."""
        deadline = time.monotonic() + self.timeout
        phase = "connecting"

        def timed_out(where: str | None = None) -> _Failure:
            return _Failure("timeout", f"no complete answer within {self.timeout:g} s ({where or phase})")

        payload = b""
        lines = [f"{method} {self._path}{path} HTTP/1.1", f"Host: {self._netloc}", "Accept: application/json",
                 "User-Agent: preregbench", "Connection: close"]
        if body is not None:
            try:
                payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in a prompt: sent as a JSON escape, never as bad UTF-8
                payload = json.dumps(body, ensure_ascii=True, allow_nan=False).encode("ascii")
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        if self._api_key:
            lines.append(f"Authorization: Bearer {self._api_key}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload

        sock = self._connect(deadline, timed_out)
        try:
            phase = "sending the request"
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out()
            sock.settimeout(left)  # since Python 3.5 the timeout bounds the whole sendall
            sock.sendall(request)
            phase = "waiting for the status line and headers"
            wire = _Wire(sock, deadline, self.max_response_bytes + _HEAD_ALLOWANCE, timed_out)
            answer = http.client.HTTPResponse(_Source(wire), method=method)  # type: ignore[arg-type]
            answer.begin()
            if 300 <= answer.status < 400:
                return _Answer(answer.status, answer.reason, b"", answer.getheader("Location"))
            success = 200 <= answer.status < 300
            limit = self.max_response_bytes if success else _ERROR_BODY_BYTES  # an error body: its start will do
            declared = _declared_length(answer)
            if success and declared is not None and declared > limit:
                raise _Failure("response_too_large", f"the answer declares Content-Length {declared}, over the "
                               f"limit of {limit} bytes (max_response_bytes); nothing of it was read")
            phase = "reading the body"
            chunks: list[bytes] = []
            total = 0
            while total <= limit:
                chunk = answer.read(min(_READ_STEP, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            if not success:
                return _Answer(answer.status, answer.reason, b"".join(chunks)[:limit])
            if total > limit:
                raise _Failure("response_too_large", f"the answer body exceeds the limit of {limit} bytes "
                               "(max_response_bytes); reading stopped there")
            if declared is not None and answer.length:
                raise _Failure("malformed_response", f"the body is truncated: Content-Length {declared}, but the "
                               f"connection closed after {total} bytes")
            return _Answer(answer.status, answer.reason, b"".join(chunks))
        except _Failure:
            raise
        except TimeoutError:
            raise timed_out() from None
        except http.client.IncompleteRead as exc:
            raise _Failure("malformed_response", f"the chunked body is truncated: the connection closed after "
                           f"{len(exc.partial)} bytes of a chunk") from None
        except (http.client.RemoteDisconnected, ConnectionError) as exc:
            raise _Failure("connection_error", f"the connection failed while {phase} (not retried): "
                           f"{type(exc).__name__}: {exc}") from None
        except (http.client.HTTPException, ValueError) as exc:  # bad status line, overlong header, bad chunk size
            raise _Failure("malformed_response", f"the answer is not valid HTTP: {type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise _Failure("connection_error", f"the connection failed while {phase} (not retried): "
                           f"{type(exc).__name__}: {exc}") from None
        finally:
            sock.close()


def _positive_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _secret_forms(key: str | None) -> tuple[str, ...]:
    """The key as it stands, percent-encoded and JSON-escaped: the forms a server plausibly echoes."""
    if not key:
        return ()
    forms = [key, quote(key, safe=""), json.dumps(key)[1:-1]]
    return tuple(sorted(set(forms), key=lambda form: (-len(form), form)))


def _declared_length(answer: http.client.HTTPResponse) -> int | None:
    """The answer's Content-Length (None when chunked or absent); raises ``_Failure`` when it is not one number."""
    if answer.chunked:
        return None
    values = answer.headers.get_all("Content-Length") or []
    if not values:
        return None
    distinct = {value.strip() for value in values}
    if len(distinct) != 1 or not next(iter(distinct)).isdigit() or not next(iter(distinct)).isascii():
        shown = ", ".join(repr(v[:40]) for v in values[:3])
        raise _Failure("malformed_response", f"the answer's Content-Length is not one decimal number: {shown}")
    return int(next(iter(distinct))[:30])  # 30 digits are far beyond any limit; int() never sees thousands


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _parse_completion(index: int, raw: bytes, excerpt: Any) -> Response:
    """A Response from a ``chat.completion`` body; raises ``_Failure`` for malformed or empty answers.

    ``excerpt`` turns raw bytes into a scrubbed, bounded excerpt for error details.
    """
    if not raw:
        raise _Failure("malformed_response", "the answer body is empty, not JSON")
    try:
        text = raw.decode("utf-8")  # strict: invalid bytes and encoded surrogates are refused
    except UnicodeDecodeError as exc:
        raise _Failure("malformed_response", f"the answer is not valid UTF-8 (byte {exc.start}: "
                       f"{raw[exc.start:exc.start + 1]!r}): {excerpt(raw)!r}") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise _Failure("malformed_response", "the answer is JSON nested too deeply to parse") from None
    except ValueError as exc:
        where = f" ({exc.msg} at character {exc.pos})" if isinstance(exc, json.JSONDecodeError) else f" ({exc})"
        raise _Failure("malformed_response", f"the answer is not JSON{where[:120]}: {excerpt(raw)!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        keys = sorted(data)[:20] if isinstance(data, dict) else type(data).__name__
        raise _Failure("malformed_response", f"the answer has no 'choices' list (got {keys})")
    if not data["choices"]:
        raise _Failure("empty_response", "the answer has no choices")
    choice = data["choices"][0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise _Failure("malformed_response", "the first choice has no 'message' object")
    content = choice["message"].get("content")
    if content is None:
        raise _Failure("empty_response", "the first choice's message has no content")
    if not isinstance(content, str):
        raise _Failure("malformed_response", f"the message content is a {type(content).__name__}, not a string")
    usage = data.get("usage")
    prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool) or prompt_tokens < 0:
        prompt_tokens = None
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    return Response(index=index, text=content, finish_reason=finish, prompt_tokens=prompt_tokens)
