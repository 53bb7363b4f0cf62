"""Fiction-CWR: the protocol's science and its declaration to the protocol shape of ``benchmarks.core``.

Conditions (seed table "Conditions"):

P  primitive probes: is this step legal here (``ANSWER: LEGAL|ILLEGAL``), or
   what exact state does this legal step produce (``STATE:`` block);
R  supplied-handbook retrieval: which artifact id is the valid solution (``ANSWER: H-XXXX``);
E  execute a candidate: ``ANSWER: ILLEGAL AT STEP k`` or ``ANSWER: LEGAL, GOAL MET|NOT MET`` plus the final ``STATE:``;
   on a pair's C (F) target the prompt also shows that condition's context (E_C, E_F), on a shipped world none;
F, C synthesis: the pair side's prompt body verbatim; the answer is an artifact graded by ``worlds.check``.

Every prompt is a single-turn chat of its own: nothing from one answer reaches
another prompt.  A malformed answer is a coded parse status, counted as wrong.

:class:`CwrProtocol` declares the units (the P/R/E items, then the F and C
side of every pair), their measurement in batches of one condition each (every
condition has its own generation bound), the metrics, the baselines file and
the summary extras; ``benchmarks.core`` runs them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import models
import worlds
from benchmarks.core import ClassificationSpec, ModelSpec, ProtocolHeader, sha256_bytes
from benchmarks.core.protocol import Option, Protocol, ProtocolRun, UsageProblem, finite
from benchmarks.core.paired import tango_rao_scott_interval
from benchmarks.core.stats import paired_difference_interval, proportion
from fixtures.cwr import E_CONTEXTS, build_cwr_items, condition_context_text, e_context, resolve_world

#: The interval the CWR rules read: Tango's score interval for a paired difference on the pooled replica table,
#: its counts divided by the Rao-Scott design effect of the replicas within their base pairs.
INTERVAL_METHOD = "tango-score-rao-scott"

from .baselines import pair_baselines
from .grading import GRADING_FILE, write_grading
from .pairs import MOTIF_REQUIRED, interchangeable_of, pair_subsets, synthesis_pairs
from .splits import SPLIT_FILE, SplitSpec, build_split, resolve_seed, splits_table

HERE = Path(__file__).resolve().parent

CONDITIONS = ("P", "R", "E", "F", "C")
CONTROL_CONDITIONS = ("P", "R", "E")
SYNTHESIS_CONDITIONS = ("F", "C")
#: The pair sets a preregistration may name.
PAIR_SETS = ("showcase",)
#: Name under which the run's F/C pairs enter ``fixtures.json`` and the run identity (built by ``worlds``,
#: not a registered fixture set).
PAIRS_FIXTURE = "cwr-pairs"
BASELINES_FILE = "baselines.json"


@dataclass(frozen=True)
class MeasurementSpec:
    fixture_set: str  # registered P/R/E fixture set
    pair_set: str  # "showcase": worlds.build_showcase_pairs()
    replicas_per_pair: int  # target replica seeds per showcase pair; each replica is one paired unit
    max_new_tokens: dict[str, int]  # generation bound per condition


@dataclass(frozen=True)
class BaselineSpec:
    random_samples: int  # seeded random step sequences per target


@dataclass(frozen=True)
class AnalysisSpec:
    confidence: float  # level of the paired F - C interval
    interval: str  # the method of the interval the rules read (INTERVAL_METHOD)


@dataclass(frozen=True)
class SensitivitySpec:
    delta: tuple[float, ...]  # deficit values the summary re-classifies at (report only)
    tau: tuple[float, ...]  # mastery values the summary re-classifies at (report only)


@dataclass(frozen=True)
class ConfirmatoryDesignSpec:
    """The prospective sample design of the confirmatory split (read by ``python -m benchmarks.core.design cwr``;
    no rule reads it and it sizes nothing in a development run)."""

    families: tuple[str, ...]  # families the base pairs come from, equal numbers of bases each
    bases_per_family: int  # base pairs per family
    replicas: int  # F/C target replicas per base pair
    c_validity: float  # assumed C exact validity of one replica
    theta: float  # assumed dependence of the F and C sides of one replica
    rho: float  # assumed within-base correlation of the replicas
    null_difference: float  # true F - C at which DEFICIT_OF_DELTA_REJECTED is the correct outcome
    effect_difference: float  # true F - C at which RECOMBINATION_DEFICIT_SUPPORTED is the correct outcome
    target: float  # required probability of the correct outcome at both
    simulations: int  # simulated data sets per probability
    seed: int  # simulation seed
    p_reject_at_null: float  # computed P(DEFICIT_OF_DELTA_REJECTED) at null_difference
    p_support_at_effect: float  # computed P(RECOMBINATION_DEFICIT_SUPPORTED) at effect_difference


@dataclass(frozen=True)
class DesignSpec:
    confirmatory: ConfirmatoryDesignSpec


@dataclass(frozen=True)
class CwrPrereg:
    protocol: ProtocolHeader
    model: ModelSpec
    seeds: dict[str, int]
    measurement: MeasurementSpec
    baselines: BaselineSpec
    analysis: AnalysisSpec
    thresholds: dict[str, float]
    sensitivity: SensitivitySpec
    design: DesignSpec
    splits: dict[str, SplitSpec]
    classification: ClassificationSpec


def gate_at(delta: float, tau: float):
    """The preregistered rule order compiled with other thresholds (for the sensitivity grid only)."""
    thresholds = {**PREREG.values.thresholds, "delta": float(delta), "tau": float(tau)}
    return PREREG.values.classification.build(thresholds)


# --------------------------------------------------------------------------- state text


def state_lines(family: str, described: Mapping[str, Any]) -> list[str]:
    """A state as ``name = value`` lines, sorted by name (the format P and E answers use)."""
    if not described:
        return ["(empty)"]
    if family == "schedule":
        return [f"{task} = {p['machine']} @ {p['start']}" for task, p in sorted(described.items())]
    return [f"{token} = {count}" for token, count in sorted(described.items())]


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# The parts of a state line are runs of character classes that cannot overlap their neighbours (name
# characters, whitespace, "=", "@", digits), so a failed match gives each run back once: linear time.
_TOKEN_LINE = re.compile(rf"({_NAME})\s*=\s*(\d+)")
_PLACEMENT_LINE = re.compile(rf"({_NAME})\s*=\s*({_NAME})\s*@\s*(\d+)")

#: Longest numeral a reply may write (a count, a start time, a step number), leading zeros included; a
#: longer one is the parse status ``number_too_large``.  The numbers of these worlds have a few digits.
MAX_NUMBER_DIGITS = 18


def read_state(family: str, lines: Sequence[str]) -> tuple[str, dict[str, Any] | None]:
    """(parse status, state) of the lines of a state block, the inverse of :func:`state_lines`.

    The status is ``bad_state_block`` when a line does not fit the format or a
    name repeats, else ``number_too_large`` when a numeral has more than
    :data:`MAX_NUMBER_DIGITS` digits, else ``ok``.  token_workshop entries with
    count 0 are dropped (an absent token has count 0).
    """
    body = [line.strip().strip("`").strip() for line in lines]
    body = [line.lstrip("-* ").strip() for line in body if line]
    if body == ["(empty)"] or body == ["empty"]:
        return "ok", {}
    pattern = _PLACEMENT_LINE if family == "schedule" else _TOKEN_LINE
    matches = {}
    for line in body:
        m = pattern.fullmatch(line)
        if m is None or m.group(1) in matches:
            return "bad_state_block", None
        matches[m.group(1)] = m
    if any(len(m.group(m.lastindex)) > MAX_NUMBER_DIGITS for m in matches.values()):
        return "number_too_large", None
    if family == "schedule":
        return "ok", {name: {"machine": m.group(2), "start": int(m.group(3))} for name, m in matches.items()}
    counts = {name: int(m.group(2)) for name, m in matches.items()}
    return "ok", {name: count for name, count in counts.items() if count > 0}


def parse_state(family: str, lines: Sequence[str]) -> dict[str, Any] | None:
    """The state :func:`read_state` reads from ``lines``; None when its status is not ok."""
    return read_state(family, lines)[1]


# --------------------------------------------------------------------------- prompts

_INTRO = ("This is a closed, fully specified world. Use only the rules written below; "
          "nothing outside this message applies.")
_LEGAL_MEANS = ("A step is legal when its primitive exists, its arguments name permitted entities of the right types, "
                "it is applicable in the current state, the step count and total cost stay within the budget, "
                "no inventory cap or horizon is exceeded, and the state after it satisfies every hard constraint "
                "that must hold in every state.")
_STATE_FORMAT = {
    "token_workshop": "one line per token held, written  name = count  (tokens with count 0 are left out; "
                      "write (empty) when nothing is held)",
    "schedule": "one line per placed task, written  task = machine @ start  (write (empty) when no task is placed)",
}


def handbook(raw: Mapping[str, Any]) -> str:
    """The complete world as the synthesis prompts show it (``worlds.render_world``)."""
    return worlds.render_world(dict(raw))


def _situation(item: Mapping[str, Any], world: worlds.World) -> list[str]:
    return [
        "CURRENT SITUATION",
        f"Steps already executed: {item['steps_used']} (budget: at most {world.budget.max_steps}).",
        f"Cost already spent: {item['cost_used']} (budget: at most {world.budget.max_cost}).",
        "Current state:",
        *state_lines(world.family, item["state"]),
    ]


def _e_context_block(item: Mapping[str, Any]) -> list[str]:
    """The lines an E item shows between the handbook and the candidate: its condition's context, or nothing."""
    context = item.get("context")
    if context not in E_CONTEXTS:
        raise ValueError(f"E item {item.get('item_id')!r} has context {context!r}, expected one of {list(E_CONTEXTS)}; "
                         "build items with fixtures.cwr.build_cwr_items")
    if context != e_context(item["world_ref"]):
        raise ValueError(f"E item {item.get('item_id')!r}: context {context!r} does not belong to world "
                         f"{item['world_ref']!r} (its context is {e_context(item['world_ref'])!r})")
    if context == "none":
        return []
    return [condition_context_text(item["world_ref"]), ""]


