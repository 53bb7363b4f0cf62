"""Frozen specifications of a world W = (S, A, T, s0, G, C, B) and the family contract."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "INT_TYPE",
    "Budget",
    "Example",
    "Failure",
    "Family",
    "Param",
    "Primitive",
    "Reason",
    "World",
]

#: The parameter type of an integer literal argument (entity types are any other name).
INT_TYPE = "int"


class Reason(enum.Enum):
    """Why a candidate is not VALID (the checker's reason enum)."""

    SCHEMA = "schema"  # text leaves the artifact grammar (status MALFORMED)
    UNKNOWN_PRIMITIVE = "unknown_primitive"  # step names no primitive of the world
    UNKNOWN_ENTITY = "unknown_entity"  # an argument names no entity of the world
    BAD_ARGUMENT = (
        "bad_argument"  # wrong arity, wrong entity type, integer out of range
    )
    INAPPLICABLE = "inapplicable"  # preconditions of the step fail in the current state
    CONSTRAINT_VIOLATION = (
        "constraint_violation"  # a hard invariant/constraint fails after the step
    )
    GOAL_NOT_MET = "goal_not_met"  # every step legal, goal false in the final state
    OVER_BUDGET = "over_budget"  # step cap, cost cap, inventory cap or horizon exceeded


@dataclass(frozen=True)
class Failure:
    """A family's verdict that a step cannot be committed: a reason and a message."""

    reason: Reason
    message: str


@dataclass(frozen=True)
class Budget:
    """Resource and execution budget B.

    max_steps: most steps a solution may execute (the program-length cap).
    max_cost: most accumulated cost a solution may spend.
    extra: family-specific caps as sorted (key, value) pairs, e.g.
        ``inventory_cap`` for token_workshop, ``horizon`` for schedule.
    """

    max_steps: int
    max_cost: int
    extra: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.extra:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class Param:
    """A typed parameter of a primitive.

    name: parameter name as written in the world file.
    type: an entity type of the world, or ``"int"`` for an integer literal.
    lo, hi: inclusive bounds for an ``int`` parameter (ignored otherwise).
    """

    name: str
    type: str
    lo: int = 0
    hi: int = 0


@dataclass(frozen=True)
class Primitive:
    """A primitive action in A: its name and typed parameters (the family gives its semantics)."""

    name: str
    params: tuple[Param, ...]


@dataclass(frozen=True)
class Example:
    """An example candidate shipped with a world.

    name: identifier unique within the world.
    text: candidate text in the artifact grammar.
    expect: ``"VALID"``, ``"INVALID"`` or ``"MALFORMED"``.
    reason: expected reason value (``Reason.value``) for a non-VALID example, else None.
    step: expected 0-based index of the first failing step, when stated.
    """

    name: str
    text: str
    expect: str
    reason: str | None = None
    step: int | None = None


@dataclass(frozen=True)
class World:
    """A loaded, validated world.

    id: world id (``TW-001``).
    family: registered family name giving the semantics.
    title: human-readable title.
    entity_types: declared entity types, sorted.
    entities: (entity name, entity type) pairs, sorted by name.
    primitives: primitives sorted by name.
    budget: the budget B.
    spec: the family's frozen spec (recipes, tasks, goal, constraints).
    initial_state: s0, a hashable canonical state of the family.
    examples: shipped example candidates.
    source: file the world was loaded from, or ``<mapping>``.
    """

    id: str
    family: str
    title: str
    entity_types: tuple[str, ...]
    entities: tuple[tuple[str, str], ...]
    primitives: tuple[Primitive, ...]
    budget: Budget
    spec: Any
    initial_state: Any
    examples: tuple[Example, ...] = ()
    source: str = "<mapping>"
    _entity_index: Mapping[str, str] = field(
        default=None, repr=False, compare=False, hash=False
    )  # type: ignore[assignment]
    _primitive_index: Mapping[str, Primitive] = field(
        default=None, repr=False, compare=False, hash=False
    )  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_entity_index", dict(self.entities))
        object.__setattr__(
            self, "_primitive_index", {p.name: p for p in self.primitives}
        )

    def entity_type(self, name: str) -> str | None:
        """Type of entity ``name``, or None when the world has no such entity."""
        return self._entity_index.get(name)

    def primitive(self, name: str) -> Primitive | None:
        """Primitive ``name``, or None when the world has no such primitive."""
        return self._primitive_index.get(name)


class Family(Protocol):
    """The semantics of a world family (T, G, C and the family part of the schema).

    States are hashable, canonical values (equal states compare and hash equal).
    ``step`` receives a step whose primitive, entities and argument types were
    already resolved by the checker.
    """

    name: str
    #: top-level world-file fields this family adds to the common ones.
    fields: tuple[str, ...]
    #: keys this family adds to the [budget] table.
    budget_fields: tuple[str, ...]

    def validate(self, raw: Mapping[str, Any], err) -> None:
        """Check the family-specific fields of a raw world mapping; call ``err(field, problem)``."""

    def build(self, raw: Mapping[str, Any]) -> tuple:
        """From a validated mapping: (entities, primitives, spec, initial_state, budget_extra, entity_types)."""

    def apply(
        self, world: World, state: Any, name: str, args: tuple
    ) -> tuple[Any, int] | Failure:
        """Applicability and transition: the next state and the step's cost, or an INAPPLICABLE Failure."""

    def limits(self, world: World, state: Any) -> Failure | None:
        """Family budget caps (inventory caps, horizon) on a state: OVER_BUDGET Failure or None."""

    def constraints(self, world: World, state: Any, final: bool) -> Failure | None:
        """Hard invariants on a state: CONSTRAINT_VIOLATION Failure or None.

        ``final`` is true for the end-of-run check, which adds ``final``-scope rules.
        """

    def goal(self, world: World, state: Any) -> bool:
        """Whether the goal G holds in ``state``."""

    def describe_state(self, state: Any) -> Any:
        """A JSON-able canonical rendering of ``state``."""
