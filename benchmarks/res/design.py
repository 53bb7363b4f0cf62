"""RES Step 0: planned power, the gate's outcome probabilities at the preregistered 2 x 32 items.

``python -m benchmarks.core.design res`` prints :func:`res_tables`: every
gate outcome when the four accuracies (logit and generated, both
conditions) share one true accuracy, each item answered right independently
and every generation parsed; exact binomial sums.  The thresholds, the sizes
and the rules come from the compiled preregistration, never repeated here.
"""

from __future__ import annotations

import math
from typing import Sequence

from benchmarks.core.design import Table, binomial_pmf, outcome_distribution
from benchmarks.core.design import format_probability as _p
from benchmarks.core.reachability import outcome_labels
from fixtures.res import CONDITIONS, build_res_fixtures

from .spec import GATE, PREREG

__all__ = ["RES_ACCURACIES", "res_tables"]

RES_ACCURACIES = (0.70, 0.75, 0.80, 0.85)


def res_tables(accuracies: Sequence[float] = RES_ACCURACIES) -> list[Table]:
    sets = build_res_fixtures(PREREG.values.measurement.fixture_set)
    sizes = {c: len(sets[c]) for c in CONDITIONS}
    threshold = GATE.thresholds["accuracy"]
    metrics = [f"{c}.{m}" for c in CONDITIONS for m in ("logit_accuracy", "generated_accuracy")]
    coverage = {f"{c}.parser_coverage": 1.0 for c in CONDITIONS}
    single, gate = [], []
    for p in accuracies:
        pmfs = {c: binomial_pmf(sizes[c], p) for c in CONDITIONS}
        clears = {c: math.fsum(pr for k, pr in enumerate(pmfs[c]) if k / sizes[c] >= threshold) for c in CONDITIONS}
        need = {c: math.ceil(threshold * sizes[c] - 1e-9) for c in CONDITIONS}
        single.append((f"{p:.2f}", *(f"{_p(clears[c])} (>= {need[c]}/{sizes[c]})" for c in CONDITIONS)))
        marginals = {}
        for m in metrics:
            condition = m.split(".")[0]
            marginals[m] = [(k / sizes[condition], pr) for k, pr in enumerate(pmfs[condition])]
        dist = outcome_distribution(GATE, marginals, coverage)
        gate.append((f"{p:.2f}", *(_p(dist[label]) for label in outcome_labels(GATE))))
    return [
        Table(f"RES: one accuracy at or above {threshold:g}",
              f"P[X/n >= {threshold:g}] for X ~ Binomial(n, true accuracy), "
              f"n = {', '.join(f'{n} ({c})' for c, n in sizes.items())}.",
              ("true accuracy", *(f"P(clears), {c}" for c in CONDITIONS)), tuple(single)),
        Table("RES: gate outcome when all four accuracies share the true accuracy",
              "The logit and generated accuracies of both conditions are independent Binomial(n, p) / n with the "
              "same p; "
              "every generation parsed (coverage 1), so GENERATION_RESPONSE_UNPARSEABLE cannot occur. Exact sums.",
              ("true accuracy", *outcome_labels(GATE)), tuple(gate)),
    ]