def control_prompt(item: Mapping[str, Any], world: worlds.World, raw: Mapping[str, Any]) -> str:
    """The user message of a P, R or E item."""
    parts = [_INTRO, "", "WORLD HANDBOOK", handbook(raw), ""]
    condition = item["condition"]
    if condition == "P":
        parts += [*_situation(item, world), "", "PROBE STEP", item["probe"], "", "QUESTION"]
        if item["kind"] == "verdict":
            parts += [f"Is the probe step legal as the next step? {_LEGAL_MEANS}",
                      "Reply with exactly one line:  ANSWER: LEGAL  or  ANSWER: ILLEGAL"]
        else:
            parts += ["The probe step is legal here. What is the exact state right after it?",
                      f"Reply with a line  STATE:  followed by the state, {_STATE_FORMAT[world.family]}."]
    elif condition == "R":
        parts += ["ARTIFACT HANDBOOK",
                  "Each artifact is a step sequence; it is executed from the initial state of the world."]
        for entry in item["handbook"]:
            parts += ["", f"[{entry['id']}]", *entry["steps"]]
        parts += ["", "QUESTION",
                  "Exactly one artifact is a valid solution: executed from the initial state every step is legal, "
                  "every hard constraint holds, the budget is kept and the goal holds at the end. Which one?",
                  "Reply with exactly one line:  ANSWER: <artifact id>   (for example  ANSWER: H-0000)"]
    elif condition == "E":
        parts += _e_context_block(item)
        parts += ["CANDIDATE (executed from the initial state, one step per line)",
                  *(f"{i}. {step}" for i, step in enumerate(item["candidate"], start=1)), "", "QUESTION",
                  f"Execute the candidate step by step. {_LEGAL_MEANS}",
                  "If some step is illegal, reply with one line  ANSWER: ILLEGAL AT STEP <n>  where n is the number "
                  "of the first illegal step.",
                  "If every step is legal, reply with one line  ANSWER: LEGAL, GOAL MET  or  ANSWER: LEGAL, GOAL NOT MET  "
                  "(whether the goal holds at the end), then a line  STATE:  followed by the final state, "
                  f"{_STATE_FORMAT[world.family]}."]
    else:
        raise ValueError(f"control_prompt serves P, R and E items, not condition {condition!r}")
    return "\n".join(parts)


