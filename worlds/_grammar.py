"""The artifact grammar shared by every family (and by F and C alike).

One step per line::

    artifact  := line ("\\n" line)*
    line      := blank | comment | step
    blank     := [ \\t]*
    comment   := [ \\t]* "#" <anything>
    step      := [ \\t]* NAME [ \\t]* "(" [ \\t]* [arg ([ \\t]* "," [ \\t]* arg)*] [ \\t]* ")" [ \\t]*
    arg       := NAME | INT
    NAME      := [A-Za-z_][A-Za-z0-9_]*
    INT       := "0" | [1-9][0-9]*

A trailing ``\\r`` on a line is dropped (CRLF text parses like LF text).  An
artifact with no step at all is malformed, and so is an integer literal of more
than ``MAX_INT_DIGITS`` (640) digits: no parameter range comes near it.  The
parser never raises on a ``str`` and reads it in time linear in its length: it
returns a ``ParseResult`` that either holds the steps or says where the text
first leaves the grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import CheckerUsageError

__all__ = ["ParseResult", "Step", "format_steps", "parse_candidate", "parse_line", "skip_ws"]

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_INT = r"(?:0|[1-9][0-9]*)"
_ARG_RE = re.compile(rf"(?:{_NAME}|{_INT})", re.ASCII)
_NAME_RE = re.compile(_NAME, re.ASCII)
_WS = " \t"

#: Longest artifact the parser reads, in characters; longer text is malformed.
MAX_ARTIFACT_CHARS = 1_000_000
#: Longest integer literal the parser reads, in digits; a longer one is malformed.  640 is the lowest
#: limit Python's int/str conversion can be set to (``sys.set_int_max_str_digits``), so every literal
#: read converts to ``int`` and back to text under any setting.
MAX_INT_DIGITS = 640


@dataclass(frozen=True)
class Step:
    """One parsed step: a primitive name and its literal arguments.

    ``args`` holds entity names as ``str`` and integer literals as ``int``.
    ``line`` is the 1-based line of the candidate text the step came from.
    """

    name: str
    args: tuple[str | int, ...]
    line: int

    def render(self) -> str:
        """The step written back in the grammar (canonical spacing)."""
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True)
class ParseResult:
    """Outcome of parsing candidate text.

    ``ok`` is true when the whole text conforms; then ``steps`` holds every
    step in order.  Otherwise ``line`` and ``column`` (both 1-based) give the
    first position that leaves the grammar and ``message`` says what was
    expected there; ``steps`` then holds the steps parsed before that line.
    """

    ok: bool
    steps: tuple[Step, ...]
    line: int | None = None
    column: int | None = None
    message: str = ""


def _fail(steps: list[Step], line: int, col: int, msg: str) -> ParseResult:
    return ParseResult(False, tuple(steps), line, col, msg)


def skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def parse_line(s: str, lineno: int) -> Step | tuple[int, str]:
    """Parse one non-blank, non-comment line; return a Step or (column, message)."""
    i = skip_ws(s, 0)
    m = _NAME_RE.match(s, i)
    if m is None:
        return i + 1, "expected a primitive name ([A-Za-z_][A-Za-z0-9_]*)"
    name = m.group(0)
    i = skip_ws(s, m.end())
    if i >= len(s) or s[i] != "(":
        return i + 1, f"expected '(' after primitive name {name!r}"
    i = skip_ws(s, i + 1)
    args: list[str | int] = []
    if i < len(s) and s[i] == ")":
        i += 1
    else:
        while True:
            m = _ARG_RE.match(s, i)
            if m is None or (
                m.end() < len(s) and (s[m.end()].isalnum() or s[m.end()] == "_")
            ):
                return (
                    i + 1,
                    "expected an argument: a name or a non-negative integer without leading zeros",
                )
            tok = m.group(0)
            if tok[0].isdigit() and len(tok) > MAX_INT_DIGITS:
                return i + 1, f"integer literal longer than {MAX_INT_DIGITS} digits"
            args.append(int(tok) if tok[0].isdigit() else tok)
            i = skip_ws(s, m.end())
            if i < len(s) and s[i] == ",":
                i = skip_ws(s, i + 1)
                continue
            if i < len(s) and s[i] == ")":
                i += 1
                break
            return i + 1, "expected ',' or ')' after an argument"
    i = skip_ws(s, i)
    if i != len(s):
        return i + 1, "unexpected text after ')'; write one step per line"
    return Step(name, tuple(args), lineno)


def parse_candidate(text: str) -> ParseResult:
    """Parse candidate text in the artifact grammar; never raises on a ``str``; linear time in its length."""
    if not isinstance(text, str):
        raise CheckerUsageError(
            f"candidate text must be str, got {type(text).__name__}; decode bytes before checking"
        )
    if len(text) > MAX_ARTIFACT_CHARS:
        return _fail([], 1, 1, f"artifact longer than {MAX_ARTIFACT_CHARS} characters")
    steps: list[Step] = []
    for idx, raw in enumerate(text.split("\n")):
        lineno = idx + 1
        s = raw.removesuffix("\r")
        stripped = s.strip(_WS)
        if not stripped or stripped.startswith("#"):
            continue
        got = parse_line(s, lineno)
        if isinstance(got, Step):
            steps.append(got)
        else:
            col, msg = got
            return _fail(steps, lineno, col, msg)
    if not steps:
        return _fail(steps, 1, 1, "the artifact contains no step")
    return ParseResult(True, tuple(steps))


def format_steps(steps) -> str:
    """Render steps as canonical artifact text (one step per line, trailing newline)."""
    return "".join(st.render() + "\n" for st in steps)
