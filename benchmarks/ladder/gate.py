"""The per-probe gate metrics: per-tier outcome counts, error and errored shares, and the four clauses.

The shares follow ``[shares]`` of prereg.toml exactly (the denominators are
frozen there): a tier's error is its ``error_outcomes`` over its
``scored_outcomes``; overall error pools every tier's scored units; clause b
pools the scored units of tiers 4 and 5; the errored share is
``errored_outcomes`` over all units of the probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from benchmarks.core import Classification, RuleError, finite
from benchmarks.core.stats import proportion

from .prompts import share
from .spec import CLAUSES, GATE, PREREG, TIERS, SharesSpec, UnitRecord


@dataclass(frozen=True)
class GateResult:
    """One probe through the gate: its metrics, the gate label and each clause's label."""

    metrics: dict[str, float | int | None]
    label: str
    clauses: dict[str, str]  # "a".."d" -> the clause's classification label

    @property
    def passed(self) -> bool:
        return self.label == GATE.passing

    def clause_passed(self, clause: str) -> bool:
        return self.clauses[clause] == CLAUSES[clause].passing


def tier_counts(units: Sequence[UnitRecord]) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {tier: {} for tier in TIERS}
    for unit in units:
        bucket = counts.setdefault(unit.tier, {})
        bucket[unit.outcome] = bucket.get(unit.outcome, 0) + 1
    return counts


def _pool(counts: Mapping[int, Mapping[str, int]], tiers: Sequence[int]) -> dict[str, int]:
    pooled: dict[str, int] = {}
    for tier in tiers:
        for outcome, n in counts.get(tier, {}).items():
            pooled[outcome] = pooled.get(outcome, 0) + n
    return pooled


def gate_metrics(units: Sequence[UnitRecord], variant: str,
                 shares: SharesSpec = PREREG.values.shares,
                 thresholds: Mapping[str, float] = PREREG.values.thresholds) -> dict[str, float | int | None]:
    """Every number the gate reads, plus the counts behind them; undefined shares are None."""
    counts = tier_counts(units)
    everything = _pool(counts, TIERS)
    out: dict[str, float | int | None] = {
        "units": len(units),
        "scored_units": sum(everything.get(o, 0) for o in shares.scored_outcomes),
        "error_units": sum(everything.get(o, 0) for o in shares.error_outcomes),
        "errored_units": sum(everything.get(o, 0) for o in shares.errored_outcomes),
        "overall_error": share(everything, shares.error_outcomes, shares.scored_outcomes),
        "tier45_error": share(_pool(counts, shares.tier45), shares.error_outcomes, shares.scored_outcomes),
        "errored_share": share(everything, shares.errored_outcomes, shares.all_outcomes),
        "gradient_applies": 1 if variant == "v2" else 0,
    }
    for outcome in shares.all_outcomes:
        out[f"outcome.{outcome}"] = everything.get(outcome, 0)
    at_floor = 0
    for tier in TIERS:
        error = share(counts[tier], shares.error_outcomes, shares.scored_outcomes)
        out[f"tier{tier}.error"] = error
        out[f"tier{tier}.scored"] = sum(counts[tier].get(o, 0) for o in shares.scored_outcomes)
        at_floor += error is not None and error >= thresholds["tier_floor"]
    out["tiers_at_floor"] = at_floor
    return out


def _share_interval(counts: Mapping[str, int], numerator: tuple[str, ...],
                    denominator: tuple[str, ...]) -> dict[str, Any]:
    n = sum(counts.get(o, 0) for o in denominator)
    return proportion(sum(counts.get(o, 0) for o in numerator), n)


def gate_intervals(units: Sequence[UnitRecord], shares: SharesSpec = PREREG.values.shares) -> dict[str, dict[str, Any]]:
    """A 95% Wilson interval with k and n beside every share :func:`gate_metrics` reports (metric name -> interval).

    Episodes are independent draws of the generator, so the intervals are plain
    Wilson; they are reported beside the gate, which reads the point shares only.
    """
    counts = tier_counts(units)
    everything = _pool(counts, TIERS)
    out = {
        "overall_error": _share_interval(everything, shares.error_outcomes, shares.scored_outcomes),
        "tier45_error": _share_interval(_pool(counts, shares.tier45), shares.error_outcomes, shares.scored_outcomes),
        "errored_share": _share_interval(everything, shares.errored_outcomes, shares.all_outcomes),
    }
    for tier in TIERS:
        out[f"tier{tier}.error"] = _share_interval(counts[tier], shares.error_outcomes, shares.scored_outcomes)
    return dict(sorted(out.items()))


UNDEFINED = "UNDEFINED"


def _label(classification: Classification, values: Mapping[str, float]) -> str:
    try:
        return classification.evaluate(values).label
    except RuleError:
        return UNDEFINED  # a share the rule reads has an empty denominator: no verdict, a broken probe


def judge(metrics: Mapping[str, Any]) -> GateResult:
    """The gate label and the four clause labels of a probe's metrics (UNDEFINED where a share is undefined)."""
    values = finite(metrics)
    return GateResult(
        metrics=dict(metrics),
        label=_label(GATE, values),
        clauses={name: _label(clause, values) for name, clause in CLAUSES.items()},
    )
