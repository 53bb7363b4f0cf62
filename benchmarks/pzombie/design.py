"""P-Zombie: planned power, the eta-squared and token-control outcomes at the preregistered 80 prompts.

``python -m benchmarks.core.design pzombie [--simulations N] [--seed S]``
prints :func:`pzombie_tables`: the outcomes by seeded simulation (the count
and seed are printed) of a normal one-way layout with the preregistered
prompts per category, at a stated population eta squared or R^2.  The
thresholds, the sizes and the rules come from the compiled preregistration,
never repeated here.
"""

from __future__ import annotations

import math
import random
from typing import Any, Sequence

from benchmarks.core.design import Table
from benchmarks.core.design import format_probability as _p
from benchmarks.core.reachability import outcome_labels
from benchmarks.core.stats import one_way_anova, pearson

from .spec import CATEGORIES, CLASSIFICATIONS, PREREG

__all__ = ["OFFSETS", "PZOMBIE_ETAS", "PZOMBIE_R2", "PZOMBIE_SEED", "PZOMBIE_SIMULATIONS", "design_tables",
           "pzombie_tables"]

PZOMBIE_ETAS = (0.0, 0.05, 0.10, 0.20, 0.29)
PZOMBIE_R2 = (0.0, 0.2, 0.3, 0.5, 0.7, 0.8)
PZOMBIE_SIMULATIONS = 2000
PZOMBIE_SEED = 20261201
OFFSETS = (-1.5, -0.5, 0.5, 1.5)  # category mean offsets (in units of d), in category order


def _normal_layout(rng: random.Random, categories: Sequence[str], per: int, eta: float) -> dict[str, list[float]]:
    """H per category: mean d * offset, unit normal noise, with d giving population eta squared ``eta``."""
    spread = math.fsum(o * o for o in OFFSETS) / len(OFFSETS)
    d = math.sqrt(eta / (1.0 - eta) / spread) if eta > 0 else 0.0
    return {c: [d * o + rng.gauss(0.0, 1.0) for _ in range(per)] for c, o in zip(categories, OFFSETS)}


def pzombie_tables(etas: Sequence[float] = PZOMBIE_ETAS, r2s: Sequence[float] = PZOMBIE_R2,
                   simulations: int = PZOMBIE_SIMULATIONS, seed: int = PZOMBIE_SEED) -> list[Table]:
    if len(CATEGORIES) != len(OFFSETS):
        raise ValueError(f"the design's layout has {len(OFFSETS)} categories, the prereg {len(CATEGORIES)}")
    per = PREREG.values.run.measured_prompts // len(CATEGORIES)
    blocks = {b.name: b for b in CLASSIFICATIONS.values()}
    combined, target, token, h2 = blocks["combined"], blocks["eta2_target"], blocks["token_control"], blocks["h2"]
    rng = random.Random(seed)

    eta_rows = []
    for eta in etas:
        counts = {(b.name, label): 0 for b in (combined, target, h2) for label in outcome_labels(b)}
        for _ in range(simulations):
            active = _normal_layout(rng, CATEGORIES, per, eta)
            baseline = _normal_layout(rng, CATEGORIES, per, 0.0)
            td = [rng.random() for _ in range(per * len(CATEGORIES))]
            h = [v for c in CATEGORIES for v in active[c]]
            a, b = one_way_anova(active), one_way_anova(baseline)
            values = {"active.eta_squared": a.eta_squared, "active.p_exact": a.p_exact,
                      "active.r_squared_td": pearson(td, h).r_squared,
                      "h2.eta_squared_gain": a.eta_squared - b.eta_squared}
            for block in (combined, target, h2):
                counts[(block.name, block.evaluate(values).label)] += 1
        eta_rows.append((f"{eta:.2f}", *(_p(counts[(blk.name, label)] / simulations)
                                         for blk in (combined, target, h2) for label in outcome_labels(blk))))
    token_rows = []
    n = per * len(CATEGORIES)
    for r2 in r2s:
        counts = {label: 0 for label in outcome_labels(token)}
        slope = math.sqrt(r2 / (1.0 - r2)) if r2 > 0 else 0.0
        for _ in range(simulations):
            td = [rng.gauss(0.0, 1.0) for _ in range(n)]
            h = [slope * x + rng.gauss(0.0, 1.0) for x in td]
            counts[token.evaluate({"active.r_squared_td": pearson(td, h).r_squared}).label] += 1
        token_rows.append((f"{r2:.1f}", *(_p(counts[label] / simulations) for label in outcome_labels(token))))
    header = tuple(f"{blk.name}: {label}" for blk in (combined, target, h2) for label in outcome_labels(blk))
    return [
        Table(f"P-Zombie: eta-squared outcomes at a population eta squared ({simulations} simulations per row, "
              f"seed {seed})",
              f"ACTIVE_MANIFOLD zone entropy in {len(CATEGORIES)} categories of {per}: category means d x "
              f"({', '.join(f'{o:g}' for o in OFFSETS)}) plus unit normal noise, d set so that the population eta "
              "squared is the row's; token diversity independent of H (population R^2 = 0); BASELINE has no category "
              "effect (for H2). Seeded simulation; each probability has a standard error of at most "
              f"{0.5 / math.sqrt(simulations):.4f}.",
              ("population eta^2", *header), tuple(eta_rows)),
        Table(f"P-Zombie: token-control outcome at a population R^2 of TD -> H ({simulations} simulations per row, "
              f"seed {seed})",
              f"{n} prompts, H = slope x TD + unit normal noise with TD standard normal, the slope set so that the "
              "population R^2 is the row's. Seeded simulation.",
              ("population R^2", *outcome_labels(token)), tuple(token_rows)),
    ]


def design_tables(args: Any) -> tuple[list[Table], list[str]]:
    """The tables of ``python -m benchmarks.core.design pzombie`` at the parsed ``--simulations`` and ``--seed``."""
    simulations = PZOMBIE_SIMULATIONS if args.simulations is None else args.simulations
    seed = PZOMBIE_SEED if args.seed is None else args.seed
    return pzombie_tables(simulations=simulations, seed=seed), []