def chat(user_text: str) -> list[dict[str, str]]:
    """One fresh single-turn chat (no system message): every unit is a separate session."""
    return [{"role": "user", "content": user_text}]


# --------------------------------------------------------------------------- parsers

#: Parse statuses; anything but "ok" is a malformed answer and counts as wrong.
PARSE_STATUSES = ("ok", "generation_error", "no_answer_line", "several_answer_lines", "bad_answer_value",
                  "no_state_block", "bad_state_block", "several_code_blocks", "unclosed_code_block",
                  "number_too_large")

# A keyed line reads  [ws][marks][ws] KEY [ws][marks][ws] ":" [ws][marks][ws] VALUE  where ws is any
# whitespace, marks any of * _ ` and KEY is matched as re.IGNORECASE matches letters ("ſ" counts as "s").
# The padding pattern is made of starred runs only, so its first, greedy attempt always succeeds and it never
# backtracks; the key is a fixed word; the value's end is trimmed with str.rstrip.  Reading a line takes
# time linear in its length, whatever it holds.
_PADDING = re.compile(r"\s*[*_`]*\s*")
_ANSWER_KEY = re.compile("answer", re.IGNORECASE)
_STATE_KEY = re.compile("state", re.IGNORECASE)
_RETRIEVAL = re.compile(r"\[?(H-[0-9A-F]{4})\]?")
_ILLEGAL_AT = re.compile(r"ILLEGAL AT STEP (\d+)")
_LEGAL_GOAL = re.compile(r"LEGAL , GOAL (MET|NOT MET)")


def _past_padding(line: str, at: int) -> int:
    """The index after the whitespace, then emphasis marks, then whitespace that start at ``at``."""
    return _PADDING.match(line, at).end()  # type: ignore[union-attr]  # starred runs always match


def _keyed_value(line: str, key: re.Pattern[str]) -> str | None:
    """What follows ``KEY:`` and its padding on ``line``, or None when the line is not keyed by ``key``."""
    if ":" not in line:
        return None
    found = key.match(line, _past_padding(line, 0))
    if found is None:
        return None
    colon = _past_padding(line, found.end())
    if not line.startswith(":", colon):
        return None
    return line[_past_padding(line, colon + 1):]


def _answer_value(text: str) -> tuple[str, str | None]:
    """The single ``ANSWER:`` value, trailing whitespace, marks and periods dropped, upper-cased, spaces normalized."""
    found = [value for line in text.splitlines() if (value := _keyed_value(line, _ANSWER_KEY)) is not None]
    if not found:
        return "no_answer_line", None
    if len(found) > 1:
        return "several_answer_lines", None
    value = found[0].rstrip().rstrip("*_`.").rstrip()
    return "ok", " ".join(value.upper().replace(",", " , ").split())


def _state_block(family: str, text: str) -> tuple[str, dict[str, Any] | None]:
    lines = text.splitlines()
    starts = [(i, value) for i, line in enumerate(lines) if (value := _keyed_value(line, _STATE_KEY)) is not None]
    if len(starts) != 1:
        return "no_state_block", None
    ((start, first),) = starts
    first = first.rstrip()
    block = [first] if first else []
    for line in lines[start + 1:]:
        if not line.strip():
            if block:
                break
            continue
        if line.strip().startswith("```"):
            if block:
                break
            continue
        block.append(line)
    return read_state(family, block) if block else ("bad_state_block", None)


def parse_control(item: Mapping[str, Any], family: str, text: str) -> tuple[str, Any]:
    """(parse status, parsed answer) of a P, R or E generation; the answer is None unless the status is ok.

    Only the ``ANSWER:`` line and the ``STATE:`` block are read; other prose is
    unscored.  Exactly one ``ANSWER:`` line (and at most one ``STATE:`` line)
    may occur.  Never raises on a ``str``; time is linear in its length.
    """
    condition, kind = item["condition"], item["kind"]
    if condition == "P" and kind == "effect":
        status, state = _state_block(family, text)
        return status, ({"state": state} if status == "ok" else None)
    status, value = _answer_value(text)
    if status != "ok":
        return status, None
    assert value is not None
    if condition == "P":
        return ("ok", {"verdict": value}) if value in ("LEGAL", "ILLEGAL") else ("bad_answer_value", None)
    if condition == "R":
        m = _RETRIEVAL.fullmatch(value)
        return ("ok", {"artifact": m.group(1)}) if m else ("bad_answer_value", None)
    m = _ILLEGAL_AT.fullmatch(value)
    if m:
        if len(m.group(1)) > MAX_NUMBER_DIGITS:
            return "number_too_large", None
        return "ok", {"verdict": "ILLEGAL", "step": int(m.group(1))}
    m = _LEGAL_GOAL.fullmatch(value)
    if not m:
        return "bad_answer_value", None
    status, state = _state_block(family, text)
    if status != "ok":
        return status, None
    return "ok", {"verdict": "LEGAL", "goal": m.group(1) == "MET", "state": state}


_INFO_WORD = re.compile(r"[A-Za-z0-9_-]*")


