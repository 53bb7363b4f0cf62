"""Independent rescorer for a Fiction-CWR run.

Usage: python -S -I benchmarks/cwr/rescore.py RUN_DIR [--prereg PATH]

Reads only the run directory (``records.jsonl``, ``baselines.json``,
``grading.json`` and the files under ``grading/``) and the preregistration
(by default the prereg.toml beside this script); uses the standard library
only and imports nothing from the suite.  Grading goes through the reference
interpreter the run copied into ``grading/reference.py`` (written apart from
the suite's checker), loaded by path, applied to the world files the units
were graded against.  From each record's primitive fields it recomputes:

* the generation error, length and sha256 of the reply: a reply kept whole
  must be the one hashed and, when longer than the preregistered
  ``max_answer_chars``, coded ``answer_too_long``; a cut one must keep exactly
  min(``max_answer_chars``, 1024) characters of an answer longer than the limit;
* the parse status and parsed answer (its own reading of the reply formats
  and of the F/C artifact extraction, in time linear in the reply's length);
* F/C: the checker verdict (status, reason, first failing step) of the
  extracted artifact on the unit's target world, and exact validity;
* P/R/E: the expected answer, from the unit's world and inputs in
  ``grading.json`` (P: legal prefix and probe; R: the handbook; E: the
  candidate), and the exact match;
* P/R/E: that the recorded prompt shows the inputs ``grading.json`` holds
  (``inputs_in_prompt``);
* the sha256 of each world file against the one ``grading.json`` records;
* per pair side, the copy baseline: each demonstration and every contiguous
  window of it, verbatim (the interpreter), renamed (equal motif signature,
  its own dependency relation and canonical form), relabelled one-to-one
  onto a bounded target solution (its own enumeration), reordered into one,
  or reordered and relabelled, compared with the flag in ``baselines.json``;
  on a dataflow target (a program world, graded through the run's copy of the
  program interpreter, ``grading/dataflow_reference.py``) each window that is
  a program by itself, as written and with its last wire bound as the goal
  wire, verbatim or matching a bounded target program's canonical form with
  the inputs as written or relabelled (its own program enumeration).

Then the metrics the rules read (the copy gate from its own copy baseline; a unit
with a generation error is the errored outcome: counted in ``units.errored``
and ``errored_share`` over all units, and left out of every accuracy,
validity and pair; the attribution gates: witness-only and exposure-unmatched
pairs from the subsets ``grading.json`` names, the greedy solved share from
its own replay of every greedy sequence ``baselines.json`` records (a recorded
``greedy_status`` that differs is a disagreement on the side's unit), the
random valid rate from the recorded counts),
E accuracy by context, the paired F - C interval the rules read (Tango's
score interval with a Rao-Scott design effect over base pairs) and the
per-replica Newcombe figure beside it, both written out here, the same
clustered interval on each pair subset ``grading.json`` names under
``pair_subsets`` (``deficit_<name>.*``, ``pairs_<name>.n``; reported beside
the primary deficit, read by no rule), and the classification by the
preregistered rule order.

Prints one JSON object: ``classification``, ``metrics``, ``intervals`` (for
each accuracy, validity and gate share it recomputes, the cluster-aware 95%
interval the run's summary reports: Wilson on the Rao-Scott effective size, clusters the
base pairs and shipped worlds), ``disagreements``
(in unit order, that of the ledger, ``{"unit", "field", "recorded", "recomputed"}`` for every
recomputed per-unit field that differs; the copy-baseline flag is reported on
the side's unit, ``F:<pair>`` or ``C:<pair>``), ``mismatched_units``,
``copy_flagged``, ``units``.  Exit status 0 when ``disagreements`` is empty,
1 when it is not, 2 (one line on stderr) when an input is missing or
malformed.
"""

import argparse
import hashlib
import importlib.util
import json
import math
import operator
import re
import statistics
import sys
import tomllib
import types
from pathlib import Path

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
DECORATION = "*_`"
#: Longest numeral read as a number (leading zeros included); a longer one is "number_too_large".
MAX_DIGITS = 18
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DIGITS = re.compile(r"\d+")
ASCII_DIGITS = re.compile(r"[0-9]+")


def read_lines(path):
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"{path}: unreadable ({exc.strerror or exc}); rescore a finished run directory") from None
    if raw and not raw.endswith(b"\n"):
        raise Unreadable(f"{path}: the last line is torn; the run did not finish writing it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{path}: not UTF-8 at byte {exc.start}") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise Unreadable(f"{path}: line {number} is not JSON ({exc})") from None
            if not isinstance(out[-1], dict):
                raise Unreadable(f"{path}: line {number} is not a JSON object")
    return out


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


def _count_entry(value):
    """(entry, numeral) of a ``count`` value, or None when it does not fit."""
    if not DIGITS.fullmatch(value):
        return None
    return value, value


def _placement_entry(value):
    """(entry, numeral) of a ``machine @ start`` value, or None when it does not fit."""
    machine, at, start = value.partition("@")
    machine, start = machine.strip(), start.strip()
    if not at or not NAME.fullmatch(machine) or not DIGITS.fullmatch(start):
        return None
    return (machine, start), start


def _values_entry(value):
    """(entry, longest numeral) of a wire's ``v1, v2, ...`` value (an opening and a closing bracket allowed), or
    None.  Its numerals are ASCII digits."""
    value = value.removeprefix("[").removesuffix("]")
    numerals = [part.strip() for part in value.split(",")]
    if not all(ASCII_DIGITS.fullmatch(n) for n in numerals):
        return None
    return numerals, max(numerals, key=len)


def _counts(entries):
    return {name: int(count) for name, count in entries.items() if int(count) > 0}


def _placements(entries):
    return {name: {"machine": machine, "start": int(start)} for name, (machine, start) in entries.items()}


#: How each family writes a state entry's value: (read one value, build the state from the entries).  A family
#: not named here writes counts.
STATE_ENTRIES = {"token_workshop": (_count_entry, _counts), "schedule": (_placement_entry, _placements),
                 "dataflow": (_values_entry, lambda entries: {name: [int(n) for n in numerals]
                                                              for name, numerals in entries.items()})}


