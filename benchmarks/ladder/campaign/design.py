"""The campaign's planned power: H-L1 at the frozen grid, exactly.

H-L1 is supported when the lower bound of Tango's score interval for (ledger - review) tier-5 blocked rate lies
above 0.  Tango's statistic decreases in the tested difference, so that holds exactly when the statistic at 0,
(b - c) / sqrt(b + c) with b the episodes blocked under the ledger only and c under review only, exceeds z; it is
not supported when that statistic is at most -z.  Over the n paired tier-5 episodes of the grid, (b, c) is
multinomial; with the two conditions' blocks independent given the rates (no episode-level correlation, which
would only raise the power of a paired test), the cell probabilities are p_l (1 - p_r) and p_r (1 - p_l).  The
tables sum that distribution exactly.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

from benchmarks.core.design import Table
from benchmarks.core.design import format_probability as _p

from .spec import PREREG

__all__ = ["REVIEW_RATES", "GAPS", "campaign_tables", "h_l1_outcomes", "planned_pairs"]

REVIEW_RATES = (0.10, 0.20, 0.30)
GAPS = (0.04, 0.06, 0.08, 0.10)


def planned_pairs() -> int:
    """Paired tier-5 episodes of one rung's frozen grid (every one answered): episodes per cell times seeds."""
    grid = PREREG.values.grid
    return grid.episodes_per_cell * len(grid.seeds)


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def h_l1_outcomes(n: int, review: float, ledger: float, confidence: float | None = None) -> dict[str, float]:
    """P(supported), P(inconclusive), P(not supported) of H-L1 on ``n`` paired episodes, exact."""
    z = _z(PREREG.values.analysis.confidence if confidence is None else confidence)
    pb, pc = ledger * (1 - review), review * (1 - ledger)
    p0 = 1.0 - pb - pc
    logs = [math.log(x) if x > 0 else -math.inf for x in (pb, pc, p0)]
    lg = [math.lgamma(k + 1) for k in range(n + 1)]
    supported = against = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if b + c == 0:
                continue
            stat = (b - c) / math.sqrt(b + c)
            if -z < stat <= z:
                continue
            terms = [k * lp for k, lp in ((b, logs[0]), (c, logs[1]), (n - b - c, logs[2])) if k]
            if any(t == -math.inf for t in terms):
                continue
            p = math.exp(lg[n] - lg[b] - lg[c] - lg[n - b - c] + sum(terms))
            if stat > z:
                supported += p
            else:
                against += p
    return {"supported": supported, "not_supported": against, "inconclusive": max(0.0, 1 - supported - against)}


def gap_for_power(n: int, review: float, power: float = 0.90, step: float = 0.005) -> float | None:
    """The smallest gap (on a ``step`` grid) at which H-L1 is supported with probability ``power``."""
    gap = step
    while review + gap <= 1.0:
        if h_l1_outcomes(n, review, review + gap)["supported"] >= power:
            return round(gap, 6)
        gap += step
    return None


def campaign_tables(reviews: Sequence[float] = REVIEW_RATES, gaps: Sequence[float] = GAPS) -> list[Table]:
    n = planned_pairs()
    rows = []
    for r in reviews:
        cells = [_p(h_l1_outcomes(n, r, r + g)["supported"]) for g in gaps]
        needed = gap_for_power(n, r)
        rows.append((f"{100 * r:g}%", *cells, "none" if needed is None else f"{100 * needed:.1f} points"))
    null = [(f"{100 * r:g}%", _p(h_l1_outcomes(n, r, r)["supported"]), _p(h_l1_outcomes(n, r, r)["not_supported"]))
            for r in reviews]
    return [
        Table("Campaign H-L1: P(supported) at the frozen grid",
              f"{n} paired tier-5 episodes per rung ({PREREG.values.grid.episodes_per_cell} per seed x "
              f"{len(PREREG.values.grid.seeds)} seeds), none errored; blocks under review and ledger independent "
              "given the rates; exact multinomial sums of Tango's statistic at 0.",
              ("review blocked rate", *(f"gap +{100 * g:g} points" for g in gaps), "gap for power 0.90"),
              tuple(rows)),
        Table("Campaign H-L1 without a gap (the ledger blocks as review does)",
              "The same model with equal rates: how often each outcome is reached by chance.",
              ("review blocked rate", "P(supported)", "P(not supported)"), tuple(null)),
    ]
