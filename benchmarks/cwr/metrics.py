"""Fiction-CWR: the metrics the rules read, the intervals reported beside them and the summary's counts."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from benchmarks.core.paired import tango_rao_scott_interval
from benchmarks.core.protocol import finite
from benchmarks.core.stats import paired_difference_interval, proportion
from fixtures.cwr import E_CONTEXTS

from .spec import (
    CONDITIONS,
    INTERVAL_METHOD,
    PREREG,
    SYNTHESIS_CONDITIONS,
    CwrRecord,
    base_pair,
    gate_at,
)


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def errored(record: CwrRecord) -> bool:
    """A unit the provider or harness failed on (``generation_error``: a backend fault, a timeout, an answer
    over ``max_answer_chars``): its own outcome, left out of every rate's denominator and counted by the
    errored-units rule; a returned answer that is malformed or wrong is not errored."""
    return record.generation_error is not None


def scored(rows: Sequence[CwrRecord]) -> list[CwrRecord]:
    """The rows a rate reads: every unit the model answered (errored units left out)."""
    return [r for r in rows if not errored(r)]


def _sides(records: Sequence[CwrRecord], only: set[str] | None) -> dict[str, dict[str, bool]]:
    """pair -> condition -> exact validity, over the F and C units that were answered (optionally ``only`` some
    pairs); a pair with an errored side has that side missing, so it is unpaired."""
    by_pair: dict[str, dict[str, bool]] = {}
    for r in records:
        if (r.condition in SYNTHESIS_CONDITIONS and r.pair_id is not None and not errored(r)
                and (only is None or r.pair_id in only)):
            by_pair.setdefault(r.pair_id, {})[r.condition] = r.correct
    return by_pair


def paired_table(records: Sequence[CwrRecord], only: set[str] | None = None) -> dict[str, int]:
    """2x2 table of F and C exact validity over the pairs measured under both conditions (optionally ``only`` some)."""
    by_pair = _sides(records, only)
    table = {"both": 0, "f_only": 0, "c_only": 0, "neither": 0, "unpaired": 0}
    for sides in by_pair.values():
        if set(sides) != {"F", "C"}:
            table["unpaired"] += 1
            continue
        key = {(True, True): "both", (True, False): "f_only", (False, True): "c_only", (False, False): "neither"}
        table[key[(sides["F"], sides["C"])]] += 1
    return table


def paired_units(records: Sequence[CwrRecord], only: set[str] | None = None) -> list[tuple[str, bool, bool]]:
    """(base pair, F valid, C valid) of every pair measured under both conditions (optionally ``only`` some)."""
    by_pair = _sides(records, only)
    return [(base_pair(pair), sides["F"], sides["C"]) for pair, sides in sorted(by_pair.items()) if set(sides) == {"F", "C"}]


def _check_interval_method() -> None:
    method = PREREG.values.analysis.interval
    if method != INTERVAL_METHOD:
        raise ValueError(f"benchmarks/cwr/prereg.toml: analysis.interval = {method!r}; this version computes "
                         f"only {INTERVAL_METHOD!r}")


def _deficit(table: Mapping[str, int], units: Sequence[tuple[str, bool, bool]], prefix: str) -> dict[str, Any]:
    """The F - C interval the rules read (clustered by base pair), and the per-replica Newcombe figure beside it."""
    _check_interval_method()
    confidence = PREREG.values.analysis.confidence
    out: dict[str, Any] = {f"{prefix}.{k}": None for k in ("estimate", "lower", "upper", "bases", "replica_newcombe.lower",
                                                           "replica_newcombe.upper")}
    if units:
        interval = tango_rao_scott_interval(units, confidence)
        secondary = paired_difference_interval(table["both"], table["f_only"], table["c_only"], table["neither"], confidence)
        out = {f"{prefix}.estimate": interval.estimate, f"{prefix}.lower": interval.low, f"{prefix}.upper": interval.high,
               f"{prefix}.bases": len({base for base, _, _ in units}),
               f"{prefix}.replica_newcombe.lower": secondary.low, f"{prefix}.replica_newcombe.upper": secondary.high}
    return out


def metrics(records: Sequence[CwrRecord], baseline_summary: Mapping[str, Any] | None = None,
            motif_required: set[str] | None = None,
            subsets: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Flat metrics; undefined ratios are None.  Denominator of every rate: the units of the condition that were
    answered (errored units, :func:`errored`, are counted apart: ``<condition>.errored``, ``units.errored``,
    ``errored_share`` over all units, and ``pairs.unpaired`` holds the pairs with an errored side).

    ``motif_required``: ids of the pairs whose every bounded target solution
    needs the withheld motif; the deficit over those pairs alone is reported
    as ``deficit_motif_required.*`` (no rule reads it). ``subsets``: further
    named pair subsets (``pairs.pair_subsets``: ``exposure_matched``,
    ``without_interchangeable``), each reported as ``deficit_<name>.*`` and
    ``pairs_<name>.n`` beside the primary deficit (no rule reads them).
    """
    out: dict[str, Any] = {}
    for condition in CONDITIONS:
        rows = [r for r in records if r.condition == condition]
        answered = scored(rows)
        out[f"{condition}.units"] = len(rows)
        out[f"{condition}.errored"] = len(rows) - len(answered)
        out[f"{condition}.correct"] = sum(r.correct for r in answered)
        out[f"{condition}.parse_coverage"] = _ratio(sum(r.parse_status == "ok" for r in answered), len(answered))
        name = "validity" if condition in SYNTHESIS_CONDITIONS else "accuracy"
        out[f"{condition}.{name}"] = _ratio(sum(r.correct for r in answered), len(answered))
    out["units.errored"] = sum(errored(r) for r in records)
    out["errored_share"] = _ratio(out["units.errored"], len(records))
    for kind in ("verdict", "effect"):
        rows = scored([r for r in records if r.condition == "P" and r.kind == kind])
        out[f"P.{kind}.accuracy"] = _ratio(sum(r.correct for r in rows), len(rows))
    for context in E_CONTEXTS:  # E_C (the seed's main E), E_F, context-free E
        rows = [r for r in records if r.condition == "E" and r.context == context]
        answered = scored(rows)
        out[f"E_{context}.units"] = len(rows)
        out[f"E_{context}.correct"] = sum(r.correct for r in answered)
        out[f"E_{context}.accuracy"] = _ratio(sum(r.correct for r in answered), len(answered))
    table = paired_table(records)
    out.update({f"pairs.{k}": v for k, v in table.items()})
    n = table["both"] + table["f_only"] + table["c_only"] + table["neither"]
    out["pairs.n"] = n
    out.update(_deficit(table, paired_units(records), "deficit"))
    if motif_required is not None:
        restricted = paired_table(records, motif_required)
        out["pairs_motif_required.n"] = sum(v for k, v in restricted.items() if k != "unpaired")
        out.update(_deficit(restricted, paired_units(records, motif_required), "deficit_motif_required"))
    for name, ids in sorted((subsets or {}).items()):
        if name == "motif_required":
            continue
        chosen = set(ids)
        restricted = paired_table(records, chosen)
        out[f"pairs_{name}.n"] = sum(v for k, v in restricted.items() if k != "unpaired")
        out.update(_deficit(restricted, paired_units(records, chosen), f"deficit_{name}"))
    out["mastery.min_family_accuracy"] = mastery_floor(mastery_rows(records))[0]
    if baseline_summary is not None:
        out.update(attribution_gates(baseline_summary, motif_required, subsets))
    return out