def state_entries(family, lines):
    """(status, entries) of a state block's lines: ok, bad_state_block or number_too_large."""
    read_entry, build = STATE_ENTRIES.get(family, STATE_ENTRIES["token_workshop"])
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
        got = read_entry(value)
        if got is None:
            return "bad_state_block", None
        entries[name], numeral = got
        numerals.append(numeral)
    if any(len(n) > MAX_DIGITS for n in numerals):
        return "number_too_large", None
    return "ok", build(entries)


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


def _word_end(body, i):
    """The index after a name [A-Za-z_][A-Za-z0-9_]* starting at i, or None when none starts there."""
    if i >= len(body) or not (body[i] == "_" or (body[i].isascii() and body[i].isalpha())):
        return None
    i += 1
    while i < len(body) and (body[i] == "_" or (body[i].isascii() and body[i].isalnum())):
        i += 1
    return i


def _spaces(body, i):
    while i < len(body) and body[i] in " \t":
        i += 1
    return i


def step_shaped(line):
    """name( ... ) or wire = name( ... ), spaces and tabs around: a line the artifact grammars could hold."""
    body = line.strip(" \t")
    if not body.endswith(")"):
        return False
    i = _word_end(body, 0)
    if i is None:
        return False
    i = _spaces(body, i)
    if body[i:i + 1] == "=":
        i = _word_end(body, _spaces(body, i + 1))
        if i is None:
            return False
        i = _spaces(body, i)
    return body[i:i + 1] == "("


def artifact(text):
    """(status, artifact) of a synthesis reply: its only candidate artifact, every other line unread.

    Candidates: each fenced block with a step-shaped line inside, and each run of step-shaped lines outside the
    blocks (blank and # lines may sit between two of its steps)."""
    found = []
    inside = None  # lines of the open block
    run, gap = [], []
    for line in text.splitlines():
        if fence(line):
            if inside is None:
                if run:
                    found.append(run)
                run, gap = [], []
                inside = []
            else:
                if any(step_shaped(x) for x in inside):
                    found.append(inside)
                inside = None
            continue
        if inside is not None:
            inside.append(line)
            continue
        if step_shaped(line):
            if run:
                run.extend(gap)
            run.append(line)
            gap = []
            continue
        body = line.strip(" \t")
        if run and (body == "" or body[:1] == "#"):
            gap.append(line)
            continue
        if run:
            found.append(run)
        run, gap = [], []
    if inside is not None:
        return "unclosed_code_block", None
    if run:
        found.append(run)
    if len(found) != 1:
        return ("no_artifact" if not found else "several_artifacts"), None
    return "ok", "\n".join(found[0]) + "\n"


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


CUT = "answer_too_long"
EXCERPT = 1024  # characters kept of a cut reply, at most (benchmarks.core.answers.EXCERPT_CHARS)


def reread_answer(record, limit):
    """(generation error, generation_chars, generation_sha256) as the kept reply and the answer limit make them."""
    text = record.get("generation")
    if not isinstance(text, str) or not {"generation_error", "generation_chars", "generation_sha256"} <= record.keys():
        raise Unreadable(f"unit {record.get('item_id')!r}: needs generation (a string), generation_error, "
                         "generation_chars and generation_sha256 (a record of schema 3)")
    recorded = record["generation_error"]
    if recorded == CUT:
        whole = record["generation_chars"]
        excerpt = min(limit, EXCERPT)
        fits = isinstance(whole, int) and whole > limit and len(text) == excerpt
        chars = whole if fits else f"more than {limit}, of which exactly {excerpt} kept (kept {len(text)})"
        return CUT, chars, record["generation_sha256"]
    error = CUT if recorded is None and len(text) > limit else recorded
    return error, len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def parse(record, error):
    """(parse status, parsed) of a record from its primitive fields and its recomputed generation error."""
    if error is not None:
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


def clustered_share(outcomes, confidence=0.95):
    """{k, n, value, low, high, design_effect} of (cluster, success) outcomes: Wilson's score interval on the
    effective size n / deff, deff = sum_i (k_i - n_i p)^2 / (n p (1 - p)) clipped to [1, largest cluster]; with
    one cluster or p = 0 or 1 deff is n / clusters.  Written here from the definition, not from the suite."""
    clusters = {}
    for cluster, ok in outcomes:
        cell = clusters.setdefault(cluster, [0, 0])
        cell[0] += bool(ok)
        cell[1] += 1
    hits, total = sum(c[0] for c in clusters.values()), sum(c[1] for c in clusters.values())
    out = {"k": hits, "n": total, "value": None, "low": None, "high": None, "design_effect": None}
    if not total:
        return out
    p = hits / total
    if len(clusters) < 2 or hits in (0, total):
        effect = total / len(clusters)
    else:
        between = sum((k - n * p) ** 2 for k, n in clusters.values())
        effect = min(max(n for _, n in clusters.values()), max(1.0, between / (total * p * (1 - p))))
    size = total / effect
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    centre = (p + z * z / (2 * size)) / (1 + z * z / size)
    half = z * math.sqrt(max(0.0, p * (1 - p) / size + z * z / (4 * size * size))) / (1 + z * z / size)
    out.update(value=p, low=0.0 if hits == 0 else max(0.0, centre - half),
               high=1.0 if hits == total else min(1.0, centre + half), design_effect=effect)
    return out


def cluster_of(world_ref):
    """A pair's worlds ("pair:<pair id>:<side>") belong to its base pair (the id before "~r"); a shipped world to itself."""
    if world_ref.startswith("pair:"):
        return world_ref.split(":", 2)[1].split("~r", 1)[0]
    return world_ref


