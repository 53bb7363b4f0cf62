"""RES Step 0: the metrics the gate reads and the intervals reported beside them."""

from __future__ import annotations

from typing import Any, Sequence

from benchmarks.core.stats import proportion
from fixtures.res import CONDITIONS

from .spec import ResRecord

__all__ = ["condition_intervals", "condition_metrics", "intervals", "metrics"]


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def condition_metrics(records: Sequence[ResRecord]) -> dict[str, float | int | None]:
    n = len(records)
    parsed = [r for r in records if r.parsed is not None]
    return {
        "items": n,
        "logit_accuracy": _ratio(sum(r.logit_choice == r.ideal for r in records), n),
        "generated_accuracy": _ratio(sum(r.parsed == r.ideal for r in records), n),
        "parser_coverage": _ratio(len(parsed), n),
        "parsed_accuracy": _ratio(sum(r.parsed == r.ideal for r in parsed), len(parsed)),
        "agreement": _ratio(sum(r.parsed == r.logit_choice for r in parsed), len(parsed)),
        "generation_errors": sum(r.generation_error is not None for r in records),
    }


def condition_intervals(records: Sequence[ResRecord]) -> dict[str, dict[str, Any]]:
    """A 95% Wilson interval with k and n beside every share :func:`condition_metrics` reports (items are
    independent: plain Wilson).  Reported only; the rules read the point values."""
    parsed = [r for r in records if r.parsed is not None]
    return {
        "logit_accuracy": proportion(sum(r.logit_choice == r.ideal for r in records), len(records)),
        "generated_accuracy": proportion(sum(r.parsed == r.ideal for r in records), len(records)),
        "parser_coverage": proportion(len(parsed), len(records)),
        "parsed_accuracy": proportion(sum(r.parsed == r.ideal for r in parsed), len(parsed)),
        "agreement": proportion(sum(r.parsed == r.logit_choice for r in parsed), len(parsed)),
    }


def intervals(records: Sequence[ResRecord]) -> dict[str, dict[str, Any]]:
    """``<condition>.<share>`` -> its interval, for the summary's ``intervals``."""
    return {f"{condition}.{key}": value for condition in CONDITIONS
            for key, value in condition_intervals([r for r in records if r.condition == condition]).items()}


def metrics(records: Sequence[ResRecord]) -> dict[str, float | int | None]:
    """Flat ``<condition>.<metric>`` values; undefined ratios (no parsed generation) are None."""
    out: dict[str, float | int | None] = {}
    for condition in CONDITIONS:
        for key, value in condition_metrics([r for r in records if r.condition == condition]).items():
            out[f"{condition}.{key}"] = value
    return out
