"""Independent rescorer of an imported-samples run.

Usage: python -S -I rescore.py RUN_DIR [--prereg PATH]

Standard library only, nothing from the suite: reads RUN_DIR/records.jsonl and
the preregistration (default: the prereg.toml beside this file), recomputes
from each record's primitive fields (its scores, error and metadata) the
preregistered scorer's value as a number, the unit's outcome (scored,
errored, unscored), its cluster and its subset, and the same of the
baseline's unit where the run has a baseline; then every metric with its
interval (Wilson, on the Rao-Scott effective size when clusters hold several
units; cluster-robust normal for a mean; for the difference to the baseline
Tango's paired score interval with the Rao-Scott design effect) and the
classification by the preregistered rule order.  Prints one JSON object: ``classification``,
``metrics``, ``units`` and ``disagreements`` (in record order, one
``{"unit", "field", "recorded", "recomputed"}`` per per-unit field that
differs).  Exit status 0 without disagreements, 1 with some, 2 (one line on
stderr) when the input cannot be read.
"""

import argparse
import json
import math
import operator
import sys
import tomllib
from pathlib import Path
from statistics import NormalDist

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


class InputError(Exception):
    """The run directory or the preregistration cannot be read; the message is one line."""


def number(value):
    """A score as a number (inspect_ai letters, booleans, numbers, numeric text), None otherwise."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        if value in LETTERS:
            return LETTERS[value]
        try:
            value = float(value)
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return None


def reading(scores, error, source):
    value = None if error is not None else number(scores.get(source["scorer"]))
    return value, ("errored" if error is not None else ("scored" if value is not None else "unscored"))


def derive(record, source):
    value, outcome = reading(record["scores"], record["error"], source)
    baseline_value = baseline_outcome = None
    if record.get("baseline_scores") is not None or record.get("baseline_error") is not None:
        baseline_value, baseline_outcome = reading(record.get("baseline_scores") or {}, record.get("baseline_error"),
                                                   source)
    metadata = record["metadata"]
    if source["cluster"].startswith("metadata."):
        field_value = metadata.get(source["cluster"][len("metadata."):])
        cluster = (f"{source['cluster']}={field_value}" if field_value is not None
                   else f"sample={record['sample_id']}")
    else:
        cluster = f"sample={record['sample_id']}"
    subset = None
    if source["subset_field"]:
        found = metadata.get(source["subset_field"])
        subset = None if found is None else str(found)
    return {"value": value, "outcome": outcome, "cluster": cluster, "subset": subset,
            "baseline_value": baseline_value, "baseline_outcome": baseline_outcome}


def z_of(confidence):
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson(p, n, z):
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if p == 0.0 else low), (1.0 if p == 1.0 else high)


def interval(units, metric, confidence):
    """(low, high) over ``units`` ((value or 0, cluster) pairs)."""
    n = len(units)
    if not n:
        return None, None
    clusters = {}
    for value, cluster in units:
        clusters.setdefault(cluster, []).append(value)
    z = z_of(confidence)
    if metric == "accuracy":
        if any(v not in (0.0, 1.0) for v, _ in units):
            return None, None
        k = sum(v for v, _ in units)
        p = k / n
        if all(len(c) == 1 for c in clusters.values()):
            return wilson(p, n, z)
        cells = [(sum(c), len(c)) for c in clusters.values()]
        if len(cells) < 2 or k in (0, n):
            deff = n / len(cells)
        else:
            spread = math.fsum((ck - cn * p) ** 2 for ck, cn in cells)
            deff = min(float(max(cn for _, cn in cells)), max(1.0, spread / (n * p * (1.0 - p))))
        return wilson(p, n / deff, z)
    if len(clusters) < 2:
        return None, None
    mean = math.fsum(v for v, _ in units) / n
    spread = math.fsum((math.fsum(c) - len(c) * mean) ** 2 for c in clusters.values())
    half = z * math.sqrt(spread) / n
    return mean - half, mean + half


def block(derived, metric, confidence, prefix):
    n = len(derived)
    scored = [d["value"] for d in derived if d["value"] is not None]
    low, high = interval([(d["value"] if d["value"] is not None else 0.0, d["cluster"]) for d in derived], metric,
                         confidence)
    return {f"{prefix}units": n, f"{prefix}{metric}": math.fsum(scored) / n if n else None,
            f"{prefix}scored_{metric}": math.fsum(scored) / len(scored) if scored else None,
            f"{prefix}{metric}_low": low, f"{prefix}{metric}_high": high}


def tango_z(b, c, n, delta):
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta
    c_ = -c * delta * (1.0 - delta)
    q21 = (math.sqrt(max(0.0, b_ * b_ - 4.0 * a_ * c_)) - b_) / (2.0 * a_)
    variance = n * (2.0 * q21 + delta * (1.0 - delta))
    numerator = b - c - n * delta
    if variance <= 1e-300:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def bisect(b, c, n, low, high, target):
    for _ in range(200):
        if high - low <= 1e-13:
            break
        mid = 0.5 * (low + high)
        if tango_z(b, c, n, mid) > target:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def tango_rao_scott(units, confidence):
    """Tango's score interval for a paired difference, b, c and n divided by the Rao-Scott design effect of the
    clusters; ``units`` are (cluster, first success, second success)."""
    tables = {}
    for cluster, first, second in units:
        cells = tables.setdefault(cluster, [0, 0, 0, 0])
        cells[(0 if second else 1) if first else (2 if second else 3)] += 1
    total = sum(sum(t) for t in tables.values())
    b = sum(t[1] for t in tables.values())
    c = sum(t[2] for t in tables.values())
    estimate = (b - c) / total
    largest = max(sum(t) for t in tables.values())
    unit_variance = (b + c) / total - estimate * estimate
    if len(tables) < 2 or unit_variance <= 1e-12:
        deff = float(largest)
    else:
        spread = math.fsum(((t[1] - t[2]) - sum(t) * estimate) ** 2 for t in tables.values())
        deff = min(float(largest), max(1.0, spread / (total * unit_variance)))
    b, c, n = b / deff, c / deff, total / deff
    z = z_of(confidence)
    lower = -1.0 if tango_z(b, c, n, -1.0) <= z else bisect(b, c, n, -1.0, estimate, z)
    upper = 1.0 if tango_z(b, c, n, 1.0) >= -z else bisect(b, c, n, estimate, 1.0, -z)
    return lower, upper


def baseline_block(derived, metric, confidence):
    out = {f"baseline_{metric}": None, "difference": None, "difference_low": None, "difference_high": None}
    if not derived or any(d["baseline_outcome"] is None for d in derived):
        return out
    mine = [d["value"] if d["value"] is not None else 0.0 for d in derived]
    theirs = [d["baseline_value"] if d["baseline_value"] is not None else 0.0 for d in derived]
    n = len(derived)
    out[f"baseline_{metric}"] = math.fsum(theirs) / n
    out["difference"] = math.fsum(mine) / n - math.fsum(theirs) / n
    if metric == "accuracy":
        if any(v not in (0.0, 1.0) for v in mine + theirs):
            return out
        low, high = tango_rao_scott([(d["cluster"], a == 1.0, b == 1.0) for d, a, b in zip(derived, mine, theirs)],
                                    confidence)
        out.update(difference_low=low, difference_high=high)
        return out
    clusters = {}
    for d, a, b in zip(derived, mine, theirs):
        clusters.setdefault(d["cluster"], []).append(a - b)
    if len(clusters) >= 2:
        mean = out["difference"]
        spread = math.fsum((math.fsum(c) - len(c) * mean) ** 2 for c in clusters.values())
        half = z_of(confidence) * math.sqrt(spread) / n
        out.update(difference_low=mean - half, difference_high=mean + half)
    return out


def metrics(records, derived, source):
    n = len(records)
    planned = source["planned_samples"] * source["epochs"]
    errored = sum(d["outcome"] == "errored" for d in derived)
    unscored = sum(d["outcome"] == "unscored" for d in derived)
    out = {
        "samples": len({r["sample_id"] for r in records}),
        "epochs": max((r["epoch"] for r in records), default=0),
        "errored": errored,
        "unscored": unscored,
        "error_share": (errored + unscored) / n if n else None,
        "planned_share": n / planned if planned else None,
        "clusters": len({d["cluster"] for d in derived}),
    }
    out.update(block(derived, source["metric"], source["confidence"], ""))
    out.update(baseline_block(derived, source["metric"], source["confidence"]))
    for name in source["subsets"]:
        out.update(block([d for d in derived if d["subset"] == name], source["metric"], source["confidence"],
                         f"subset.{name}."))
    return out


def holds(condition, values, thresholds):
    metric, op, operand = condition.split()
    limit = thresholds[operand] if operand in thresholds else float(operand)
    value = values.get(metric)
    if value is None:
        raise ValueError(f"metric {metric} is undefined")
    return COMPARE[op](value, limit)


def classify(prereg, values):
    block_, thresholds = prereg["classification"], prereg["thresholds"]
    for rule in block_["rules"]:
        if rule.get("otherwise"):
            return rule["label"]
        if all(holds(c, values, thresholds) for c in rule.get("all", [])) and (
                not rule.get("any") or any(holds(c, values, thresholds) for c in rule["any"])):
            return rule["label"]
    return block_.get("passing")


def read_inputs(run_dir, prereg_path):
    try:
        prereg = tomllib.loads(prereg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{prereg_path}: cannot be read as TOML ({exc})")
    ledger = run_dir / "records.jsonl"
    try:
        raw = ledger.read_bytes()
    except OSError as exc:
        raise InputError(f"{ledger}: cannot be read ({exc.strerror or exc})")
    if raw and not raw.endswith(b"\n"):
        raise InputError(f"{ledger}: ends in a torn line")
    records = []
    for line_number, line in enumerate(raw.split(b"\n")[:-1] if raw else [], start=1):
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{ledger}: line {line_number} is not a JSON record ({exc})")
        if not isinstance(record, dict):
            raise InputError(f"{ledger}: line {line_number} is not a JSON object")
        records.append(record)
    return prereg, records


def rescore(prereg, records):
    source = prereg["source"]
    disagreements, derived = [], []
    for line_number, record in enumerate(records, start=1):
        try:
            found = derive(record, source)
            unit = record["unit"]
        except (KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"records.jsonl: line {line_number} lacks a field ({exc!r})")
        for field in ("value", "outcome", "cluster", "subset", "baseline_value", "baseline_outcome"):
            if record.get(field) != found[field]:
                disagreements.append({"unit": unit, "field": field, "recorded": record.get(field),
                                      "recomputed": found[field]})
        derived.append(found)
    values = metrics(records, derived, source)
    try:
        label = classify(prereg, values) if records else None
    except (KeyError, TypeError, ValueError):
        label = None  # a rule reads an undefined metric: the run cannot be decided
    return {"units": len(records), "metrics": values, "classification": label, "disagreements": disagreements}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Recompute an imported-samples run from its records.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
    args = parser.parse_args(argv)
    try:
        result = rescore(*read_inputs(args.run_dir, args.prereg))
    except InputError as exc:
        print(f"rescore: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0 if not result["disagreements"] else 1


if __name__ == "__main__":
    sys.exit(main())
