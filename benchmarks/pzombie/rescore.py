"""Independent rescorer for a P-Zombie run.

Usage: python -S -I benchmarks/pzombie/rescore.py RUN_DIR [--prereg PATH]

Reads only the run directory (records.jsonl, and fixtures.json when it is
there) and the preregistration (by default the prereg.toml beside this
script); standard library only, nothing from the suite.

Per record it recomputes, from the primitive fields the engine recorded:

* token_diversity, engine.input_tokens, engine.distinct_input_tokens from
  input_token_ids (distinct over total ids);
* zone_entropy (H in bits, p = w / sum w) and zone (the largest weight, the
  first of equal ones) from zone_weights, the last step's router weights;
  engine.zone_entropy_of_mean from zone_weights_mean;
* unit_id ("<preset>:<prompt_id>"), and category and prompt from the
  measured prompt of that id in fixtures.json.

Every recomputed value that differs from the recorded one (floats by more
than 1e-9) is a disagreement.  Then, per preset and from the recomputed H and
TD of the records without an error: eta squared in both forms, F, the exact
p of F (regularised incomplete beta), the Wilson-Hilferty p, Pearson r and R
squared of TD -> H with the fitted line, the per-category counts and means;
h2.eta_squared_gain; and every classification of the prereg by its rule
order.  "classification" is the combined verdict (the prereg's [combined]).

Prints one JSON object: classification, classifications, metrics,
disagreements ({unit, field, recorded, recomputed}, in ledger order), records.
Exit status 0 without disagreements, 1 with; 2 with a one-line message on
stderr when an input cannot be read or is not what a run writes.
"""

import json
import math
import operator
import sys
import tomllib
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
#: The prereg block whose label is the run's one "classification" (the seed's combined verdict).
HEADLINE = "combined"
TOLERANCE = 1e-9
USAGE = "usage: rescore.py RUN_DIR [--prereg PATH]"


class Unusable(Exception):
    """An input that cannot be rescored; the message is one line."""


# --------------------------------------------------------------------------- reading


def parse_args(argv):
    run_dir, prereg = None, Path(__file__).resolve().parent / "prereg.toml"
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            print(USAGE)
            sys.exit(0)
        if arg == "--prereg":
            if not args:
                raise Unusable("--prereg needs a path; " + USAGE)
            prereg = Path(args.pop(0))
        elif arg.startswith("--prereg="):
            prereg = Path(arg[len("--prereg="):])
        elif arg.startswith("-"):
            raise Unusable(f"unknown option {arg!r}; " + USAGE)
        elif run_dir is None:
            run_dir = Path(arg)
        else:
            raise Unusable(f"one run directory only (got {str(run_dir)!r} and {arg!r}); " + USAGE)
    if run_dir is None:
        raise Unusable("no run directory given; " + USAGE)
    return run_dir, prereg


def read_bytes(path):
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise Unusable(f"{path}: no such file") from None
    except OSError as exc:
        raise Unusable(f"{path}: cannot be read ({exc.strerror or exc})") from None