def _is_fence(line: str) -> bool:
    """A fence line: optional whitespace, three backticks, an optional info word of [A-Za-z0-9_-], optional whitespace."""
    body = line.strip()
    return body.startswith("```") and _INFO_WORD.fullmatch(body, 3) is not None


def extract_artifact(text: str) -> tuple[str, str | None]:
    """(parse status, artifact text) of a synthesis answer.

    The whole answer is the artifact (the grammar the prompt states allows
    comments and blank lines, not prose).  One exception: an answer made only
    of one fenced code block (```...```) is unwrapped.  Two or more fences
    pairs, or an unclosed fence, are coded outcomes.
    """
    lines = text.strip("\n").splitlines()
    fences = [i for i, line in enumerate(lines) if _is_fence(line)]
    if not fences:
        return "ok", text
    if len(fences) % 2:
        return "unclosed_code_block", None
    if len(fences) > 2:
        return "several_code_blocks", None
    first, last = fences
    outside = [line for i, line in enumerate(lines) if (i < first or i > last) and line.strip()]
    if outside:
        return "ok", text  # prose around a block: the checker decides (MALFORMED)
    return "ok", "\n".join(lines[first + 1:last]) + "\n"


def grade_control(item: Mapping[str, Any], parsed: Any) -> bool:
    """Exact match of the parsed answer with the checker-derived expected answer."""
    return parsed is not None and parsed == item["expected"]


def expected_answer_text(item: Mapping[str, Any], family: str) -> str:
    """The answer a perfect responder writes for a P, R or E item (used by scripted policies and tests)."""
    expected = item["expected"]
    if item["condition"] == "P":
        if item["kind"] == "effect":
            return "STATE:\n" + "\n".join(state_lines(family, expected["state"]))
        return f"ANSWER: {expected['verdict']}"
    if item["condition"] == "R":
        return f"ANSWER: {expected['artifact']}"
    if expected["verdict"] == "ILLEGAL":
        return f"ANSWER: ILLEGAL AT STEP {expected['step']}"
    goal = "GOAL MET" if expected["goal"] else "GOAL NOT MET"
    return f"ANSWER: LEGAL, {goal}\nSTATE:\n" + "\n".join(state_lines(family, expected["state"]))


# --------------------------------------------------------------------------- units and records


@dataclass(frozen=True)
class Unit:
    """One prompt to measure: a P/R/E item or one side of a pair."""

    item_id: str  # P/R/E: the fixture item id; F/C: "<F|C>:<pair id>"
    condition: str
    kind: str  # P: verdict/effect; R: retrieval; E: goal/non_goal/illegal; F/C: synthesis
    pair_id: str | None  # F/C: the pair; None for controls
    world_ref: str  # world behind the prompt (for F/C: "pair:<id>:<F|C>")
    family: str
    prompt_text: str  # the user message
    expected: Any  # P/R/E: the expected answer; F/C: None (every valid artifact passes)
    context: str | None = None  # E: "C", "F" or "none" (the condition context the prompt shows); None otherwise
    target: worlds.World | None = field(default=None, repr=False, compare=False)  # F/C: the world the checker grades


@dataclass(frozen=True)
class CwrRecord:
    """One unit's measurement: a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 2  # 2: the E context field

    item_id: str
    condition: str  # P, R, E, F or C
    kind: str
    pair_id: str | None
    world_ref: str
    family: str
    prompt: str  # the rendered prompt text the model saw
    prompt_sha256: str
    prompt_tokens: int | None
    max_new_tokens: int  # the generation bound actually used
    generation: str  # raw greedy text
    generation_tokens: int  # generated token count (0 for backends that report no token ids, e.g. scripted)
    finish_reason: str
    generation_error: str | None  # coded backend failure; the unit counts as wrong
    parse_status: str  # one of PARSE_STATUSES
    parsed: Any  # P/R/E: the parsed answer; F/C: the extracted artifact text; None when not ok
    expected: Any  # P/R/E: the expected answer; F/C: None
    check_status: str | None  # F/C: VALID / INVALID / MALFORMED from worlds.check; None for controls
    check_reason: str | None  # F/C: the checker's reason
    check_failing_step: int | None  # F/C: the checker's first failing step (0-based)
    correct: bool  # P/R/E: exact match; F/C: check_status == VALID
    context: str | None  # E: "C", "F" or "none" (E_C, E_F, context-free); None for other conditions


def make_record(unit: Unit, prompt: str, response: Any, max_new_tokens: int) -> CwrRecord:
    """The record of one unit from the model's response to its rendered prompt (F/C graded against ``unit.target``)."""
    error = getattr(response, "error", None)
    text = response.text or ""
    check_status = check_reason = check_step = None
    if error is not None:
        parse_status, parsed, correct = "generation_error", None, False
    elif unit.condition in SYNTHESIS_CONDITIONS:
        assert unit.target is not None, unit.item_id
        parse_status, parsed = extract_artifact(text)
        if parse_status == "ok":
            result = worlds.check(unit.target, parsed)
            check_status, check_step = result.status.value, result.failing_step
            check_reason = result.reason.value if result.reason else None
        correct = check_status == "VALID"
    else:
        parse_status, parsed = parse_control({"condition": unit.condition, "kind": unit.kind}, unit.family, text)
        correct = grade_control({"expected": unit.expected}, parsed)
    return CwrRecord(
        item_id=unit.item_id, condition=unit.condition, kind=unit.kind, pair_id=unit.pair_id,
        world_ref=unit.world_ref, family=unit.family, prompt=prompt,
        prompt_sha256=sha256_bytes(prompt.encode("utf-8")), prompt_tokens=getattr(response, "prompt_tokens", None),
        max_new_tokens=max_new_tokens, generation=text,
        generation_tokens=len(getattr(response, "token_ids", ()) or ()), finish_reason=response.finish_reason,
        generation_error=error, parse_status=parse_status, parsed=parsed, expected=unit.expected,
        check_status=check_status, check_reason=check_reason, check_failing_step=check_step, correct=bool(correct),
        context=unit.context,
    )


