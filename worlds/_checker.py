"""The strict checker: schema, permitted names and types, legal execution, constraints, goal, budget."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

from canonical_hash import sha256_json

from ._errors import CheckerUsageError
from ._grammar import Step, parse_candidate
from ._model import INT_TYPE, Failure, Reason, World
from ._registry import get_family

__all__ = [
    "CheckResult",
    "Status",
    "TraceEntry",
    "canonical_state",
    "check",
    "check_steps",
]


class Status(enum.Enum):
    """Outcome class of a candidate."""

    VALID = "VALID"
    INVALID = "INVALID"
    MALFORMED = "MALFORMED"


@dataclass(frozen=True)
class TraceEntry:
    """One committed step: the step as written, its cost and the state after it."""

    step: str
    cost: int
    state: Any


@dataclass(frozen=True)
class CheckResult:
    """What the checker decided about one candidate.

    status: VALID, INVALID or MALFORMED.
    reason: None when VALID; otherwise why (``Reason.SCHEMA`` for MALFORMED).
    failing_step: 0-based index of the first failing step; None when VALID, for
        MALFORMED text, and for failures found only at the end (goal not met,
        ``final``-scope constraint).
    message: one line saying what failed (empty when VALID).
    final_state: the last committed state (s0 when nothing was committed).
    cost: accumulated cost of the committed steps.
    executed: number of committed steps.
    trace: the committed steps in order.
    line, column: 1-based position in the text of the failure (MALFORMED: where
        the grammar broke; INVALID at a step: the line of that step).
    """

    status: Status
    reason: Reason | None
    failing_step: int | None
    message: str
    final_state: Any
    cost: int
    executed: int
    trace: tuple[TraceEntry, ...] = ()
    line: int | None = None
    column: int | None = None

    @property
    def ok(self) -> bool:
        """True exactly when the status is VALID."""
        return self.status is Status.VALID

    def summary(self) -> dict[str, Any]:
        """JSON-able canonical summary (status, reason, failing step, state, cost, executed)."""
        return {
            "status": self.status.value,
            "reason": None if self.reason is None else self.reason.value,
            "failing_step": self.failing_step,
            "final_state": canonical_state(self.final_state),
            "cost": self.cost,
            "executed": self.executed,
        }

    def digest(self) -> str:
        """sha256 of the ASCII-escaped canonical JSON of ``summary()``."""
        return sha256_json(self.summary(), ensure_ascii=True)


def canonical_state(state: Any) -> Any:
    """JSON-able rendering of a state (frozen dataclass of tuples): fields to lists, recursively."""
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {
            f.name: canonical_state(getattr(state, f.name))
            for f in dataclasses.fields(state)
        }
    if isinstance(state, tuple):
        return [canonical_state(x) for x in state]
    return state


def _resolve(world: World, st: Step) -> Failure | None:
    prim = world.primitive(st.name)
    if prim is None:
        return Failure(
            Reason.UNKNOWN_PRIMITIVE,
            f"{st.name!r} is not a primitive of world {world.id}",
        )
    if len(st.args) != len(prim.params):
        return Failure(
            Reason.BAD_ARGUMENT,
            f"{st.name} takes {len(prim.params)} argument(s), got {len(st.args)}",
        )
    for prm, arg in zip(prim.params, st.args):
        if prm.type == INT_TYPE:
            if not isinstance(arg, int):
                return Failure(
                    Reason.BAD_ARGUMENT,
                    f"{st.name}: parameter {prm.name} takes an integer, got {arg!r}",
                )
            if not prm.lo <= arg <= prm.hi:
                return Failure(
                    Reason.BAD_ARGUMENT,
                    f"{st.name}: {prm.name}={arg} outside [{prm.lo}, {prm.hi}]",
                )
            continue
        if isinstance(arg, int):
            return Failure(
                Reason.BAD_ARGUMENT,
                f"{st.name}: parameter {prm.name} takes a {prm.type}, got integer {arg}",
            )
        etype = world.entity_type(arg)
        if etype is None:
            return Failure(
                Reason.UNKNOWN_ENTITY, f"{arg!r} is not an entity of world {world.id}"
            )
        if etype != prm.type:
            return Failure(
                Reason.BAD_ARGUMENT,
                f"{st.name}: parameter {prm.name} takes a {prm.type}, {arg} is a {etype}",
            )
    return None


def check(world: World, candidate_text: str) -> CheckResult:
    """Check candidate text against ``world``; never raises on any ``str``."""
    if not isinstance(world, World):
        raise CheckerUsageError(
            f"check() needs a World (from load_world), got {type(world).__name__}"
        )
    own = getattr(get_family(world.family), "check_text", None)
    if own is not None:  # a family with its own artifact grammar (dataflow)
        return own(world, candidate_text)
    parsed = parse_candidate(candidate_text)
    if not parsed.ok:
        return CheckResult(
            Status.MALFORMED,
            Reason.SCHEMA,
            None,
            f"line {parsed.line}, column {parsed.column}: {parsed.message}",
            world.initial_state,
            0,
            0,
            (),
            parsed.line,
            parsed.column,
        )
    return check_steps(world, parsed.steps)


def check_steps(world: World, steps) -> CheckResult:
    """Check already-parsed steps (as from ``parse_candidate``) against ``world``."""
    if not isinstance(world, World):
        raise CheckerUsageError(
            f"check_steps() needs a World (from load_world), got {type(world).__name__}"
        )
    fam = get_family(world.family)
    if getattr(fam, "check_text", None) is not None:
        raise CheckerUsageError(
            f"world {world.id} of family {world.family} has its own artifact grammar; check its text with check()"
        )
    state = world.initial_state
    cost = 0
    trace: list[TraceEntry] = []

    def fail(i: int | None, f: Failure, line: int | None) -> CheckResult:
        return CheckResult(
            Status.INVALID,
            f.reason,
            i,
            f.message,
            state,
            cost,
            len(trace),
            tuple(trace),
            line,
        )

    for i, st in enumerate(steps):
        if i >= world.budget.max_steps:
            return fail(
                i,
                Failure(
                    Reason.OVER_BUDGET, f"step cap {world.budget.max_steps} exceeded"
                ),
                st.line,
            )
        bad = _resolve(world, st)
        if bad is not None:
            return fail(i, bad, st.line)
        got = fam.apply(world, state, st.name, st.args)
        if isinstance(got, Failure):
            return fail(i, got, st.line)
        new_state, step_cost = got
        if cost + step_cost > world.budget.max_cost:
            return fail(
                i,
                Failure(
                    Reason.OVER_BUDGET,
                    f"cost cap {world.budget.max_cost} exceeded: {cost} + {step_cost}",
                ),
                st.line,
            )
        bad = fam.limits(world, new_state) or fam.constraints(world, new_state, False)
        if bad is not None:
            return fail(i, bad, st.line)
        state = new_state
        cost += step_cost
        trace.append(TraceEntry(st.render(), step_cost, state))
    bad = fam.constraints(world, state, True)
    if bad is not None:
        return fail(None, bad, None)
    if not fam.goal(world, state):
        return fail(
            None,
            Failure(
                Reason.GOAL_NOT_MET,
                "every step is legal but the goal does not hold at the end",
            ),
            None,
        )
    return CheckResult(
        Status.VALID, None, None, "", state, cost, len(trace), tuple(trace)
    )
