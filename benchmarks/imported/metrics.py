"""What the rules of an imported run read: per-unit decisions, shares, means and their intervals.

Every unit (a sample and epoch) counts.  A unit is *scored* when the log
gives the preregistered scorer a number (:func:`benchmarks.imported.spec.score_number`),
*errored* when the log records an error for it, *unscored* otherwise.  The
headline metric (``accuracy`` or ``mean``, as ``[source].metric`` says) is
taken over every unit, an errored or unscored one counting as 0, so that a
failure never leaves the denominator; ``scored_<metric>`` is the same over
scored units only.  Intervals count units in their clusters (the epochs of one
sample, or a metadata field): for ``accuracy`` the Wilson interval on the
Rao-Scott effective size (plain Wilson when every cluster holds one unit), for
``mean`` the cluster-robust normal interval.  ``accuracy`` needs scores of 0 or
1; any other value makes its interval undefined, and a rule reading it
cannot decide.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Iterable, Mapping, Sequence

from benchmarks.core import stats
from benchmarks.core.paired import tango_rao_scott_interval

from .spec import DecidedSample, ImportedSample, SourceSpec, score_number


def cluster_of(sample: ImportedSample, source: SourceSpec) -> str:
    """The cluster a unit's interval counts it in: its sample id, or the value of a metadata field (a unit without
    the field is a cluster of its own sample)."""
    if source.cluster.startswith("metadata."):
        value = sample.metadata.get(source.cluster[len("metadata."):])
        return f"{source.cluster}={value}" if value is not None else f"sample={sample.sample_id}"
    return f"sample={sample.sample_id}"


def subset_of(sample: ImportedSample, source: SourceSpec) -> str | None:
    if not source.subset_field:
        return None
    value = sample.metadata.get(source.subset_field)
    return None if value is None else str(value)


def reading(sample: ImportedSample, source: SourceSpec) -> tuple[float | None, str]:
    """The preregistered scorer's value of a unit as a number, and the unit's outcome."""
    value = None if sample.error is not None else score_number(sample.scores.get(source.scorer))
    return value, ("errored" if sample.error is not None else ("scored" if value is not None else "unscored"))


def decide(sample: ImportedSample, source: SourceSpec, baseline: ImportedSample | None = None) -> DecidedSample:
    """The run's record of one imported unit: its score as a number, its outcome, cluster and subset, and with a
    baseline the same unit of the baseline run."""
    value, outcome = reading(sample, source)
    paired: dict[str, Any] = {}
    if baseline is not None:
        base_value, base_outcome = reading(baseline, source)
        paired = {"baseline_scores": dict(baseline.scores), "baseline_error": baseline.error,
                  "baseline_value": base_value, "baseline_outcome": base_outcome}
    return DecidedSample(**sample.__dict__, value=value, outcome=outcome, cluster=cluster_of(sample, source),
                         subset=subset_of(sample, source), **paired)


def first_difference(a: Sequence[ImportedSample], b: Sequence[ImportedSample]) -> str | None:
    """The first way two sets of samples cannot be paired unit by unit (by unit key), or None."""
    by_a = {s.unit: s for s in a}
    by_b = {s.unit: s for s in b}
    for unit in sorted(set(by_a) | set(by_b)):
        if unit not in by_b or unit not in by_a:
            where, other = ("A", "B") if unit in by_a else ("B", "A")
            return f"sample {unit} is in run {where} and not in run {other}; the runs hold different sample sets"
        if by_a[unit].input_sha256 != by_b[unit].input_sha256:
            return (f"sample {unit}: its input differs between the runs (sha256 {by_a[unit].input_sha256[:12]} in A, "
                    f"{by_b[unit].input_sha256[:12]} in B)")
        if by_a[unit].target != by_b[unit].target:
            return f"sample {unit}: its target differs between the runs ({by_a[unit].target!r} in A, " \
                   f"{by_b[unit].target!r} in B)"
    return None


def _interval(records: Sequence[DecidedSample], metric: str, confidence: float) -> tuple[float | None, float | None, Any]:
    """(low, high, method) of the headline metric over ``records`` (unscored units count as 0)."""
    n = len(records)
    if not n:
        return None, None, None
    values = [r.value if r.value is not None else 0.0 for r in records]
    clusters: dict[str, list[float]] = {}
    for record, value in zip(records, values):
        clusters.setdefault(record.cluster, []).append(value)
    if metric == "accuracy":
        if any(v not in (0.0, 1.0) for v in values):
            return None, None, "undefined: a score other than 0 or 1"
        k = int(sum(values))
        if all(len(c) == 1 for c in clusters.values()):
            found = stats.proportion(k, n, confidence=confidence)
        else:
            cells = [(int(sum(c)), len(c)) for _, c in sorted(clusters.items())]
            found = stats.proportion(k, n, confidence=confidence, clusters=cells)
        return found["low"], found["high"], found["method"]
    mean = math.fsum(values) / n
    if len(clusters) < 2:
        return None, None, "undefined: one cluster"
    spread = math.fsum((math.fsum(c) - len(c) * mean) ** 2 for c in clusters.values())
    half = NormalDist().inv_cdf(0.5 + confidence / 2.0) * math.sqrt(spread) / n
    return mean - half, mean + half, "cluster-robust-normal"


def _block(records: Sequence[DecidedSample], metric: str, confidence: float, prefix: str) -> dict[str, Any]:
    n = len(records)
    scored = [r for r in records if r.value is not None]
    low, high, _ = _interval(records, metric, confidence)
    return {
        f"{prefix}units": n,
        f"{prefix}{metric}": math.fsum(r.value for r in scored) / n if n else None,
        f"{prefix}scored_{metric}": math.fsum(r.value for r in scored) / len(scored) if scored else None,
        f"{prefix}{metric}_low": low,
        f"{prefix}{metric}_high": high,
    }


def _baseline_block(records: Sequence[DecidedSample], metric: str, confidence: float) -> dict[str, Any]:
    """The baseline's metric over the same units, the difference (run - baseline) and its paired interval:
    for accuracy Tango's score interval divided by the Rao-Scott design effect of the clusters (plain Tango when
    every cluster holds one unit), for a mean the cluster-robust normal interval of the per-unit differences."""
    out: dict[str, Any] = {f"baseline_{metric}": None, "difference": None, "difference_low": None,
                           "difference_high": None}
    if not records or any(r.baseline_outcome is None for r in records):
        return out
    mine = [r.value if r.value is not None else 0.0 for r in records]
    theirs = [r.baseline_value if r.baseline_value is not None else 0.0 for r in records]
    n = len(records)
    out[f"baseline_{metric}"] = math.fsum(theirs) / n
    out["difference"] = math.fsum(mine) / n - math.fsum(theirs) / n
    if metric == "accuracy":
        if any(v not in (0.0, 1.0) for v in mine + theirs):
            return out
        found = tango_rao_scott_interval([(r.cluster, a == 1.0, b == 1.0) for r, a, b in zip(records, mine, theirs)],
                                         confidence)
        out.update(difference_low=found.low, difference_high=found.high)
        return out
    clusters: dict[str, list[float]] = {}
    for record, a, b in zip(records, mine, theirs):
        clusters.setdefault(record.cluster, []).append(a - b)
    if len(clusters) >= 2:
        mean = out["difference"]
        spread = math.fsum((math.fsum(c) - len(c) * mean) ** 2 for c in clusters.values())
        half = NormalDist().inv_cdf(0.5 + confidence / 2.0) * math.sqrt(spread) / n
        out.update(difference_low=mean - half, difference_high=mean + half)
    return out


def metrics_of(records: Sequence[DecidedSample], source: SourceSpec) -> dict[str, Any]:
    """Every metric a rule of an imported run may read (see the module's docstring)."""
    n = len(records)
    planned = source.planned_samples * source.epochs
    errored = sum(r.outcome == "errored" for r in records)
    unscored = sum(r.outcome == "unscored" for r in records)
    out: dict[str, Any] = {
        "samples": len({r.sample_id for r in records}),
        "epochs": max((r.epoch for r in records), default=0),
        "errored": errored,
        "unscored": unscored,
        "error_share": (errored + unscored) / n if n else None,
        "planned_share": n / planned if planned else None,
        "clusters": len({r.cluster for r in records}),
    }
    out.update(_block(records, source.metric, source.confidence, ""))
    out.update(_baseline_block(records, source.metric, source.confidence))
    for name in source.subsets:
        chosen = [r for r in records if r.subset == name]
        out.update(_block(chosen, source.metric, source.confidence, f"subset.{name}."))
    return out


def metric_names(source: SourceSpec) -> tuple[str, ...]:
    return tuple(metrics_of([], source))


def interval_methods(records: Sequence[DecidedSample], source: SourceSpec) -> dict[str, Any]:
    """Which interval each headline figure has (for the summary): overall and per subset."""
    out = {source.metric: _interval(records, source.metric, source.confidence)[2]}
    for name in source.subsets:
        out[f"subset.{name}.{source.metric}"] = _interval([r for r in records if r.subset == name], source.metric,
                                                          source.confidence)[2]
    return out


def binary_outcomes(records: Iterable[DecidedSample], source: SourceSpec) -> dict[str, dict[str, bool]]:
    """Per-unit successes for ``preregbench compare`` when every value is 0 or 1 (unscored units fail)."""
    records = list(records)
    if source.metric != "accuracy" or any(r.value not in (None, 0.0, 1.0) for r in records):
        return {}
    out = {source.metric: {r.unit: r.value == 1.0 for r in records}}
    for name in source.subsets:
        out[f"subset.{name}.{source.metric}"] = {r.unit: r.value == 1.0 for r in records if r.subset == name}
    return out


def paired_mean_bootstrap(a: Mapping[str, DecidedSample], b: Mapping[str, DecidedSample], confidence: float,
                          resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Mean score difference A - B over the shared units, with a percentile bootstrap over clusters (seeded)."""
    import numpy as np  # the paired bootstrap's resampling; numpy is a dependency of the suite

    shared = sorted(set(a) & set(b))
    clusters: dict[str, list[float]] = {}
    for unit in shared:
        difference = (a[unit].value or 0.0) - (b[unit].value or 0.0)
        clusters.setdefault(a[unit].cluster, []).append(difference)
    if not shared:
        return {"units": 0, "difference": None, "low": None, "high": None}
    sums = np.array([math.fsum(c) for _, c in sorted(clusters.items())])
    sizes = np.array([len(c) for _, c in sorted(clusters.items())], dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(sums), size=(resamples, len(sums)))
    draws = sums[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(draws, [alpha / 2.0, 1.0 - alpha / 2.0])
    mean_a = math.fsum(a[u].value or 0.0 for u in shared) / len(shared)
    mean_b = math.fsum(b[u].value or 0.0 for u in shared) / len(shared)
    return {"units": len(shared), "value_a": mean_a, "value_b": mean_b, "difference": mean_a - mean_b,
            "low": float(low), "high": float(high), "clusters": len(sums), "resamples": resamples, "seed": seed}


__all__ = ["binary_outcomes", "cluster_of", "decide", "first_difference", "interval_methods", "metric_names", "metrics_of",
           "paired_mean_bootstrap", "reading", "subset_of"]
