"""Independent rescorer for a Fiction-CWR run.

Usage: python benchmarks/cwr/rescore.py RUN_DIR [--prereg PATH]

Reads only RUN_DIR/records.jsonl, RUN_DIR/baselines.json and the
preregistration (by default the prereg.toml beside this script), uses the
standard library only and nothing from the suite.  From each record's
primitive fields it recomputes: for P, R and E the parsed answer (its own
reading of the reply formats) and its exact match with the recorded
expected answer; for F and C exact validity from the checker status stored
with the record.  Then the metrics the rules read, E accuracy split by the
context the E prompt showed (``E_C``, ``E_F``, ``E_none``, from each
record's ``context``), the paired F - C interval (Newcombe's hybrid score,
written out here), and the classification by the preregistered rule order.  Prints JSON; exit status 0
when every recomputed per-unit field equals the recorded one, 1 otherwise.
"""

import argparse
import json
import math
import operator
import re
import statistics
import sys
import tomllib
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
DECORATION = "*_`"


def read_lines(path):
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        sys.exit(f"{path}: the last line is torn; the run did not finish writing it")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def keyed_line(line, key):
    """The value after 'KEY:' on a line (decorations *, _, ` around the key allowed), else None."""
    body = line.strip().lstrip(DECORATION).lstrip()
    if body[: len(key)].upper() != key:
        return None
    rest = body[len(key):].lstrip(DECORATION).lstrip()
    if not rest.startswith(":"):
        return None
    return rest[1:].strip().lstrip(DECORATION).strip()


def answer(text):
    values = [v for v in (keyed_line(line, "ANSWER") for line in text.splitlines()) if v is not None]
    if len(values) != 1:
        return None
    value = values[0].rstrip(DECORATION + ". ").upper()
    return " ".join(value.replace(",", " , ").split())


def state_entries(family, lines):
    entries = {}
    for line in lines:
        line = line.strip().strip("`").strip().lstrip("-* ").strip()
        if not line:
            continue
        if line.lower() in ("(empty)", "empty") and not entries and len([x for x in lines if x.strip()]) == 1:
            return {}
        name, eq, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in entries:
            return None
        if family == "schedule":
            machine, at, start = value.partition("@")
            machine, start = machine.strip(), start.strip()
            if not at or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", machine) or not re.fullmatch(r"\d+", start):
                return None
            entries[name] = {"machine": machine, "start": int(start)}
        else:
            if not re.fullmatch(r"\d+", value):
                return None
            entries[name] = int(value)
    if family != "schedule":
        entries = {k: v for k, v in entries.items() if v > 0}
    return entries


def state(family, text):
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if keyed_line(line, "STATE") is not None]
    if len(heads) != 1:
        return None
    block = [keyed_line(lines[heads[0]], "STATE")]
    block = [b for b in block if b]
    for line in lines[heads[0] + 1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("```"):
            if block:
                break
            continue
        block.append(line)
    return state_entries(family, block) if block else None


def parse(record):
    if record["generation_error"] is not None:
        return None
    text, condition, kind, family = record["generation"], record["condition"], record["kind"], record["family"]
    if condition == "P" and kind == "effect":
        found = state(family, text)
        return None if found is None else {"state": found}
    value = answer(text)
    if value is None:
        return None
    if condition == "P":
        return {"verdict": value} if value in ("LEGAL", "ILLEGAL") else None
    if condition == "R":
        m = re.fullmatch(r"\[?(H-[0-9A-F]{4})\]?", value)
        return {"artifact": m.group(1)} if m else None
    m = re.fullmatch(r"ILLEGAL AT STEP (\d+)", value)
    if m:
        return {"verdict": "ILLEGAL", "step": int(m.group(1))}
    for words, met in (("LEGAL , GOAL MET", True), ("LEGAL , GOAL NOT MET", False)):
        if value == words:
            found = state(family, text)
            return None if found is None else {"verdict": "LEGAL", "goal": met, "state": found}
    return None


def wilson(k, n, z):
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def newcombe(a, b, c, d, confidence):
    n = a + b + c + d
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    product = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(product) if product else 0.0
    lower_gap = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper_gap = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return p1 - p2, max(-1.0, p1 - p2 - lower_gap), min(1.0, p1 - p2 + upper_gap)


def holds(condition, values, thresholds):
    metric, op, operand = condition.split()
    limit = thresholds[operand] if operand in thresholds else float(operand)
    return COMPARE[op](values[metric], limit)


def classify(prereg, values, thresholds):
    block = prereg["classification"]
    for rule in block["rules"]:
        if rule.get("otherwise"):
            return rule["label"]
        if all(holds(c, values, thresholds) for c in rule.get("all", [])) and (
                not rule.get("any") or any(holds(c, values, thresholds) for c in rule["any"])):
            return rule["label"]
    return block.get("passing")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Recompute a Fiction-CWR run from its records.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
    args = parser.parse_args(argv)
    prereg = tomllib.loads(args.prereg.read_text(encoding="utf-8"))
    records = read_lines(args.run_dir / "records.jsonl")
    baselines = json.loads((args.run_dir / "baselines.json").read_text(encoding="utf-8"))

    mismatches, correct, contexts = [], {}, {}
    for record in records:
        if record["condition"] in ("F", "C"):
            ok = record["generation_error"] is None and record["check_status"] == "VALID"
        else:
            parsed = parse(record)
            ok = parsed is not None and parsed == record["expected"]
            if parsed != record["parsed"]:
                mismatches.append(record["item_id"])
        if ok != record["correct"] and record["item_id"] not in mismatches:
            mismatches.append(record["item_id"])
        correct[record["item_id"]] = (record["condition"], record["pair_id"], ok)
        contexts[record["item_id"]] = record.get("context")

    values = {}
    for condition in ("P", "R", "E", "F", "C"):
        rows = [ok for cond, _, ok in correct.values() if cond == condition]
        values[f"{condition}.units"] = len(rows)
        name = "validity" if condition in ("F", "C") else "accuracy"
        values[f"{condition}.{name}"] = sum(rows) / len(rows) if rows else None
    for context in ("C", "F", "none"):  # E_C (the seed's main E), E_F, context-free E
        rows = [ok for item, (cond, _, ok) in correct.items() if cond == "E" and contexts[item] == context]
        values[f"E_{context}.units"] = len(rows)
        values[f"E_{context}.accuracy"] = sum(rows) / len(rows) if rows else None
    sides = {}
    for cond, pair, ok in correct.values():
        if cond in ("F", "C"):
            sides.setdefault(pair, {})[cond] = ok
    cells = [0, 0, 0, 0]
    for pair in sides.values():
        if set(pair) == {"F", "C"}:
            cells[[(True, True), (True, False), (False, True), (False, False)].index((pair["F"], pair["C"]))] += 1
    values["pairs.n"] = sum(cells)
    if sum(cells):
        estimate, low, high = newcombe(*cells, prereg["analysis"]["confidence"])
        values.update({"deficit.estimate": estimate, "deficit.lower": low, "deficit.upper": high})
    values["baselines.copy_flagged_pairs"] = baselines["copy_flagged_pairs"]

    report = {"units": len(records), "metrics": values, "mismatched_units": sorted(mismatches)}
    try:
        report["classification"] = classify(prereg, values, prereg["thresholds"])
    except (KeyError, TypeError) as exc:
        report["classification"] = None
        report["classification_problem"] = f"metric not measured: {exc}"
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
