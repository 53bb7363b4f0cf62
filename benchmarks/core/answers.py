"""What a record keeps of a generated answer: the whole answer up to a preregistered length, else its start.

A served model may answer far more than the generation bound asked for (a
server that ignores ``max_tokens``, a proxy that pads).  Keeping such answers
whole makes every record, the ledger and each reader of it grow with them, so
a protocol that stores answers preregisters ``max_answer_chars``: an answer of
at most that many characters is kept whole; a longer one becomes the coded
outcome ``answer_too_long`` (a provider fault, since the limit is set well
above what the generation bound allows), which the protocol's rules count like
any other backend error, and keeps only an excerpt, its first
``EXCERPT_CHARS`` characters (or ``max_answer_chars``, when smaller) for a
reader to see what came.  Either way the record carries the length in
characters and the sha256 of the whole answer, so a reader can tell a kept
answer from a cut one and check that a kept one is the answer that came.

Nothing is read from a cut answer: its decision or artifact is never parsed,
which keeps every recorded outcome re-derivable from the record alone.  And a
cut answer costs the record no more than a short answer does, so a run whose
server answers megabytes per unit holds and writes no more than one whose
answers are short: its memory stays flat in the number of units.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from canonical_hash import sha256_text

__all__ = ["ANSWER_TOO_LONG", "EXCERPT_CHARS", "KeptAnswer", "excerpt_chars", "keep_answer"]

#: The error code of an answer longer than the preregistered limit.
ANSWER_TOO_LONG = "answer_too_long"
#: Characters of a cut answer a record keeps (its start), at most.
EXCERPT_CHARS = 1024


def excerpt_chars(limit: int) -> int:
    """How many characters a record keeps of an answer cut under ``limit``."""
    return min(limit, EXCERPT_CHARS)


@dataclass(frozen=True)
class KeptAnswer:
    """A response as a record keeps it, with the length and hash of the answer that came."""

    response: Any  # the response; over the limit, coded ``answer_too_long`` with its text cut to an excerpt
    chars: int  # length of the whole answer in characters
    sha256: str  # sha256 of the whole answer (canonical_hash.sha256_text)

    @property
    def cut(self) -> bool:
        return self.response.error == ANSWER_TOO_LONG


def keep_answer(response: Any, limit: int) -> KeptAnswer:
    """``response`` as a record keeps it under a limit of ``limit`` characters (a positive int).

    A cut response's finish reason is ``error``, as for every coded failure.
    A response that already carries an error code keeps its text and code (a
    backend error is never recoded); its length and hash are those of its text.
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"max_answer_chars must be a positive integer, got {limit!r}")
    text = response.text or ""
    chars, digest = len(text), sha256_text(text)
    if chars <= limit or response.error is not None:
        return KeptAnswer(response, chars, digest)
    kept = excerpt_chars(limit)
    detail = (f"the answer has {chars} characters, over the preregistered max_answer_chars of {limit}; "
              f"its first {kept} are kept, the whole is known by its length and sha256 {digest}")
    cut = dataclasses.replace(response, text=text[:kept], finish_reason="error", error=ANSWER_TOO_LONG,
                              error_detail=detail)
    return KeptAnswer(cut, chars, digest)
