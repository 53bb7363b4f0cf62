"""RES Step 0: the preregistration's form, the compiled preregistration and the record types.

The bottom of the package: it reads ``prereg.toml`` and imports nothing of
the package.  The prompts and parser (:mod:`.prompts`), the metrics
(:mod:`.metrics`), the planned power (:mod:`.design`) and the protocol
(:mod:`.protocol`) build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

from benchmarks.core import ClassificationSpec, ModelSpec, ProtocolHeader, classification, load_prereg

HERE = Path(__file__).resolve().parent

__all__ = ["GATE", "HERE", "PREREG", "MeasurementSpec", "ResPrereg", "ResRecord", "ResUnit"]


@dataclass(frozen=True)
class MeasurementSpec:
    labels: tuple[str, ...]  # response labels, scored by their first token
    max_new_tokens: int  # bound on the greedy generation
    fixture_set: str  # the preregistered fixture variant


@dataclass(frozen=True)
class ResPrereg:
    protocol: ProtocolHeader
    model: ModelSpec
    seeds: dict[str, int]
    measurement: MeasurementSpec
    thresholds: dict[str, float]
    classification: ClassificationSpec


@dataclass(frozen=True)
class ResRecord:
    """One fixture item's measurements: a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    item_id: str  # "<condition>:<index>", index within the condition (0-31)
    condition: str  # five_factor or minimal_owner_indexed
    index: int
    family_id: str
    ideal: str  # the gold response letter
    prompt: str  # the rendered prompt text the model saw
    prompt_sha256: str
    prompt_tokens: int | None
    label_token_ids: tuple[int, ...]  # first token of each label, in label order
    label_logits: tuple[float, ...]  # their logits at the final prompt position
    margin: float  # logit[A] - logit[B]
    logit_choice: str  # A when margin >= 0, else B
    generation: str  # raw greedy text (special tokens skipped)
    generation_token_ids: tuple[int, ...]
    finish_reason: str
    generation_error: str | None  # a coded backend failure, counted as unparsed
    parsed: str | None  # parse_answer(generation), None when unparsed


@dataclass(frozen=True)
class ResUnit:
    """One fixture item to measure."""

    item_id: str  # "<condition>:<index>"
    condition: str
    index: int  # within the condition
    row: Mapping[str, Any]  # the fixture row


#: The preregistration, validated against :class:`ResPrereg`.
PREREG = load_prereg(HERE / "prereg.toml", ResPrereg)
#: The six ordered classifications of the gate, compiled with the prereg's thresholds.
GATE = classification(PREREG, "classification")
