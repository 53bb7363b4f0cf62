"""A coded per-request failure of the HTTP backend: one exchange that went wrong, as a code from ``ERROR_CODES``.

The transport and the completion parser raise it; the backend turns it into a
``Response`` with ``finish_reason="error"``, so it never reaches the caller.
"""

from __future__ import annotations


class _Failure(Exception):
    """A coded per-request failure (code from ``ERROR_CODES``)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
