"""The program grammar of family ``dataflow``: bindings ``x3 = add(x1, x2)``, one per line.

The binding grammar is the generic step grammar (``worlds._grammar``) with a
binder in front::

    binding := [ \\t]* NAME [ \\t]* "=" step

Blank lines, ``#`` comments, CR-LF line ends and the length and digit limits
are the generic grammar's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collections.abc import Sequence

from ..._errors import CheckerUsageError, PairConstructionError
from ..._grammar import MAX_ARTIFACT_CHARS, ParseResult, parse_line, skip_ws

__all__ = ["CANONICAL_WIRE", "Binding", "bindings", "canonical_wire", "parse_program"]

#: Names of the form ``w<digits>`` are the enumerator's canonical names for
#: intermediate wires; inputs and the goal wire may not take one.
CANONICAL_WIRE = re.compile(r"^w[0-9]+$", re.ASCII)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def canonical_wire(i: int) -> str:
    """The enumerator's name of the wire bound by step ``i`` (0-based): ``w1``, ``w2``, ..."""
    return f"w{i + 1}"


@dataclass(frozen=True)
class Binding:
    """One parsed binding ``target = name(args)``.

    ``args`` holds wire names as ``str`` and integer literals as ``int`` (an
    integer is never a wire, so it fails the type check, not the grammar).
    ``line`` is the 1-based line of the text it came from.
    """

    target: str
    name: str
    args: tuple[str | int, ...]
    line: int = 0

    def render(self) -> str:
        """The binding written back in the grammar (canonical spacing)."""
        return f"{self.target} = {self.name}({', '.join(str(a) for a in self.args)})"


def parse_program(text: str) -> ParseResult:
    """Parse a dataflow program; never raises on a ``str``, linear time in its length.

    The binding grammar is the generic step grammar with a binder in front::

        binding := [ \\t]* NAME [ \\t]* "=" step

    ``ParseResult.steps`` then holds ``Binding`` values.  Blank lines,
    ``#`` comments, CR-LF line ends and the length and digit limits are the
    generic grammar's.
    """
    if not isinstance(text, str):
        raise CheckerUsageError(
            f"candidate text must be str, got {type(text).__name__}; decode bytes before checking"
        )
    if len(text) > MAX_ARTIFACT_CHARS:
        return ParseResult(False, (), 1, 1, f"artifact longer than {MAX_ARTIFACT_CHARS} characters")
    out: list[Binding] = []
    for idx, raw in enumerate(text.split("\n")):
        lineno = idx + 1
        s = raw.removesuffix("\r")
        body = s.strip(" \t")
        if not body or body.startswith("#"):
            continue
        i = skip_ws(s, 0)
        m = _NAME.match(s, i)
        if m is None:
            return ParseResult(False, tuple(out), lineno, i + 1,
                               "expected a wire name ([A-Za-z_][A-Za-z0-9_]*) to bind: NAME = primitive(args)")
        j = skip_ws(s, m.end())
        if j >= len(s) or s[j] != "=":
            return ParseResult(False, tuple(out), lineno, j + 1,
                               f"expected '=' after wire name {m.group(0)!r}; write NAME = primitive(args)")
        # the rest is one generic step; blanking the binder keeps every column
        got = parse_line(" " * (j + 1) + s[j + 1:], lineno)
        if isinstance(got, tuple):
            col, msg = got
            return ParseResult(False, tuple(out), lineno, col, msg)
        out.append(Binding(m.group(0), got.name, got.args, lineno))
    if not out:
        return ParseResult(False, (), 1, 1, "the artifact contains no binding")
    return ParseResult(True, tuple(out))


def bindings(program: Sequence[str | Binding]) -> list[Binding]:
    """The parsed bindings of a program given as bindings or as one rendered binding per item."""
    out: list[Binding] = []
    for s in program:
        if isinstance(s, Binding):
            out.append(s)
            continue
        got = parse_program(s)
        if not got.ok or len(got.steps) != 1:
            raise PairConstructionError(f"not a single binding in the program grammar: {s!r}")
        out.append(got.steps[0])
    return out
