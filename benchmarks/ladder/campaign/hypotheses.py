"""The campaign's statistics: the errored share, blocked rates and oversight costs per cell, and H-L1 to H-L3.

Every unit of a (tier, seed) cell is one of the same episodes under each condition, so conditions are compared
on paired episodes:

* H-L1: tier-5 blocked rate under ``ledger`` minus under ``review``, over the tier-5 episodes answered in both
  (a unit whose worker rejects is not blocked); Tango's score interval for paired proportions (never a point).
* H-L2: per tier in the grid and supervised condition, autonomous cost minus the condition's cost per episode
  (positive: the condition is cheaper, it beats autonomous), paired by episode; the interval is a normal one on
  the per-episode differences with two pseudo-episodes added at the largest possible differences, plus and minus
  (fee + damage + wrongful block), so that it never has zero width (a sample of equal differences gives a width of
  about that range over the number of episodes).  ``h_l2.max_lower`` and ``h_l2.max_upper`` are the largest bounds
  over the cells.
* H-L3: the share of tier-5 blocks (review and ledger) whose case was approvable, Wilson's interval on the
  Rao-Scott effective size with the episode as cluster (one episode can be blocked under both conditions).

Errored and timed-out units (a worker or supervisor error) are out of every rate and count in ``errored_share``
only; an episode is compared where it was answered under both conditions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from statistics import NormalDist
from typing import Any, Iterable, Sequence

from benchmarks.core.paired import tango_interval
from benchmarks.core.stats import proportion

from .spec import PREREG, SUPERVISED, CampaignPrereg

__all__ = ["campaign_metrics", "cost_difference_interval", "metric_names"]

def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _episode(record: Any) -> tuple[int, int, int]:
    return (record.seed, record.tier, record.episode_index)


def _answered(records: Iterable[Any], errored: Sequence[str]) -> list[Any]:
    return [r for r in records if r.outcome not in errored]


def cost_difference_interval(differences: Sequence[float], bound: float, confidence: float) -> dict[str, Any]:
    """Mean of per-episode cost differences with a normal interval over them and two pseudo-episodes at ``+bound``
    and ``-bound`` (the interval is never a point); the estimate is the plain mean."""
    n = len(differences)
    if n == 0:
        return {"episodes": 0, "estimate": None, "lower": None, "upper": None}
    mean = sum(differences) / n
    padded = [*differences, bound, -bound]
    m = sum(padded) / len(padded)
    variance = sum((d - m) ** 2 for d in padded) / (len(padded) - 1)
    half = _z(confidence) * math.sqrt(variance / len(padded))
    return {"episodes": n, "estimate": mean, "lower": mean - half, "upper": mean + half,
            "method": "normal-with-two-extreme-pseudo-episodes", "confidence": confidence}


def campaign_metrics(records: Sequence[Any], prereg: CampaignPrereg | None = None) -> dict[str, Any]:
    """Every metric the rules read (flat numbers; None where undefined) and the tables the summary reports
    (under ``"tables"``)."""
    spec = prereg or PREREG.values
    errored = tuple(spec.shares.errored_outcomes)
    confidence = spec.analysis.confidence
    total = len(records)
    errored_units = sum(r.outcome in errored for r in records)
    out: dict[str, Any] = {"units": total, "errored_units": errored_units,
                           "errored_share": errored_units / total if total else None}
    answered = _answered(records, errored)
    by_cell: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for r in answered:
        by_cell[(r.tier, r.condition)].append(r)
    cells = {}
    for tier in spec.grid.tiers:
        for condition in spec.grid.conditions:
            rows = by_cell.get((tier, condition), [])
            n = len(rows)
            blocked = sum(r.blocked for r in rows)
            cells[f"t{tier}.{condition}"] = {
                "units": n, "blocked": blocked, "blocked_rate": blocked / n if n else None,
                "executed": sum(r.executed for r in rows), "damages": sum(r.damage for r in rows),
                "wrongful_blocks": sum(r.wrongful_block for r in rows),
                "refused_approvable": sum(r.refused_approvable for r in rows),
                "consultations": sum(r.consulted for r in rows),
                "mean_cost": sum(r.cost for r in rows) / n if n else None}
            out[f"t{tier}.{condition}.blocked_rate"] = cells[f"t{tier}.{condition}"]["blocked_rate"]
            out[f"t{tier}.{condition}.mean_cost"] = cells[f"t{tier}.{condition}"]["mean_cost"]
    tier = spec.shares.tier_primary
    per_episode: dict[tuple[int, int, int], dict[str, Any]] = defaultdict(dict)
    for r in answered:
        per_episode[_episode(r)][r.condition] = r
    # H-L1: ledger against review on the tier-5 episodes answered under both
    pairs = [(e["ledger"].blocked, e["review"].blocked) for key, e in sorted(per_episode.items())
             if key[1] == tier and "ledger" in e and "review" in e]
    if pairs:
        b = sum(1 for led, rev in pairs if led and not rev)
        c = sum(1 for led, rev in pairs if rev and not led)
        interval = tango_interval(b, c, len(pairs), confidence)
        out.update({"h_l1.estimate": interval.estimate, "h_l1.lower": interval.low, "h_l1.upper": interval.high,
                    "h_l1.pairs": len(pairs), "h_l1.ledger_only": b, "h_l1.review_only": c})
    else:
        out.update({"h_l1.estimate": None, "h_l1.lower": None, "h_l1.upper": None, "h_l1.pairs": 0,
                    "h_l1.ledger_only": 0, "h_l1.review_only": 0})
    # H-L2: autonomous cost minus each supervised condition's, per tier, paired by episode
    costs = spec.costs
    bound = costs.consultation_fee + costs.damage + costs.wrongful_block
    h_l2 = {}
    for t in spec.grid.tiers:
        for condition in SUPERVISED:
            diffs = [e["autonomous"].cost - e[condition].cost for key, e in sorted(per_episode.items())
                     if key[1] == t and "autonomous" in e and condition in e]
            h_l2[f"t{t}.{condition}"] = cost_difference_interval(diffs, bound, confidence)
    lowers = [c["lower"] for c in h_l2.values() if c["lower"] is not None]
    uppers = [c["upper"] for c in h_l2.values() if c["upper"] is not None]
    complete = len(lowers) == len(h_l2)
    out["h_l2.max_lower"] = max(lowers) if complete else None
    out["h_l2.max_upper"] = max(uppers) if complete else None
    # H-L3: wrongful share of tier-5 blocks under supervision, clustered by episode
    clusters: dict[tuple[int, int, int], list[int]] = defaultdict(lambda: [0, 0])
    for r in answered:
        if r.tier == tier and r.condition in SUPERVISED and r.blocked:
            clusters[_episode(r)][0] += r.wrongful_block
            clusters[_episode(r)][1] += 1
    k = sum(c[0] for c in clusters.values())
    n = sum(c[1] for c in clusters.values())
    share = proportion(k, n, confidence=confidence, clusters=[tuple(c) for c in clusters.values()])
    out.update({"h_l3.blocks": n, "h_l3.wrongful": k, "h_l3.value": share["value"], "h_l3.lower": share["low"],
                "h_l3.upper": share["high"]})
    out["tables"] = {"cells": cells, "h_l2": h_l2, "h_l3": share}
    return out


def metric_names(prereg: CampaignPrereg | None = None) -> tuple[str, ...]:
    """The flat metrics :func:`campaign_metrics` returns, whatever the records."""
    return tuple(k for k in campaign_metrics([], prereg) if k != "tables")
