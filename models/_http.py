"""OpenAI-compatible HTTP backend: chat completions from a served model (vLLM, ollama, llama.cpp, ``transformers serve``).

Only the standard library is used (``http.client``), so the backend needs no extra.

What the backend does, and the choices behind it:

- Requests are ``POST {base_url}/chat/completions``, non-streaming, greedy
  (``temperature: 0``), ``max_tokens`` = ``settings.max_new_tokens``, the
  settings' stop strings in ``stop``.  ``settings=None`` means
  :meth:`OpenAIChatModel.default_settings` (``max_tokens_default`` tokens).
  ``max_new_tokens=0`` sends nothing and answers ``finish_reason="none"``.
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
  seconds); a timeout, an HTTP error or a connection lost after the request was
  sent is never retried.  ``timeout`` is a deadline for the whole exchange
  (connect, send, wait and read), not per socket operation.
- The API key is read once, at construction, from the environment variable
  named ``api_key_env`` and sent as ``Authorization: Bearer``; it never appears
  in ``repr``, descriptions or error details (details are scrubbed of it).
- A served model cannot prove its weights.  An explicit immutable ``revision``
  (40-hex commit sha or ``sha256:<64 hex>``) is recorded as given; otherwise the
  revision is ``sha256:`` of the canonical JSON of ``{base_url, model,
  models_entry}``, where ``models_entry`` is the server's ``GET
  {base_url}/models`` entry for the model (``null`` when not listed or not
  reachable) without the volatile keys ``created``, ``status`` and
  ``permission``.  That revision identifies the endpoint, not the weights.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

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
_DETAIL_LIMIT = 300  # characters of a server's body quoted in an error detail
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
        """
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
        if not model:
            raise ModelError("model (the served model name) must not be empty")
        if timeout <= 0:
            raise ModelError(f"timeout must be > 0 seconds, got {timeout}")
        if max_concurrency < 1:
            raise ModelError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if connect_retries < 0 or retry_backoff < 0:
            raise ModelError(f"connect_retries and retry_backoff must be >= 0, got {connect_retries}, {retry_backoff}")
        if max_tokens_default < 0:
            raise ModelError(f"max_tokens_default must be >= 0, got {max_tokens_default}")
        if revision is not None and not _IMMUTABLE_REVISION.match(revision):
            raise ModelError(f"revision must be immutable: a 40-hex commit sha or sha256:<64 hex>, got {revision!r}; "
                             "omit it to record a hash of the endpoint instead")
        api_key = None
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise ModelError(f"the environment variable {api_key_env} (api_key_env) is not set or empty; "
                                 "set it to the API key, or omit api_key_env for a server without keys")

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_concurrency = max_concurrency
        self.connect_retries = connect_retries
        self.retry_backoff = float(retry_backoff)
        self.max_tokens_default = max_tokens_default
        self.send_penalties = send_penalties
        self._api_key = api_key
        self._revision = revision
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
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
                    "revision", "max_tokens_default", "send_penalties")
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
                    extra.update(revision_basis="endpoint (base_url, model, /models entry); not the weights",
                                 models_entry=entry, models_listing=listing)
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
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text

    def _complete(self, index: int, body: dict[str, Any]) -> Response:
        try:
            status, reason, raw = self._request("POST", "/chat/completions", body)
            if not 200 <= status < 300:
                excerpt = raw[:_DETAIL_LIMIT].decode("utf-8", "replace")
                raise _Failure("http_error", f"HTTP {status} {reason}: {excerpt}")
            return _parse_completion(index, raw)
        except _Failure as failure:
            return Response(index=index, finish_reason="error", error=failure.code,
                            error_detail=self._scrub(failure.detail))
        except Exception as exc:  # noqa: BLE001 -- a bug or an unforeseen transport error: coded, never raised
            return Response(index=index, finish_reason="error", error="backend_error",
                            error_detail=self._scrub(f"{type(exc).__name__}: {exc}"))

    def _models_entry(self) -> tuple[dict[str, Any] | None, str]:
        """The server's ``/models`` entry for this model without volatile keys, and how the look-up went."""
        try:
            status, _reason, raw = self._request("GET", "/models", None)
        except _Failure as failure:
            return None, f"unavailable ({failure.code})"
        if not 200 <= status < 300:
            return None, f"unavailable (HTTP {status})"
        try:
            data = json.loads(raw)["data"]
            entries = [e for e in data if isinstance(e, dict) and e.get("id") == self.model]
        except (ValueError, KeyError, TypeError):
            return None, "unavailable (malformed_response)"
        if not entries:
            return None, "model not listed"
        return {k: v for k, v in entries[0].items() if k not in _VOLATILE_MODEL_KEYS}, "listed"

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, str, bytes]:
        """(status, reason, body bytes) of one exchange within ``timeout``; raises ``_Failure``."""
        deadline = time.monotonic() + self.timeout

        def remaining() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Failure("timeout", f"no complete answer within {self.timeout:g} s")
            return left

        headers = {"Accept": "application/json", "User-Agent": "preregbench"}
        payload = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"

        attempt = 0
        while True:
            conn = self._connection(remaining())
            try:
                conn.connect()
                break
            except TimeoutError:  # socket.timeout is TimeoutError
                conn.close()
                raise _Failure("timeout", f"connecting to {self._host}:{conn.port} took over {self.timeout:g} s")
            except ssl.SSLError as exc:  # a TLS failure does not go away on retry
                conn.close()
                raise _Failure("connection_error", f"TLS handshake with {self._host}:{conn.port} failed: {exc}") from None
            except OSError as exc:  # refused, unreachable, name not resolved: nothing was sent
                conn.close()
                if attempt >= self.connect_retries:
                    raise _Failure("connection_error", f"cannot connect to {self._host}:{conn.port} after "
                                   f"{attempt + 1} attempt(s): {type(exc).__name__}: {exc}") from None
                time.sleep(self.retry_backoff * 2 ** attempt)
                attempt += 1
        sock = conn.sock  # held: the connection drops its reference once a "Connection: close" answer arrives
        try:
            sock.settimeout(remaining())
            conn.request(method, self._path + path, body=payload, headers=headers)
            sock.settimeout(remaining())
            answer = conn.getresponse()
            chunks = []
            while not answer.isclosed():  # the answer closes itself (and the socket) after its last byte
                sock.settimeout(remaining())
                chunk = answer.read(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            return answer.status, answer.reason, b"".join(chunks)
        except TimeoutError:
            raise _Failure("timeout", f"no complete answer within {self.timeout:g} s") from None
        except (OSError, http.client.IncompleteRead) as exc:  # includes RemoteDisconnected
            raise _Failure("connection_error", "the connection failed after the request was sent (not retried): "
                           f"{type(exc).__name__}: {exc}") from None
        except http.client.HTTPException as exc:  # not an HTTP answer (bad status line, overlong header)
            raise _Failure("malformed_response", f"the answer is not valid HTTP: {type(exc).__name__}: {exc}") from None
        finally:
            conn.close()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _parse_completion(index: int, raw: bytes) -> Response:
    """A Response from a ``chat.completion`` body; raises ``_Failure`` for malformed or empty answers."""
    try:
        data = json.loads(raw)
    except ValueError:
        excerpt = raw[:_DETAIL_LIMIT].decode("utf-8", "replace")
        raise _Failure("malformed_response", f"the answer is not JSON: {excerpt!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
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
    if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool):
        prompt_tokens = None
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    return Response(index=index, text=content, finish_reason=finish, prompt_tokens=prompt_tokens)
