"""Independent rescorer for a Fiction-CWR run.

Usage: python benchmarks/cwr/rescore.py RUN_DIR [--prereg PATH]

Reads only RUN_DIR/records.jsonl, RUN_DIR/baselines.json and the
preregistration (by default the prereg.toml beside this script), uses the
standard library only and nothing from the suite.  From each record's
primitive fields it recomputes: the parse status and parsed answer of every
unit (its own reading of the reply formats: the P, R and E answers and the
F/C artifact extraction, each in time linear in the reply's length); for
P, R and E the exact match with the recorded expected answer; for F and C
exact validity from the checker status stored with the record.  Then the metrics the rules read, E accuracy split by the
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
#: Longest numeral read as a number (leading zeros included); a longer one is "number_too_large".
MAX_DIGITS = 18
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DIGITS = re.compile(r"\d+")


def read_lines(path):
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        sys.exit(f"{path}: the last line is torn; the run did not finish writing it")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def unpad(text):
    """Drop leading whitespace, then decoration marks, then whitespace."""
    return text.lstrip().lstrip(DECORATION).lstrip()


def keyed_line(line, key):
    """The value after 'KEY:' on a line (decorations *, _, ` around the key allowed), else None.

    The key compares letter by letter through str.upper(), so 'ſ' reads as 'S'."""
    body = unpad(line)
    if len(body) < len(key) or any(c.upper() != k for c, k in zip(body, key)):
        return None
    rest = unpad(body[len(key):])
    if not rest.startswith(":"):
        return None
    return unpad(rest[1:]).rstrip()


def answer(text):
    """(status, value) of the single ANSWER line: trailing marks and periods go, words upper-cased and respaced."""
    values = [v for v in (keyed_line(line, "ANSWER") for line in text.splitlines()) if v is not None]
    if len(values) != 1:
        return ("no_answer_line" if not values else "several_answer_lines"), None
    value = values[0].rstrip(DECORATION + ".").rstrip().upper()
    return "ok", " ".join(value.replace(",", " , ").split())


def state_entries(family, lines):
    """(status, entries) of a state block's lines: ok, bad_state_block or number_too_large."""
    cleaned = []
    for line in lines:
        line = line.strip().strip("`").strip()
        if line:
            cleaned.append(line.lstrip("-* ").strip())
    if cleaned in (["(empty)"], ["empty"]):
        return "ok", {}
    entries, numerals = {}, []
    for line in cleaned:
        name, eq, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not NAME.fullmatch(name) or name in entries:
            return "bad_state_block", None
        if family == "schedule":
            machine, at, start = value.partition("@")
            machine, start = machine.strip(), start.strip()
            if not at or not NAME.fullmatch(machine) or not DIGITS.fullmatch(start):
                return "bad_state_block", None
            entries[name] = (machine, start)
            numerals.append(start)
        else:
            if not DIGITS.fullmatch(value):
                return "bad_state_block", None
            entries[name] = value
            numerals.append(value)
    if any(len(n) > MAX_DIGITS for n in numerals):
        return "number_too_large", None
    if family == "schedule":
        return "ok", {name: {"machine": machine, "start": int(start)} for name, (machine, start) in entries.items()}
    return "ok", {name: int(count) for name, count in entries.items() if int(count) > 0}


def state(family, text):
    """(status, state) of the single STATE block: its inline value, then lines up to a blank line or a fence."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if keyed_line(line, "STATE") is not None]
    if len(heads) != 1:
        return "no_state_block", None
    block = [keyed_line(lines[heads[0]], "STATE")]
    block = [b for b in block if b]
    for line in lines[heads[0] + 1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("```"):
            if block:
                break
            continue
        block.append(line)
    return state_entries(family, block) if block else ("bad_state_block", None)


def fence(line):
    body = line.strip()
    return body[:3] == "```" and all(c.isascii() and (c.isalnum() or c in "_-") for c in body[3:])


def artifact(text):
    """(status, artifact) of a synthesis reply: the whole reply, or the inside of its only fenced block."""
    opened = closed = None  # line numbers of the first fence pair
    count = 0
    prose = False  # a non-blank line outside that pair
    body = []
    for number, line in enumerate(text.strip("\n").splitlines()):
        if fence(line):
            count += 1
            if opened is None:
                opened = number
            elif closed is None:
                closed = number
            continue
        if opened is not None and closed is None:
            body.append(line)
        elif line.strip():
            prose = True
    if count == 0:
        return "ok", text
    if count % 2 == 1:
        return "unclosed_code_block", None
    if count > 2:
        return "several_code_blocks", None
    return ("ok", text) if prose else ("ok", "\n".join(body) + "\n")


def parse_text(condition, kind, family, text):
    """(parse status, parsed answer) of a reply, the answer None unless the status is ok."""
    if condition in ("F", "C"):
        return artifact(text)
    if condition == "P" and kind == "effect":
        status, found = state(family, text)
        return status, (None if found is None else {"state": found})
    status, value = answer(text)
    if status != "ok":
        return status, None
    bad = ("bad_answer_value", None)
    if condition == "P":
        return ("ok", {"verdict": value}) if value in ("LEGAL", "ILLEGAL") else bad
    if condition == "R":
        m = re.fullmatch(r"\[?(H-[0-9A-F]{4})\]?", value)
        return ("ok", {"artifact": m.group(1)}) if m else bad
    if value.startswith("ILLEGAL AT STEP ") and DIGITS.fullmatch(value, len("ILLEGAL AT STEP ")):
        step = value[len("ILLEGAL AT STEP "):]
        return ("number_too_large", None) if len(step) > MAX_DIGITS else ("ok", {"verdict": "ILLEGAL", "step": int(step)})
    for words, met in (("LEGAL , GOAL MET", True), ("LEGAL , GOAL NOT MET", False)):
        if value == words:
            status, found = state(family, text)
            return (status, None) if found is None else ("ok", {"verdict": "LEGAL", "goal": met, "state": found})
    return bad


def parse(record):
    """(parse status, parsed) of a record from its primitive fields."""
    if record["generation_error"] is not None:
        return "generation_error", None
    return parse_text(record["condition"], record["kind"], record["family"], record["generation"])


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
        status, parsed = parse(record)
        if status != record["parse_status"] or parsed != record["parsed"]:
            mismatches.append(record["item_id"])
        if record["condition"] in ("F", "C"):
            ok = record["generation_error"] is None and record["check_status"] == "VALID"
        else:
            ok = parsed is not None and parsed == record["expected"]
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
