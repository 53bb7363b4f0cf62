"""The chat-completions schema: the request body sent for a chat, and the answer's body read into a Response.

- A prompt must be a chat: a non-empty list of messages with string ``role``
  and ``content`` (and only string fields); the server applies its own chat
  template.  Anything else is caller misuse and raises ``ModelError``.
- A request is non-streaming and greedy (``temperature: 0``), with
  ``max_tokens`` = ``settings.max_new_tokens`` and the settings' stop strings.
  ``repetition_penalty`` and ``no_repeat_ngram_size`` are not part of the
  OpenAI API: non-default values go into the body only when the model was built
  with ``send_penalties=True``, and raise ``CapabilityError`` otherwise.
- An answer's body is read strictly (UTF-8, JSON, ``choices[0].message.content``
  a string); anything else is a coded failure: ``malformed_response``, or
  ``empty_response`` for a well-formed answer with no choices or ``null``
  content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._base import CapabilityError, GenerationSettings, ModelError, Response
from ._http_failure import _Failure

__all__ = ["chat_messages", "completion_request", "penalty_fields"]

_DEFAULT_PENALTIES = GenerationSettings()


def chat_messages(prompt: Any, index: int | None = None) -> list[dict[str, str]]:
    """The messages of one chat as sent; ``index`` names the prompt in the error."""
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


def penalty_fields(settings: GenerationSettings, send_penalties: bool) -> dict[str, Any]:
    """The non-default penalty fields of ``settings``; raises ``CapabilityError`` unless ``send_penalties``."""
    fields: dict[str, Any] = {}
    if settings.repetition_penalty != _DEFAULT_PENALTIES.repetition_penalty:
        fields["repetition_penalty"] = settings.repetition_penalty
    if settings.no_repeat_ngram_size != _DEFAULT_PENALTIES.no_repeat_ngram_size:
        fields["no_repeat_ngram_size"] = settings.no_repeat_ngram_size
    if fields and not send_penalties:
        raise CapabilityError(
            f"{sorted(fields)} are not part of the OpenAI API and servers treat them differently (honour, "
            "reject or silently drop); build the model with send_penalties=True if this server honours them"
        )
    return fields


def completion_request(model: str, messages: list[dict[str, str]], settings: GenerationSettings,
                       extra: Mapping[str, Any]) -> dict[str, Any]:
    """The body of one greedy, non-streaming chat completion (``extra``: the penalty fields)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": settings.max_new_tokens,
        "temperature": 0,
        "stream": False,
        **extra,
    }
    if settings.stop:
        body["stop"] = list(settings.stop)
    return body


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