# --------------------------------------------------------------------------- metrics


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def paired_table(records: Sequence[CwrRecord], only: set[str] | None = None) -> dict[str, int]:
    """2x2 table of F and C exact validity over the pairs measured under both conditions (optionally ``only`` some)."""
    by_pair: dict[str, dict[str, bool]] = {}
    for r in records:
        if r.condition in SYNTHESIS_CONDITIONS and r.pair_id is not None and (only is None or r.pair_id in only):
            by_pair.setdefault(r.pair_id, {})[r.condition] = r.correct
    table = {"both": 0, "f_only": 0, "c_only": 0, "neither": 0, "unpaired": 0}
    for sides in by_pair.values():
        if set(sides) != {"F", "C"}:
            table["unpaired"] += 1
            continue
        key = {(True, True): "both", (True, False): "f_only", (False, True): "c_only", (False, False): "neither"}
        table[key[(sides["F"], sides["C"])]] += 1
    return table


def base_pair(pair_id: str) -> str:
    """The base pair a replica belongs to (``PAIR-X~r2`` -> ``PAIR-X``; a base pair is its own)."""
    return pair_id.split("~r", 1)[0]


def paired_units(records: Sequence[CwrRecord], only: set[str] | None = None) -> list[tuple[str, bool, bool]]:
    """(base pair, F valid, C valid) of every pair measured under both conditions (optionally ``only`` some)."""
    by_pair: dict[str, dict[str, bool]] = {}
    for r in records:
        if r.condition in SYNTHESIS_CONDITIONS and r.pair_id is not None and (only is None or r.pair_id in only):
            by_pair.setdefault(r.pair_id, {})[r.condition] = r.correct
    return [(base_pair(pair), sides["F"], sides["C"]) for pair, sides in sorted(by_pair.items()) if set(sides) == {"F", "C"}]


def _check_interval_method() -> None:
    method = PREREG.values.analysis.interval
    if method != INTERVAL_METHOD:
        raise ValueError(f"benchmarks/cwr/prereg.toml: analysis.interval = {method!r}; this version computes "
                         f"only {INTERVAL_METHOD!r}")


def _deficit(table: Mapping[str, int], units: Sequence[tuple[str, bool, bool]], prefix: str) -> dict[str, Any]:
    """The F - C interval the rules read (clustered by base pair), and the per-replica Newcombe figure beside it."""
    _check_interval_method()
    confidence = PREREG.values.analysis.confidence
    out: dict[str, Any] = {f"{prefix}.{k}": None for k in ("estimate", "lower", "upper", "bases", "replica_newcombe.lower",
                                                           "replica_newcombe.upper")}
    if units:
        interval = tango_rao_scott_interval(units, confidence)
        secondary = paired_difference_interval(table["both"], table["f_only"], table["c_only"], table["neither"], confidence)
        out = {f"{prefix}.estimate": interval.estimate, f"{prefix}.lower": interval.low, f"{prefix}.upper": interval.high,
               f"{prefix}.bases": len({base for base, _, _ in units}),
               f"{prefix}.replica_newcombe.lower": secondary.low, f"{prefix}.replica_newcombe.upper": secondary.high}
    return out


