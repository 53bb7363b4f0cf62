"""Independent rescorer for a P-Zombie run.

Usage: python benchmarks/pzombie/rescore.py RUN_DIR [--prereg PATH]

Reads only RUN_DIR/records.jsonl and the preregistration (by default the
prereg.toml beside this script) and uses the standard library only, nothing
from the suite.  For every record it recomputes the zone entropy H (bits)
from the recorded last-step zone weights and the token diversity from the
recorded input token ids; per preset it recomputes eta squared in both forms,
F, the exact p (regularised incomplete beta by continued fraction), the
Wilson-Hilferty p, Pearson R squared of TD -> H and the per-category means;
then every classification by the preregistered rule order.  It prints JSON.
Exit status 0 when every recomputed per-record value equals the recorded one
(to 1e-9), 1 otherwise.
"""

import argparse
import json
import math
import operator
import sys
import tomllib
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
CLASSIFICATIONS = ("token_control", "combined", "eta2_target", "h2")
TOLERANCE = 1e-9


def read_records(path):
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        sys.exit(f"{path}: the last line is torn; the run did not finish writing it")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def entropy_bits(weights):
    total = math.fsum(weights)
    h = 0.0
    for w in weights:
        p = w / total
        if p > 0:
            h -= p * math.log2(p)
    return max(0.0, h)


def mean(values):
    return math.fsum(values) / len(values) if values else None


def log_beta(a, b):
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_fraction(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 1000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a, b, x):
    """Regularised I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - log_beta(a, b))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * beta_fraction(a, b, x) / a
    return 1.0 - math.exp(b * math.log1p(-x) + a * math.log(x) - log_beta(a, b)) * beta_fraction(b, a, 1.0 - x) / b


def f_sf(f, d1, d2):
    """Upper tail of the F(d1, d2) distribution."""
    if math.isinf(f):
        return 0.0
    return incomplete_beta(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f))


def f_sf_wilson_hilferty(f, d1, d2):
    if math.isinf(f):
        return 0.0
    a, b = 2.0 / (9.0 * d1), 2.0 / (9.0 * d2)
    cube = f ** (1.0 / 3.0)
    z = ((1.0 - b) * cube - (1.0 - a)) / math.sqrt(a + b * cube * cube)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def anova(groups):
    values = [v for g in groups.values() for v in g]
    grand = mean(values)
    ss_total = math.fsum((v - grand) ** 2 for v in values)
    ss_between = math.fsum(len(g) * (mean(g) - grand) ** 2 for g in groups.values())
    ss_within = math.fsum((v - mean(g)) ** 2 for g in groups.values() for v in g)
    d1, d2 = len(groups) - 1, len(values) - len(groups)
    if ss_between + ss_within == 0.0:
        return {"eta_squared": None, "eta_squared_over_total": None, "f": None, "p_exact": None, "p_approx": None,
                "df_between": d1, "df_within": d2}
    f = math.inf if ss_within == 0.0 else (ss_between / d1) / (ss_within / d2)
    return {
        "eta_squared": ss_between / (ss_between + ss_within),
        "eta_squared_over_total": ss_between / ss_total if ss_total > 0 else None,
        "f": None if math.isinf(f) else f,
        "p_exact": f_sf(f, d1, d2),
        "p_approx": f_sf_wilson_hilferty(f, d1, d2),
        "df_between": d1,
        "df_within": d2,
    }


def r_squared(xs, ys):
    mx, my = mean(xs), mean(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx == 0.0 or syy == 0.0:
        return None
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    return r * r


def holds(condition, values, thresholds):
    metric, op, operand = condition.split()
    limit = thresholds[operand] if operand in thresholds else float(operand)
    value = values.get(metric)
    if value is None:
        raise LookupError(metric)
    return COMPARE[op](value, limit)


def classify(block, values, thresholds):
    """The first rule that fires, else the passing state; None when a metric it reads is undefined."""
    try:
        for rule in block["rules"]:
            if rule.get("otherwise"):
                return rule["label"]
            all_hold = all(holds(c, values, thresholds) for c in rule.get("all", []))
            any_hold = not rule.get("any") or any(holds(c, values, thresholds) for c in rule["any"])
            if all_hold and any_hold:
                return rule["label"]
    except LookupError:
        return None
    return block.get("passing")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Recompute a P-Zombie run from its per-prompt records.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
    args = parser.parse_args(argv)
    prereg = tomllib.loads(args.prereg.read_text(encoding="utf-8"))
    run = prereg["run"]
    categories = run["categories"]
    prefixes = {run["rule_preset"]: "active", run["comparison_preset"]: "baseline"}
    records = read_records(args.run_dir / "records.jsonl")

    mismatches = []
    by_preset = {preset: [] for preset in prefixes}
    for record in records:
        ids = record["input_token_ids"]
        if ids:
            td = len(set(ids)) / len(ids)
        else:  # an engine that records only the counts behind TD
            td = record["engine"]["distinct_input_tokens"] / record["engine"]["input_tokens"]
        if abs(td - record["token_diversity"]) > TOLERANCE:
            mismatches.append(f"{record['unit_id']}: token_diversity")
        if record["error"] is None:
            if record["zone_weights"] is None or record["zone_entropy"] is None:
                mismatches.append(f"{record['unit_id']}: no zone weights on a record without an error")
                continue
            h = entropy_bits(record["zone_weights"])
            if abs(h - record["zone_entropy"]) > TOLERANCE:
                mismatches.append(f"{record['unit_id']}: zone_entropy")
            by_preset.setdefault(record["preset"], []).append((record["category"], td, h))

    values = {}
    for preset, prefix in prefixes.items():
        rows = by_preset.get(preset, [])
        groups = {c: [h for cat, _, h in rows if cat == c] for c in categories}
        groups = {c: g for c, g in groups.items() if g}
        values[f"{prefix}.n_ok"] = len(rows)
        for c in categories:
            values[f"{prefix}.mean_h.{c}"] = mean([h for cat, _, h in rows if cat == c])
        if len(groups) >= 2 and len(rows) > len(groups):
            for key, value in anova(groups).items():
                values[f"{prefix}.{key}"] = value
        else:
            values.update({f"{prefix}.{k}": None for k in ("eta_squared", "eta_squared_over_total", "f", "p_exact", "p_approx")})
        values[f"{prefix}.r_squared_td"] = r_squared([td for _, td, _ in rows], [h for _, _, h in rows]) if len(rows) >= 2 else None
    active, baseline = values.get("active.eta_squared"), values.get("baseline.eta_squared")
    values["h2.eta_squared_gain"] = active - baseline if active is not None and baseline is not None else None

    thresholds = prereg["thresholds"]
    labels = {key: classify(prereg[key], values, thresholds) for key in CLASSIFICATIONS}
    report = {"records": len(records), "metrics": values, "classifications": labels, "mismatches": mismatches}
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