def clustered_deficit(sides_by_pair, confidence):
    """F - C and its interval, clustered by base pair (the replicas ``<base>~r<k>`` share their base).

    Tango's score interval for a paired difference, on the pooled table of every
    pair measured under both conditions, with its discordant counts and its size
    divided by the Rao-Scott design effect of the bases (between 1 and the
    largest base size).  Written here from the definition, not from the suite.
    """
    bases = {}
    for pair, side in sides_by_pair.items():
        if set(side) != {"F", "C"}:
            continue
        tally = bases.setdefault(pair.split("~r", 1)[0], [0, 0, 0])  # replicas, F only, C only
        tally[0] += 1
        tally[1] += side["F"] and not side["C"]
        tally[2] += side["C"] and not side["F"]
    total = sum(t[0] for t in bases.values())
    f_only = sum(t[1] for t in bases.values())
    c_only = sum(t[2] for t in bases.values())
    diff = (f_only - c_only) / total
    spread = (f_only + c_only) / total - diff * diff
    largest = max(t[0] for t in bases.values())
    if len(bases) < 2 or spread <= 1e-12:
        effect = largest
    else:
        between = sum(((t[1] - t[2]) - t[0] * diff) ** 2 for t in bases.values())
        effect = min(largest, max(1.0, between / (total * spread)))
    b, c, n = f_only / effect, c_only / effect, total / effect
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)

    def score(d):
        # restricted maximum-likelihood estimate of the C-only cell probability under F - C = d
        qa, qb, qc = 2 * n, (2 * n - b + c) * d - b - c, -c * d * (1 - d)
        q = (math.sqrt(max(0.0, qb * qb - 4 * qa * qc)) - qb) / (2 * qa)
        variance = n * (2 * q + d * (1 - d))
        top = b - c - n * d
        if variance <= 1e-300:
            return 0.0 if top == 0 else math.copysign(math.inf, top)
        return top / math.sqrt(variance)

    def crossing(low, high, level):  # score decreases in d: the d in [low, high] where it passes level
        for _ in range(200):
            middle = (low + high) / 2
            if score(middle) > level:
                low = middle
            else:
                high = middle
            if high - low < 1e-14:
                break
        return (low + high) / 2

    lower = -1.0 if score(-1.0) <= z else crossing(-1.0, diff, z)
    upper = 1.0 if score(1.0) >= -z else crossing(diff, 1.0, -z)
    return diff, lower, upper, len(bases)


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


class Unreadable(Exception):
    """The run directory cannot be rescored as it is; the message is one line."""


def read_json(path):
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise Unreadable(f"{path}: missing; rescore a finished run directory") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"{path}: unreadable ({type(exc).__name__}: {exc})".replace("\n", " ")) from None


#: The run directory's copies of the reference interpreters (benchmarks/cwr/grading.py writes them).
INTERPRETER_FILE = "grading/reference.py"
PROGRAM_INTERPRETER_FILE = "grading/dataflow_reference.py"


