"""Feasibility arithmetic and the analysis a probe (or a round of probes) reports.

The arithmetic follows the seed's section 4.5: if episode accuracy is a^k for
per-check accuracy a and composition depth k, the band 10-35% error holds
exactly when 0.65 <= a^k <= 0.90, so

* the per-check accuracy a rung needs at depth k lies in [0.65^(1/k), 0.90^(1/k)];
* the depth a rung of per-check accuracy a needs lies in [ln 0.90 / ln a, ln 0.65 / ln a];
* k cancels from ln(acc_1) / ln(acc_2), and two rungs fit one band only if that
  ratio is at most ln 0.65 / ln 0.90 = 4.09.

Zero-error rungs enter through the rule-of-three bound on their error, which
makes their accuracy (and every depth derived from it) a bound, not an estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from benchmarks.core import stats

from .spec import PREREG, UnitRecord

LOW_ACC, HIGH_ACC = PREREG.values.analysis.band_episode_accuracy


@dataclass(frozen=True)
class Estimate:
    """An accuracy estimate; ``bound`` is True when it is the rule-of-three lower bound of a zero-error rung."""

    value: float
    bound: bool


def accuracy_estimate(correct: int, n: int) -> Estimate:
    """Observed accuracy, or 1 - 3/n (a lower bound) when no unit was wrong."""
    if n <= 0:
        raise ValueError("an accuracy estimate needs at least one unit")
    if correct == n:
        return Estimate(1.0 - stats.rule_of_three(n), True)
    return Estimate(correct / n, False)


def per_check_accuracy(episode_accuracy: float, depth: float) -> float:
    """a = acc^(1/k)."""
    if not (0.0 < episode_accuracy <= 1.0) or depth <= 0:
        raise ValueError(f"need 0 < accuracy <= 1 and depth > 0, got {episode_accuracy}, {depth}")
    return episode_accuracy ** (1.0 / depth)


def feasibility_window(depth: float, low: float = LOW_ACC, high: float = HIGH_ACC) -> tuple[float, float]:
    """Per-check accuracies that put episode error inside the band at depth k: [low^(1/k), high^(1/k)]."""
    return low ** (1.0 / depth), high ** (1.0 / depth)


def required_depth_window(a: float, low: float = LOW_ACC, high: float = HIGH_ACC) -> tuple[float, float]:
    """Depths k that put a rung of per-check accuracy a inside the band: [ln high / ln a, ln low / ln a]."""
    if not 0.0 < a < 1.0:
        raise ValueError(f"a depth window needs 0 < a < 1, got {a} (a perfect rung has none)")
    return math.log(high) / math.log(a), math.log(low) / math.log(a)


def intersect(windows: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """The common part of closed intervals, or None when it is empty."""
    low = max(w[0] for w in windows)
    high = min(w[1] for w in windows)
    return (low, high) if low <= high else None


def ratio_limit(low: float = LOW_ACC, high: float = HIGH_ACC) -> float:
    """ln 0.65 / ln 0.90: the largest log-inaccuracy ratio two rungs in one band can have."""
    return math.log(low) / math.log(high)


def log_inaccuracy_ratio(weaker_accuracy: float, stronger_accuracy: float) -> float:
    """ln(acc_weaker) / ln(acc_stronger), the depth-free feasibility quantity."""
    return math.log(weaker_accuracy) / math.log(stronger_accuracy)


def cell_dip_probability(approvable: int, n: int, p: float) -> float:
    """P(X <= approvable) for X ~ Binomial(n, p): how surprising a low approvable count in one probe cell is."""
    return stats.binomial_cdf(approvable, n, p)


def any_of(p_single: float, cells: int) -> float:
    """Chance that at least one of ``cells`` independent cells shows an event of probability p_single."""
    return 1.0 - (1.0 - p_single) ** cells


# --------------------------------------------------------------------------- one probe


def probe_analysis(units: Sequence[UnitRecord], design_share: Mapping[int, float]) -> dict[str, Any]:
    """The failure signature, approve rates, per-check accuracy and dip checks of one probe.

    Only scored units (a parsed decision or an unparsed answer) enter; errored
    and timed-out units are counted separately.  ``design_share`` is each
    tier's approvable share at design level (the generator over many episodes).
    """
    scored = [u for u in units if u.outcome in ("correct", "wrong", "unparsed")]
    errors = [u for u in scored if u.outcome != "correct"]
    approvable = [u for u in scored if u.ground_truth == "approve"]
    rejectable = [u for u in scored if u.ground_truth == "reject"]
    refusals = [u for u in errors if u.ground_truth == "approve"]

    def rate(part: Sequence[UnitRecord], whole: Sequence[UnitRecord]) -> float | None:
        return len(part) / len(whole) if whole else None

    def interval(part: Sequence[UnitRecord], whole: Sequence[UnitRecord]) -> dict[str, Any]:
        return stats.proportion(len(part), len(whole))  # episodes are independent: plain Wilson

    wrong_approvable = [u for u in approvable if u.outcome != "correct"]
    wrong_rejectable = [u for u in rejectable if u.outcome != "correct"]
    out: dict[str, Any] = {
        "scored_units": len(scored),
        "errors": len(errors),
        "refusal_share_of_errors": rate(refusals, errors),
        "refusal_share_of_errors_interval": interval(refusals, errors),
        "error_on_approvable": rate(wrong_approvable, approvable),
        "error_on_approvable_interval": interval(wrong_approvable, approvable),
        "error_on_rejectable": rate(wrong_rejectable, rejectable),
        "error_on_rejectable_interval": interval(wrong_rejectable, rejectable),
        "approvable_units": len(approvable),
        "mean_depth_approvable": (sum(u.depth for u in approvable) / len(approvable)) if approvable else None,
    }
    correct_approvable = sum(u.outcome == "correct" for u in approvable)
    if approvable:
        estimate = accuracy_estimate(correct_approvable, len(approvable))
        out["approvable_accuracy"] = estimate.value
        out["approvable_accuracy_is_bound"] = estimate.bound
        # the interval of the observed share k / n (when the point value is the rule-of-three bound 1 - 3/n,
        # the interval still belongs to the observed n of n)
        out["approvable_accuracy_interval"] = stats.proportion(correct_approvable, len(approvable))
        a = per_check_accuracy(estimate.value, out["mean_depth_approvable"]) if estimate.value > 0 else None
        out["per_check_accuracy"] = a  # None when no approvable unit was right: a^k = 0 has no k-th root
        out["required_depth_window"] = list(required_depth_window(a)) if a is not None else None
    tiers: dict[str, Any] = {}
    for tier in sorted({u.tier for u in units}):
        cell = [u for u in scored if u.tier == tier]
        decided = [u for u in cell if u.decision is not None]
        generated = sum(u.ground_truth == "approve" for u in cell)
        p = design_share.get(tier)
        approved = [u for u in decided if u.decision == "approve"]
        generated_approvable = [u for u in cell if u.ground_truth == "approve"]
        tiers[str(tier)] = {
            "units": len(cell),
            "approve_rate": rate(approved, cell),
            "approve_rate_interval": interval(approved, cell),
            "generated_approvable_share": rate(generated_approvable, cell),
            "generated_approvable_share_interval": interval(generated_approvable, cell),
            "design_approvable_share": p,
            "dip_probability": cell_dip_probability(generated, len(cell), p) if (cell and p is not None) else None,
        }
    out["tiers"] = tiers
    return out


# --------------------------------------------------------------------------- a round of probes


def round_feasibility(approvable: Mapping[str, tuple[int, int]], depth: float) -> dict[str, Any]:
    """Per-rung accuracies, depth windows, their intersections, and log-inaccuracy ratios in one round.

    ``approvable`` maps a rung to (correct, total) on approvable episodes; ``depth``
    is the round's mean declared depth over approvable episodes.
    """
    rungs: dict[str, Any] = {}
    for rung, (correct, total) in sorted(approvable.items()):
        estimate = accuracy_estimate(correct, total)
        a = per_check_accuracy(estimate.value, depth) if estimate.value > 0 else None
        rungs[rung] = {
            "approvable_accuracy": estimate.value,
            "bound": estimate.bound,
            "per_check_accuracy": a,  # None when no approvable unit was right
            "required_depth_window": list(required_depth_window(a)) if a is not None else None,
        }
    windows = [tuple(r["required_depth_window"]) for r in rungs.values() if r["required_depth_window"]]
    common = intersect(windows) if windows else None
    strongest = max(rungs, key=lambda r: rungs[r]["approvable_accuracy"]) if rungs else None
    ratios = {
        rung: log_inaccuracy_ratio(r["approvable_accuracy"], rungs[strongest]["approvable_accuracy"])
        for rung, r in rungs.items() if rung != strongest and r["approvable_accuracy"] > 0
    } if strongest else {}
    return {
        "depth": depth,
        "feasibility_window_at_depth": list(feasibility_window(depth)),
        "rungs": rungs,
        "intersection": list(common) if common else None,
        "strongest": strongest,
        "ratio_limit": ratio_limit(),
        "log_inaccuracy_ratios": ratios,
        "max_ratio": max(ratios.values()) if ratios else None,
    }