def decode(path, raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unusable(f"{path}: not UTF-8 at byte {exc.start}") from None


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def json_value(text, where):
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise Unusable(f"{where}: not JSON ({str(exc).splitlines()[0]})") from None


def read_prereg(path):
    try:
        prereg = tomllib.loads(decode(path, read_bytes(path)))
    except tomllib.TOMLDecodeError as exc:
        raise Unusable(f"{path}: not TOML ({exc})") from None
    try:
        run = prereg["run"]
        spec = {
            "presets": {run["rule_preset"]: "active", run["comparison_preset"]: "baseline"},
            "categories": list(run["categories"]),
            "zones": list(prereg["engine"]["zones"]),
            "fixture_set": run["fixture_set"],
            "thresholds": dict(prereg["thresholds"]),
            "blocks": {key: value for key, value in prereg.items()
                       if isinstance(value, dict) and isinstance(value.get("rules"), list)},
        }
    except (KeyError, TypeError) as exc:
        raise Unusable(f"{path}: not a P-Zombie preregistration (missing {exc})") from None
    if HEADLINE not in spec["blocks"]:
        raise Unusable(f"{path}: not a P-Zombie preregistration (no [{HEADLINE}] rules)")
    return spec


def is_number(value):
    """A finite JSON number (an integer too large for a float is not one)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    return isinstance(value, float) and math.isfinite(value) or isinstance(value, int) and abs(value) <= 2 ** 1000


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_record(record, where, spec):
    """Refuse a line that is not a P-Zombie record; names the line and the field."""
    if not isinstance(record, dict):
        raise Unusable(f"{where}: a JSON {type(record).__name__}, not a record")

    def need(name, test, what):
        if name not in record:
            raise Unusable(f"{where}: no field {name!r}")
        if not test(record[name]):
            raise Unusable(f"{where}: {name} is {record[name]!r}, expected {what}")

    need("unit_id", lambda v: isinstance(v, str), "a string")
    where = f"{where} ({record['unit_id']})"
    need("preset", lambda v: isinstance(v, str) and v in spec["presets"], "one of " + ", ".join(spec["presets"]))
    need("prompt_id", lambda v: isinstance(v, str), "a string")
    need("category", lambda v: isinstance(v, str) and v in spec["categories"], "one of " + ", ".join(spec["categories"]))
    need("prompt", lambda v: isinstance(v, str), "a string")
    need("error", lambda v: v is None or isinstance(v, str), "null or an error code")
    need("input_token_ids", lambda v: isinstance(v, list) and all(is_int(i) for i in v), "a list of token ids")
    need("token_diversity", lambda v: v is None or is_number(v), "null or a number")
    need("zones", lambda v: isinstance(v, list) and all(isinstance(z, str) for z in v) and v, "a list of zone names")
    weights = lambda v: (v is None or isinstance(v, list) and len(v) == len(record["zones"])
                         and all(is_number(w) and 0 <= w <= 1e300 for w in v) and math.fsum(v) > 0)
    what = f"null or {len(record['zones'])} numbers from 0 to 1e300 with a positive sum"
    need("zone_weights", weights, what)
    need("zone_weights_mean", weights, what)
    need("zone_entropy", lambda v: v is None or is_number(v), "null or a number")
    need("zone", lambda v: v is None or isinstance(v, str), "null or a zone name")
    need("engine", lambda v: isinstance(v, dict), "an object")
    if record["error"] is None:
        if not record["input_token_ids"]:
            raise Unusable(f"{where}: a record without an error has no input_token_ids")
        if record["zone_weights"] is None:
            raise Unusable(f"{where}: a record without an error has no zone_weights")
    return where


def read_records(run_dir, spec):
    path = run_dir / "records.jsonl"
    text = decode(path, read_bytes(path))
    if text and not text.endswith("\n"):
        raise Unusable(f"{path}: the last line is torn (the run was killed while writing it); resume the run first")
    records, seen = [], {}
    for number, line in enumerate(text.split("\n")[:-1], start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        record = json_value(line, where)
        check_record(record, where, spec)
        if record["unit_id"] in seen:
            raise Unusable(f"{where}: unit {record['unit_id']} is recorded twice (first on line {seen[record['unit_id']]})")
        seen[record["unit_id"]] = number
        records.append(record)
    if not records:
        raise Unusable(f"{path}: no records")
    return records


def read_fixture_prompts(run_dir, spec):
    """The measured prompts of fixtures.json by prompt id, or None when the run has no fixtures.json."""
    path = run_dir / "fixtures.json"
    if not path.exists():
        return None
    data = json_value(decode(path, read_bytes(path)), str(path))
    try:
        rows = data["sets"][spec["fixture_set"]]["records"]
        return {row["prompt_id"]: row for row in rows if row["phase"] == "measured"}
    except (KeyError, TypeError) as exc:
        raise Unusable(f"{path}: no measured prompts of fixture set {spec['fixture_set']!r} (missing {exc})") from None


# --------------------------------------------------------------------------- per record


def entropy_bits(weights):
    total = math.fsum(weights)
    h = 0.0
    for w in weights:
        p = w / total
        if p > 0:
            h -= p * math.log2(p)
    return max(0.0, h)


def dominant(zones, weights):
    best = max(range(len(weights)), key=lambda i: (weights[i], -i))
    return zones[best]


def differs(recorded, recomputed):
    if is_number(recorded) and is_number(recomputed) and not (isinstance(recorded, int) and isinstance(recomputed, int)):
        return abs(recorded - recomputed) > TOLERANCE
    return recorded != recomputed


def recompute(record, fixtures):
    """(field, recorded, recomputed) for every field recomputed from the record's primitives, and (TD, H)."""
    ids, engine = record["input_token_ids"], record["engine"]
    found = [("unit_id", record["unit_id"], f"{record['preset']}:{record['prompt_id']}")]
    if fixtures is not None:
        row = fixtures.get(record["prompt_id"])
        found.append(("category", record["category"], None if row is None else row.get("category")))
        found.append(("prompt", record["prompt"], None if row is None else row.get("text")))
    td = len(set(ids)) / len(ids) if ids else None
    found.append(("token_diversity", record["token_diversity"], td))
    # no input ids (a prompt whose process failed before tokenising): TD and the counts are undefined (null)
    if "input_tokens" in engine:
        found.append(("engine.input_tokens", engine["input_tokens"], len(ids) if ids else None))
    if "distinct_input_tokens" in engine:
        found.append(("engine.distinct_input_tokens", engine["distinct_input_tokens"], len(set(ids)) if ids else None))
    h = None
    if record["zone_weights"] is not None:
        h = entropy_bits(record["zone_weights"])
        found.append(("zone_entropy", record["zone_entropy"], h))
        found.append(("zone", record["zone"], dominant(record["zones"], record["zone_weights"])))
    if record["zone_weights_mean"] is not None and "zone_entropy_of_mean" in engine:
        found.append(("engine.zone_entropy_of_mean", engine["zone_entropy_of_mean"], entropy_bits(record["zone_weights_mean"])))
    return found, td, h


# --------------------------------------------------------------------------- statistics


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
    """One-way ANOVA of category -> H; undefined values (no variance at all) are None, an infinite F is None."""
    values = [v for g in groups.values() for v in g]
    grand = mean(values)
    ss_total = math.fsum((v - grand) ** 2 for v in values)
    ss_between = math.fsum(len(g) * (mean(g) - grand) ** 2 for g in groups.values())
    ss_within = math.fsum((v - mean(g)) ** 2 for g in groups.values() for v in g)
    d1, d2 = len(groups) - 1, len(values) - len(groups)
    out = {"df_between": d1, "df_within": d2, "ss_between": ss_between, "ss_within": ss_within}
    if ss_between + ss_within == 0.0:
        return {**out, "eta_squared": None, "eta_squared_over_total": None, "f": None, "p_exact": None, "p_approx": None}
    f = math.inf if ss_within == 0.0 else (ss_between / d1) / (ss_within / d2)
    return {
        **out,
        "eta_squared": ss_between / (ss_between + ss_within),
        "eta_squared_over_total": ss_between / ss_total if ss_total > 0 else None,
        "f": None if math.isinf(f) else f,
        "p_exact": f_sf(f, d1, d2),
        "p_approx": f_sf_wilson_hilferty(f, d1, d2),
    }


def fit(xs, ys):
    """Pearson r and r squared of x -> y with the least-squares line; None where undefined."""
    mx, my = mean(xs), mean(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx if sxx > 0 else None
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy))) if sxx > 0 and syy > 0 else None
    return {"r_td": r, "r_squared_td": None if r is None else r * r, "slope_td": slope,
            "intercept_td": None if slope is None else my - slope * mx}


