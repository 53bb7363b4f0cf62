"""The records a built pair is made of: demonstrations, one-step examples, the two sides, the pair."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._errors import WorldsError
from ._model import World
from ._pairs import Replica
from ._render import format_state

__all__ = ["MOTIF_REQUIRED", "WITNESS_ONLY", "Demonstration", "Pair", "PairSide", "PrimitiveExample"]

#: Novelty label of a pair whose every bounded target solution holds the withheld motif.
MOTIF_REQUIRED = "motif-required"
#: Novelty label of a pair where some bounded target solution avoids the motif.
WITNESS_ONLY = "witness-only demonstration-relative novelty"


@dataclass(frozen=True)
class Demonstration:
    """A worked solution of a source instance, in the side's labels.

    source_id: id of the source world.  source: the source world (a replica of a
    variant of the base).  source_raw: its mapping.  steps: rendered steps.
    text: the steps as artifact text.  base_steps: the same in the base's labels.
    motif_present: whether the demonstration realizes the pair's motif.
    signature: its canonical motif signature.
    """

    source_id: str
    source: World
    source_raw: dict
    steps: tuple[str, ...]
    text: str
    base_steps: tuple[str, ...]
    motif_present: bool
    signature: tuple


@dataclass(frozen=True)
class PrimitiveExample:
    """A one-step exposure of a primitive, in the side's labels.

    subject: what is exposed (a recipe, or a task for the schedule primitive),
    in the base's labels (equal on both sides).  state: the described state the
    step is applied in.  step: the rendered step.  status: ``VALID`` or
    ``INVALID``.  reason: the failure reason value for INVALID.  result: the
    described next state for VALID.  cost: the step's cost for VALID.
    message: the semantics' explanation for INVALID.
    """

    subject: str
    state: Any
    step: str
    status: str
    reason: str | None
    result: Any
    cost: int | None
    message: str

    def text(self, family: str) -> str:
        head = f"In the {format_state(family, self.state)}: {self.step}"
        if self.status == "VALID":
            return f"{head} -> valid, cost {self.cost}; {format_state(family, self.result)}."
        return f"{head} -> invalid ({self.reason}): {self.message}."


@dataclass(frozen=True)
class PairSide:
    """One condition of a pair: its target, its evidence and its prompt.

    condition: ``"F"`` or ``"C"``.  target: the target world (grade with
    ``worlds.check(side.target, text)``).  target_raw: its mapping.
    demonstrations: the worked solution(s) shown.  primitive_examples: the
    one-step examples (abstractly the same on both sides).  optimum_length:
    shortest valid target solution.  prompt_text: the complete prompt body.
    replica: the replica (label maps from the base).
    """

    condition: str
    target: World
    target_raw: dict
    demonstrations: tuple[Demonstration, ...]
    primitive_examples: tuple[PrimitiveExample, ...]
    optimum_length: int
    prompt_text: str
    replica: Replica = field(repr=False, compare=False)


@dataclass(frozen=True)
class Pair:
    """An F/C pair: two matched targets, their evidence, its novelty label and manifest."""

    pair_id: str
    family: str
    f: PairSide
    c: PairSide
    novelty: str
    flags: tuple[str, ...]
    manifest: dict = field(compare=False)
    motif: tuple = ()
    #: the pair spec it was built from (``dataclasses.replace`` it and ``worlds.build_pair`` it again to rebuild
    #: the pair with other replica seeds or another label scheme, every audit run again).
    spec: Any = field(default=None, repr=False, compare=False)

    def side(self, condition: str) -> PairSide:
        if condition not in ("F", "C"):
            raise WorldsError(f"condition must be 'F' or 'C', got {condition!r}")
        return self.f if condition == "F" else self.c
