"""Planned power: the probability of each preregistered outcome at the planned size, under stated true effects.

``python -m benchmarks.core.design PROTOCOL`` prints, for one protocol, tables
of outcome probabilities under named true-effect scenarios at the sample size
its preregistration plans:

* ``res``: every gate outcome when the four accuracies (logit and generated,
  both conditions) share one true accuracy, each item answered right
  independently, every generation parsed; exact binomial sums.
* ``ladder``: clause (a), overall error inside the band, on the pooled scored
  units of a probe, at a true per-unit error; clauses (b) and (c) at the same
  uniform true error; exact binomial sums.
* ``cwr``: the three deficit-driven outcomes when P mastery is established and
  the copy baseline flags nothing, at a true F - C validity difference with the
  two sides of a pair independent; exact multinomial sums over every 2x2 table
  of the planned pairs, through a paired-difference interval that is a
  parameter (``--interval module:function``); or, with ``--simulate``, by
  seeded simulation of the planned pairs' records through the protocol's own
  metric function, whatever interval it computes.  ``cwr --confirmatory``
  (and ``--check``, ``--search``, ``--bases N``): the confirmatory sample
  design, P(correct outcome) at a true F - C of 0 and 0.4 by bases per family
  and within-base correlation, by seeded simulation of per-base tables
  through the clustered interval the rules read, and the check of the design
  frozen in ``[design.confirmatory]``.
* ``pzombie``: the eta-squared and token-control outcomes by seeded
  simulation (the count and seed are printed) of a normal one-way layout with
  20 prompts per category at a stated population eta squared or R^2.

Every outcome is decided by the compiled classification of the protocol's own
``prereg.toml``; thresholds and sizes are read from it, never repeated here.
The probabilities are exact under the stated model; the models are
simplifications (stated with each table), not claims about any model under test.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import random
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .reachability import outcome_labels
from .rules import Classification

__all__ = ["CwrDesignPoint", "CwrScenario", "Table", "binomial_pmf", "check_confirmatory_design", "cwr_design_point",
           "cwr_design_search", "main", "outcome_distribution", "protocol_tables"]


def binomial_pmf(n: int, p: float) -> list[float]:
    """P[X = k] for k = 0..n, X ~ Binomial(n, p), by lgamma (exact to float rounding)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if p in (0.0, 1.0):
        return [1.0 if k == (0 if p == 0.0 else n) else 0.0 for k in range(n + 1)]
    out = []
    for k in range(n + 1):
        log = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
               + k * math.log(p) + (n - k) * math.log1p(-p))
        out.append(math.exp(log))
    return out


def outcome_distribution(classification: Classification, marginals: Mapping[str, Sequence[tuple[float, float]]],
                         fixed: Mapping[str, float] | None = None) -> dict[str, float]:
    """Exact probability of each label when the metrics in ``marginals`` are independent discrete variables.

    ``marginals`` maps a metric to its (value, probability) pairs; ``fixed``
    holds the other metrics the rules read.  Values that every condition on
    their metric treats alike are pooled first, so the product is over the
    distinguishable cases only.
    """
    fixed = dict(fixed or {})
    conditions = [c for rule in classification.rules for c in rule.all + rule.any]
    pooled: dict[str, list[tuple[float, float]]] = {}
    for metric, values in marginals.items():
        on_metric = [c for c in conditions if c.metric == metric]
        groups: dict[tuple[bool, ...], list[float]] = {}
        for value, probability in values:
            signature = tuple(c.holds({metric: value}) for c in on_metric)
            entry = groups.setdefault(signature, [value, 0.0])
            entry[1] += probability
        pooled[metric] = [(v, p) for v, p in groups.values()]
    out = {label: 0.0 for label in outcome_labels(classification)}
    names = list(pooled)
    for combo in itertools.product(*(pooled[m] for m in names)):
        probability = math.prod(p for _, p in combo)
        if probability == 0.0:
            continue
        values = {**fixed, **{m: v for m, (v, _) in zip(names, combo)}}
        out[classification.evaluate(values).label] += probability
    return out