def metrics(records: Sequence[CwrRecord], baseline_summary: Mapping[str, Any] | None = None,
            motif_required: set[str] | None = None,
            subsets: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Flat metrics; undefined ratios are None.  Denominator of every rate: all units of the condition.

    ``motif_required``: ids of the pairs whose every bounded target solution
    needs the withheld motif; the deficit over those pairs alone is reported
    as ``deficit_motif_required.*`` (no rule reads it). ``subsets``: further
    named pair subsets (``pairs.pair_subsets``: ``exposure_matched``,
    ``without_interchangeable``), each reported as ``deficit_<name>.*`` and
    ``pairs_<name>.n`` beside the primary deficit (no rule reads them).
    """
    out: dict[str, Any] = {}
    for condition in CONDITIONS:
        rows = [r for r in records if r.condition == condition]
        out[f"{condition}.units"] = len(rows)
        out[f"{condition}.correct"] = sum(r.correct for r in rows)
        out[f"{condition}.parse_coverage"] = _ratio(sum(r.parse_status == "ok" for r in rows), len(rows))
        out[f"{condition}.generation_errors"] = sum(r.generation_error is not None for r in rows)
        name = "validity" if condition in SYNTHESIS_CONDITIONS else "accuracy"
        out[f"{condition}.{name}"] = _ratio(sum(r.correct for r in rows), len(rows))
    for kind in ("verdict", "effect"):
        rows = [r for r in records if r.condition == "P" and r.kind == kind]
        out[f"P.{kind}.accuracy"] = _ratio(sum(r.correct for r in rows), len(rows))
    for context in E_CONTEXTS:  # E_C (the seed's main E), E_F, context-free E
        rows = [r for r in records if r.condition == "E" and r.context == context]
        out[f"E_{context}.units"] = len(rows)
        out[f"E_{context}.correct"] = sum(r.correct for r in rows)
        out[f"E_{context}.accuracy"] = _ratio(sum(r.correct for r in rows), len(rows))
    table = paired_table(records)
    out.update({f"pairs.{k}": v for k, v in table.items()})
    n = table["both"] + table["f_only"] + table["c_only"] + table["neither"]
    out["pairs.n"] = n
    out.update(_deficit(table, paired_units(records), "deficit"))
    if motif_required is not None:
        restricted = paired_table(records, motif_required)
        out["pairs_motif_required.n"] = sum(v for k, v in restricted.items() if k != "unpaired")
        out.update(_deficit(restricted, paired_units(records, motif_required), "deficit_motif_required"))
    for name, ids in sorted((subsets or {}).items()):
        if name == "motif_required":
            continue
        chosen = set(ids)
        restricted = paired_table(records, chosen)
        out[f"pairs_{name}.n"] = sum(v for k, v in restricted.items() if k != "unpaired")
        out.update(_deficit(restricted, paired_units(records, chosen), f"deficit_{name}"))
    if baseline_summary is not None:
        out["baselines.copy_flagged_pairs"] = baseline_summary["copy_flagged_pairs"]
    return out


def cluster_of(record: CwrRecord) -> str:
    """The cluster a unit's outcome shares structure with: the base pair for every unit on a pair's worlds (F and C
    sides of every replica, P/R/E items on its targets), otherwise the shipped world the item is on."""
    if record.world_ref.startswith("pair:"):
        return base_pair(record.world_ref.split(":", 2)[1])
    return record.world_ref


def clustered_share(rows: Sequence[CwrRecord], success: Any) -> dict[str, Any]:
    """The share of ``rows`` for which ``success(row)`` holds, with its cluster-aware 95% interval: Wilson on the
    Rao-Scott effective size, the clusters those of :func:`cluster_of` (:func:`benchmarks.core.stats.proportion`)."""
    cells: dict[str, list[int]] = {}
    for row in rows:
        cell = cells.setdefault(cluster_of(row), [0, 0])
        cell[0] += bool(success(row))
        cell[1] += 1
    clusters = [tuple(cells[key]) for key in sorted(cells)]
    return proportion(sum(k for k, _ in clusters), len(rows), clusters=clusters)


def intervals(records: Sequence[CwrRecord]) -> dict[str, dict[str, Any]]:
    """A cluster-aware 95% interval with k and n beside every share :func:`metrics` reports (metric name ->
    interval).  Reported only: the rules read the F - C interval of :func:`metrics`, not these."""
    out: dict[str, dict[str, Any]] = {}
    for condition in CONDITIONS:
        rows = [r for r in records if r.condition == condition]
        name = "validity" if condition in SYNTHESIS_CONDITIONS else "accuracy"
        out[f"{condition}.parse_coverage"] = clustered_share(rows, lambda r: r.parse_status == "ok")
        out[f"{condition}.{name}"] = clustered_share(rows, lambda r: r.correct)
    for kind in ("verdict", "effect"):
        out[f"P.{kind}.accuracy"] = clustered_share([r for r in records if r.condition == "P" and r.kind == kind],
                                                    lambda r: r.correct)
    for context in E_CONTEXTS:
        out[f"E_{context}.accuracy"] = clustered_share(
            [r for r in records if r.condition == "E" and r.context == context], lambda r: r.correct)
    return dict(sorted(out.items()))


def sensitivity_grid(measured: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The classification at every (delta, tau) of the preregistered grid; reported, never used to choose."""
    values = finite(measured)
    grid = []
    for delta in PREREG.values.sensitivity.delta:
        for tau in PREREG.values.sensitivity.tau:
            try:
                label = gate_at(delta, tau).evaluate(values).label
            except Exception as exc:  # an unmeasured metric: recorded, not hidden
                label = f"not classifiable: {exc}"
            grid.append({"delta": delta, "tau": tau, "classification": label})
    return grid


# --------------------------------------------------------------------------- units


def spread(rows: Sequence[Any], n: int | None) -> list[Any]:
    """``n`` rows evenly spaced over ``rows`` (all when n is None or not smaller)."""
    if n is None or n >= len(rows):
        return list(rows)
    if n == 1:
        return [rows[0]]
    return [rows[round(i * (len(rows) - 1) / (n - 1))] for i in range(n)]


def check_pair_set(name: str) -> str:
    if name not in PAIR_SETS:
        raise UsageProblem(f"unknown pair set {name!r}; available: {', '.join(PAIR_SETS)}")
    return name


def run_pairs(split: str | None = None, seed_file: str | None = None) -> tuple[Any, ...]:
    """The pairs a run measures: every showcase pair and its replicas (the preregistered pair set), or with
    ``split`` every pair of that preregistered split (a committed split's seed read from ``seed_file`` or the
    environment; see :mod:`benchmarks.cwr.splits`)."""
    if split is not None:
        return generated_split(split, seed_file).pairs
    spec = PREREG.values.measurement
    check_pair_set(spec.pair_set)
    return synthesis_pairs(spec.replicas_per_pair)


def split_spec(name: str) -> SplitSpec:
    table = splits_table(PREREG.values.splits)
    if name not in table:
        raise UsageProblem(f"--cwr-split {name!r} is not a split of {PREREG.path}; splits: {', '.join(sorted(table))}")
    return table[name]


def generated_split(name: str, seed_file: str | None = None):
    """The built split ``name`` (its seed checked against the commitment first when it is committed)."""
    spec = split_spec(name)
    seed, committed = resolve_seed(name, spec, seed_file)
    return build_split(name, spec, seed, committed)


def build_units(items: Mapping[str, Sequence[Mapping[str, Any]]], pairs: Sequence[Any],
                per_condition: int | None) -> list[Unit]:
    """Every unit of the run in a fixed order: P, R and E items, then the F side and the C side of each pair."""
    units: list[Unit] = []
    for condition in CONTROL_CONDITIONS:
        for item in spread(items[condition], per_condition):
            world, raw = resolve_world(item["world_ref"])
            units.append(Unit(item["item_id"], condition, item["kind"], None, item["world_ref"], world.family,
                              control_prompt(item, world, raw), item["expected"],
                              item["context"] if condition == "E" else None))
    chosen = spread(list(pairs), per_condition)
    for condition in SYNTHESIS_CONDITIONS:
        for pair in chosen:
            side = pair.side(condition)
            units.append(Unit(f"{condition}:{pair.pair_id}", condition, "synthesis", pair.pair_id,
                              f"pair:{pair.pair_id}:{condition}", side.target.family, side.prompt_text, None,
                              target=side.target))
    return units


def pair_rows(pairs: Sequence[Any]) -> list[dict[str, Any]]:
    """What a run's F/C material is, pair by pair: its targets and the sha256 of both prompt bodies."""
    return [{"pair_id": p.pair_id, "family": p.family, "novelty": p.novelty, "flags": list(p.flags),
             "f_target": p.f.target.id, "c_target": p.c.target.id,
             "f_prompt_sha256": sha256_bytes(p.f.prompt_text.encode("utf-8")),
             "c_prompt_sha256": sha256_bytes(p.c.prompt_text.encode("utf-8"))} for p in pairs]


# --------------------------------------------------------------------------- summary extras


def parse_status_counts(records: Sequence[CwrRecord]) -> dict[str, dict[str, int]]:
    return {c: dict(sorted(Counter(r.parse_status for r in records if r.condition == c).items())) for c in CONDITIONS}


def check_counts(records: Sequence[CwrRecord]) -> dict[str, dict[str, int]]:
    """``status:reason`` counts of the checker's verdicts on F and C artifacts."""
    return {c: dict(sorted(Counter(f"{r.check_status}:{r.check_reason}" for r in records if r.condition == c).items()))
            for c in SYNTHESIS_CONDITIONS}


def token_counts(records: Sequence[CwrRecord]) -> dict[str, dict[str, int]]:
    return {c: {"prompt": sum(r.prompt_tokens or 0 for r in records if r.condition == c),
                "generated": sum(r.generation_tokens for r in records if r.condition == c)} for c in CONDITIONS}


# --------------------------------------------------------------------------- the protocol


@dataclass(frozen=True)
class CwrSettings:
    """A run's settings beyond the preregistration's (they enter its identity)."""

    max_new_tokens: dict[str, int]  # generation bound per condition actually used
    units_per_condition: int | None  # reduced pass: units per condition; None measures every unit
    split: str | None = None  # the preregistered generated split measured; None: the showcase pair set
    split_seed_sha256: str | None = None  # a committed split's checked seed hash (the seed is never recorded)


def _positive(flag: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageProblem(f"{flag} must be a positive integer, got {value}")
    return value


class CwrProtocol(Protocol[Unit, CwrRecord]):
    """Fiction-CWR on the shape of ``benchmarks.core``: P/R/E controls and paired F/C synthesis, five ordered rules."""

    title = "CWR"
    prereg_schema = CwrPrereg
    record_type = CwrRecord
    record_key = "item_id"
    options = (
        Option("max-new-tokens", "cap every condition's generation bound at this many tokens (a recorded deviation; "
               "for quick self-checks)", type=int),
        Option("units-per-condition", "measure only this many units per condition (P, R, E: items spread over the "
               "set; F and C: the same pairs on both sides); a recorded deviation for quick self-checks", type=int),
        Option("split", "measure the pairs of this preregistered generated split ([splits.NAME] in prereg.toml) "
               "instead of the showcase pairs"),
        Option("seed-file", "file holding a committed split's seed (default: the file named by "
               "PREREGBENCH_CWR_SEED_FILE); refused unless its sha256 is the one in prereg.toml"),
    )

    # settings

    def configure(self, run: ProtocolRun) -> CwrSettings:
        """The generation bounds (the preregistered ones, or capped by the option) and the reduced-pass size."""
        measurement = self.spec.measurement
        bounds = dict(measurement.max_new_tokens)
        if sorted(bounds) != sorted(CONDITIONS):
            raise UsageProblem(f"prereg measurement.max_new_tokens must name exactly {list(CONDITIONS)}")
        check_pair_set(measurement.pair_set)
        splits_table(self.spec.splits)
        cap = _positive("--cwr-max-new-tokens", run.option("max-new-tokens"))
        if cap is not None:
            bounds = {c: min(n, cap) for c, n in bounds.items()}
        split, committed = run.option("split"), None
        if split is not None:
            # Before any work: an unknown split, a family the generator cannot draw, a missing or wrong seed.
            committed = generated_split(split, run.option("seed-file")).record["seed_sha256"]
        return CwrSettings(bounds, _positive("--cwr-units-per-condition", run.option("units-per-condition")),
                           split, committed)

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The options that give a recorded run's settings (the seed of a committed split comes from the
        environment, as it did for the run)."""
        bounds = dict(settings.get("max_new_tokens") or {})
        frozen = dict(self.spec.measurement.max_new_tokens)
        return {"split": settings.get("split"), "units-per-condition": settings.get("units_per_condition"),
                "max-new-tokens": max(bounds.values()) if bounds and bounds != frozen else None}

    def deviations(self, run: ProtocolRun) -> list[str]:
        found = []
        cap = run.option("max-new-tokens")
        if cap is not None:
            found.append(f"generation bounds capped at {cap} tokens: {run.settings.max_new_tokens} instead of "
                         f"{dict(self.spec.measurement.max_new_tokens)}")
        if run.settings.units_per_condition is not None:
            found.append(f"reduced pass: {run.settings.units_per_condition} units per condition instead of all")
        return found

    def recognize_model(self, name: str) -> None:
        from .scripted import SCENARIOS, register_scenarios

        if name in SCENARIOS:
            register_scenarios()

    # units

    def pairs(self, run: ProtocolRun | None = None) -> tuple[Any, ...]:
        """The run's pairs (the showcase pair set without a run or a split)."""
        if run is None or run.settings.split is None:
            return run_pairs()
        return run_pairs(run.settings.split, run.option("seed-file"))

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        """The registered P/R/E item set, and the run's F/C pairs (built by ``worlds``; identified by prompt hashes)."""
        name = self.spec.measurement.fixture_set
        if name != "cwr-controls":
            raise UsageProblem(f"[measurement] fixture_set {name!r} in {self.prereg.path} is not a CWR item set; "
                               "the one registered set is 'cwr-controls'")
        # Generated from the prereg's seeds.fixtures (the registered set's frozen hash holds for its seed).
        items = build_cwr_items(self.spec.seeds["fixtures"])
        return {name: items, PAIRS_FIXTURE: pair_rows(self.pairs(run))}

    def units(self, run: ProtocolRun) -> list[Unit]:
        items = run.fixture_sets[self.spec.measurement.fixture_set]
        return build_units(items, self.pairs(run), run.settings.units_per_condition)

    # measurement

    def chat(self, run: ProtocolRun, unit: Unit) -> list[dict[str, str]]:
        return chat(unit.prompt_text)

    def answer_key(self, run: ProtocolRun):
        from .scripted import AnswerKey

        return AnswerKey()

    def scripted_answer(self, run: ProtocolRun, unit: Unit) -> Unit:
        """A scripted model is handed the unit itself (its expected answer, or its target world for F/C)."""
        return unit

    def batches(self, run: ProtocolRun, todo: Sequence[Unit]) -> Iterable[Sequence[Unit]]:
        """Batches of one condition each, in condition order: a batch shares its condition's generation bound."""
        step = max(1, self.batch_size(run))
        for condition in CONDITIONS:
            rows = [u for u in todo if u.condition == condition]
            for start in range(0, len(rows), step):
                yield rows[start:start + step]

    def measure(self, run: ProtocolRun, model: Any, batch: Sequence[Unit]) -> list[CwrRecord]:
        (condition,) = {u.condition for u in batch}
        bound = run.settings.max_new_tokens[condition]
        prompts = [model.render_chat(chat(u.prompt_text)) for u in batch]
        responses = model.generate(prompts, models.GenerationSettings(max_new_tokens=bound))
        return [make_record(u, prompt, response, bound) for u, prompt, response in zip(batch, prompts, responses)]

    def provenance_extra(self, run: ProtocolRun) -> dict[str, Any]:
        return {"max_new_tokens": run.settings.max_new_tokens, "units": len(run.units), "split": run.settings.split,
                "split_seed_sha256": run.settings.split_seed_sha256,
                "pairs": [p.pair_id for p in self.pairs(run)]}

    # results

    def baselines(self, run: ProtocolRun) -> dict[str, Any]:
        """``baselines.json``: copy, random and greedy baselines on every pair target (computed once per run)."""
        spec = self.spec
        return run.once(BASELINES_FILE, lambda: pair_baselines(self.pairs(run), spec.baselines.random_samples,
                                                               spec.seeds["baselines"]))

    def paired_outcomes(self, records: Sequence[CwrRecord]) -> dict[str, dict[str, bool]]:
        return {f"{c}.accuracy": {r.item_id: bool(r.correct) for r in records if r.condition == c} for c in CONDITIONS}

    def paired_clusters(self, records: Sequence[CwrRecord]) -> dict[str, str]:
        """F and C units by base pair: the replicas of one base share world, motif and demonstrations."""
        return {r.item_id: base_pair(r.pair_id) for r in records
                if r.condition in SYNTHESIS_CONDITIONS and r.pair_id is not None}

    def metrics(self, run: ProtocolRun, records: Sequence[CwrRecord]) -> dict[str, Any]:
        pairs = self.pairs(run)
        motif_required = {p.pair_id for p in pairs if p.novelty == MOTIF_REQUIRED}
        return metrics(records, self.baselines(run), motif_required, pair_subsets(pairs))

    def result_files(self, run: ProtocolRun, records: Sequence[CwrRecord], measured: Mapping[str, Any]):
        files = {BASELINES_FILE: lambda: self.baselines(run), GRADING_FILE: lambda: self.grading(run)}
        if run.settings.split is not None:
            files[SPLIT_FILE] = lambda: generated_split(run.settings.split, run.option("seed-file")).record
        return files

    def grading(self, run: ProtocolRun) -> dict[str, Any]:
        """``grading.json`` and the files under ``grading/``: the worlds, unit inputs and demonstrations the
        units were graded against, and the reference interpreter (see :mod:`benchmarks.cwr.grading`)."""
        items = run.fixture_sets[self.spec.measurement.fixture_set]
        pairs = self.pairs(run)
        return write_grading(run.dir, run.units, items, pairs, pair_subsets(pairs))

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        from .figures import report_figures

        return report_figures(run_dir, summary)

    def pair_summary(self, run: ProtocolRun) -> dict[str, dict[str, Any]]:
        pairs = self.pairs(run)
        inter = interchangeable_of(pairs)
        return {p.pair_id: {"family": p.family, "novelty": p.novelty, "flags": list(p.flags),
                            "f_target": p.f.target.id, "c_target": p.c.target.id,
                            "interchangeable_edges": list(inter[p.pair_id])} for p in pairs}

    def summary(self, run: ProtocolRun, records: Sequence[CwrRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        shares = intervals(records)
        return {
            "sensitivity": sensitivity_grid(measured),
            "intervals": shares,
            "execution_by_context": {
                f"E_{c}": {"units": measured.get(f"E_{c}.units"), "correct": measured.get(f"E_{c}.correct"),
                           "accuracy": measured.get(f"E_{c}.accuracy"), "accuracy_interval": shares[f"E_{c}.accuracy"]}
                for c in E_CONTEXTS},
            "parse_statuses": parse_status_counts(records),
            "synthesis_checks": check_counts(records),
            "units": {c: sum(u.condition == c for u in run.units) for c in CONDITIONS},
            "max_new_tokens": dict(run.settings.max_new_tokens),
            "baselines": self.baselines(run),
            "pairs": self.pair_summary(run),
            "pair_subsets": pair_subsets(self.pairs(run)),
            "token_counts": token_counts(records),
        }


PROTOCOL = CwrProtocol(HERE)
PREREG = PROTOCOL.prereg
GATE = PROTOCOL.classifications["classification"]
