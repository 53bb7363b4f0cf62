"""Capability ladder: planned power, the gate clauses' outcome probabilities at the preregistered probe size.

``python -m benchmarks.core.design ladder`` prints :func:`ladder_tables`:
clause (a), overall error inside the band, on the pooled scored units of a
probe, at a true per-unit error; clauses (b) and (c) at the same uniform true
error; exact binomial sums.  The band, the floors and the sizes come from the
compiled preregistration, never repeated here.
"""

from __future__ import annotations

import math
from typing import Sequence

from benchmarks.core.design import Table, binomial_pmf, outcome_distribution
from benchmarks.core.design import format_probability as _p

from .spec import CLAUSES, PREREG, TIERS

__all__ = ["LADDER_ERRORS", "ladder_tables"]

LADDER_ERRORS = (0.08, 0.10, 0.12, 0.35, 0.37)


def ladder_tables(errors: Sequence[float] = LADDER_ERRORS) -> list[Table]:
    per_tier = PREREG.values.probe.units_per_tier
    tiers45 = PREREG.values.shares.tier45
    n = per_tier * len(TIERS)
    low, high = CLAUSES["a"].thresholds["band_low"], CLAUSES["a"].thresholds["band_high"]
    floor = CLAUSES["c"].thresholds["tier_floor"]
    a_rows, bc_rows = [], []
    for e in errors:
        pmf = binomial_pmf(n, e)
        below = math.fsum(p for k, p in enumerate(pmf) if k / n < low)
        above = math.fsum(p for k, p in enumerate(pmf) if k / n > high)
        dist = outcome_distribution(CLAUSES["a"], {"overall_error": [(k / n, p) for k, p in enumerate(pmf)]})
        a_rows.append((f"{100 * e:g}%", _p(dist[CLAUSES["a"].passing]), _p(below), _p(above)))
        m45 = per_tier * len(tiers45)
        b = outcome_distribution(CLAUSES["b"],
                                 {"tier45_error": [(k / m45, p) for k, p in enumerate(binomial_pmf(m45, e))]})
        tier_clears = math.fsum(p for k, p in enumerate(binomial_pmf(per_tier, e)) if k / per_tier >= floor)
        at_floor = [(float(j), p) for j, p in enumerate(binomial_pmf(len(TIERS), tier_clears))]
        c = outcome_distribution(CLAUSES["c"], {"tiers_at_floor": at_floor}, {"gradient_applies": 1.0})
        bc_rows.append((f"{100 * e:g}%", _p(b[CLAUSES["b"].passing]), _p(tier_clears), _p(c[CLAUSES["c"].passing])))
    return [
        Table(f"Ladder clause (a): overall error inside {100 * low:g}-{100 * high:g}%",
              f"{per_tier} episodes per tier x {len(TIERS)} tiers = {n} scored units (none errored), each an error "
              "independently with the true error rate; overall error = errors / scored. Exact binomial sums.",
              ("true error", "P(A in band)", "P(below band)", "P(above band)"), tuple(a_rows)),
        Table("Ladder clauses (b) and (c) at the same uniform true error",
              f"Clause (b) pools tiers {', '.join(map(str, tiers45))} ({per_tier * len(tiers45)} units); clause (c) "
              f"counts tiers whose {per_tier}-unit error reaches {100 * floor:g}%, the tiers independent "
              "(a v2 probe, so the gradient clause applies).",
              ("true error", "P(B at floor)", f"P(one tier >= {100 * floor:g}%)", "P(C gradient held)"),
              tuple(bc_rows)),
    ]
