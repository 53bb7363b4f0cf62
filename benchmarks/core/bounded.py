"""The limits on what the suite reads: one JSON parser and one line reader that every file read goes through.

A run directory may come from anywhere, so every JSON or JSONL file a
command reads (``verify``, ``compare``, ``report``, a resume) is held to
limits before it can cost memory or time:

==================  =========  ===========================================================
limit               default    what it bounds
==================  =========  ===========================================================
``file_bytes``      256 MiB    a JSON file, which is read whole (checked before reading)
``line_bytes``      64 MiB     one line of a JSONL ledger, which is read line by line
``depth``           64         nesting of arrays and objects in one JSON value
``number_chars``    64         the characters of one number as written (digits, sign,
                               point, exponent); a number beyond a float's range is refused
==================  =========  ===========================================================

Nothing the suite writes comes near them: a record holding a 3.9 MiB answer
is a 4 MiB line, and no file of a run nests deeper than about ten.  Input over
a limit is :class:`OverLimitError`, one line naming the file, the line where
there is one, the limit and its value; ``preregbench verify`` reports such a
run directory with its own exit status (3).  A ledger is never read whole:
:class:`Lines` hands out one line at a time, so reading one costs memory in
the size of a line, not of the file (what the reader keeps is its own
affair).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator

from .errors import PreregbenchError

MIB = 1 << 20
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    file_bytes: int = 256 * MIB
    line_bytes: int = 64 * MIB
    depth: int = 64
    number_chars: int = 64


#: The limits every reader of the suite applies.
LIMITS = Limits()


class OverLimitError(PreregbenchError, ValueError):
    """Input over one of the reading limits (:data:`LIMITS`); the message names where and which limit."""


def size_text(count: int) -> str:
    return f"{count / MIB:.1f} MiB" if count >= MIB else f"{count} bytes"


# A run of digits longer than any number may be, or an exponent of three digits or more: only then is the slow,
# exact check of every number needed (the fast path would take 1e400 for infinity, or parse a 5,000-digit integer).
_SUSPECT_NUMBER = r"[0-9]{%d,}|[eE][+-]?[0-9]{3,}"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def _number_hooks(limits: Limits, where: str) -> dict[str, Any]:
    def checked(text: str, convert: Any) -> Any:
        if len(text) > limits.number_chars:
            shown = text[:20] + "..." if len(text) > 20 else text
            raise OverLimitError(f"{where}: the number {shown} ({len(text)} characters) is over the limit of "
                                 f"{limits.number_chars} characters a number may have")
        value = convert(text)
        if isinstance(value, float) and not math.isfinite(value):
            raise OverLimitError(f"{where}: the number {text} is beyond the range of a float")
        return value

    return {"parse_int": lambda text: checked(text, int), "parse_float": lambda text: checked(text, float)}


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings set aside)."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads(text: str, where: str, limits: Limits = LIMITS, *, check_every_number: bool = False) -> Any:
    """The JSON value of ``text``, held to ``limits`` (:class:`OverLimitError`); malformed JSON raises
    ``json.JSONDecodeError`` as ``json.loads`` does.  ``where`` names the input in a message.

    By default a scan of the text decides whether its numbers need the exact check; ``check_every_number``
    skips the scan and checks each number as it is parsed, the same limits at a cost per number rather than
    per character: cheaper for long text holding few numbers (a log's sample line)."""
    openers = text.count("[") + text.count("{")
    if openers > limits.depth and _depth(text) > limits.depth:
        raise OverLimitError(f"{where}: nests arrays and objects deeper than the limit of {limits.depth}")
    pattern = _SUSPECT_NUMBER % (limits.number_chars + 1)
    hooks = _number_hooks(limits, where) if check_every_number or re.search(pattern, text) else {}
    try:
        return json.loads(text, **hooks)
    except RecursionError:  # the depth check above makes this unreachable; kept as a floor
        raise OverLimitError(f"{where}: nests arrays and objects deeper than the limit of {limits.depth}") from None


def check_file_size(fd: int, where: str, limits: Limits = LIMITS) -> int:
    """The size of the open file ``fd``; :class:`OverLimitError` when a JSON file of that size is over the limit."""
    size = os.fstat(fd).st_size
    if size > limits.file_bytes:
        raise OverLimitError(f"{where}: {size_text(size)} is over the limit of {size_text(limits.file_bytes)} "
                             "for a JSON file the suite reads whole")
    return size


class Lines:
    """The whole lines of the open file ``fd`` (without their LF), read a chunk at a time from offset 0.

    Iterating yields ``(number, line)`` from 1; a line longer than ``limits.line_bytes`` is
    :class:`OverLimitError` before more than a chunk past the limit is held.  After the iteration,
    :attr:`end` is the byte length of the whole lines and :attr:`tail` the bytes after the last LF (a line
    torn by a killed writer; empty when the file ends in LF).
    """

    def __init__(self, fd: int, where: str, limits: Limits = LIMITS):
        self.fd, self.where, self.limits = fd, where, limits
        self.end = 0
        self.tail = b""

    def _too_long(self, number: int, length: int, whole: bool) -> OverLimitError:
        return OverLimitError(f"{self.where}: line {number} is {'' if whole else 'at least '}{size_text(length)}, "
                              f"over the limit of {size_text(self.limits.line_bytes)} for one line")

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        buffer, offset, number, limit = bytearray(), 0, 0, self.limits.line_bytes
        while True:
            chunk = os.pread(self.fd, _CHUNK, offset)
            if not chunk:
                break
            offset += len(chunk)
            buffer += chunk
            start = 0
            while True:
                newline = buffer.find(b"\n", start)
                if newline < 0:
                    break
                number += 1
                if newline - start > limit:
                    raise self._too_long(number, newline - start, True)
                yield number, bytes(buffer[start:newline])
                self.end += newline - start + 1
                start = newline + 1
            del buffer[:start]
            if len(buffer) > limit:
                raise self._too_long(number + 1, len(buffer), False)
        self.tail = bytes(buffer)


__all__ = ["LIMITS", "Limits", "Lines", "OverLimitError", "check_file_size", "loads", "size_text"]