def _scored_bases(records: Sequence[CwrRecord]) -> set[str]:
    return {base_pair(r.pair_id) for r in records if r.condition in SYNTHESIS_CONDITIONS and r.pair_id is not None}


def mastery_rows(records: Sequence[CwrRecord]) -> dict[str, list[CwrRecord]]:
    """family -> the answered P units on the worlds the run scores (a target of a base pair with an F or C unit),
    for every family with an F or C unit (a family no such P unit probes maps to an empty list)."""
    bases = _scored_bases(records)
    families = sorted({r.family for r in records if r.condition in SYNTHESIS_CONDITIONS})
    rows: dict[str, list[CwrRecord]] = {family: [] for family in families}
    for r in scored(records):
        if (r.condition == "P" and r.family in rows and r.world_ref.startswith("pair:")
                and base_pair(r.world_ref.split(":", 2)[1]) in bases):
            rows[r.family].append(r)
    return rows


def mastery_floor(rows: Mapping[str, Sequence[CwrRecord]]) -> tuple[float | None, str | None]:
    """(the least per-family P accuracy over the worlds scored, the family it belongs to) that the mastery gate
    reads, from :func:`mastery_rows`; a family with scored worlds and no answered P unit on them has mastery not
    established (0.0); None when the run scores no F or C unit."""
    if not rows:
        return None, None
    accuracy = {family: (sum(r.correct for r in got) / len(got) if got else 0.0) for family, got in rows.items()}
    family = min(sorted(accuracy), key=lambda f: accuracy[f])
    return accuracy[family], family


