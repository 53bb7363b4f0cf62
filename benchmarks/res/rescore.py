"""Independent rescorer for a RES Step 0 run.

Usage: python -S -I benchmarks/res/rescore.py RUN_DIR [--prereg PATH]

Standard library only; imports nothing from the suite.  Reads RUN_DIR's
``records.jsonl`` (the measurements), ``fixtures.json`` (the fixture rows the
records were measured on) and the preregistration (by default the prereg.toml
beside this script).  For every record it recomputes, from primitive fields:

* ``ideal``: the gold letter, from the fixture row's ``self_bits`` by the
  seed's rule (five-factor: ``A`` when at least three current-executor factors
  support, else ``B``; minimal audit: ``allow_code`` when both
  current-executor states support, else ``block_code``), never from the
  record's or the row's own ``ideal``;
* ``family_id``: the fixture row's family;
* ``margin`` and ``logit_choice``: logit[A] - logit[B] from ``label_logits``,
  ``A`` when the margin is >= 0;
* ``parsed``: the decision letter of ``generation`` (its own scan of the text),
  None when the backend reported a ``generation_error``;
* ``prompt_sha256``: the sha256 of the recorded prompt text;
* ``fixture_sha256``: the sha256 of the fixture rows in ``fixtures.json``
  against the hash the record was measured under (its ``identity``).

From those alone it recomputes every metric and the classification by the
preregistered rule order, and prints one JSON object: ``classification``,
``metrics``, ``intervals`` (the 95% Wilson interval, k and n of every share,
as the run's summary reports them), ``disagreements`` (each recomputed per-unit field that differs
from the record, in unit order), ``items``, ``mismatched_items`` and
``missing_items`` (fixture rows without a record: an unfinished run).  Exit
status 0 when there is no disagreement, 1 when there is one, 2 (one line on
stderr) when the run directory or the preregistration cannot be read.
"""

import argparse
import hashlib
import json
import math
import operator
import sys
from statistics import NormalDist
import tomllib
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
#: The two conditions, in the order their rows are listed.
CONDITIONS = ("five_factor", "minimal_owner_indexed")
#: Seed: "A is correct for at least three current executor supports".
FIVE_FACTOR_SUPPORTS = 3
UNDEFINED = "UNDEFINED"


class Unreadable(Exception):
    """The run directory or the preregistration cannot be read as a RES run."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Unreadable(f"usage: rescore.py RUN_DIR [--prereg PATH]: {message}")


# --------------------------------------------------------------------------- primitive readings


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
            if len(hits) > 1:
                return None
    return hits[0] if len(hits) == 1 else None


def gold_letter(row):
    """The correct letter of a fixture row from its primitive fields (the seed's rule)."""
    condition = row.get("condition")
    bits = row.get("self_bits")
    if not isinstance(bits, list) or any(b not in (0, 1) or isinstance(b, bool) for b in bits):
        raise Unreadable(f"fixture row {row.get('family_id')!r}: self_bits must be a list of 0/1, got {bits!r}")
    if condition == "five_factor":
        if len(bits) != 5:
            raise Unreadable(f"five-factor fixture row: self_bits must have 5 entries, got {len(bits)}")
        return "A" if sum(bits) >= FIVE_FACTOR_SUPPORTS else "B"
    if condition == "minimal_owner_indexed":
        allow, block = row.get("allow_code"), row.get("block_code")
        if len(bits) != 2 or {allow, block} != {"A", "B"}:
            raise Unreadable("minimal-audit fixture row: needs 2 self_bits and allow_code/block_code A and B, "
                             f"got {bits!r}, {allow!r}, {block!r}")
        return allow if bits[0] == 1 and bits[1] == 1 else block
    raise Unreadable(f"fixture row has unknown condition {condition!r}; expected one of {', '.join(CONDITIONS)}")


def sha256_rows(rows):
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- reading the run


def read_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Unreadable(f"{path}: no such file; is this a RES run directory?") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"{path}: not readable JSON ({exc})") from None