def preset_metrics(rows, total, categories):
    """rows: (category, TD, H) of the preset's records without an error; total: all its records."""
    out = {"n": total, "n_ok": len(rows), "errors": total - len(rows),
           "mean_h": mean([h for _, _, h in rows]), "mean_td": mean([td for _, td, _ in rows])}
    groups = {c: [h for cat, _, h in rows if cat == c] for c in categories}
    for c in categories:
        out[f"mean_h.{c}"] = mean(groups[c])
        out[f"n.{c}"] = len(groups[c])
    usable = {c: g for c, g in groups.items() if g}
    if len(usable) >= 2 and len(rows) > len(usable):
        out.update(anova(usable))
    else:
        out.update(dict.fromkeys(("eta_squared", "eta_squared_over_total", "f", "p_exact", "p_approx"), None))
    if len(rows) >= 2:
        out.update(fit([td for _, td, _ in rows], [h for _, _, h in rows]))
    else:
        out.update(dict.fromkeys(("r_td", "r_squared_td", "slope_td", "intercept_td"), None))
    return out


# --------------------------------------------------------------------------- rules


def holds(condition, values, thresholds):
    metric, op, operand = condition.split()
    limit = thresholds[operand] if operand in thresholds else float(operand)
    value = values.get(metric)
    if value is None:
        raise LookupError(metric)
    return COMPARE[op](value, limit)