def mastery_table(records: Sequence[CwrRecord]) -> dict[str, dict[str, Any]]:
    """The summary's per-family mastery table: P units on the scored worlds, their accuracy with its clustered
    interval, the worlds probed and scored, and whether tau is reached (the gate reads the least accuracy)."""
    tau = PREREG.values.thresholds["tau"]
    out = {}
    for family, got in mastery_rows(records).items():
        accuracy = sum(r.correct for r in got) / len(got) if got else None
        scored_worlds = {r.world_ref for r in records if r.condition in SYNTHESIS_CONDITIONS and r.family == family}
        out[family] = {"p_units": len(got), "p_correct": sum(r.correct for r in got), "accuracy": accuracy,
                       "accuracy_interval": clustered_share(got, lambda r: r.correct) if got else None,
                       "worlds_probed": len({r.world_ref for r in got}), "worlds_scored": len(scored_worlds),
                       "tau": tau, "established": accuracy is not None and accuracy >= tau}
    return out


def attribution_gates(baseline_summary: Mapping[str, Any], motif_required: set[str] | None,
                      subsets: Mapping[str, Sequence[str]] | None) -> dict[str, Any]:
    """The gate metrics, properties of the run's whole pair set (measured or not, as ``baselines.json`` lists it),
    decided before any model outcome: witness-only pairs (not every bounded target solution needs the withheld
    motif), pairs whose F and C demonstrations differ in primitive exposure, the greedy baseline's solved share
    and the random baseline's valid rate over every target, and the pairs a copy of a demonstration solves."""
    pairs = set(baseline_summary.get("pairs", ()))
    matched = set((subsets or {}).get("exposure_matched", ()))
    out: dict[str, Any] = {
        "pairs.witness_only": None if motif_required is None else len(pairs - set(motif_required)),
        "pairs.exposure_unmatched": None if subsets is None else len(pairs - matched),
        "baselines.greedy_solved_share": _ratio(baseline_summary.get("greedy_solved", 0),
                                                baseline_summary.get("targets", 0)),
        "baselines.random_valid_rate": _ratio(baseline_summary.get("random_valid", 0),
                                              baseline_summary.get("random_samples", 0)),
        "baselines.copy_flagged_pairs": baseline_summary["copy_flagged_pairs"],
    }
    return out


def cluster_of(record: CwrRecord) -> str:
    """The cluster a unit's outcome shares structure with: the base pair for every unit on a pair's worlds (F and C
    sides of every replica, P/R/E items on its targets), otherwise the shipped world the item is on."""
    if record.world_ref.startswith("pair:"):
        return base_pair(record.world_ref.split(":", 2)[1])
    return record.world_ref


def clustered_share(rows: Sequence[CwrRecord], success: Any) -> dict[str, Any]:
    """The share of ``rows`` for which ``success(row)`` holds, with its cluster-aware 95% interval: Wilson on the
    Rao-Scott effective size, the clusters those of :func:`cluster_of` (:func:`benchmarks.core.stats.proportion`)."""
    cells: dict[str, list[int]] = {}
    for row in rows:
        cell = cells.setdefault(cluster_of(row), [0, 0])
        cell[0] += bool(success(row))
        cell[1] += 1
    clusters = [tuple(cells[key]) for key in sorted(cells)]
    return proportion(sum(k for k, _ in clusters), len(rows), clusters=clusters)


