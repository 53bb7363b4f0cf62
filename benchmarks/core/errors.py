"""The root of the errors ``benchmarks.core`` raises on purpose.

Every such error is a :class:`PreregbenchError` whose ``str()`` is one line
saying what is wrong and what to do instead, so that a command or the pytest
plugin can print it without a traceback.  Each also keeps the built-in base
it has always had (``ValueError``, ``OSError``, ``LookupError``), so code that
catches those goes on working.
"""

from __future__ import annotations


class PreregbenchError(Exception):
    """An error of the suite with a one-line message (catch this to catch them all)."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An error's message as one line of at most ``limit`` characters (runs of white space folded to one)."""
    return " ".join(str(exc).split())[:limit]


__all__ = ["PreregbenchError", "one_line"]