@dataclass(frozen=True)
class Table:
    """One printed table: a title, the model behind it, a header row and the rows."""

    title: str
    model: str  # what the probabilities assume, in one or two sentences
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", self.model, "",
                 "| " + " | ".join(self.header) + " |", "|" + "|".join(" --- " for _ in self.header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


def _p(value: float) -> str:
    return f"{value:.4f}"


# --------------------------------------------------------------------------- RES


RES_ACCURACIES = (0.70, 0.75, 0.80, 0.85)


def res_tables(accuracies: Sequence[float] = RES_ACCURACIES) -> list[Table]:
    from benchmarks.res.protocol import CONDITIONS, GATE, PREREG
    from fixtures.res import build_res_fixtures

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


# --------------------------------------------------------------------------- ladder


LADDER_ERRORS = (0.08, 0.10, 0.12, 0.35, 0.37)


def ladder_tables(errors: Sequence[float] = LADDER_ERRORS) -> list[Table]:
    from benchmarks.ladder.protocol import CLAUSES, PREREG, TIERS

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


# --------------------------------------------------------------------------- CWR


CWR_DIFFERENCES = (0.0, 0.1, 0.2, 0.3, 0.4)
CWR_C_VALIDITY = 0.4


def load_interval(spec: str) -> Callable[..., Any]:
    """``module:function`` -> the function; it takes (both, f_only, c_only, neither, confidence) and returns an
    object with ``low`` and ``high``."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"--interval {spec!r} is not of the form module:function "
                         "(e.g. benchmarks.core.stats:paired_difference_interval)")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--interval {spec!r} cannot be loaded ({exc}); give an importable module:function") from None


def tables_of(n: int):
    """Every 2x2 paired table (both, f_only, c_only, neither) with n pairs."""
    for both in range(n + 1):
        for f_only in range(n + 1 - both):
            for c_only in range(n + 1 - both - f_only):
                yield both, f_only, c_only, n - both - f_only - c_only


def multinomial_pmf(cells: Sequence[int], probabilities: Sequence[float]) -> float:
    log = math.lgamma(sum(cells) + 1)
    for k, p in zip(cells, probabilities):
        if p == 0.0:
            if k:
                return 0.0
            continue
        log += k * math.log(p) - math.lgamma(k + 1)
    return math.exp(log)


def cwr_tables(differences: Sequence[float] = CWR_DIFFERENCES, c_validity: float = CWR_C_VALIDITY,
               interval: Callable[..., Any] | None = None, pairs: int | None = None) -> list[Table]:
    from benchmarks.cwr.protocol import GATE, PREREG
    from benchmarks.core.stats import paired_difference_interval

    interval = interval or paired_difference_interval
    spec = PREREG.values.measurement
    planned = pairs is None
    if planned:
        from benchmarks.cwr.protocol import run_pairs

        pairs = len(run_pairs())
    confidence = PREREG.values.analysis.confidence
    fixed = {"baselines.copy_flagged_pairs": 0.0, "P.accuracy": 1.0}
    bounds = {}
    for table in tables_of(pairs):
        got = interval(*table, confidence)
        bounds[table] = (float(got.low), float(got.high))
    rows = []
    for d in differences:
        f = c_validity + d
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"F validity {f} = C validity {c_validity} + difference {d} lies outside [0, 1]")
        cells = (f * c_validity, f * (1 - c_validity), (1 - f) * c_validity, (1 - f) * (1 - c_validity))
        out = {label: 0.0 for label in outcome_labels(GATE)}
        for table, (lower, upper) in bounds.items():
            values = {**fixed, "deficit.lower": lower, "deficit.upper": upper}
            out[GATE.evaluate(values).label] += multinomial_pmf(table, cells)
        rows.append((f"{d:.1f}", f"{f:.2f}", *(_p(out[label]) for label in outcome_labels(GATE))))
    name = getattr(interval, "__module__", "?") + ":" + getattr(interval, "__qualname__", "?")
    return [Table(
        f"CWR: outcome at a true F - C validity difference ({pairs} pairs, interval {name})",
        f"{pairs} F/C pairs" + (f" (the planned showcase pairs x {spec.replicas_per_pair} replicas)" if planned else
                                 " (not the planned number)") + ", each pair's F side valid with "
        f"probability C validity + difference and its C side with C validity {c_validity:g}, the sides and the pairs "
        f"independent; P mastery established and no pair flagged by the copy baseline (the first two rules do not "
        f"fire). The {confidence:g} interval of each of the {len(bounds)} possible 2x2 tables decides; exact "
        "multinomial sums.",
        ("true F - C", "F validity", *outcome_labels(GATE)), tuple(rows))]


def cwr_simulated_tables(differences: Sequence[float] = CWR_DIFFERENCES, c_validity: float = CWR_C_VALIDITY,
                         simulations: int = 2000, seed: int = 20261201) -> list[Table]:
    """The same scenarios by seeded simulation of the planned pairs' F and C records, through the protocol's own
    ``metrics`` (so through whatever F - C interval the protocol computes, clustered or not)."""
    from benchmarks.cwr.protocol import GATE, PREREG, CwrRecord, metrics, run_pairs

    pairs = run_pairs()
    fixed = {"baselines.copy_flagged_pairs": 0.0, "P.accuracy": 1.0}

    def side(pair: Any, condition: str, valid: bool) -> CwrRecord:
        return CwrRecord(
            item_id=f"{condition}:{pair.pair_id}", condition=condition, kind="synthesis", pair_id=pair.pair_id,
            world_ref=f"pair:{pair.pair_id}:{condition}", family=pair.family, prompt="", prompt_sha256="",
            prompt_tokens=None, max_new_tokens=1, generation="", generation_tokens=0, finish_reason="stop",
            generation_error=None, parse_status="ok", parsed=None, expected=None,
            check_status="VALID" if valid else "INVALID", check_reason=None, check_failing_step=None,
            correct=valid, context=None)

    records = {(p.pair_id, c, v): side(p, c, v) for p in pairs for c in ("F", "C") for v in (True, False)}
    rng = random.Random(seed)
    rows = []
    for d in differences:
        f = c_validity + d
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"F validity {f} = C validity {c_validity} + difference {d} lies outside [0, 1]")
        out = {label: 0 for label in outcome_labels(GATE)}
        for _ in range(simulations):
            drawn = []
            for p in pairs:
                drawn.append(records[(p.pair_id, "F", rng.random() < f)])
                drawn.append(records[(p.pair_id, "C", rng.random() < c_validity)])
            values = {k: float(v) for k, v in metrics(drawn).items()
                      if isinstance(v, (int, float)) and math.isfinite(v)}
            out[GATE.evaluate({**values, **fixed}).label] += 1
        rows.append((f"{d:.1f}", f"{f:.2f}", *(_p(out[label] / simulations) for label in outcome_labels(GATE))))
    return [Table(
        f"CWR: outcome at a true F - C validity difference ({len(pairs)} pairs, the protocol's own metrics; "
        f"{simulations} simulations per row, seed {seed})",
        f"{len(pairs)} F/C pairs ({PREREG.values.measurement.replicas_per_pair} replicas per showcase pair), each "
        f"pair's F side valid with probability C validity + difference and its C side with C validity {c_validity:g}, "
        "the sides and the pairs independent; P mastery established and no pair flagged by the copy baseline. "
        "The deficit interval is the one benchmarks.cwr.protocol.metrics computes. Seeded simulation; each "
        f"probability has a standard error of at most {0.5 / math.sqrt(simulations):.4f}.",
        ("true F - C", "F validity", *outcome_labels(GATE)), tuple(rows))]


# --------------------------------------------------------------------------- CWR confirmatory sample design


#: The Fiction-CWR families a confirmatory split draws base pairs from (equal numbers of bases each).
CWR_FAMILIES = ("token_workshop", "schedule", "dataflow")
#: What the confirmatory design must reach: P(correct outcome) at the two true F - C differences.
CWR_DESIGN_TARGET = 0.8
CWR_NULL_DIFFERENCE = 0.0
CWR_EFFECT_DIFFERENCE = 0.4
#: Within-base correlations of the sensitivity table (the design scenario's own value is added).
CWR_DESIGN_RHOS = (0.0, 0.3, 0.5, 0.7, 0.95)
CWR_DESIGN_SIMULATIONS = 2000
CWR_DESIGN_SEED = 20261201


@dataclass(frozen=True)
class CwrScenario:
    """The true model of one replica's (F, C) outcome and of the replicas of one base.

    Each replica is one F/C pair: F valid with probability ``c_validity +
    difference``, C valid with ``c_validity``, P(both) = pF pC + theta
    (min(pF, pC) - pF pC) (theta = 0: the two sides independent).  With
    probability ``rho`` every replica of a base copies one draw, otherwise
    each draws its own: ``rho`` is the within-base correlation (the model of
    ``benchmarks/cwr/bench_coverage.py``).  Bases are independent.
    """

    c_validity: float
    difference: float
    theta: float
    rho: float

    def __post_init__(self) -> None:
        f = self.c_validity + self.difference
        for name, value in (("C validity", self.c_validity), ("F validity", f), ("theta", self.theta),
                            ("rho", self.rho)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"scenario {name} {value:g} lies outside [0, 1]; choose C validity, difference, "
                                 "theta and rho so that every one is a probability")

    def cells(self) -> tuple[float, float, float, float]:
        """(both, F only, C only, neither) of one replica."""
        pf, pc = self.c_validity + self.difference, self.c_validity
        both = pf * pc + self.theta * (min(pf, pc) - pf * pc)
        f_only, c_only = pf - both, pc - both
        return both, f_only, c_only, max(0.0, 1.0 - both - f_only - c_only)


def base_table_distribution(scenario: CwrScenario, replicas: int) -> list[tuple[tuple[int, int, int, int], float]]:
    """Every 2x2 table (both, F only, C only, neither) of one base of ``replicas`` replicas, with its probability."""
    if replicas < 1:
        raise ValueError(f"replicas per base must be at least 1, got {replicas}")
    cells = scenario.cells()
    out = []
    for table in tables_of(replicas):
        shared = cells[table.index(replicas)] if replicas in table else 0.0
        out.append((table, scenario.rho * shared + (1.0 - scenario.rho) * multinomial_pmf(table, cells)))
    return out


def deficit_key(bases: Sequence[Sequence[int]]) -> tuple[int, int, int]:
    """(F only, C only, sum of squared per-base differences) of equal-sized bases: with the number of bases and
    the replicas per base, all that the clustered interval depends on."""
    return (sum(b[1] for b in bases), sum(b[2] for b in bases), sum((b[1] - b[2]) ** 2 for b in bases))


def cwr_design_probabilities(bases: int, replicas: int, scenario: CwrScenario, *,
                             simulations: int = CWR_DESIGN_SIMULATIONS, seed: int = CWR_DESIGN_SEED,
                             cache: dict | None = None) -> dict[str, float]:
    """P(each label) for ``bases`` independent bases of ``replicas`` replicas by seeded simulation.

    Each simulated data set is a list of per-base tables; its F - C interval is
    the one the protocol's rules read (``benchmarks.core.paired.tango_rao_scott_interval`` at the
    preregistered confidence, what ``benchmarks.cwr.protocol.metrics`` computes), classified by the compiled
    rules with P mastery established and no pair flagged by the copy baseline.  Data sets with the same
    :func:`deficit_key` share one interval (``cache``).  The random stream is seeded by ``seed``, the number of
    bases and the replicas, so every scenario at one size sees the same uniforms (common random numbers).
    """
    from benchmarks.core.paired import BaseCounts, tango_rao_scott_interval
    from benchmarks.cwr.protocol import GATE, PREREG

    if bases < 1:
        raise ValueError(f"a design needs at least one base pair, got {bases}")
    if simulations < 1:
        raise ValueError(f"simulations must be a positive count, got {simulations}")
    confidence = PREREG.values.analysis.confidence
    fixed = {"baselines.copy_flagged_pairs": 0.0, "P.accuracy": 1.0}
    tables, weights = zip(*base_table_distribution(scenario, replicas))
    cumulative = list(itertools.accumulate(weights))
    # One BaseCounts per possible base table, shared by every base that draws it (the interval reads the
    # cells only, never the base ids).
    as_base = {t: BaseCounts(i, *t) for i, t in enumerate(tables)}
    cache = {} if cache is None else cache
    rng = random.Random(f"{seed}:{bases}:{replicas}")
    counts = {label: 0 for label in outcome_labels(GATE)}
    for _ in range(simulations):
        drawn = rng.choices(tables, cum_weights=cumulative, k=bases)
        key = (bases, replicas, confidence, *deficit_key(drawn))
        label = cache.get(key)
        if label is None:
            got = tango_rao_scott_interval([as_base[t] for t in drawn], confidence)
            label = GATE.evaluate({**fixed, "deficit.lower": got.low, "deficit.upper": got.high}).label
            cache[key] = label
        counts[label] += 1
    return {label: count / simulations for label, count in counts.items()}


@dataclass(frozen=True)
class CwrDesignPoint:
    """P(correct outcome) of one design at the null and the effect scenario."""

    bases_per_family: int
    replicas: int
    families: int
    null: dict[str, float]  # label -> probability at true F - C = CWR_NULL_DIFFERENCE
    effect: dict[str, float]  # ... at CWR_EFFECT_DIFFERENCE

    @property
    def bases(self) -> int:
        return self.bases_per_family * self.families

    @property
    def p_reject(self) -> float:
        """P(DEFICIT_OF_DELTA_REJECTED) when the true F - C is 0 (the failure criterion is the correct outcome)."""
        return self.null["DEFICIT_OF_DELTA_REJECTED"]

    @property
    def p_support(self) -> float:
        """P(RECOMBINATION_DEFICIT_SUPPORTED) when the true F - C is 0.4 (the success criterion is correct)."""
        return self.effect["RECOMBINATION_DEFICIT_SUPPORTED"]

    def meets(self, target: float = CWR_DESIGN_TARGET) -> bool:
        return self.p_reject >= target and self.p_support >= target


def cwr_design_point(bases_per_family: int, replicas: int, *, c_validity: float, theta: float, rho: float,
                     families: int = len(CWR_FAMILIES), simulations: int = CWR_DESIGN_SIMULATIONS,
                     seed: int = CWR_DESIGN_SEED, cache: dict | None = None) -> CwrDesignPoint:
    """The two probabilities that decide a confirmatory design, at one size and one correlation scenario."""
    if bases_per_family < 1:
        raise ValueError(f"bases per family must be at least 1, got {bases_per_family}")
    cache = {} if cache is None else cache
    out = {}
    for name, difference in (("null", CWR_NULL_DIFFERENCE), ("effect", CWR_EFFECT_DIFFERENCE)):
        scenario = CwrScenario(c_validity, difference, theta, rho)
        out[name] = cwr_design_probabilities(bases_per_family * families, replicas, scenario,
                                             simulations=simulations, seed=seed, cache=cache)
    return CwrDesignPoint(bases_per_family, replicas, families, out["null"], out["effect"])


def cwr_design_search(replicas: int, *, c_validity: float, theta: float, rho: float,
                      families: int = len(CWR_FAMILIES), simulations: int = CWR_DESIGN_SIMULATIONS,
                      seed: int = CWR_DESIGN_SEED, target: float = CWR_DESIGN_TARGET,
                      limit: int = 200) -> tuple[CwrDesignPoint, list[CwrDesignPoint]]:
    """The smallest number of bases per family (1, 2, ... ``limit``) whose design meets both targets.

    Returns the chosen point and every point computed on the way (each smaller size fails a target).
    """
    cache: dict = {}
    tried = []
    for n in range(1, limit + 1):
        point = cwr_design_point(n, replicas, c_validity=c_validity, theta=theta, rho=rho, families=families,
                                 simulations=simulations, seed=seed, cache=cache)
        tried.append(point)
        if point.meets(target):
            return point, tried
    raise ValueError(f"no design of at most {limit} bases per family reaches P(correct) >= {target:g} at both "
                     f"true differences (C validity {c_validity:g}, theta {theta:g}, rho {rho:g}); "
                     "give more replicas per base or another scenario")


def confirmatory_design() -> Any:
    """The ``[design.confirmatory]`` table of ``benchmarks/cwr/prereg.toml``."""
    from benchmarks.cwr.protocol import PREREG

    return PREREG.values.design.confirmatory


def cwr_design_tables(bases_per_family: Sequence[int], replicas: int, *, c_validity: float, theta: float,
                      rhos: Sequence[float], families: int = len(CWR_FAMILIES),
                      simulations: int = CWR_DESIGN_SIMULATIONS, seed: int = CWR_DESIGN_SEED,
                      chosen: int | None = None) -> list[Table]:
    """P(correct outcome) by bases per family and within-base correlation."""
    from benchmarks.cwr.protocol import PREREG

    delta = PREREG.values.thresholds["delta"]
    cache: dict = {}
    rows = []
    for n in bases_per_family:
        row = [f"{n}{' (chosen)' if n == chosen else ''}", str(n * families), str(n * families * replicas)]
        for rho in rhos:
            point = cwr_design_point(n, replicas, c_validity=c_validity, theta=theta, rho=rho, families=families,
                                     simulations=simulations, seed=seed, cache=cache)
            row.append(f"{_p(point.p_reject)} / {_p(point.p_support)}{' *' if point.meets() else ''}")
        rows.append(tuple(row))
    return [Table(
        f"CWR confirmatory design: P(correct outcome) by bases per family and within-base correlation "
        f"({simulations} simulations per cell, seed {seed})",
        f"{families} families with equal numbers of base pairs, {replicas} F/C replicas per base; each replica's C "
        f"side valid with probability {c_validity:g} and its F side with {c_validity:g} + the true F - C, the sides "
        f"of a replica with dependence theta = {theta:g}, the replicas of a base sharing one draw with probability "
        "rho, the bases independent; P mastery established and no pair flagged by the copy baseline. Each cell is "
        f"P(DEFICIT_OF_DELTA_REJECTED | F - C = {CWR_NULL_DIFFERENCE:g}) / P(RECOMBINATION_DEFICIT_SUPPORTED | "
        f"F - C = {CWR_EFFECT_DIFFERENCE:g}) through the preregistered clustered interval and rules (delta = "
        f"{delta:g}); * marks both >= {CWR_DESIGN_TARGET:g}. Each probability has a standard error of at most "
        f"{0.5 / math.sqrt(simulations):.4f}.",
        ("bases per family", "bases", "F/C pairs", *(f"rho = {rho:g}" for rho in rhos)), tuple(rows))]


def check_confirmatory_design(cache: dict | None = None) -> list[str]:
    """Recompute the frozen ``[design.confirmatory]`` design; the problems found (empty when it holds).

    The frozen size must be the smallest meeting both targets at the frozen scenario (recomputed at that size
    and one base per family fewer), and the frozen probabilities must be those the computation gives.
    """
    spec = confirmatory_design()
    problems = []
    if tuple(spec.families) != CWR_FAMILIES:
        problems.append(f"design.confirmatory.families is {list(spec.families)}, the design computes "
                        f"{list(CWR_FAMILIES)}")
    kwargs = dict(c_validity=spec.c_validity, theta=spec.theta, rho=spec.rho, families=len(spec.families),
                  simulations=spec.simulations, seed=spec.seed)
    if (spec.null_difference, spec.effect_difference, spec.target) != (
            CWR_NULL_DIFFERENCE, CWR_EFFECT_DIFFERENCE, CWR_DESIGN_TARGET):
        problems.append("design.confirmatory: null_difference, effect_difference and target must be "
                        f"{CWR_NULL_DIFFERENCE:g}, {CWR_EFFECT_DIFFERENCE:g} and {CWR_DESIGN_TARGET:g}")
    cache = {} if cache is None else cache
    chosen = cwr_design_point(spec.bases_per_family, spec.replicas, cache=cache, **kwargs)
    if not chosen.meets(spec.target):
        problems.append(f"{spec.bases_per_family} bases per family do not meet {spec.target:g}: "
                        f"P(reject | 0) = {chosen.p_reject:.4f}, P(support | 0.4) = {chosen.p_support:.4f}")
    if spec.bases_per_family > 1:
        smaller = cwr_design_point(spec.bases_per_family - 1, spec.replicas, cache=cache, **kwargs)
        if smaller.meets(spec.target):
            problems.append(f"{spec.bases_per_family - 1} bases per family already meet {spec.target:g}: "
                            "the frozen size is not the smallest")
    for name, frozen, got in (("p_reject_at_null", spec.p_reject_at_null, chosen.p_reject),
                              ("p_support_at_effect", spec.p_support_at_effect, chosen.p_support)):
        if round(got, 4) != round(frozen, 4):
            problems.append(f"design.confirmatory.{name} = {frozen:g}, recomputed {got:.4f}")
    return problems


# --------------------------------------------------------------------------- P-Zombie


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
    from benchmarks.core.stats import one_way_anova, pearson
    from benchmarks.pzombie.protocol import CATEGORIES, CLASSIFICATIONS, PREREG

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


# --------------------------------------------------------------------------- command line


PROTOCOLS = ("res", "ladder", "cwr", "pzombie")


def protocol_tables(protocol: str, *, interval: Callable[..., Any] | None = None,
                    simulations: int = PZOMBIE_SIMULATIONS, seed: int = PZOMBIE_SEED,
                    simulate: bool = False) -> list[Table]:
    if protocol == "res":
        return res_tables()
    if protocol == "ladder":
        return ladder_tables()
    if protocol == "cwr":
        return cwr_simulated_tables(simulations=simulations, seed=seed) if simulate else cwr_tables(interval=interval)
    if protocol == "pzombie":
        return pzombie_tables(simulations=simulations, seed=seed)
    raise ValueError(f"unknown protocol {protocol!r}; available: {', '.join(PROTOCOLS)}")


def _design_options(args: argparse.Namespace) -> dict[str, Any]:
    """The confirmatory design's scenario: the frozen ``[design.confirmatory]`` values, each overridable."""
    spec = confirmatory_design()
    return {
        "replicas": spec.replicas if args.replicas is None else args.replicas,
        "c_validity": spec.c_validity if args.c_validity is None else args.c_validity,
        "theta": spec.theta if args.theta is None else args.theta,
        "rho": spec.rho if args.rho is None else args.rho,
        "simulations": spec.simulations if args.simulations is None else args.simulations,
        "seed": spec.seed if args.seed is None else args.seed,
        "families": len(spec.families),
        "chosen": spec.bases_per_family,
    }


