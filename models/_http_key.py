"""The HTTP backend's API key: read from the environment, checked, and scrubbed from everything the backend returns.

The key is read once, from the environment variable named ``api_key_env``.  It
must have at least :data:`MIN_KEY_LENGTH` characters (a shorter key would be
scrubbed out of ordinary words) and no spaces, control or non-Latin-1
characters (others cannot travel in an ``Authorization`` header); the errors
say so without quoting the key.  :class:`KeyScrubber` replaces the key, as it
stands, percent-encoded and JSON-escaped, by ``***`` in text, in parsed JSON
values (keys of objects included) and in excerpts of a server's body, which are
scrubbed *before* they are cut to length.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from ._base import ModelError

__all__ = ["DETAIL_LIMIT", "MIN_KEY_LENGTH", "KeyScrubber", "read_api_key"]

_EXCERPT_BYTES = 4096  # bytes of a body decoded for an excerpt (more than DETAIL_LIMIT characters need)
DETAIL_LIMIT = 300  # characters of a server's body quoted in an error detail
MIN_KEY_LENGTH = 8  # shorter keys cannot be scrubbed from generated text without mangling it


def read_api_key(api_key_env: str | None) -> str | None:
    """The key in the environment variable ``api_key_env`` (None when that is None), checked; raises ``ModelError``."""
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise ModelError(f"the environment variable {api_key_env} (api_key_env) is not set or empty; "
                             "set it to the API key, or omit api_key_env for a server without keys")
        if len(api_key) < MIN_KEY_LENGTH:
            raise ModelError(f"the API key in {api_key_env} has {len(api_key)} characters; it needs at least "
                             f"{MIN_KEY_LENGTH} (it is scrubbed from generated text, where a short key would "
                             "mangle ordinary words); omit api_key_env if the server needs no key")
        if not api_key.isprintable() or any(c.isspace() for c in api_key) or not _latin1(api_key):
            raise ModelError(f"the API key in {api_key_env} contains spaces, control or non-Latin-1 "
                             "characters, which cannot travel in an Authorization header; check the variable")
    return api_key


class KeyScrubber:
    """Replaces every form of one API key by ``***``; with no key, changes nothing."""

    def __init__(self, key: str | None) -> None:
        self._secrets = _secret_forms(key)

    def scrub(self, text: str) -> str:
        """``text`` with every form of the API key replaced by ``***``."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def scrub_value(self, value: Any) -> Any:
        """A parsed JSON value with the key scrubbed from every string in it, keys of objects included."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.scrub_value(v) for v in value]
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub_value(v) for k, v in value.items()}
        return value

    def excerpt(self, raw: bytes) -> str:
        """The start of a body for an error detail: decoded, scrubbed, *then* cut to ``DETAIL_LIMIT`` characters."""
        return self.scrub(raw[:_EXCERPT_BYTES].decode("utf-8", "replace"))[:DETAIL_LIMIT]


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
