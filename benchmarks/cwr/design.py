"""Fiction-CWR: planned power and the confirmatory sample design (``python -m benchmarks.core.design cwr``).

* the three deficit-driven outcomes when P mastery is established and the
  copy baseline flags nothing, at a true F - C validity difference with the
  two sides of a pair independent: exact multinomial sums over every 2x2
  table of the planned pairs, through a paired-difference interval that is a
  parameter (``--interval module:function``); or, with ``--simulate``, by
  seeded simulation of the planned pairs' records through the protocol's own
  metric function, whatever interval it computes;
* ``--confirmatory`` (and ``--check``, ``--search``, ``--bases N``): the
  confirmatory sample design, P(correct outcome) at a true F - C of 0 and 0.4
  by bases per family and within-base correlation, by seeded simulation of
  per-base tables through the clustered interval the rules read, and the
  check of the design frozen in ``[design.confirmatory]``.

Every outcome is decided by the compiled classification of ``prereg.toml``;
thresholds and sizes are read from it, never repeated here.  The
probabilities are exact (or seeded simulations) under the stated model; the
models are simplifications, stated with each table, not claims about any
model under test.  :func:`design_arguments` and :func:`design_tables` are the
protocol's two planned-power hooks.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from benchmarks.core.design import (
    Note,
    Table,
    load_interval,
    multinomial_pmf,
    tables_of,
)
from benchmarks.core.design import format_probability as _p
from benchmarks.core.paired import BaseCounts, tango_rao_scott_interval
from benchmarks.core.protocol import UsageProblem
from benchmarks.core.reachability import outcome_labels
from benchmarks.core.stats import paired_difference_interval

from .metrics import metrics
from .spec import GATE, PREREG, CwrRecord
from .units import run_pairs
from canonical_hash import sha256_text

EMPTY = sha256_text("")  # the hash of an empty answer

__all__ = ["CWR_C_VALIDITY", "CWR_DESIGN_RHOS", "CWR_DESIGN_SEED", "CWR_DESIGN_SIMULATIONS", "CWR_DESIGN_TARGET",
           "CWR_DIFFERENCES", "CWR_EFFECT_DIFFERENCE", "CWR_FAMILIES", "CWR_NULL_DIFFERENCE", "CWR_SEED",
           "CWR_SIMULATIONS", "CwrDesignPoint", "CwrScenario", "base_table_distribution", "check_confirmatory_design",
           "confirmatory_design", "cwr_design_point", "cwr_design_probabilities", "cwr_design_search",
           "cwr_design_tables", "cwr_simulated_tables", "cwr_tables", "deficit_key", "design_arguments",
           "design_tables"]


CWR_DIFFERENCES = (0.0, 0.1, 0.2, 0.3, 0.4)
CWR_C_VALIDITY = 0.4
#: ``--simulate``: simulated data sets per row and their seed, unless --simulations / --seed say otherwise.
CWR_SIMULATIONS = 2000
CWR_SEED = 20261201


#: The gate metrics at values that open every gate before the deficit rules (no errored unit, no witness-only or
#: exposure-unmatched pair, no target a baseline solves, no copy-solvable pair, primitive mastery met): the design
#: asks only what the deficit rules decide.
GATES_OPEN = {"errored_share": 0.0, "pairs.witness_only": 0.0, "pairs.exposure_unmatched": 0.0,
              "baselines.greedy_solved_share": 0.0, "baselines.random_valid_rate": 0.0,
              "baselines.copy_flagged_pairs": 0.0, "mastery.min_family_accuracy": 1.0}


def cwr_tables(differences: Sequence[float] = CWR_DIFFERENCES, c_validity: float = CWR_C_VALIDITY,
               interval: Callable[..., Any] | None = None, pairs: int | None = None) -> list[Table]:
    interval = interval or paired_difference_interval
    spec = PREREG.values.measurement
    planned = pairs is None
    if planned:
        pairs = len(run_pairs())
    confidence = PREREG.values.analysis.confidence
    fixed = GATES_OPEN
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
                         simulations: int = CWR_SIMULATIONS, seed: int = CWR_SEED) -> list[Table]:
    """The same scenarios by seeded simulation of the planned pairs' F and C records, through the protocol's own
    ``metrics`` (so through whatever F - C interval the protocol computes, clustered or not)."""
    pairs = run_pairs()
    fixed = GATES_OPEN

    def side(pair: Any, condition: str, valid: bool) -> CwrRecord:
        return CwrRecord(
            item_id=f"{condition}:{pair.pair_id}", condition=condition, kind="synthesis", pair_id=pair.pair_id,
            world_ref=f"pair:{pair.pair_id}:{condition}", family=pair.family, prompt="", prompt_sha256="",
            prompt_tokens=None, max_new_tokens=1, generation="", generation_chars=0,
            generation_sha256=EMPTY, generation_tokens=0, finish_reason="stop",
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
    ``scripts/bench/bench_coverage.py``).  Bases are independent.
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
    if bases < 1:
        raise ValueError(f"a design needs at least one base pair, got {bases}")
    if simulations < 1:
        raise ValueError(f"simulations must be a positive count, got {simulations}")
    confidence = PREREG.values.analysis.confidence
    fixed = GATES_OPEN
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
    return PREREG.values.design.confirmatory


def cwr_design_tables(bases_per_family: Sequence[int], replicas: int, *, c_validity: float, theta: float,
                      rhos: Sequence[float], families: int = len(CWR_FAMILIES),
                      simulations: int = CWR_DESIGN_SIMULATIONS, seed: int = CWR_DESIGN_SEED,
                      chosen: int | None = None) -> list[Table]:
    """P(correct outcome) by bases per family and within-base correlation."""
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


# --------------------------------------------------------------------------- the command line


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


def _designed(args: argparse.Namespace, problems: list[str]) -> Iterator[Any]:
    """The confirmatory design's tables, computed as they are printed; the frozen design's problems go into
    ``problems`` (the check runs after the last table), and ``Frozen design holds`` closes a check without any."""
    if args.check:
        found = check_confirmatory_design()
    else:
        o = _design_options(args)
        common = dict(c_validity=o["c_validity"], theta=o["theta"], families=o["families"],
                      simulations=o["simulations"], seed=o["seed"])
        found = []
        if args.search:
            chosen, tried = cwr_design_search(o["replicas"], rho=o["rho"], **common)
            rows = tuple((str(p.bases_per_family), str(p.bases), _p(p.p_reject), _p(p.p_support),
                          "yes" if p.meets() else "no") for p in tried)
            yield Table(
                f"CWR confirmatory design search: smallest bases per family with both P(correct) >= "
                f"{CWR_DESIGN_TARGET:g} ({o['simulations']} simulations per cell, seed {o['seed']})",
                f"{o['families']} families, {o['replicas']} replicas per base, C validity {o['c_validity']:g}, "
                f"theta {o['theta']:g}, rho {o['rho']:g}. Smallest: {chosen.bases_per_family} bases per family "
                f"({chosen.bases} base pairs, {chosen.bases * o['replicas']} F/C pairs).",
                ("bases per family", "bases", f"P(rejected | F - C = {CWR_NULL_DIFFERENCE:g})",
                 f"P(supported | F - C = {CWR_EFFECT_DIFFERENCE:g})", "meets both"), rows)
        elif args.bases is not None:
            rhos = sorted({*CWR_DESIGN_RHOS, o["rho"]}) if args.rho is None else [o["rho"]]
            yield from cwr_design_tables([args.bases], o["replicas"], rhos=rhos, chosen=o["chosen"], **common)
        else:
            chosen = o["chosen"]
            sizes = sorted({10, 15, 20, chosen - 1, chosen, chosen + 5} - {0})
            tables = cwr_design_tables(sizes, o["replicas"], rhos=sorted({*CWR_DESIGN_RHOS, o["rho"]}),
                                       chosen=chosen, **common)
            found = check_confirmatory_design()
            yield from tables
    problems.extend(f"frozen design does not hold: {problem}" for problem in found)
    if (args.confirmatory or args.check) and not problems:
        spec = confirmatory_design()
        yield Note(f"Frozen design holds: {spec.bases_per_family} bases per family x {len(spec.families)} families "
                   f"x {spec.replicas} replicas is the smallest meeting both targets at rho {spec.rho:g}.")


def design_arguments(parser: Any) -> None:
    """The CWR options of ``python -m benchmarks.core.design cwr``."""
    parser.add_argument("--interval", default="benchmarks.core.stats:paired_difference_interval",
                        help="the paired F - C interval, module:function taking "
                             "(both, f_only, c_only, neither, confidence) (default: %(default)s)")
    parser.add_argument("--simulate", action="store_true",
                        help="simulate the planned pairs' records through the protocol's own metrics "
                             "(its current interval, clustered or not) instead of the exact sum over 2x2 tables "
                             f"(--simulations default: {CWR_SIMULATIONS}, --seed default: {CWR_SEED})")
    group = parser.add_argument_group(
        "confirmatory sample design (benchmarks/cwr/prereg.toml [design.confirmatory]; defaults are its values, "
        "--simulations and --seed included)")
    group.add_argument("--confirmatory", action="store_true",
                       help="print P(correct outcome) by bases per family and within-base correlation, and "
                            "check the frozen design (exit status 1 when it does not hold)")
    group.add_argument("--check", action="store_true",
                       help="only recompute and check the frozen design (exit status 1 when it does not hold)")
    group.add_argument("--search", action="store_true",
                       help="find the smallest bases per family meeting both targets at the scenario")
    group.add_argument("--bases", type=int, help="bases per family: P(correct outcome) at that size")
    group.add_argument("--replicas", type=int, help="F/C replicas per base")
    group.add_argument("--rho", type=float, help="within-base correlation of the replicas")
    group.add_argument("--theta", type=float, help="dependence of the F and C sides of one replica")
    group.add_argument("--c-validity", type=float, help="C exact validity of one replica")


def design_tables(args: Any) -> tuple[Any, list[str]]:
    """The tables of the parsed options: usage problems are raised before anything is computed; the
    confirmatory design's tables are computed as they are printed."""
    designing = args.confirmatory or args.check or args.search or args.bases is not None
    tuning = [name for name in ("replicas", "rho", "theta", "c_validity") if getattr(args, name) is not None]
    if tuning and not designing:
        raise UsageProblem(f"--{tuning[0].replace('_', '-')} needs --confirmatory, --search or --bases")
    if args.check and (args.simulations is not None or args.seed is not None):
        tuning.append("simulations" if args.simulations is not None else "seed")
    if tuning and args.check:
        raise UsageProblem("--check recomputes the frozen design as frozen; it takes no scenario option")
    if sum((args.confirmatory, args.check, args.search, args.bases is not None)) > 1:
        raise UsageProblem("give one of --confirmatory, --check, --search and --bases")
    if designing and args.simulate:
        raise UsageProblem("--simulate and the confirmatory design options exclude each other "
                           "(the design always simulates)")
    if args.bases is not None and args.bases < 1:
        raise UsageProblem(f"--bases must be a positive number of bases per family, got {args.bases}")
    if args.replicas is not None and args.replicas < 1:
        raise UsageProblem(f"--replicas must be a positive number of replicas per base, got {args.replicas}")
    if designing:
        problems: list[str] = []
        return _designed(args, problems), problems
    simulations = CWR_SIMULATIONS if args.simulations is None else args.simulations
    seed = CWR_SEED if args.seed is None else args.seed
    if args.simulate:
        return cwr_simulated_tables(simulations=simulations, seed=seed), []
    return cwr_tables(interval=load_interval(args.interval)), []
