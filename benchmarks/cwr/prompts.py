"""Fiction-CWR: the prompts, the parsers and the record of one response.

Every prompt is a single-turn chat of its own: nothing from one answer reaches
another prompt.  A malformed answer is a coded parse status
(:data:`PARSE_STATUSES`), counted as wrong.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import worlds
from benchmarks.core import sha256_bytes
from benchmarks.core.answers import keep_answer
from fixtures.cwr import E_CONTEXTS, condition_context_text, e_context, side_context_text

from .spec import ARTIFACT_EXTRACTION, PREREG, SYNTHESIS_CONDITIONS, CwrRecord, Unit

if PREREG.values.measurement.artifact_extraction != ARTIFACT_EXTRACTION:
    raise ValueError(f"benchmarks/cwr/prereg.toml: measurement.artifact_extraction = "
                     f"{PREREG.values.measurement.artifact_extraction!r}; this version extracts artifacts only by "
                     f"{ARTIFACT_EXTRACTION!r}")

# --------------------------------------------------------------------------- state text


def _line_format(family: str) -> worlds.StateLineFormat:
    """How a state of ``family`` is written as lines (the world family's ``state_lines``)."""
    fmt = worlds.get_family(family).state_lines
    if fmt is None:
        raise ValueError(f"family {family!r} writes no state as lines (worlds.StateLineFormat); it cannot serve "
                         "P and E items")
    return fmt


def state_lines(family: str, described: Mapping[str, Any]) -> list[str]:
    """A state as ``name = value`` lines, sorted by name (the format P and E answers use)."""
    if not described:
        return ["(empty)"]
    write = _line_format(family).write
    return [write(name, value) for name, value in sorted(described.items())]


_NUMERALS = re.compile(r"[0-9]+")

#: Longest numeral a reply may write (a count, a start time, a step number), leading zeros included; a
#: longer one is the parse status ``number_too_large``.  The numbers of these worlds have a few digits.
MAX_NUMBER_DIGITS = 18


def read_state(family: str, lines: Sequence[str]) -> tuple[str, dict[str, Any] | None]:
    """(parse status, state) of the lines of a state block, the inverse of :func:`state_lines`.

    The status is ``bad_state_block`` when a line does not fit the family's
    line format (``worlds.StateLineFormat``; each part of a line is a run of
    characters its neighbours cannot share, so matching takes linear time) or
    a name repeats, else ``number_too_large`` when a numeral has more than
    :data:`MAX_NUMBER_DIGITS` digits, else ``ok``.  token_workshop entries with
    count 0 are dropped (an absent token has count 0).
    """
    body = [line.strip().strip("`").strip() for line in lines]
    body = [line.lstrip("-* ").strip() for line in body if line]
    if body == ["(empty)"] or body == ["empty"]:
        return "ok", {}
    fmt = _line_format(family)
    matches = {}
    for line in body:
        m = fmt.pattern.fullmatch(line)
        if m is None or m.group(1) in matches:
            return "bad_state_block", None
        matches[m.group(1)] = m
    if any(len(numeral) > MAX_NUMBER_DIGITS for m in matches.values() for numeral in _NUMERALS.findall(m.group(m.lastindex))):
        return "number_too_large", None
    return "ok", fmt.read(matches)


def parse_state(family: str, lines: Sequence[str]) -> dict[str, Any] | None:
    """The state :func:`read_state` reads from ``lines``; None when its status is not ok."""
    return read_state(family, lines)[1]


# --------------------------------------------------------------------------- prompts

_INTRO = ("This is a closed, fully specified world. Use only the rules written below; "
          "nothing outside this message applies.")


def handbook(raw: Mapping[str, Any]) -> str:
    """The complete world as the synthesis prompts show it (``worlds.render_world``)."""
    return worlds.render_world(dict(raw))


def _situation(item: Mapping[str, Any], world: worlds.World) -> list[str]:
    executed = []
    if _line_format(world.family).steps_in_situation:  # the state lines leave out what legality depends on
        executed = ["Steps executed so far, in order:", *(item["prefix"] or ["(none)"])]
    return [
        "CURRENT SITUATION",
        f"Steps already executed: {item['steps_used']} (budget: at most {world.budget.max_steps}).",
        f"Cost already spent: {item['cost_used']} (budget: at most {world.budget.max_cost}).",
        *executed,
        "Current state:",
        *state_lines(world.family, item["state"]),
    ]


def _e_context_block(item: Mapping[str, Any], side: Any = None) -> list[str]:
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
    if side is not None:  # a generated pair's target: its own side's context
        return [side_context_text(side, item["world_ref"]), ""]
    return [condition_context_text(item["world_ref"]), ""]


def control_prompt(item: Mapping[str, Any], world: worlds.World, raw: Mapping[str, Any], side: Any = None) -> str:
    """The user message of a P, R or E item; ``side`` is the pair side whose target the item is on where it is
    not a showcase pair's (an E item shows that side's context)."""
    parts = [_INTRO, "", "WORLD HANDBOOK", handbook(raw), ""]
    condition = item["condition"]
    if condition == "P":
        parts += [*_situation(item, world), "", "PROBE STEP", item["probe"], "", "QUESTION"]
        if item["kind"] == "verdict":
            parts += [f"Is the probe step legal as the next step? {_line_format(world.family).legality}",
                      "Reply with exactly one line:  ANSWER: LEGAL  or  ANSWER: ILLEGAL"]
        else:
            parts += ["The probe step is legal here. What is the exact state right after it?",
                      f"Reply with a line  STATE:  followed by the state, {_line_format(world.family).words}."]
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
        parts += _e_context_block(item, side)
        parts += ["CANDIDATE (executed from the initial state, one step per line)",
                  *(f"{i}. {step}" for i, step in enumerate(item["candidate"], start=1)), "", "QUESTION",
                  f"Execute the candidate step by step. {_line_format(world.family).legality}",
                  "If some step is illegal, reply with one line  ANSWER: ILLEGAL AT STEP <n>  where n is the number "
                  "of the first illegal step.",
                  "If every step is legal, reply with one line  ANSWER: LEGAL, GOAL MET  or  ANSWER: LEGAL, GOAL NOT MET  "
                  "(whether the goal holds at the end), then a line  STATE:  followed by the final state, "
                  f"{_line_format(world.family).words}."]
    else:
        raise ValueError(f"control_prompt serves P, R and E items, not condition {condition!r}")
    return "\n".join(parts)


def chat(user_text: str) -> list[dict[str, str]]:
    """One fresh single-turn chat (no system message): every unit is a separate session."""
    return [{"role": "user", "content": user_text}]


# --------------------------------------------------------------------------- parsers

#: Parse statuses; anything but "ok" is a malformed answer and counts as wrong.
PARSE_STATUSES = ("ok", "generation_error", "no_answer_line", "several_answer_lines", "bad_answer_value",
                  "no_state_block", "bad_state_block", "no_artifact", "several_artifacts", "unclosed_code_block",
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
#: The start of a line in the artifact grammars: a primitive name and "(", or for a binding a wire name, "=",
#: a primitive name and "(" (spaces and tabs allowed between them, as the grammars allow them).
_STEP_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*[ \t]*(?:=[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*)?\(", re.ASCII)
_GRAMMAR_SPACE = " \t"


def _is_fence(line: str) -> bool:
    """A fence line: optional whitespace, three backticks, an optional info word of [A-Za-z0-9_-], optional whitespace."""
    body = line.strip()
    return body.startswith("```") and _INFO_WORD.fullmatch(body, 3) is not None


def is_step_line(line: str) -> bool:
    """Whether a line has the shape of a step or binding: ``name(...)`` or ``wire = name(...)`` between optional
    spaces and tabs.  The shape only; whether the step is well formed is the checker's question."""
    body = line.strip(_GRAMMAR_SPACE)
    return body.endswith(")") and _STEP_HEAD.match(body) is not None


def _is_filler(line: str) -> bool:
    """A line the artifact grammars ignore: blank (spaces and tabs) or a ``#`` comment."""
    body = line.strip(_GRAMMAR_SPACE)
    return not body or body.startswith("#")


def extract_artifact(text: str) -> tuple[str, str | None]:
    """(parse status, artifact text) of a synthesis answer; prose around the artifact is unscored.

    One rule.  The answer's candidate artifacts are every fenced code block
    (```...```) holding at least one step-shaped line (:func:`is_step_line`),
    and, outside the blocks, every run of step-shaped lines in which only
    blank and ``#`` lines come between two steps.  Exactly one candidate is
    the artifact (a block: all of its inside; a run: its first to its last
    step line); every other line is prose and is not read.  No candidate is
    ``no_artifact``, two or more ``several_artifacts``, and a fence left
    open ``unclosed_code_block``: each a malformed answer, graded wrong.
    Never raises on a ``str``; time linear in its length.
    """
    candidates: list[list[str]] = []
    block: list[str] | None = None  # the inside of the open fenced block
    run: list[str] = []  # the current run outside blocks, from its first step line
    pending: list[str] = []  # blank and comment lines after the run's last step line

    def close_run() -> None:
        if run:
            candidates.append(list(run))
        run.clear()
        pending.clear()

    for line in text.splitlines():
        if _is_fence(line):
            if block is None:
                close_run()
                block = []
            else:
                if any(is_step_line(inner) for inner in block):
                    candidates.append(block)
                block = None
        elif block is not None:
            block.append(line)
        elif is_step_line(line):
            run.extend(pending)
            pending.clear()
            run.append(line)
        elif run and _is_filler(line):
            pending.append(line)
        else:
            close_run()
    if block is not None:
        return "unclosed_code_block", None
    close_run()
    if not candidates:
        return "no_artifact", None
    if len(candidates) > 1:
        return "several_artifacts", None
    return "ok", "\n".join(candidates[0]) + "\n"


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



def make_record(unit: Unit, prompt: str, response: Any, max_new_tokens: int, max_answer_chars: int) -> CwrRecord:
    """The record of one unit from the model's response to its rendered prompt (F/C graded against ``unit.target``);
    an answer over ``max_answer_chars`` is kept cut and coded ``answer_too_long``, and nothing is parsed from it."""
    kept = keep_answer(response, max_answer_chars)
    response = kept.response
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
        max_new_tokens=max_new_tokens, generation=text, generation_chars=kept.chars, generation_sha256=kept.sha256,
        generation_tokens=len(getattr(response, "token_ids", ()) or ()), finish_reason=response.finish_reason,
        generation_error=error, parse_status=parse_status, parsed=parsed, expected=unit.expected,
        check_status=check_status, check_reason=check_reason, check_failing_step=check_step, correct=bool(correct),
        context=unit.context, endpoint=getattr(response, "endpoint", None),
    )