def load_interpreter(path, program_path=None):
    """The reference interpreter copied into the run directory, loaded by path (standard library only).

    With ``program_path`` (the run's copy of the dataflow program interpreter) both are loaded as modules of one
    package, so that the first one's relative import of the second finds the run's own copy."""
    package = f"cwr_run_reference_{len(sys.modules)}"
    holder = types.ModuleType(package)
    holder.__path__ = []
    sys.modules[package] = holder

    def load(name, where):
        spec = importlib.util.spec_from_file_location(f"{package}.{name}", where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise Unreadable(f"{where}: the reference interpreter does not load ({type(exc).__name__}: {exc})") from None
        return module

    module = load("_reference", path)
    for name in ("replay", "_TokenRef", "_ScheduleRef"):
        if not hasattr(module, name):
            raise Unreadable(f"{path}: the reference interpreter lacks {name}; the run directory is damaged")
    if program_path is not None and not hasattr(load("_dataflow_reference", program_path), "replay"):
        raise Unreadable(f"{program_path}: the program interpreter lacks replay; the run directory is damaged")
    return module


def steps_text(steps):
    return "".join(step + "\n" for step in steps)


def chat_contents(prompt):
    """The text of a recorded prompt: as it stands, or, when it is the JSON of a list of chat messages (what a
    served model is sent), their contents one after another."""
    if not prompt.startswith("[{"):
        return prompt
    try:
        messages = json.loads(prompt)
    except ValueError:
        return prompt
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        return prompt
    return "\n".join(m["content"] for m in messages)


class Grader:
    """Re-grades units from the run's world files with the reference interpreter (never the suite's checker)."""

    def __init__(self, run_dir, index):
        self.run_dir = run_dir
        self.index = index
        files = index["files"]
        if not isinstance(files, dict):
            raise Unreadable(f"{run_dir / 'grading.json'}: 'files' is not an object")
        self.actual_sha = {}
        for name in files:
            self.actual_sha[name] = hashlib.sha256(self.inside(name).read_bytes()).hexdigest()
        interpreter = index["interpreter"]
        program = index.get("program_interpreter")
        # Only the two files a run copies are ever executed, whatever else the index names.
        if interpreter != INTERPRETER_FILE or program not in (None, PROGRAM_INTERPRETER_FILE):
            raise Unreadable(f"{run_dir / 'grading.json'}: names {interpreter!r} and {program!r} as interpreters; a "
                             f"run's are {INTERPRETER_FILE!r} and {PROGRAM_INTERPRETER_FILE!r} (or none)")
        if self.actual_sha.get(interpreter) != files.get(interpreter):
            raise Unreadable(f"{self.inside(interpreter)}: differs from the sha256 grading.json records; "
                             "the run's reference interpreter cannot be trusted")
        if program is not None and self.actual_sha.get(program) != files.get(program):
            raise Unreadable(f"{self.inside(program)}: differs from the sha256 grading.json records; "
                             "the run's program interpreter cannot be trusted")
        self.ref = load_interpreter(self.inside(interpreter), None if program is None else self.inside(program))
        self.programs = program is not None
        self.worlds = {}

    def inside(self, name):
        """The path of a file the index names, refused unless it lies under the run directory's grading/."""
        if not isinstance(name, str) or not name.startswith("grading/") or ".." in name.split("/") or "\\" in name:
            raise Unreadable(f"grading.json names the file {name!r}; only files under grading/ are read")
        path = self.run_dir / name
        if not path.is_file():
            raise Unreadable(f"{path}: missing; grading.json names it")
        return path

    def world(self, name):
        if name not in self.worlds:
            raw = read_json(self.inside(name))
            families = ("token_workshop", "schedule") + (("dataflow",) if self.programs else ())
            if not isinstance(raw, dict) or raw.get("family") not in families:
                raise Unreadable(f"{self.inside(name)}: not a {' or '.join(families)} world mapping"
                                 + ("" if self.programs else " (a dataflow world needs grading.json's "
                                    "program_interpreter)"))
            self.worlds[name] = raw
        return self.worlds[name]

    def changed(self, name):
        """(recorded sha256, actual sha256) of a world file, or None when they agree."""
        if name not in self.actual_sha:
            self.actual_sha[name] = hashlib.sha256(self.inside(name).read_bytes()).hexdigest()
        recorded, actual = self.index["files"].get(name), self.actual_sha[name]
        return None if recorded == actual else (recorded, actual)

    def replay(self, name, steps):
        return self.ref.replay(self.world(name), steps if isinstance(steps, str) else steps_text(steps))

    def describe(self, raw, canon):
        if raw["family"] == "schedule":
            return {task: {"machine": machine, "start": start} for task, machine, start in canon}
        if raw["family"] == "dataflow":  # (wires, uses, read): the wires the program bound (inputs have depth 0)
            return {name: list(values) for name, _, depth, values in canon[0] if depth > 0}
        return {token: count for token, count in canon}

    def goal_holds(self, raw, canon):
        if raw["family"] == "dataflow":
            goal = raw["goal"]
            bound = {name: (typ, list(values)) for name, typ, _, values in canon[0]}
            return bound.get(goal["wire"]) == (goal["type"], [case["expect"] for case in goal["cases"]])
        if raw["family"] == "schedule":
            placed = {task for task, _, _ in canon}
            return all(task in placed for task in raw["goal"]["scheduled"])
        held = dict(canon)
        return all(held.get(token, 0) >= need for token, need in raw["goal"]["require"].items())

    def expected(self, condition, entry):
        """The expected answer of a P, R or E unit, re-derived from its world and inputs (None: not derivable)."""
        name = entry["world"]
        raw = self.world(name)
        if condition == "P":
            prefix = list(entry["prefix"])
            if prefix and self.replay(name, prefix).executed != len(prefix):
                return None  # the recorded prefix is not legal: no state to probe from
            after = self.replay(name, prefix + [entry["probe"]])
            committed = after.executed == len(prefix) + 1
            if entry["kind"] == "effect":
                return {"state": self.describe(raw, after.state)} if committed else None
            return {"verdict": "LEGAL" if committed else "ILLEGAL"}
        if condition == "R":
            valid = [e["id"] for e in entry["handbook"] if self.replay(name, e["steps"]).status == "VALID"]
            return {"artifact": valid[0]} if len(valid) == 1 else None
        result = self.replay(name, entry["candidate"])
        if result.status == "MALFORMED":
            return None
        if result.failing_step is not None:
            return {"verdict": "ILLEGAL", "step": result.failing_step + 1}
        return {"verdict": "LEGAL", "goal": self.goal_holds(raw, result.state),
                "state": self.describe(raw, result.state)}

    @staticmethod
    def shown(condition, entry, prompt):
        """Whether the prompt the model saw shows the unit's inputs (P probe, R artifacts, E candidate) as written.

        A served model is sent the chat, and its record holds the canonical JSON of the messages: their contents
        are what it was shown."""
        prompt = chat_contents(prompt)
        if condition == "P":
            return f"PROBE STEP\n{entry['probe']}\n" in prompt
        if condition == "R":
            return all(f"[{e['id']}]\n" + "".join(s + "\n" for s in e["steps"]) in prompt for e in entry["handbook"])
        return "".join(f"{i}. {s}\n" for i, s in enumerate(entry["candidate"], start=1)) in prompt

    def check(self, name, artifact):
        """(status, reason, failing step) of an artifact on a target world."""
        result = self.replay(name, artifact)
        return result.status, result.reason, result.failing_step


# --------------------------------------------------------------------------- copy baseline


def parse_step(step):
    """(name, args) of one rendered step: names stay strings, integer literals become ints."""
    name, _, rest = step.strip().partition("(")
    inner = rest.rstrip().removesuffix(")").strip()
    args = tuple(int(a) if a.isdigit() else a for a in (p.strip() for p in inner.split(",")) if inner)
    return name.strip(), args


def grounded(raw):
    """Every type-correct step of a world, as (name, args)."""
    if raw["family"] == "schedule":
        return [("start", (task["name"], machine, t)) for task in raw["tasks"] for machine in raw["machines"]
                for t in range(raw["budget"]["horizon"])]
    by_type = {}
    for token, kind in raw["tokens"].items():
        by_type.setdefault(kind, []).append(token)
    out = []
    for recipe in raw["recipes"]:
        combos = [()]
        for param in recipe.get("params", []):
            combos = [c + (token,) for c in combos for token in by_type.get(param["type"], [])]
        out.extend((recipe["name"], combo) for combo in combos)
    return out


def render(step):
    name, args = step
    return f"{name}({', '.join(str(a) for a in args)})"


def bounded_solutions(ref, raw):
    """Every valid step sequence within the step and cost caps, as tuples of (name, args), from the interpreter's
    own step semantics; memoized over (state, steps left, cost left)."""
    sem = ref._TokenRef(raw) if raw["family"] == "token_workshop" else ref._ScheduleRef(raw)
    alphabet = grounded(raw)
    memo = {}

    def walk(state, steps_left, cost_left):
        sem.commit(state)
        key = (sem.canon(), steps_left, cost_left)
        if key in memo:
            return memo[key]
        out = []
        if steps_left > 0:
            for step in alphabet:
                sem.commit(state)
                trial = sem.trial(*step)
                if trial is None:
                    continue
                cost, after = trial
                if cost > cost_left or not sem.within_caps(after) or not sem.invariants_ok(after, final=False):
                    continue
                sem.commit(after)
                if sem.invariants_ok(after, final=True) and sem.goal_met():
                    out.append((step,))
                out.extend((step,) + rest for rest in walk(after, steps_left - 1, cost_left - cost))
        memo[key] = tuple(out)
        return memo[key]

    initial = dict(raw["initial"]) if raw["family"] == "token_workshop" else {}
    return walk(initial, raw["budget"]["max_steps"], raw["budget"]["max_cost"])


def dependencies(raw, steps):
    """For each step, the set of earlier steps it directly depends on (the seed's independence relation)."""
    n = len(steps)
    deps = [set() for _ in range(n)]
    if raw["family"] == "schedule":
        after = {task["name"]: set(task.get("after", [])) for task in raw["tasks"]}
        for j in range(n):
            for i in range(j):
                a, b = steps[i][1][0], steps[j][1][0]
                if a == b or a in after.get(b, ()) or b in after.get(a, ()):
                    deps[j].add(i)
        return deps
    group = {}

    def root(token):
        while group.get(token, token) != token:
            token = group[token]
        return token

    for rule in raw.get("constraints", []):
        if rule["kind"] == "never_together":
            roots = sorted({root(t) for t in rule["tokens"]})
            for other in roots[1:]:
                group[other] = roots[0]
    recipes = {recipe["name"]: recipe for recipe in raw["recipes"]}
    prints = []
    for name, args in steps:
        recipe = recipes[name]
        bind = {p["name"]: a for p, a in zip(recipe.get("params", []), args)}
        res = lambda ref: root(bind.get(ref, ref))  # noqa: E731
        ins = {res(r) for r in recipe.get("inputs", {})}
        prints.append((ins | {res(r) for r in recipe.get("catalysts", [])}, ins | {res(t) for t in recipe["outputs"]}))
    for j in range(n):
        for i in range(j):
            (ri, wi), (rj, wj) = prints[i], prints[j]
            if wi & (rj | wj) or ri & wj:
                deps[j].add(i)
    return deps


def signature(raw, steps):
    """The least relabelled form of a step sequence over its linearisations (invariant to reordering independent
    steps and to renaming primitives and entities)."""
    steps = list(steps)
    deps = dependencies(raw, steps)
    best = [None]

    def walk(order, form, prims, ents):
        if len(order) == len(steps):
            if best[0] is None or form < best[0]:
                best[0] = form
            return
        position = {k: i for i, k in enumerate(order)}
        for k in range(len(steps)):
            if k in position or not deps[k] <= position.keys():
                continue
            name, args = steps[k]
            p2, e2 = dict(prims), dict(ents)
            label = p2.setdefault(name, f"p{len(p2)}")
            labelled = tuple((True, a) if isinstance(a, int) else (False, e2.setdefault(a, f"e{len(e2)}")) for a in args)
            walk(order + [k], form + ((label, labelled, tuple(sorted(position[d] for d in deps[k]))),), p2, e2)

    walk([], (), {}, {})
    return best[0] or ()


def relabels_onto(window, solution, shared):
    """One consistent one-to-one relabelling of entities (and of primitives outside ``shared``) maps window to solution."""
    if len(window) != len(solution):
        return False
    prims, ents = {}, {}
    for (na, aa), (nb, ab) in zip(window, solution):
        if (na in shared and na != nb) or len(aa) != len(ab) or prims.setdefault(na, nb) != nb:
            return False
        for x, y in zip(aa, ab):
            if isinstance(x, int) or isinstance(y, int):
                if x != y:
                    return False
            elif ents.setdefault(x, y) != y:
                return False
    return len(set(prims.values())) == len(prims) and len(set(ents.values())) == len(ents)


def reorders_onto(window, solution, shared, relabel):
    """Some order of ``window`` is ``solution`` as written, or with ``relabel`` after one consistent one-to-one
    relabelling as in :func:`relabels_onto` (each window step placed on an unused solution step, depth first)."""
    if len(window) != len(solution):
        return False
    if not relabel:
        return sorted(map(repr, window)) == sorted(map(repr, solution))

    def bound(forward, backward, a, b):
        if a in forward or b in backward:
            return forward.get(a) == b and backward.get(b) == a
        forward[a] = b
        backward[b] = a
        return True

    def place(i, free, prims, prims_back, ents, ents_back):
        if i == len(window):
            return True
        name, args = window[i]
        for j in sorted(free):
            other, other_args = solution[j]
            if len(args) != len(other_args) or (name in shared and name != other):
                continue
            maps = [dict(prims), dict(prims_back), dict(ents), dict(ents_back)]
            fits = bound(maps[0], maps[1], name, other)
            for x, y in zip(args, other_args):
                if not fits:
                    break
                if isinstance(x, int) or isinstance(y, int):
                    fits = x == y
                else:
                    fits = bound(maps[2], maps[3], x, y)
            if fits and place(i + 1, free - {j}, *maps):
                return True
        return False

    return place(0, frozenset(range(len(solution))), {}, {}, {}, {})


def primitive_names(raw):
    return {"start"} if raw["family"] == "schedule" else {recipe["name"] for recipe in raw["recipes"]}


# --------------------------------------------------------------------------- copy baseline, dataflow programs

_BINDING = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*([A-Za-z_]\w*)\s*\((.*)\)\s*", re.ASCII)


def binding_of(line):
    """(wire bound, primitive, argument names) of one rendered binding."""
    m = _BINDING.fullmatch(line)
    if m is None:
        raise Unreadable(f"grading.json: {line!r} is not a binding NAME = primitive(args)")
    inner = m.group(3).strip()
    return m.group(1), m.group(2), tuple(a.strip() for a in inner.split(",")) if inner else ()


def program_text(bindings):
    return "".join(f"{t} = {n}({', '.join(a)})\n" for t, n, a in bindings)


def program_solutions(grader, name):
    """Every valid program of a dataflow world within its budget, in canonical form (binding i binds the goal
    wire or w<i+1>), found over types, use counts and depths and confirmed by the run's interpreter.

    Pruned where no completion can exist: the goal wire is bound last when every other wire must be read; a
    goal-typed wire needs a primitive chain from the bound types (its least length and cost, each primitive
    counted as the largest of what its parameters need); every unread wire needs a chain into the goal wire's
    binding through primitives not used up."""
    raw = grader.world(name)
    prims = raw["primitives"]
    limit = {c["primitive"]: c["limit"] for c in raw.get("constraints", []) if c["kind"] == "max_uses"}
    no_dead = any(c["kind"] == "no_dead_wires" for c in raw.get("constraints", []))
    goal, budget = raw["goal"], raw["budget"]
    kinds = list(raw["types"])
    huge = 10 ** 9
    found = []

    def least(have, uses):
        steps = {t: 0 if t in have else huge for t in kinds}
        cost = dict(steps)
        for _ in kinds:
            for p in prims:
                need_s = max([steps[t] for t in p.get("params", [])] + [0]) + 1
                need_c = max([cost[t] for t in p.get("params", [])] + [0]) + p["cost"]
                steps[p["result"]] = min(steps[p["result"]], need_s)
                cost[p["result"]] = min(cost[p["result"]], need_c)
        into = {t: huge for t in kinds}
        for _ in range(len(kinds) + 1):
            for p in prims:
                if uses.get(p["name"], 0) >= limit.get(p["name"], huge):
                    continue
                via = 1 if p["result"] == goal["type"] else into[p["result"]] + 1
                for t in p.get("params", []):
                    into[t] = min(into[t], via)
        last = [p for p in prims if p["result"] == goal["type"]]
        return (min([max([steps[t] for t in p.get("params", [])] + [0]) + 1 for p in last] + [huge]),
                min([max([cost[t] for t in p.get("params", [])] + [0]) + p["cost"] for p in last] + [huge]), into)

    def walk(program, wires, uses, read, spent):
        bound = goal["wire"] in wires
        if bound:
            if grader.replay(name, [f"{t} = {n}({', '.join(a)})" for t, n, a in program]).status == "VALID":
                found.append(tuple(f"{t} = {n}({', '.join(a)})" for t, n, a in program))
            if no_dead:
                return
        left = budget["max_steps"] - len(program)
        if left == 0:
            return
        if not bound:
            steps, cost, into = least({w[0] for w in wires.values()}, uses)
            if steps > left or cost > budget["max_cost"] - spent:
                return
            if no_dead and any(into[w[0]] > left for v, w in wires.items()
                               if v not in raw["inputs"] and v not in read):
                return
        binders = [f"w{len(program) + 1}"] + ([] if bound else [goal["wire"]])
        for target in sorted(binders):
            if target == f"w{len(program) + 1}" and left == 1 and not bound:
                continue
            for p in sorted(prims, key=lambda q: q["name"]):
                if uses.get(p["name"], 0) >= limit.get(p["name"], huge) or spent + p["cost"] > budget["max_cost"]:
                    continue
                pools = [sorted(v for v, w in wires.items() if w[0] == t) for t in p.get("params", [])]
                combos = [()]
                for pool in pools:
                    combos = [c + (v,) for c in combos for v in pool]
                for args in combos:
                    depth = max([wires[a][1] for a in args] + [0]) + 1
                    if depth > budget["max_depth"]:
                        continue
                    wires[target] = (p["result"], depth)
                    uses[p["name"]] = uses.get(p["name"], 0) + 1
                    walk(program + [(target, p["name"], args)], wires, uses, read | set(args), spent + p["cost"])
                    uses[p["name"]] -= 1
                    del wires[target]

    walk([], {v: (t, 0) for v, t in raw["inputs"].items()}, {}, frozenset(), 0)
    return sorted(found)


def program_form(raw, bindings, relabel=True):
    """The least form of a program over the binding orders that keep each wire bound before it is read: inputs
    relabelled by first use (or kept), inner wires by the position of the binding that made them, the goal
    wire's binding marked."""
    made = {t: i for i, (t, _, _) in enumerate(bindings)}
    need = [{made[a] for a in args if a in made and made[a] < i} for i, (_, _, args) in enumerate(bindings)]
    best = []

    def extend(order, form, names):
        if best and form > best[0][:len(form)]:
            return
        if len(order) == len(bindings):
            if not best or form < best[0]:
                best[:] = [form]
            return
        at = {k: i for i, k in enumerate(order)}
        for k, (target, prim, args) in enumerate(bindings):
            if k in at or not need[k] <= at.keys():
                continue
            mine = dict(names)
            written = []
            for a in args:
                if a in made and made[a] in at:
                    written.append(("wire", at[made[a]]))
                else:
                    written.append(("input", mine.setdefault(a, f"e{len(mine)}") if relabel else a))
            extend(order + [k], form + ((prim, tuple(written), target == raw["goal"]["wire"]),), mine)

    extend([], (), {})
    return best[0] if best else ()


def program_copy_solves(grader, side):
    """The copy baseline on a dataflow side: each demonstration and every contiguous window of it that reads only
    inputs and its own wires, as written and with its last wire bound as the goal wire, solves the target when
    the interpreter finds it VALID (verbatim) or its form is a bounded target program's with the inputs as
    written (reordered) or relabelled (reordered and relabelled)."""
    target = grader.world(side["target"])
    solutions = program_solutions(grader, side["target"])
    relabelled = {program_form(target, [binding_of(s) for s in sol]) for sol in solutions}
    written = {program_form(target, [binding_of(s) for s in sol], relabel=False) for sol in solutions}
    goal = target["goal"]["wire"]
    for number, demo in enumerate(side["demonstrations"]):
        bindings = [binding_of(s) for s in demo["steps"]]
        for length in range(len(bindings), 0, -1):
            for start in range(len(bindings) - length + 1):
                window = bindings[start:start + length]
                own = set()
                closed = True
                for t, _, args in window:
                    closed = closed and all(a in target["inputs"] or a in own for a in args)
                    own.add(t)
                if not closed:
                    continue
                tries = [window]
                if goal not in own:
                    tries.append(window[:-1] + [(goal,) + window[-1][1:]])
                where = f"demonstration {number}, steps {start + 1}..{start + length}"
                for prog in tries:
                    if grader.replay(side["target"], program_text(prog)).status == "VALID":
                        return f"{where}, copied verbatim, solve the target"
                    if program_form(target, prog, relabel=False) in written:
                        return f"{where}, reordered, become a target solution"
                    if program_form(target, prog) in relabelled:
                        return f"{where}, reordered and relabelled, become a target solution"
    return None


def copy_solves(grader, side):
    """Why a demonstration of the side, or a contiguous window of it, copied verbatim, renamed, relabelled,
    reordered, or reordered and relabelled, solves the side's target; None when none does (every bounded
    solution is enumerated, so "some order is valid" is "some order is a bounded solution")."""
    if grader.world(side["target"])["family"] == "dataflow":
        return program_copy_solves(grader, side)
    target = grader.world(side["target"])
    solutions = bounded_solutions(grader.ref, target)
    signatures = {signature(target, solution) for solution in solutions}
    for number, demo in enumerate(side["demonstrations"]):
        source = grader.world(demo["world"])
        steps = [parse_step(s) for s in demo["steps"]]
        shared = primitive_names(source) & primitive_names(target)
        for length in range(len(steps), 0, -1):
            for start in range(len(steps) - length + 1):
                window = steps[start:start + length]
                where = f"demonstration {number}, steps {start + 1}..{start + length}"
                if grader.replay(side["target"], [render(s) for s in window]).status == "VALID":
                    return f"{where}, copied verbatim, solve the target"
                if signature(source, window) in signatures:
                    return f"{where}, renamed, match the motif signature of a target solution"
                if any(relabels_onto(window, solution, shared) for solution in solutions):
                    return f"{where}, relabelled, become a target solution"
                if any(reorders_onto(window, solution, shared, False) for solution in solutions):
                    return f"{where}, reordered, become a target solution"
                if any(reorders_onto(window, solution, shared, True) for solution in solutions):
                    return f"{where}, reordered and relabelled, become a target solution"
    return None


# --------------------------------------------------------------------------- the run


def rescore(run_dir, prereg):
    records = read_lines(run_dir / "records.jsonl")
    baselines = read_json(run_dir / "baselines.json")
    index = read_json(run_dir / "grading.json")
    if not isinstance(index, dict) or index.get("schema_version") != 1:
        raise Unreadable(f"{run_dir / 'grading.json'}: not a grading index of schema version 1")
    grader = Grader(run_dir, index)
    limit = prereg["measurement"]["max_answer_chars"]
    if prereg["measurement"].get("artifact_extraction") != "one-candidate":
        raise Unreadable(f"measurement.artifact_extraction = {prereg['measurement'].get('artifact_extraction')!r} "
                         "in the preregistration; this rescorer extracts artifacts only by 'one-candidate'")

    disagreements, correct, contexts, clusters, failed = [], {}, {}, {}, []

    def differ(unit, field, recorded, recomputed):
        if recorded != recomputed:
            disagreements.append({"unit": unit, "field": field, "recorded": recorded, "recomputed": recomputed})

    for record in records:
        unit, condition = record["item_id"], record["condition"]
        entry = index["units"].get(unit)
        if entry is None:
            raise Unreadable(f"{run_dir / 'grading.json'}: no grading entry for unit {unit!r}")
        changed = grader.changed(entry["world"])
        if changed:
            differ(unit, "world_sha256", *changed)
        error, chars, digest = reread_answer(record, limit)
        differ(unit, "generation_error", record["generation_error"], error)
        differ(unit, "generation_chars", record["generation_chars"], chars)
        differ(unit, "generation_sha256", record["generation_sha256"], digest)
        status, parsed = parse(record, error)
        differ(unit, "parse_status", record["parse_status"], status)
        differ(unit, "parsed", record["parsed"], parsed)
        if condition in ("F", "C"):
            verdict = grader.check(entry["world"], parsed) if status == "ok" else (None, None, None)
            for field, value in zip(("check_status", "check_reason", "check_failing_step"), verdict):
                differ(unit, field, record[field], value)
            ok = verdict[0] == "VALID"
        else:
            if not grader.shown(condition, entry, record["prompt"]):
                differ(unit, "inputs_in_prompt", True, False)
            expected = grader.expected(condition, entry)
            differ(unit, "expected", record["expected"], expected)
            ok = parsed is not None and parsed == expected
        differ(unit, "correct", record["correct"], ok)
        if error is not None:  # a provider or harness fault: no answer to score; counted apart
            failed.append(unit)
            continue
        correct[unit] = (condition, record["pair_id"], ok)
        contexts[unit] = record.get("context")
        clusters[unit] = cluster_of(record["world_ref"])

    flagged = set()
    recorded_sides = {pair: {s["condition"]: s for s in row["sides"]} for pair, row in baselines["pairs"].items()}
    for pair_id, sides in sorted(index["pairs"].items()):
        for condition in ("F", "C"):
            if condition not in sides:
                continue
            why = copy_solves(grader, sides[condition])
            if why is not None:
                flagged.add(pair_id)
            recorded = recorded_sides.get(pair_id, {}).get(condition)
            differ(sides[condition]["unit"], "copy_baseline_solves_target",
                   None if recorded is None else bool(recorded["copy_solves"]), why is not None)

    # The attribution gates: properties of the whole pair set. Witness-only and exposure-unmatched pairs from the
    # subsets grading.json names; every greedy sequence baselines.json holds replayed on its target (its status must
    # be the recorded one), the greedy and random shares counted from the sides.
    greedy = {}  # base pair -> [solved, targets]
    random_cells = []
    for pair_id, sides in sorted(index["pairs"].items()):
        for condition in ("F", "C"):
            if condition not in sides:
                continue
            recorded = recorded_sides.get(pair_id, {}).get(condition)
            if recorded is None:
                raise Unreadable(f"{run_dir / 'baselines.json'}: no {condition} side of pair {pair_id!r}")
            status = grader.check(sides[condition]["target"], steps_text(recorded["greedy_steps"]))[0]
            differ(sides[condition]["unit"], "greedy_status", recorded["greedy_status"], status)
            cell = greedy.setdefault(pair_id.split("~r", 1)[0], [0, 0])
            cell[0] += status == "VALID"
            cell[1] += 1
            random_cells.append((recorded["random_valid"], recorded["random_samples"]))
    subsets = index.get("pair_subsets") or {}
    everyone = set(index["pairs"])

    values, intervals = {}, {}
    values["pairs.witness_only"] = len(everyone - set(subsets.get("motif_required", ())))
    values["pairs.exposure_unmatched"] = len(everyone - set(subsets.get("exposure_matched", ())))
    solved, targets = sum(c[0] for c in greedy.values()), sum(c[1] for c in greedy.values())
    values["baselines.greedy_solved_share"] = solved / targets if targets else None
    if targets:
        intervals["baselines.greedy_solved_share"] = clustered_share(
            [(base, n < cell[0]) for base, cell in greedy.items() for n in range(cell[1])])
    drawn = sum(n for _, n in random_cells)
    values["baselines.random_valid_rate"] = sum(k for k, _ in random_cells) / drawn if drawn else None
    if drawn:
        intervals["baselines.random_valid_rate"] = clustered_share(
            [(number, n < k) for number, (k, total) in enumerate(random_cells) for n in range(total)])
    values["units.errored"] = len(failed)
    values["errored_share"] = len(failed) / len(records) if records else None
    lost = set(failed)
    intervals["errored_share"] = clustered_share([(cluster_of(r["world_ref"]), r["item_id"] in lost) for r in records])
    for condition in ("P", "R", "E", "F", "C"):
        rows = [ok for cond, _, ok in correct.values() if cond == condition]
        values[f"{condition}.units"] = sum(r["condition"] == condition for r in records)
        name = "validity" if condition in ("F", "C") else "accuracy"
        values[f"{condition}.{name}"] = sum(rows) / len(rows) if rows else None
        intervals[f"{condition}.{name}"] = clustered_share(
            [(clusters[item], ok) for item, (cond, _, ok) in correct.items() if cond == condition])
    # The mastery gate: per family the run scores (an F or C unit of it), P accuracy over the answered P units on
    # the targets of the scored base pairs; the least of them (a family with no such unit: 0.0).
    synthesis = [r for r in records if r["condition"] in ("F", "C")]
    scored_bases = {r["pair_id"].split("~r", 1)[0] for r in synthesis}
    by_family = {r["family"]: [] for r in synthesis}
    for r in records:
        ref = r["world_ref"]
        if (r["condition"] == "P" and r["item_id"] in correct and r["family"] in by_family and ref.startswith("pair:")
                and ref.split(":", 2)[1].split("~r", 1)[0] in scored_bases):
            by_family[r["family"]].append((clusters[r["item_id"]], correct[r["item_id"]][2]))
    floor = None
    for family in sorted(by_family):
        got = by_family[family]
        share = sum(ok for _, ok in got) / len(got) if got else 0.0
        if floor is None or share < floor[0]:
            floor = (share, got)
    values["mastery.min_family_accuracy"] = None if floor is None else floor[0]
    intervals["mastery.min_family_accuracy"] = clustered_share([] if floor is None else floor[1])
    for context in ("C", "F", "none"):  # E_C (the seed's main E), E_F, context-free E
        rows = [ok for item, (cond, _, ok) in correct.items() if cond == "E" and contexts[item] == context]
        values[f"E_{context}.units"] = sum(r["condition"] == "E" and r.get("context") == context for r in records)
        values[f"E_{context}.accuracy"] = sum(rows) / len(rows) if rows else None
        intervals[f"E_{context}.accuracy"] = clustered_share(
            [(clusters[item], ok) for item, (cond, _, ok) in correct.items()
             if cond == "E" and contexts[item] == context])
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
        analysis = prereg["analysis"]
        if analysis.get("interval") != "tango-score-rao-scott":
            raise Unreadable(f"analysis.interval = {analysis.get('interval')!r} in the preregistration; this rescorer "
                             "computes only 'tango-score-rao-scott'")
        estimate, low, high, bases = clustered_deficit(sides, analysis["confidence"])
        values.update({"deficit.estimate": estimate, "deficit.lower": low, "deficit.upper": high, "deficit.bases": bases})
        _, low, high = newcombe(*cells, analysis["confidence"])
        values.update({"deficit.replica_newcombe.lower": low, "deficit.replica_newcombe.upper": high})
        # The secondary deficits (no rule reads them) on the pair subsets grading.json names.
        for name, ids in sorted((index.get("pair_subsets") or {}).items()):
            members = set(ids)
            chosen = {pair: both for pair, both in sides.items() if pair in members and set(both) == {"F", "C"}}
            values[f"pairs_{name}.n"] = len(chosen)
            if chosen:
                estimate, low, high, bases = clustered_deficit(chosen, analysis["confidence"])
            else:
                estimate = low = high = bases = None
            values.update({f"deficit_{name}.estimate": estimate, f"deficit_{name}.lower": low,
                           f"deficit_{name}.upper": high, f"deficit_{name}.bases": bases})
    values["baselines.copy_flagged_pairs"] = len(flagged)

    position = {record["item_id"]: number for number, record in enumerate(records)}
    disagreements.sort(key=lambda d: position.get(d["unit"], len(records)))  # unit (ledger) order; stable
    report = {"units": len(records), "metrics": values, "intervals": intervals, "disagreements": disagreements,
              "mismatched_units": sorted({d["unit"] for d in disagreements}),
              "copy_flagged": sorted(flagged)}
    try:
        report["classification"] = classify(prereg, values, prereg["thresholds"])
    except (KeyError, TypeError) as exc:
        report["classification"] = None
        report["classification_problem"] = f"metric not measured: {exc}"
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description="Recompute a Fiction-CWR run from its run directory.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prereg", type=Path, default=Path(__file__).resolve().parent / "prereg.toml")
    args = parser.parse_args(argv)
    try:
        try:
            prereg = tomllib.loads(args.prereg.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise Unreadable(f"{args.prereg}: unreadable preregistration ({type(exc).__name__}: {exc})") from None
        report = rescore(args.run_dir, prereg)
    except Unreadable as exc:
        print(f"rescore: {exc}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        what = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        print(f"rescore: {args.run_dir}: a run file lacks a field or holds a value of the wrong kind ({what}); "
              "rescore an unmodified finished run directory", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0 if not report["disagreements"] else 1


if __name__ == "__main__":
    sys.exit(main())