def classify(block, values, thresholds):
    """The first rule that fires, else the passing state; None when a metric it has to read is undefined."""
    try:
        for rule in block["rules"]:
            if rule.get("otherwise"):
                return rule["label"]
            if all(holds(c, values, thresholds) for c in rule.get("all", [])) and (
                    not rule.get("any") or any(holds(c, values, thresholds) for c in rule["any"])):
                return rule["label"]
    except LookupError:
        return None
    return block.get("passing")


# --------------------------------------------------------------------------- main


def rescore(run_dir, prereg_path):
    spec = read_prereg(prereg_path)
    if not run_dir.is_dir():
        raise Unusable(f"{run_dir}: not a run directory")
    records = read_records(run_dir, spec)
    fixtures = read_fixture_prompts(run_dir, spec)
    disagreements = []
    rows = {preset: [] for preset in spec["presets"]}
    totals = dict.fromkeys(spec["presets"], 0)
    for record in records:
        found, td, h = recompute(record, fixtures)
        for field, recorded, recomputed in found:
            if differs(recorded, recomputed):
                disagreements.append({"unit": record["unit_id"], "field": field, "recorded": recorded,
                                      "recomputed": recomputed})
        totals[record["preset"]] += 1
        if record["error"] is None:
            rows[record["preset"]].append((record["category"], td, h))
    values = {}
    for preset, prefix in spec["presets"].items():
        for key, value in preset_metrics(rows[preset], totals[preset], spec["categories"]).items():
            values[f"{prefix}.{key}"] = value
    active, baseline = values["active.eta_squared"], values["baseline.eta_squared"]
    values["h2.eta_squared_gain"] = active - baseline if active is not None and baseline is not None else None
    labels = {key: classify(block, values, spec["thresholds"]) for key, block in spec["blocks"].items()}
    return {"classification": labels[HEADLINE], "classifications": labels, "metrics": values,
            "disagreements": disagreements, "records": len(records)}


def main(argv=None):
    try:
        run_dir, prereg_path = parse_args(sys.argv[1:] if argv is None else argv)
        report = rescore(run_dir, prereg_path)
    except Unusable as exc:
        print("rescore.py: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, sort_keys=True))
    return 1 if report["disagreements"] else 0


if __name__ == "__main__":
    sys.exit(main())
