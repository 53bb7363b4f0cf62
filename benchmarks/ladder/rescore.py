"""Independent rescorer for ladder probes.

Usage: python -S -I benchmarks/ladder/rescore.py DIR [DIR ...] [--prereg PATH]

Each DIR is a probe directory (it holds ``metadata.json`` and ``units.jsonl``)
or a run directory holding probe directories.  Standard library only; imports
nothing from the suite.  Reads each probe's ``units.jsonl`` and
``metadata.json``, the run directory's ``fixtures.json`` beside the probe when
it holds that probe's episodes, and the preregistration (by default the
prereg.toml beside this script).  From the primitive fields alone it
recomputes, per unit:

* ``ground_truth``: ``approve`` when every check of the episode passes, else
  ``reject`` (from the episode's recorded checks in ``fixtures.json``);
* ``checks``, ``depth`` and ``episode_sha256``: the episode's number of checks,
  its declared depth and the sha256 of its canonical fact dictionary;
* ``error_code``: ``answer_too_long`` for a reply kept whole that is longer
  than the preregistered ``max_answer_chars``, else as recorded;
* ``response_chars`` and ``response_sha256``: the length and sha256 of a reply
  kept whole; of a cut one (``answer_too_long``) the recorded ones, provided the
  kept excerpt is exactly min(``max_answer_chars``, 1024) characters long and the
  whole was longer than ``max_answer_chars``;
* ``decision``: its own reading of the raw reply (a character scanner, in time
  linear in the reply's length, written apart from the suite's parser),
  null when the backend reported an error code;
* ``outcome``: re-coded from the error code, that decision and the ground truth;
* ``condition`` and ``supervisor``: ``autonomous`` and null, as preregistered;

then recounts every tier, recomputes the shares with the preregistered
numerators and denominators, and decides the gate and the four clauses by the
preregistered rule order.  Refuses to mix generator v1 with v2 probes.

Prints one JSON object.  For one probe: ``classification`` (the gate label),
``metrics``, ``intervals`` (the 95% Wilson interval, k and n of every share, as
the run's summary reports them), ``disagreements`` (every recomputed per-unit field that differs
from the record, in unit order) and the probe's full reading under
``probes``.  For several: ``classification`` null, ``classifications``
(probe -> gate label), metrics as ``<probe>/<metric>`` and disagreements
with ``unit`` as ``<probe>/<unit id>``.  Exit status 0 when there is no
disagreement, 1 when there is one, 2 (one line on stderr) when an input
cannot be read.
"""

import argparse
import hashlib
import json
import math
import operator
import sys
import tomllib
from pathlib import Path
from statistics import NormalDist

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


class Unreadable(Exception):
    """A probe, its run's fixtures or the preregistration cannot be read."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Unreadable(f"usage: rescore.py DIR [DIR ...] [--prereg PATH]: {message}")


def outcome_of(error_code, decision, truth):
    if error_code == "timeout":
        return "timeout"
    if error_code is not None:
        return "errored"
    if decision is None:
        return "unparsed"
    return "correct" if decision == truth else "wrong"


def read_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Unreadable(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"{path}: not readable JSON ({exc})") from None


def read_units(path):
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise Unreadable(f"{path}: no such file; is this a probe directory?") from None
    except OSError as exc:
        raise Unreadable(f"{path}: cannot be read ({exc})") from None
    if raw and not raw.endswith(b"\n"):
        raise Unreadable(f"{path}: the last line is torn; resume the probe before rescoring it")
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{path}: not UTF-8 ({exc})") from None
    units = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            unit = json.loads(line)
        except ValueError as exc:
            raise Unreadable(f"{path}: line {number} is not JSON ({exc})") from None
        if not isinstance(unit, dict):
            raise Unreadable(f"{path}: line {number} is not a JSON object")
        missing = [key for key in UNIT_KEYS if key not in unit]
        if missing:
            raise Unreadable(f"{path}: line {number} lacks {', '.join(missing)} (a unit record of schema 2 has them)")
        units.append(unit)
    return units


def canonical_sha256(value):
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def probe_episodes(folder):
    """(tier, index) -> episode record from the run directory's fixtures.json, when it holds this probe's
    episodes; None when the probe stands alone (its ground truths are then read as recorded)."""
    path = folder.parent / "fixtures.json"
    if not path.is_file():
        return None
    stored = read_json(path)
    if not isinstance(stored, dict) or stored.get("probe") != folder.name:
        return None
    sets = stored.get("sets")
    if not isinstance(sets, dict) or len(sets) != 1:
        raise Unreadable(f"{path}: expected the one fixture set of probe {folder.name}")
    [entry] = sets.values()
    episodes = entry.get("records", {}).get("episodes") if isinstance(entry, dict) else None
    if not isinstance(episodes, list):
        raise Unreadable(f"{path}: the fixture set holds no episode list")
    out = {}
    for episode in episodes:
        if not isinstance(episode, dict) or not isinstance(episode.get("checks"), list):
            raise Unreadable(f"{path}: an episode without its checks")
        if any(not isinstance(episode.get(k), int) or isinstance(episode.get(k), bool) for k in ("tier", "index")):
            raise Unreadable(f"{path}: an episode without an integer tier and index")
        out[(episode.get("tier"), episode.get("index"))] = episode
    return out


def truth_of(checks):
    """The evaluator's verdict from the checks: approve only when every one passes."""
    if any(not isinstance(c, dict) or not isinstance(c.get("passes"), bool) for c in checks):
        raise Unreadable("fixtures.json: every check needs a true/false 'passes'")
    return "approve" if all(c["passes"] for c in checks) else "reject"


