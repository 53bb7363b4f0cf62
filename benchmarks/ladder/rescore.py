"""Independent rescorer for ladder probes.

Usage: python benchmarks/ladder/rescore.py PROBE_DIR [PROBE_DIR ...] [--prereg PATH]

Standard library only; imports nothing from the suite.  Reads each probe's
``units.jsonl`` and ``metadata.json`` and the preregistration (by default the
prereg.toml beside this script).  From the primitive fields alone (raw
response text, error code, ground truth, tier) it re-parses every decision
(its own reading of the reply, in time linear in its length), re-codes every
outcome, recounts every tier, recomputes the shares with the preregistered
numerators and denominators, and decides the gate and the four
clauses by the preregistered rule order.  Refuses to mix generator v1 with v2
probes.  Prints JSON; exit status 0 when every re-derived per-unit field equals
the recorded one, 1 otherwise.
"""

import argparse
import json
import operator
import sys
import tomllib
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
BLOCKS = ("gate", "clause_a", "clause_b", "clause_c", "clause_d")
TIERS = (1, 2, 3, 4, 5)


#: Letters beyond ASCII that a case-insensitive reading takes for the ASCII letter (as Python's re.IGNORECASE does).
FOLD = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


def folded(c):
    return FOLD.get(c, c.lower() if c.isascii() else c)


def word_at(text, at, word):
    """Whether ``word`` (lower-case) is written at ``at`` in any letter case."""
    chunk = text[at:at + len(word)]
    return len(chunk) == len(word) and all(folded(c) == w for c, w in zip(chunk, word))


def wordlike(c):
    return c.isalnum() or c == "_"


def find_word(text, at, word):
    """The first index >= at where ``word`` starts (any case), or -1; ``word`` starts with a character no letter folds to."""
    while (at := text.find(word[0], at)) >= 0:
        if word_at(text, at, word):
            return at
        at += 1
    return -1


def skip(text, at, accept):
    while at < len(text) and accept(text[at]):
        at += 1
    return at


def verdict_at(text, at):
    """(verdict, the places where its word may end) for an approve/reject word at ``at``, else (None, ())."""
    for verdict in ("approve", "reject"):
        if word_at(text, at, verdict):
            end = at + len(verdict)
            ends = [end]
            if end < len(text) and text[end] in "dD":
                ends.append(end + 1)
            if word_at(text, end, "ed"):
                ends.append(end + 2)
            return verdict, ends
    return None, ()


def marker_verdict(text, at):
    """The verdict of a 'decision' marker starting at ``at``, or None."""
    at = skip(text, at + len("decision"), str.isspace)
    if at >= len(text) or text[at] not in ":=-":
        return None
    at = skip(text, at + 1, str.isspace)
    at = skip(text, skip(text, at, lambda c: c == "*"), str.isspace)
    verdict, ends = verdict_at(text, at)
    return verdict if any(end >= len(text) or not wordlike(text[end]) for end in ends) else None


def decision_of(text):
    """Drop closed <think> blocks; an unclosed one leaves no decision.  The last DECISION marker wins;
    otherwise the answer must be the bare word approve(d) or reject(ed)."""
    kept, at = [], 0
    while (start := find_word(text, at, "<think>")) >= 0 and (stop := find_word(text, start + 7, "</think>")) >= 0:
        kept += [text[at:start], " "]
        at = stop + len("</think>")
    visible = "".join(kept) + text[at:]
    if "<think>" in visible.lower():
        return None
    starts = [i for i, c in enumerate(visible) if c in "dD" and word_at(visible, i, "decision")]
    for start in reversed(starts):
        verdict = marker_verdict(visible, start)
        if verdict is not None:
            return verdict
    verdict, ends = verdict_at(visible, skip(visible, 0, lambda c: not wordlike(c)))
    if any(skip(visible, end, lambda c: not wordlike(c)) == len(visible) for end in ends):
        return verdict
    return None


def outcome_of(error_code, decision, truth):
    if error_code == "timeout":
        return "timeout"
    if error_code is not None:
        return "errored"
    if decision is None:
        return "unparsed"
    return "correct" if decision == truth else "wrong"


def read_units(path):
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        sys.exit(f"{path}: the last line is torn; resume the probe before rescoring it")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def ratio(counts, numerator, denominator):
    below = sum(counts.get(o, 0) for o in denominator)
    return sum(counts.get(o, 0) for o in numerator) / below if below else None


def decide(block, thresholds, values):
    """The label of one classification block, or UNDEFINED when a rule reaches an unmeasured share."""

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
            if all(holds(c) for c in rule.get("all", [])) and (
                not rule.get("any") or any(holds(c) for c in rule["any"])
            ):
                return rule["label"]
    except KeyError:
        return "UNDEFINED"
    return block.get("passing")


def rescore_probe(folder, prereg):
    shares = prereg["shares"]
    thresholds = prereg["thresholds"]
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    units = read_units(folder / "units.jsonl")
    mismatched = []
    counts = {t: {} for t in TIERS}
    for unit in units:
        decision = None if unit["error_code"] else decision_of(unit["response_text"])
        outcome = outcome_of(unit["error_code"], decision, unit["ground_truth"])
        if decision != unit["decision"] or outcome != unit["outcome"]:
            mismatched.append(unit["unit_id"])
        if unit["condition"] != "autonomous" or unit["supervisor"] is not None:
            mismatched.append(unit["unit_id"])
        bucket = counts.setdefault(unit["tier"], {})
        bucket[outcome] = bucket.get(outcome, 0) + 1

    def pool(tiers):
        out = {}
        for t in tiers:
            for k, n in counts.get(t, {}).items():
                out[k] = out.get(k, 0) + n
        return out

    everything = pool(TIERS)
    values = {
        "overall_error": ratio(everything, shares["error_outcomes"], shares["scored_outcomes"]),
        "tier45_error": ratio(pool(shares["tier45"]), shares["error_outcomes"], shares["scored_outcomes"]),
        "errored_share": ratio(everything, shares["errored_outcomes"], shares["all_outcomes"]),
        "gradient_applies": 1 if meta["generator_variant"] == "v2" else 0,
    }
    at_floor = 0
    for t in TIERS:
        error = ratio(counts[t], shares["error_outcomes"], shares["scored_outcomes"])
        values[f"tier{t}.error"] = error
        at_floor += error is not None and error >= thresholds["tier_floor"]
    values["tiers_at_floor"] = at_floor
    labels = {name: decide(prereg[name], thresholds, values) for name in BLOCKS}
    return {
        "probe": folder.name,
        "variant": meta["generator_variant"],
        "rung": meta["rung"],
        "state": meta["generator_state"],
        "seed": meta["seed"],
        "units": len(units),
        "counts": {str(t): counts[t] for t in TIERS},
        "metrics": values,
        "gate": labels["gate"],
        "clauses": {name[-1]: labels[name] for name in BLOCKS[1:]},
        "mismatched_units": sorted(set(mismatched)),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description="Recompute ladder probe gates from their ledgers.")
    parser.add_argument("probe_dirs", nargs="+", type=Path)
    parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
    args = parser.parse_args(argv)
    prereg = tomllib.loads(args.prereg.read_text(encoding="utf-8"))
    results = [rescore_probe(folder, prereg) for folder in args.probe_dirs]
    variants = sorted({r["variant"] for r in results})
    if len(variants) > 1:
        sys.exit("refusing to pool generator v1 with v2 probes; rescore each variant separately")
    print(json.dumps({"probes": results}, indent=2, sort_keys=True))
    return 0 if not any(r["mismatched_units"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