def _design_output(args: argparse.Namespace) -> tuple[list[Table], list[str]]:
    if args.check:
        return [], check_confirmatory_design()
    o = _design_options(args)
    common = dict(c_validity=o["c_validity"], theta=o["theta"], families=o["families"],
                  simulations=o["simulations"], seed=o["seed"])
    if args.search:
        chosen, tried = cwr_design_search(o["replicas"], rho=o["rho"], **common)
        rows = tuple((str(p.bases_per_family), str(p.bases), _p(p.p_reject), _p(p.p_support),
                      "yes" if p.meets() else "no") for p in tried)
        return [Table(
            f"CWR confirmatory design search: smallest bases per family with both P(correct) >= "
            f"{CWR_DESIGN_TARGET:g} ({o['simulations']} simulations per cell, seed {o['seed']})",
            f"{o['families']} families, {o['replicas']} replicas per base, C validity {o['c_validity']:g}, "
            f"theta {o['theta']:g}, rho {o['rho']:g}. Smallest: {chosen.bases_per_family} bases per family "
            f"({chosen.bases} base pairs, {chosen.bases * o['replicas']} F/C pairs).",
            ("bases per family", "bases", f"P(rejected | F - C = {CWR_NULL_DIFFERENCE:g})",
             f"P(supported | F - C = {CWR_EFFECT_DIFFERENCE:g})", "meets both"), rows)], []
    if args.bases is not None:
        rhos = sorted({*CWR_DESIGN_RHOS, o["rho"]}) if args.rho is None else [o["rho"]]
        return cwr_design_tables([args.bases], o["replicas"], rhos=rhos, chosen=o["chosen"], **common), []
    chosen = o["chosen"]
    sizes = sorted({10, 15, 20, chosen - 1, chosen, chosen + 5} - {0})
    tables = cwr_design_tables(sizes, o["replicas"], rhos=sorted({*CWR_DESIGN_RHOS, o["rho"]}), chosen=chosen,
                               **common)
    return tables, check_confirmatory_design()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.core.design",
                                     description="Planned power: outcome probabilities at the preregistered size.")
    parser.add_argument("protocol", choices=PROTOCOLS)
    parser.add_argument("--interval", default="benchmarks.core.stats:paired_difference_interval",
                        help="cwr: the paired F - C interval, module:function taking "
                             "(both, f_only, c_only, neither, confidence) (default: %(default)s)")
    parser.add_argument("--simulate", action="store_true",
                        help="cwr: simulate the planned pairs' records through the protocol's own metrics "
                             "(its current interval, clustered or not) instead of the exact sum over 2x2 tables")
    parser.add_argument("--simulations", type=int, default=None,
                        help=f"pzombie, cwr --simulate: simulated data sets per row (default: {PZOMBIE_SIMULATIONS}); "
                             "cwr confirmatory design: per cell (default: the frozen design's)")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"pzombie, cwr --simulate: simulation seed (default: {PZOMBIE_SEED}); cwr confirmatory "
                             "design: the frozen design's")
    design_group = parser.add_argument_group(
        "cwr confirmatory sample design (benchmarks/cwr/prereg.toml [design.confirmatory]; defaults are its values)")
    design_group.add_argument("--confirmatory", action="store_true",
                              help="print P(correct outcome) by bases per family and within-base correlation, and "
                                   "check the frozen design (exit status 1 when it does not hold)")
    design_group.add_argument("--check", action="store_true",
                              help="only recompute and check the frozen design (exit status 1 when it does not hold)")
    design_group.add_argument("--search", action="store_true",
                              help="find the smallest bases per family meeting both targets at the scenario")
    design_group.add_argument("--bases", type=int, help="bases per family: P(correct outcome) at that size")
    design_group.add_argument("--replicas", type=int, help="F/C replicas per base")
    design_group.add_argument("--rho", type=float, help="within-base correlation of the replicas")
    design_group.add_argument("--theta", type=float, help="dependence of the F and C sides of one replica")
    design_group.add_argument("--c-validity", type=float, help="C exact validity of one replica")
    args = parser.parse_args(argv)
    if args.simulations is not None and args.simulations <= 0:
        parser.error(f"--simulations must be a positive count, got {args.simulations}")
    if args.simulate and args.protocol != "cwr":
        parser.error("--simulate applies to cwr only")
    designing = args.confirmatory or args.check or args.search or args.bases is not None
    tuning = [name for name in ("replicas", "rho", "theta", "c_validity") if getattr(args, name) is not None]
    if (designing or tuning) and args.protocol != "cwr":
        parser.error("--confirmatory, --check, --search, --bases, --replicas, --rho, --theta and --c-validity "
                     "apply to cwr only")
    if tuning and not designing:
        parser.error(f"--{tuning[0].replace('_', '-')} needs --confirmatory, --search or --bases")
    if args.check and (args.simulations is not None or args.seed is not None):
        tuning.append("simulations" if args.simulations is not None else "seed")
    if tuning and args.check:
        parser.error("--check recomputes the frozen design as frozen; it takes no scenario option")
    if sum((args.confirmatory, args.check, args.search, args.bases is not None)) > 1:
        parser.error("give one of --confirmatory, --check, --search and --bases")
    if designing and args.simulate:
        parser.error("--simulate and the confirmatory design options exclude each other (the design always simulates)")
    if args.bases is not None and args.bases < 1:
        parser.error(f"--bases must be a positive number of bases per family, got {args.bases}")
    if args.replicas is not None and args.replicas < 1:
        parser.error(f"--replicas must be a positive number of replicas per base, got {args.replicas}")
    given = " ".join(sys.argv[1:] if argv is None else argv)
    heading = f"Planned power, {args.protocol}: `python -m benchmarks.core.design {given}`"
    if designing:
        print(heading, flush=True)
        try:
            tables, problems = _design_output(args)
        except ValueError as exc:
            parser.error(str(exc))
        for table in tables:
            print()
            print(table.markdown())
        if problems:
            print()
            for problem in problems:
                print(f"frozen design does not hold: {problem}")
            return 1
        if args.confirmatory or args.check:
            spec = confirmatory_design()
            print()
            print(f"Frozen design holds: {spec.bases_per_family} bases per family x {len(spec.families)} families "
                  f"x {spec.replicas} replicas is the smallest meeting both targets at rho {spec.rho:g}.")
        return 0
    simulations = PZOMBIE_SIMULATIONS if args.simulations is None else args.simulations
    seed = PZOMBIE_SEED if args.seed is None else args.seed
    try:
        interval = load_interval(args.interval) if args.protocol == "cwr" and not args.simulate else None
    except ValueError as exc:
        parser.error(str(exc))
    tables = protocol_tables(args.protocol, interval=interval, simulations=simulations, seed=seed,
                             simulate=args.simulate)
    print(heading)
    for table in tables:
        print()
        print(table.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