def ratio(counts, numerator, denominator):
    below = sum(counts.get(o, 0) for o in denominator)
    return sum(counts.get(o, 0) for o in numerator) / below if below else None


def wilson(counts, numerator, denominator, confidence=0.95):
    """{k, n, value, low, high}: the share with its Wilson score interval; value and bounds None when n is 0."""
    total = sum(counts.get(o, 0) for o in denominator)
    hits = sum(counts.get(o, 0) for o in numerator)
    out = {"k": hits, "n": total, "value": None, "low": None, "high": None}
    if total:
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        p = hits / total
        centre = (p + z * z / (2 * total)) / (1 + z * z / total)
        half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
        out.update(value=p, low=0.0 if hits == 0 else max(0.0, centre - half),
                   high=1.0 if hits == total else min(1.0, centre + half))
    return out


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


#: Per-unit fields recomputed, in the order a unit's disagreements are listed.
FIELDS = ("ground_truth", "checks", "depth", "episode_sha256", "error_code", "response_chars", "response_sha256",
          "decision", "outcome", "condition", "supervisor")
CUT = "answer_too_long"
EXCERPT = 1024  # characters kept of a cut reply, at most (benchmarks.core.answers.EXCERPT_CHARS)
#: What every unit line must hold for the rescorer to read it.
UNIT_KEYS = ("unit_id", "tier", "episode_index", "ground_truth", "response_text", "response_chars", "response_sha256",
             "error_code")


def reread_answer(unit, limit):
    """The error code, length and hash of a unit's reply as its kept text and the answer limit make them."""
    text = unit["response_text"]
    if not isinstance(text, str):
        raise Unreadable(f"unit {unit.get('unit_id')!r}: response_text must be a string")
    recorded = unit["error_code"]
    if recorded == CUT:
        whole = unit["response_chars"]
        excerpt = min(limit, EXCERPT)
        fits = isinstance(whole, int) and whole > limit and len(text) == excerpt
        chars = whole if fits else f"more than {limit}, of which exactly {excerpt} kept (kept {len(text)})"
        return CUT, chars, unit["response_sha256"]
    error_code = CUT if recorded is None and len(text) > limit else recorded
    return error_code, len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def reread_unit(unit, episode, condition, limit):
    """The recomputed value of every field in FIELDS that this unit's primitives determine."""
    mine = {}
    error_code, mine["response_chars"], mine["response_sha256"] = reread_answer(unit, limit)
    mine["error_code"] = error_code
    if episode is not None:
        mine["ground_truth"] = truth_of(episode["checks"])
        mine["checks"] = len(episode["checks"])
        mine["depth"] = episode.get("depth")
        mine["episode_sha256"] = canonical_sha256(episode.get("facts"))
    truth = mine.get("ground_truth", unit["ground_truth"])
    mine["decision"] = None if error_code else decision_of(unit["response_text"])
    mine["outcome"] = outcome_of(error_code, mine["decision"], truth)
    mine["condition"] = condition
    mine["supervisor"] = None
    return mine