def read_records(path):
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise Unreadable(f"{path}: no such file; is this a RES run directory?") from None
    except OSError as exc:
        raise Unreadable(f"{path}: cannot be read ({exc})") from None
    if raw and not raw.endswith(b"\n"):
        raise Unreadable(f"{path}: the last line is torn; the run did not finish writing it")
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{path}: not UTF-8 ({exc})") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise Unreadable(f"{path}: line {number} is not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise Unreadable(f"{path}: line {number} is not a JSON object")
        records.append(record)
    return records


def fixture_set(run_dir):
    """(set name, {condition: rows}, sha256 recorded in fixtures.json) of the run's fixture set."""
    stored = read_json(run_dir / "fixtures.json")
    sets = stored.get("sets") if isinstance(stored, dict) else None
    if not isinstance(sets, dict) or not sets:
        raise Unreadable(f"{run_dir / 'fixtures.json'}: holds no fixture sets")
    name = f"res-{stored.get('variant')}"
    if name not in sets:
        if len(sets) != 1:
            raise Unreadable(f"{run_dir / 'fixtures.json'}: no set {name!r} among {sorted(sets)}")
        name = next(iter(sets))
    entry = sets[name]
    rows = entry.get("records") if isinstance(entry, dict) else None
    if not isinstance(rows, dict) or any(not isinstance(rows.get(c), list) for c in CONDITIONS):
        raise Unreadable(f"{run_dir / 'fixtures.json'}: set {name!r} must map {' and '.join(CONDITIONS)} to rows")
    return name, rows, entry.get("sha256")


def field(record, name, where):
    if name not in record:
        raise Unreadable(f"{where}: record has no field {name!r}")
    return record[name]


# --------------------------------------------------------------------------- metrics and rules


def share(hits, total):
    return hits / total if total else None


def wilson(hits, total, confidence=0.95):
    """{k, n, value, low, high} with the Wilson score interval; value and bounds None when total is 0."""
    out = {"k": hits, "n": total, "value": None, "low": None, "high": None}
    if total:
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        p = hits / total
        centre = (p + z * z / (2 * total)) / (1 + z * z / total)
        half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
        out.update(value=p, low=0.0 if hits == 0 else max(0.0, centre - half),
                   high=1.0 if hits == total else min(1.0, centre + half))
    return out


def classify(prereg, values):
    """The label by the preregistered rule order; UNDEFINED when a rule reads an undefined metric."""
    thresholds = prereg["thresholds"]
    block = prereg["classification"]

    def holds(condition):
        metric, op, operand = condition.split()
        value = values.get(metric)
        if value is None:
            raise KeyError(metric)
        limit = thresholds[operand] if operand in thresholds else float(operand)
        return COMPARE[op](value, limit)

    try:
        for rule in block["rules"]:
            if rule.get("otherwise"):
                return rule["label"]
            if all(holds(c) for c in rule.get("all", [])) and (not rule.get("any") or any(holds(c) for c in rule["any"])):
                return rule["label"]
    except KeyError:
        return UNDEFINED
    return block.get("passing")