def baseline_intervals(baseline_summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The intervals of the two baseline shares the competence gate reads: the greedy solved share clustered by
    base pair (the sides and replicas of a base share its world), the random valid rate clustered by target (its
    samples share the target)."""
    greedy: dict[str, list[int]] = {}
    random_cells: list[tuple[int, int]] = []
    for pair_id, row in sorted(baseline_summary.get("pairs", {}).items()):
        cell = greedy.setdefault(base_pair(pair_id), [0, 0])
        for side in row["sides"]:
            cell[0] += side["greedy_status"] == "VALID"
            cell[1] += 1
            random_cells.append((side["random_valid"], side["random_samples"]))
    out = {}
    if greedy:
        cells = [tuple(greedy[key]) for key in sorted(greedy)]
        out["baselines.greedy_solved_share"] = proportion(sum(k for k, _ in cells), sum(n for _, n in cells),
                                                          clusters=cells)
    if random_cells and sum(n for _, n in random_cells):
        out["baselines.random_valid_rate"] = proportion(sum(k for k, _ in random_cells),
                                                        sum(n for _, n in random_cells), clusters=random_cells)
    return out


def intervals(records: Sequence[CwrRecord]) -> dict[str, dict[str, Any]]:
    """A cluster-aware 95% interval with k and n beside every share :func:`metrics` reports (metric name ->
    interval; errored units left out, as in the share).  Reported only: the rules read the F - C interval of :func:`metrics`, not these."""
    out: dict[str, dict[str, Any]] = {"errored_share": clustered_share(records, errored)}
    for condition in CONDITIONS:
        rows = scored([r for r in records if r.condition == condition])
        name = "validity" if condition in SYNTHESIS_CONDITIONS else "accuracy"
        out[f"{condition}.parse_coverage"] = clustered_share(rows, lambda r: r.parse_status == "ok")
        out[f"{condition}.{name}"] = clustered_share(rows, lambda r: r.correct)
    for kind in ("verdict", "effect"):
        out[f"P.{kind}.accuracy"] = clustered_share(
            scored([r for r in records if r.condition == "P" and r.kind == kind]), lambda r: r.correct)
    for context in E_CONTEXTS:
        out[f"E_{context}.accuracy"] = clustered_share(
            scored([r for r in records if r.condition == "E" and r.context == context]), lambda r: r.correct)
    rows = mastery_rows(records)
    _, family = mastery_floor(rows)
    out["mastery.min_family_accuracy"] = clustered_share(rows[family] if family else [], lambda r: r.correct)
    return dict(sorted(out.items()))


def sensitivity_grid(measured: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The classification at every (delta, tau) of the preregistered grid; reported, never used to choose."""
    values = finite(measured)
    grid = []
    for delta in PREREG.values.sensitivity.delta:
        for tau in PREREG.values.sensitivity.tau:
            try:
                label = gate_at(delta, tau).evaluate(values).label
            except Exception as exc:  # an unmeasured metric: recorded, not hidden
                label = f"not classifiable: {exc}"
            grid.append({"delta": delta, "tau": tau, "classification": label})
    return grid


def parse_status_counts(records: Sequence[CwrRecord]) -> dict[str, dict[str, int]]:
    return {c: dict(sorted(Counter(r.parse_status for r in records if r.condition == c).items())) for c in CONDITIONS}


def check_counts(records: Sequence[CwrRecord]) -> dict[str, dict[str, int]]:
    """``status:reason`` counts of the checker's verdicts on F and C artifacts."""
    return {c: dict(sorted(Counter(f"{r.check_status}:{r.check_reason}" for r in records if r.condition == c).items()))
            for c in SYNTHESIS_CONDITIONS}


def token_counts(records: Sequence[CwrRecord]) -> dict[str, dict[str, int]]:
    return {c: {"prompt": sum(r.prompt_tokens or 0 for r in records if r.condition == c),
                "generated": sum(r.generation_tokens for r in records if r.condition == c)} for c in CONDITIONS}


