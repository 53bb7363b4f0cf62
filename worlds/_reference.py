"""A second, independently written interpreter used only for differential replay.

It reads the raw world mapping (the TOML document) directly, parses candidate
text with its own line splitter, and re-implements the step-sequence families
(token_workshop, schedule) without the checker's data structures; a program
world (dataflow) goes to the program interpreter beside it,
``_dataflow_reference``.  It returns a plain ``Replay`` record so tests can
compare it field by field with ``check``: status, reason, first failing step,
committed state (canonical), accumulated cost and executed count.

The file is standalone (standard library only, no import of the rest of
``worlds``): a CWR run copies it byte for byte into its run directory, and the
rescorer loads that copy by path and reads ``replay``, ``_TokenRef`` and
``_ScheduleRef``.  The families reach it through their ``reference_replay``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Replay", "replay"]

_STEP = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\((.*)\)[ \t]*", re.ASCII)
_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|0|[1-9][0-9]*", re.ASCII)


@dataclass(frozen=True)
class Replay:
    """Outcome of the reference interpreter (values as plain strings, ints and tuples)."""

    status: str
    reason: str | None
    failing_step: int | None
    state: tuple
    cost: int
    executed: int


#: An integer literal longer than this is malformed (the checker's grammar draws the same line, and
#: ``int()`` stays within every digit limit Python can be configured to).
_MAX_DIGITS = 640


def _lines(text: str) -> list[tuple] | None:
    out = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        body = line.strip(" \t")
        if body == "" or body[0] == "#":
            continue
        m = _STEP.fullmatch(line)
        if m is None:
            return None
        inner = m.group(2).strip(" \t")
        args: list = []
        if inner:
            for piece in inner.split(","):
                piece = piece.strip(" \t")
                if not _ARG.fullmatch(piece) or (piece[0].isdigit() and len(piece) > _MAX_DIGITS):
                    return None
                args.append(int(piece) if piece[0].isdigit() else piece)
        out.append((m.group(1), tuple(args)))
    return out or None


def replay(raw: Mapping[str, Any], text: str) -> Replay:
    """Interpret ``text`` against the world mapping ``raw``."""
    if raw["family"] in _PROGRAM_FAMILIES:
        return _replay_program(raw, text)
    steps = _lines(text) if len(text) <= 1_000_000 else None
    sem = _SEMANTICS[raw["family"]](raw)
    if steps is None:
        return Replay("MALFORMED", "schema", None, sem.canon(), 0, 0)
    cap_steps = raw["budget"]["max_steps"]
    cap_cost = raw["budget"]["max_cost"]
    spent = 0
    done = 0
    for idx, (name, args) in enumerate(steps):
        if idx == cap_steps:
            return Replay("INVALID", "over_budget", idx, sem.canon(), spent, done)
        sig = sem.signature(name)
        if sig is None:
            why = "unknown_primitive"
        elif len(sig) != len(args):
            why = "bad_argument"
        else:
            why = None
            for ptype, arg in zip(sig, args):
                if isinstance(ptype, tuple):  # integer range
                    if not isinstance(arg, int) or not ptype[0] <= arg <= ptype[1]:
                        why = "bad_argument"
                elif isinstance(arg, int):
                    why = "bad_argument"
                elif arg not in sem.types:
                    why = "unknown_entity"
                elif sem.types[arg] != ptype:
                    why = "bad_argument"
                if why:
                    break
        if why is None:
            trial = sem.trial(name, args)
            if trial is None:
                why = "inapplicable"
            else:
                step_cost, commit = trial
                if spent + step_cost > cap_cost or not sem.within_caps(commit):
                    why = "over_budget"
                elif not sem.invariants_ok(commit, final=False):
                    why = "constraint_violation"
        if why is not None:
            return Replay("INVALID", why, idx, sem.canon(), spent, done)
        sem.commit(commit)
        spent += step_cost
        done += 1
    if not sem.invariants_ok(sem.current(), final=True):
        return Replay("INVALID", "constraint_violation", None, sem.canon(), spent, done)
    if not sem.goal_met():
        return Replay("INVALID", "goal_not_met", None, sem.canon(), spent, done)
    return Replay("VALID", None, None, sem.canon(), spent, done)


class _TokenRef:
    def __init__(self, raw):
        self.raw = raw
        self.types = dict(raw["tokens"])
        self.inv = {k: v for k, v in raw["initial"].items()}
        self.recipes = {r["name"]: r for r in raw["recipes"]}

    def signature(self, name):
        r = self.recipes.get(name)
        return None if r is None else [p["type"] for p in r.get("params", [])]

    def trial(self, name, args):
        r = self.recipes[name]
        binding = {p["name"]: a for p, a in zip(r.get("params", []), args)}
        after = dict(self.inv)
        for ref, n in r.get("inputs", {}).items():
            tok = binding.get(ref, ref)
            after[tok] = after.get(tok, 0) - n
        if any(v < 0 for v in after.values()):
            return None
        for ref in r.get("catalysts", []):
            if after.get(binding.get(ref, ref), 0) < 1:
                return None
        for tok, n in r["outputs"].items():
            after[tok] = after.get(tok, 0) + n
        return r["cost"], after

    def within_caps(self, inv):
        return max(inv.values(), default=0) <= self.raw["budget"]["inventory_cap"]

    def invariants_ok(self, inv, final):
        for c in self.raw.get("constraints", []):
            if c["scope"] == "final" and not final:
                continue
            if c["kind"] == "at_most" and inv.get(c["tokens"][0], 0) > c["limit"]:
                return False
            if (
                c["kind"] == "never_together"
                and min(inv.get(t, 0) for t in c["tokens"]) > 0
            ):
                return False
        return True

    def commit(self, inv):
        self.inv = inv

    def current(self):
        return self.inv

    def goal_met(self):
        return all(
            self.inv.get(t, 0) >= n for t, n in self.raw["goal"]["require"].items()
        )

    def canon(self):
        return tuple(sorted((k, v) for k, v in self.inv.items() if v))


class _ScheduleRef:
    def __init__(self, raw):
        self.raw = raw
        self.types = {m: "machine" for m in raw["machines"]}
        self.types.update({t["name"]: "task" for t in raw["tasks"]})
        self.tasks = {t["name"]: t for t in raw["tasks"]}
        self.at: dict[str, tuple[str, int]] = {}

    def signature(self, name):
        if name != "start":
            return None
        return ["task", "machine", (0, self.raw["budget"]["horizon"] - 1)]

    def _span(self, task, start):
        return start, start + self.tasks[task]["duration"]

    def trial(self, name, args):
        task, machine, start = args
        t = self.tasks[task]
        if task in self.at or self.raw["machines"][machine]["kind"] != t["kind"]:
            return None
        for pred in t.get("after", []):
            if pred not in self.at or self._span(pred, self.at[pred][1])[1] > start:
                return None
        lo, hi = self._span(task, start)
        for other, (m, s) in self.at.items():
            olo, ohi = self._span(other, s)
            if m == machine and lo < ohi and olo < hi:
                return None
        after = dict(self.at)
        after[task] = (machine, start)
        return t["duration"] * self.raw["machines"][machine]["rate"], after

    def within_caps(self, at):
        return all(
            self._span(t, s)[1] <= self.raw["budget"]["horizon"]
            for t, (_, s) in at.items()
        )

    def invariants_ok(self, at, final):
        for c in self.raw.get("constraints", []):
            if c["kind"] == "deadline":
                t = c["tasks"][0]
                if t in at and self._span(t, at[t][1])[1] > c["by"]:
                    return False
            else:
                placed = [t for t in c["tasks"] if t in at]
                for a in placed:
                    for b in placed:
                        if a < b:
                            alo, ahi = self._span(a, at[a][1])
                            blo, bhi = self._span(b, at[b][1])
                            if alo < bhi and blo < ahi:
                                return False
        return True

    def commit(self, at):
        self.at = at

    def current(self):
        return self.at

    def goal_met(self):
        return all(t in self.at for t in self.raw["goal"]["scheduled"])

    def canon(self):
        return tuple(sorted((t, m, s) for t, (m, s) in self.at.items()))


#: The step semantics of each step-sequence family this interpreter re-implements.
_SEMANTICS = {"token_workshop": _TokenRef, "schedule": _ScheduleRef}
#: Program families, interpreted by ``_dataflow_reference``.
_PROGRAM_FAMILIES = ("dataflow",)


def _replay_program(raw: Mapping[str, Any], text: str) -> Any:
    # deferred: a run directory without program worlds holds no copy of the program interpreter
    from ._dataflow_reference import replay as replay_program

    return replay_program(raw, text)
