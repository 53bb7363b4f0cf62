"""The preregistration's form and the record types of the imported-samples protocol.

An imported sample is one sample and epoch of an existing evaluation (an
inspect_ai log or lm-evaluation-harness output), read into primitive fields
by :mod:`benchmarks.imported.importers`.  The protocol decides a frozen rule
order over those samples: nothing is measured, the scores are the log's own.
This module imports nothing of its own package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from benchmarks.core import ClassificationSpec, ProtocolHeader

HERE = Path(__file__).resolve().parent

#: The model name a run of this protocol uses: no model runs, the samples are read from the import.
IMPORTED_MODEL = "imported-log"
#: Formats the importers read.
FORMATS = ("inspect", "lm-eval")
#: Files of an import directory (``preregbench import ... --out DIR``).
HEADER_FILE = "import.json"
SAMPLES_FILE = "samples.jsonl"
HEADER_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ImportedModelSpec:
    """``[model]``: the stand-in that hands the imported samples to the run; no model is loaded."""

    id: str  # always "imported-log"
    device: str  # "cpu": nothing is computed on a device


@dataclass(frozen=True)
class SourceSpec:
    """``[source]``: which evaluation the rules decide, and how its scores are read."""

    format: Literal["inspect", "lm-eval"]  # the tool that wrote the log
    task: str  # the task name the log records; an import of another task is refused
    scorer: str  # the score each rule reads: an inspect_ai scorer name, an lm-eval per-sample metric
    metric: Literal["accuracy", "mean"]  # accuracy: scores that are 0 or 1 (Wilson); mean: any number (Wald)
    planned_samples: int  # the planned number of distinct sample ids
    epochs: int  # the planned epochs per sample (lm-eval: 1)
    cluster: str  # "sample" (epochs of one sample share a cluster) or "metadata.<field>"
    subset_field: str  # a metadata field whose values name subsets ("" for none)
    subsets: tuple[str, ...]  # the subsets with rules of their own (metrics subset.<name>.<metric>)
    confidence: float  # of every interval


@dataclass(frozen=True)
class ImportedPrereg:
    protocol: ProtocolHeader
    model: ImportedModelSpec
    source: SourceSpec
    thresholds: dict[str, float]
    classification: ClassificationSpec


@dataclass(frozen=True)
class ImportedSample:
    """One sample and epoch of an imported log: a line of an import directory's ``samples.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    unit: str  # "<sample_id>#<epoch>": unique within an import
    sample_id: str  # the log's sample id, as text
    epoch: int  # from 1
    task: str  # the task the log names for this sample
    input_sha256: str  # sha256 of the canonical JSON of ``input``
    input: Any  # the input as the log holds it: text, or a list of chat messages as plain data
    target: Any  # the target(s) as the log holds them
    answer: str | None  # the model's answer (inspect: the completion; lm-eval: the filtered response)
    scores: dict[str, Any]  # every score: scorer or metric name -> its value (number, bool or text)
    error: str | None  # why the sample errored (then it has no scores); None when it did not
    metadata: dict[str, Any]  # the sample's metadata, primitive values only
    started_at: str | None  # when the sample started (ISO 8601), where the log records it


@dataclass(frozen=True)
class DecidedSample(ImportedSample):
    """A line of a run's ``records.jsonl``: the imported sample and what the rules read of it."""

    SCHEMA_VERSION: ClassVar[int] = 1

    value: float | None = None  # the preregistered scorer's value as a number; None for an errored or unscored unit
    outcome: Literal["scored", "errored", "unscored"] = "scored"  # errored: the log says so; unscored: no such score
    cluster: str = ""  # the cluster the unit's interval counts it in
    subset: str | None = None  # the value of the subset field
    # With a baseline import (--<protocol>-baseline): the same unit of the baseline run, as imported, and its reading.
    baseline_scores: dict[str, Any] | None = None  # the baseline unit's scores; None without a baseline
    baseline_error: str | None = None  # the baseline unit's error
    baseline_value: float | None = None  # the preregistered scorer's value there as a number
    baseline_outcome: Literal["scored", "errored", "unscored"] | None = None  # None without a baseline


def score_number(value: Any) -> float | None:
    """A score as a number: inspect_ai's letters (C correct 1, I incorrect 0, P partial 0.5, N no answer 0),
    booleans, numbers and numeric text; None for anything else (the unit is then unscored)."""
    letters = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        number = float(value)
        return number if number == number and abs(number) != float("inf") else None
    if isinstance(value, str):
        if value in letters:
            return letters[value]
        try:
            number = float(value)
        except ValueError:
            return None
        return number if number == number and abs(number) != float("inf") else None
    return None


__all__ = [
    "DecidedSample",
    "FORMATS",
    "HEADER_FILE",
    "HEADER_SCHEMA_VERSION",
    "IMPORTED_MODEL",
    "ImportedModelSpec",
    "ImportedPrereg",
    "ImportedSample",
    "SAMPLES_FILE",
    "SourceSpec",
    "score_number",
]
