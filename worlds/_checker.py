"""The strict checker: schema, permitted names and types, legal execution, constraints, goal, budget.

One check path for every family: the family parses the text in its artifact
grammar and resolves, applies and judges each parsed step; the order of the
checks and the result record are the same for all.  The cap tests are small
module functions and the family is looked up through this module's
``get_family``, so a certification test can break one decision at a time.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from canonical_hash import sha256_json

from ._errors import CheckerUsageError
from ._model import Failure, Reason, World
from ._registry import get_family

__all__ = [
    "CheckResult",
    "Status",
    "TraceEntry",
    "canonical_state",
    "check",
    "check_steps",
    "differential",
    "reference_replay",
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


def _over_step_cap(i: int, world: World) -> bool:
    """Whether step ``i`` (0-based) is past the world's step cap."""
    return i >= world.budget.max_steps


def _over_cost_cap(cost: int, step_cost: int, world: World) -> bool:
    """Whether a step costing ``step_cost`` after ``cost`` spent breaks the world's cost cap."""
    return cost + step_cost > world.budget.max_cost


def check(world: World, candidate_text: str) -> CheckResult:
    """Check candidate text against ``world`` in its family's artifact grammar; never raises on any ``str``."""
    if not isinstance(world, World):
        raise CheckerUsageError(
            f"check() needs a World (from load_world), got {type(world).__name__}"
        )
    parsed = get_family(world.family).parse(candidate_text)
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
    """Check already-parsed steps (as the family's ``parse`` gives them) against ``world``.

    Order of checks for step *i*: step cap -> the family's ``resolve`` (primitive known,
    arity, each argument) -> its ``transition`` (applicability) -> cost cap -> family caps
    (``limits``) -> every-state rules.  A step failing any of these is not committed.
    After the last step: the final rules, then the goal.
    """
    if not isinstance(world, World):
        raise CheckerUsageError(
            f"check_steps() needs a World (from load_world), got {type(world).__name__}"
        )
    fam = get_family(world.family)
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
        if not isinstance(st, fam.step_type):
            raise CheckerUsageError(
                f"world {world.id} of family {world.family} takes the {fam.step_type.__name__} values of the "
                f"family's own artifact grammar, got {type(st).__name__}; check its text with check()"
            )
        if _over_step_cap(i, world):
            return fail(
                i,
                Failure(
                    Reason.OVER_BUDGET, f"{fam.step_cap_name} {world.budget.max_steps} exceeded"
                ),
                st.line,
            )
        bad = fam.resolve(world, state, st)
        if bad is not None:
            return fail(i, bad, st.line)
        got = fam.transition(world, state, st)
        if isinstance(got, Failure):
            return fail(i, got, st.line)
        new_state, step_cost = got
        if _over_cost_cap(cost, step_cost, world):
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
        return fail(None, Failure(Reason.GOAL_NOT_MET, fam.goal_miss(world, state)), None)
    return CheckResult(
        Status.VALID, None, None, "", state, cost, len(trace), tuple(trace)
    )


def differential(result: CheckResult, raw: Mapping[str, Any], text: str) -> tuple[tuple, tuple]:
    """The checker's ``result`` on ``text`` and the reference interpreter's replay, side by side.

    Both sides are (status, reason, first failing step, final state, cost,
    executed count); strict differential replay requires them to be equal.
    """
    fam = get_family(raw["family"])
    got = (
        result.status.value,
        None if result.reason is None else result.reason.value,
        result.failing_step,
        fam.replay_state(result.final_state),
        result.cost,
        result.executed,
    )
    ref = fam.reference_replay(raw, text)
    return got, (ref.status, ref.reason, ref.failing_step, ref.state, ref.cost, ref.executed)


def reference_replay(raw: Mapping[str, Any], text: str) -> Any:
    """The reference interpreter of the mapping's family on ``text`` (a ``Replay``), for differential replay."""
    return get_family(raw["family"]).reference_replay(raw, text)