def rescore_probe(folder, prereg):
    shares = prereg["shares"]
    thresholds = prereg["thresholds"]
    condition = prereg.get("probe", {}).get("condition", "autonomous")
    limit = prereg["probe"]["max_answer_chars"]
    meta = read_json(folder / "metadata.json")
    if not isinstance(meta, dict) or "generator_variant" not in meta:
        raise Unreadable(f"{folder / 'metadata.json'}: not a probe's metadata (no generator_variant)")
    units = read_units(folder / "units.jsonl")
    episodes = probe_episodes(folder)
    readings = []
    counts = {t: {} for t in TIERS}
    for unit in units:
        episode = None
        if episodes is not None:
            episode = episodes.get((unit["tier"], unit["episode_index"]))
            if episode is None:
                raise Unreadable(f"{folder.parent / 'fixtures.json'}: no episode for unit {unit['unit_id']!r}")
        mine = reread_unit(unit, episode, condition, limit)
        readings.append(((unit["tier"], unit["episode_index"]), unit, mine))
        bucket = counts.setdefault(unit["tier"], {})
        bucket[mine["outcome"]] = bucket.get(mine["outcome"], 0) + 1
    readings.sort(key=lambda r: r[0])
    measured = {r[0] for r in readings}
    disagreements = [{"unit": unit["unit_id"], "field": name, "recorded": unit.get(name), "recomputed": mine[name]}
                     for _, unit, mine in readings for name in FIELDS if name in mine and unit.get(name) != mine[name]]

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
    intervals = {
        "overall_error": wilson(everything, shares["error_outcomes"], shares["scored_outcomes"]),
        "tier45_error": wilson(pool(shares["tier45"]), shares["error_outcomes"], shares["scored_outcomes"]),
        "errored_share": wilson(everything, shares["errored_outcomes"], shares["all_outcomes"]),
        **{f"tier{t}.error": wilson(counts[t], shares["error_outcomes"], shares["scored_outcomes"]) for t in TIERS},
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
        "rung": meta.get("rung"),
        "state": meta.get("generator_state"),
        "seed": meta.get("seed"),
        "units": len(units),
        "ground_truth_from": "fixtures.json" if episodes is not None else "units.jsonl",
        "counts": {str(t): counts[t] for t in TIERS},
        "metrics": values,
        "intervals": intervals,
        "gate": labels["gate"],
        "clauses": {name[-1]: labels[name] for name in BLOCKS[1:]},
        "disagreements": disagreements,
        "mismatched_units": sorted({d["unit"] for d in disagreements}),
        "missing_units": [] if episodes is None else [
            f"t{tier}-{index:03d}" for tier, index in sorted(episodes) if (tier, index) not in measured],
    }


def probe_folders(folder):
    """The probe directories a command-line DIR names: itself, or the probe directories inside a run directory."""
    if (folder / "metadata.json").is_file():
        return [folder]
    if not folder.is_dir():
        raise Unreadable(f"{folder}: not a directory; give a probe directory or a ladder run directory")
    found = sorted(p.parent for p in folder.glob("*/metadata.json"))
    if not found:
        raise Unreadable(f"{folder}: holds no probe directory (no */metadata.json)")
    return found


def report_of(results):
    if len(results) == 1:
        [only] = results
        return {"classification": only["gate"], "metrics": only["metrics"], "intervals": only["intervals"],
                "disagreements": only["disagreements"], "probes": results}
    return {
        "classification": None,
        "classifications": {r["probe"]: r["gate"] for r in results},
        "metrics": {f"{r['probe']}/{k}": v for r in results for k, v in r["metrics"].items()},
        "disagreements": [{**d, "unit": f"{r['probe']}/{d['unit']}"} for r in results for d in r["disagreements"]],
        "probes": results,
    }


def main(argv=None):
    try:
        parser = Parser(description="Recompute ladder probe gates from the primitive fields of their ledgers.")
        parser.add_argument("dirs", nargs="+", type=Path)
        parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
        args = parser.parse_args(argv)
        try:
            prereg = tomllib.loads(args.prereg.read_text(encoding="utf-8"))
            for name in (*BLOCKS, "shares", "thresholds"):
                prereg[name]
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
            raise Unreadable(f"{args.prereg}: not a readable ladder preregistration ({exc!r})") from None
        folders = [probe for folder in args.dirs for probe in probe_folders(folder)]
        results = [rescore_probe(folder, prereg) for folder in folders]
        if len({r["variant"] for r in results}) > 1:
            raise Unreadable("refusing to pool generator v1 with v2 probes; rescore each variant separately")
    except Unreadable as exc:
        print(f"rescore.py: {exc}", file=sys.stderr)
        return 2
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        print(f"rescore.py: a probe's files do not have the ladder record layout ({exc!r})", file=sys.stderr)
        return 2
    report = report_of(results)
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if not report["disagreements"] else 1


if __name__ == "__main__":
    sys.exit(main())