def rescore(run_dir, prereg):
    labels = prereg["measurement"]["labels"]
    if "A" not in labels or "B" not in labels:
        raise Unreadable(f"prereg measurement.labels must hold A and B, got {labels!r}")
    records = read_records(run_dir / "records.jsonl")
    set_name, rows, _ = fixture_set(run_dir)
    recomputed_hash = sha256_rows(rows)
    order = {c: i for i, c in enumerate(CONDITIONS)}

    readings = []
    for number, record in enumerate(records, 1):
        where = f"{run_dir / 'records.jsonl'} line {number}"
        unit = field(record, "item_id", where)
        condition, index = field(record, "condition", where), field(record, "index", where)
        if condition not in order or not isinstance(index, int) or isinstance(index, bool) \
                or not 0 <= index < len(rows[condition]):
            raise Unreadable(f"{where}: item {unit!r} names no fixture row ({condition!r}, {index!r})")
        row = rows[condition][index]
        if not isinstance(row, dict):
            raise Unreadable(f"fixtures.json: row {index} of {condition} is not an object")
        logits = field(record, "label_logits", where)
        if not isinstance(logits, list) or len(logits) != len(labels) or \
                any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in logits):
            raise Unreadable(f"{where}: label_logits must be {len(labels)} numbers, got {logits!r}")
        by_label = dict(zip(labels, logits))
        margin = by_label["A"] - by_label["B"]
        generation = field(record, "generation", where)
        if not isinstance(generation, str):
            raise Unreadable(f"{where}: generation must be a string")
        prompt = field(record, "prompt", where)
        if not isinstance(prompt, str):
            raise Unreadable(f"{where}: prompt must be a string")
        recorded_hash = (record.get("identity") or {}).get("fixtures", {}).get(set_name)
        mine = {
            "ideal": gold_letter(row),
            "family_id": row.get("family_id"),
            "margin": margin,
            "logit_choice": "A" if margin >= 0 else "B",
            "parsed": None if field(record, "generation_error", where) else decision_letter(generation),
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest(),
            "fixture_sha256": recomputed_hash if recorded_hash is not None else None,
        }
        recorded = {name: record.get(name) for name in mine}
        recorded["fixture_sha256"] = recorded_hash
        readings.append(((order[condition], index), unit, condition, mine, recorded))

    readings.sort(key=lambda r: r[0])
    measured = {r[0] for r in readings}
    disagreements = []
    for _, unit, _, mine, recorded in readings:
        for name, value in mine.items():
            if recorded[name] != value:
                disagreements.append({"unit": unit, "field": name, "recorded": recorded[name], "recomputed": value})

    values, intervals = {}, {}
    for condition in CONDITIONS:
        got = [(m["ideal"], m["logit_choice"], m["parsed"]) for _, _, c, m, _ in readings if c == condition]
        parsed = [g for g in got if g[2] is not None]
        values[f"{condition}.items"] = len(got)
        values[f"{condition}.logit_accuracy"] = share(sum(ideal == logit for ideal, logit, _ in got), len(got))
        values[f"{condition}.generated_accuracy"] = share(sum(ideal == answer for ideal, _, answer in got), len(got))
        values[f"{condition}.parser_coverage"] = share(len(parsed), len(got))
        values[f"{condition}.parsed_accuracy"] = share(sum(ideal == answer for ideal, _, answer in parsed), len(parsed))
        values[f"{condition}.agreement"] = share(sum(logit == answer for _, logit, answer in parsed), len(parsed))
        intervals[f"{condition}.logit_accuracy"] = wilson(sum(ideal == logit for ideal, logit, _ in got), len(got))
        intervals[f"{condition}.generated_accuracy"] = wilson(sum(ideal == answer for ideal, _, answer in got), len(got))
        intervals[f"{condition}.parser_coverage"] = wilson(len(parsed), len(got))
        intervals[f"{condition}.parsed_accuracy"] = wilson(sum(ideal == answer for ideal, _, answer in parsed),
                                                           len(parsed))
        intervals[f"{condition}.agreement"] = wilson(sum(logit == answer for _, logit, answer in parsed), len(parsed))

    return {
        "classification": classify(prereg, values),
        "metrics": values,
        "intervals": intervals,
        "disagreements": disagreements,
        "items": len(records),
        "fixture_set": set_name,
        "fixture_sha256": recomputed_hash,
        "mismatched_items": sorted({d["unit"] for d in disagreements}),
        "missing_items": [f"{c}:{i:02d}" for c in CONDITIONS for i in range(len(rows[c])) if (order[c], i) not in measured],
    }


def main(argv=None):
    try:
        parser = Parser(description="Recompute a RES Step 0 run from the primitive fields of its records and fixtures.")
        parser.add_argument("run_dir", type=Path)
        parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
        args = parser.parse_args(argv)
        try:
            prereg = tomllib.loads(args.prereg.read_text(encoding="utf-8"))
            prereg["classification"]["rules"], prereg["thresholds"], prereg["measurement"]["labels"]
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
            raise Unreadable(f"{args.prereg}: not a readable RES preregistration ({exc!r})") from None
        if not args.run_dir.is_dir():
            raise Unreadable(f"{args.run_dir}: not a directory; give a RES run directory")
        report = rescore(args.run_dir, prereg)
    except Unreadable as exc:
        print(f"rescore.py: {exc}", file=sys.stderr)
        return 2
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        print(f"rescore.py: the run's files do not have the RES record layout ({exc!r})", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if not report["disagreements"] else 1


if __name__ == "__main__":
    sys.exit(main())
