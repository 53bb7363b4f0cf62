"""Independent rescorer for a RES Step 0 run.

Usage: python benchmarks/res/rescore.py RUN_DIR [--prereg PATH]

Reads only RUN_DIR/records.jsonl and the preregistration (by default the
prereg.toml beside this script), uses the standard library only and nothing
from the suite, recomputes the logit choice and the parsed answer of every
item from its raw fields, every metric, and the classification by the
preregistered rule order, and prints them as JSON.  Exit status 0 when the
recomputed per-item fields equal the recorded ones, 1 otherwise.
"""

import argparse
import json
import operator
import sys
import tomllib
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}


def decision_letter(text):
    """Upper-case; keep A/B with no capital letter on either side; accept exactly one."""
    upper = text.upper()
    hits = []
    for i, ch in enumerate(upper):
        if ch not in "AB":
            continue
        before = upper[i - 1] if i > 0 else ""
        after = upper[i + 1] if i + 1 < len(upper) else ""
        if not ("A" <= before <= "Z") and not ("A" <= after <= "Z"):
            hits.append(ch)
    return hits[0] if len(hits) == 1 else None


def read_records(path):
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        sys.exit(f"{path}: the last line is torn; the run did not finish writing it")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def share(hits, total):
    return hits / total if total else None


def holds(condition, values, thresholds):
    metric, op, operand = condition.split()
    limit = thresholds[operand] if operand in thresholds else float(operand)
    return COMPARE[op](values[metric], limit)


def classify(prereg, values):
    thresholds = prereg["thresholds"]
    block = prereg["classification"]
    for rule in block["rules"]:
        if rule.get("otherwise"):
            return rule["label"]
        all_hold = all(holds(c, values, thresholds) for c in rule.get("all", []))
        any_hold = not rule.get("any") or any(holds(c, values, thresholds) for c in rule["any"])
        if all_hold and any_hold:
            return rule["label"]
    return block.get("passing")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Recompute a RES Step 0 run from its records.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
    args = parser.parse_args(argv)
    prereg = tomllib.loads(args.prereg.read_text(encoding="utf-8"))
    labels = prereg["measurement"]["labels"]
    records = read_records(args.run_dir / "records.jsonl")

    mismatches = []
    by_condition = {}
    for record in records:
        logits = dict(zip(labels, record["label_logits"]))
        logit_choice = "A" if logits["A"] - logits["B"] >= 0 else "B"
        parsed = None if record["generation_error"] else decision_letter(record["generation"])
        if logit_choice != record["logit_choice"] or parsed != record["parsed"]:
            mismatches.append(record["item_id"])
        by_condition.setdefault(record["condition"], []).append((record["ideal"], logit_choice, parsed))

    values = {}
    for condition, rows in sorted(by_condition.items()):
        parsed_rows = [r for r in rows if r[2] is not None]
        values[f"{condition}.items"] = len(rows)
        values[f"{condition}.logit_accuracy"] = share(sum(ideal == logit for ideal, logit, _ in rows), len(rows))
        values[f"{condition}.generated_accuracy"] = share(sum(ideal == got for ideal, _, got in rows), len(rows))
        values[f"{condition}.parser_coverage"] = share(len(parsed_rows), len(rows))
        values[f"{condition}.parsed_accuracy"] = share(sum(ideal == got for ideal, _, got in parsed_rows), len(parsed_rows))
        values[f"{condition}.agreement"] = share(sum(logit == got for _, logit, got in parsed_rows), len(parsed_rows))

    report = {"items": len(records), "metrics": values, "classification": classify(prereg, values),
              "mismatched_items": mismatches}
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
