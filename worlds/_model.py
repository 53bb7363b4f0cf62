"""Frozen specifications of a world W = (S, A, T, s0, G, C, B) and the family contract."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "INT_TYPE",
    "Budget",
    "Example",
    "Failure",
    "Family",
    "FamilyGenerator",
    "Param",
    "Primitive",
    "Reason",
    "StateLineFormat",
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




#: What makes a step of a step-sequence world legal (the probe and execution prompts' words).
STEP_LEGALITY = ("A step is legal when its primitive exists, its arguments name permitted entities of the right types, "
                 "it is applicable in the current state, the step count and total cost stay within the budget, "
                 "no inventory cap or horizon is exceeded, and the state after it satisfies every hard constraint "
                 "that must hold in every state.")


@dataclass(frozen=True)
class StateLineFormat:
    """How a family's described state is written as ``name = value`` lines (the P and E answers' state block).

    words: the format in words, as a prompt states it.
    pattern: a full-line regular expression of one line; group 1 is the name and the last group the numeral.
    write: ``(name, value) -> line`` for one entry of a described state.
    read: ``{name: match}`` of a block's lines -> the described state they write.
    neighbour: a described state that differs from the one given (a scripted responder's wrong answer).
    project: the family's described state (``describe_state``) -> the mapping the lines write (default: the
        described state itself, when it already is a flat mapping).
    steps_in_situation: whether a probe's situation also lists the steps executed so far (true where the lines
        leave out what legality depends on, as a program's wire depths and primitive uses).
    legality: what makes a step legal, in one paragraph of prompt text.
    """

    words: str
    pattern: re.Pattern[str]
    write: Callable[[str, Any], str]
    read: Callable[[Mapping[str, re.Match[str]]], dict[str, Any]]
    neighbour: Callable[[Mapping[str, Any]], dict[str, Any]]
    project: Callable[[Any], dict[str, Any]] = dict
    steps_in_situation: bool = False
    legality: str = STEP_LEGALITY


@dataclass(frozen=True)
class FamilyGenerator:
    """What the seeded pair generator (``worlds.generate_pairs``) needs from a family.

    tiers: the tiers the family's bases are drawn for.
    tier_params: ``tier -> draw parameters`` (a frozen dataclass; raises WorldsError for a tier it lacks).
    pair_code: the family's code in generated pair ids (``GEN-<code>-<tier>-<seed>-<draw>``).
    source_variants: source variants drawn per draw.
    source_steps_bounded: whether a source variant is enumerated only up to the optimum + 1 steps.
    draw_base: ``(rng, params, world id) -> (base mapping, context)``; the context is what the family's other
        hooks need to know about the draw (None when nothing).
    draw_source: ``(base mapping, context, rng) -> overrides`` of one source variant, or None when the draw
        changed nothing.
    motif_key: ``context -> key``: the preference order of the motif among the edges every bounded solution
        holds (least key first).
    notes: ``context -> dict`` added to the manifest's ``generator`` record.
    """

    tiers: tuple[str, ...]
    tier_params: Callable[[str], Any]
    pair_code: str
    source_variants: int
    source_steps_bounded: bool
    draw_base: Callable[[Any, Any, str], tuple[dict, Any]]
    draw_source: Callable[[Mapping[str, Any], Any, Any], dict | None]
    motif_key: Callable[[Any], Callable[[tuple[str, str, str]], Any]]
    notes: Callable[[Any], dict] = lambda context: {}


class Family(Protocol):
    """Everything generic world code needs from a world family; registered by name (``_registry``).

    States are hashable, canonical values (equal states compare and hash equal).  Generic code
    asks the family of a world (``get_family(world.family)``) and never compares family names.
    ``worlds.StepFamily`` implements every method below for families whose artifacts are
    sequences of grounded steps in the shared step grammar, from a smaller set of hooks.
    """

    name: str
    #: top-level world-file fields this family adds to the common ones.
    fields: tuple[str, ...]
    #: keys this family adds to the [budget] table.
    budget_fields: tuple[str, ...]
    #: the parsed step type of the family's artifact grammar (``Step``, or ``Binding`` for programs).
    step_type: type
    #: what the checker calls the step cap in its messages ("step cap", "node cap").
    step_cap_name: str
    #: what a manifest calls the bounded solutions ("solutions", "programs").
    solution_noun: str
    #: whether a replica gives the primitives fresh names (a primitive that is part of the grammar keeps its name).
    relabels_primitives: bool
    #: the artifact grammar's name and the text whose sha256 a manifest records.
    grammar_name: str
    grammar_digest_text: str
    #: the standalone reference interpreter files ``reference_replay`` reads (a run copies them for its rescorer).
    reference_sources: tuple[Path, ...]
    #: how a described state is written as lines, or None when the family's states have no line format.
    state_lines: StateLineFormat | None
    #: the pair generator's hooks, or None when the generator does not draw this family.
    generator: FamilyGenerator | None

    # ---- the world file ------------------------------------------------------------

    def validate(self, raw: Mapping[str, Any], err) -> None:
        """Check the family-specific fields of a raw world mapping; call ``err(field, problem)``."""

    def build(self, raw: Mapping[str, Any]) -> tuple:
        """From a validated mapping: (entities, primitives, spec, initial_state, budget_extra, entity_types)."""

    def sort_declarations(self, raw: dict) -> None:
        """Sort, in place, the declaration lists whose order carries no meaning (for the structure hash)."""

    def relabel(self, raw: dict, ent: Mapping[str, str], prim: Mapping[str, str], types: Mapping[str, str]) -> None:
        """Rename, in place, entities by ``ent``, primitives by ``prim`` and types by ``types`` in a world mapping."""

    def raw_of_world(self, world: World) -> dict:
        """The family fields of a world mapping equivalent to ``world`` (sorted declaration order).

        A family that does not rebuild a mapping from a ``World`` sets this attribute to None.
        """

    # ---- the semantics -------------------------------------------------------------

    def apply(self, world: World, state: Any, name: str, args: tuple) -> tuple[Any, int] | Failure:
        """Applicability and transition: the next state and the step's cost, or an INAPPLICABLE Failure."""

    def limits(self, world: World, state: Any) -> Failure | None:
        """Family budget caps (inventory caps, horizon, depth) on a state: OVER_BUDGET Failure or None."""

    def constraints(self, world: World, state: Any, final: bool) -> Failure | None:
        """Hard invariants on a state: CONSTRAINT_VIOLATION Failure or None.

        ``final`` is true for the end-of-run check, which adds ``final``-scope rules.
        """

    def goal(self, world: World, state: Any) -> bool:
        """Whether the goal G holds in ``state``."""

    def describe_state(self, state: Any) -> Any:
        """A JSON-able canonical rendering of ``state``."""

    def state_from_described(self, world: World, described: Any) -> Any:
        """The state ``describe_state`` rendered as ``described`` (its inverse)."""

    # ---- artifacts and the checker -------------------------------------------------

    def parse(self, text: str) -> Any:
        """Parse candidate text in the family's artifact grammar (a ``ParseResult``); never raises on a ``str``."""

    def resolve(self, world: World, state: Any, step: Any) -> Failure | None:
        """Primitive known, arity and each argument in order: a Failure or None."""

    def transition(self, world: World, state: Any, step: Any) -> tuple[Any, int] | Failure:
        """Applicability and transition of a resolved parsed step: (next state, cost) or a Failure."""

    def goal_miss(self, world: World, state: Any) -> str:
        """The GOAL_NOT_MET message for a run whose every step was legal."""

    def trajectory(self, world: World, solution: Sequence[str]) -> list[Any]:
        """The states a valid solution (rendered steps) passes through after each of its steps."""

    # ---- enumeration and the reference interpreter ---------------------------------

    def enumerate(self, world: World, bounds: Any = None) -> Any:
        """Every valid bounded solution (an ``Enumeration``)."""

    def alphabet(self, world: World, state: Any, index: int) -> list[Any]:
        """The type-correct parsed steps that may come at step ``index`` (0-based) from ``state``, sorted."""

    def reference_replay(self, raw: Mapping[str, Any], text: str) -> Any:
        """The independently written reference interpreter's ``Replay`` of ``text`` on the mapping ``raw``."""

    def replay_state(self, state: Any) -> tuple:
        """A checker state in the reference interpreter's canonical form (for differential replay)."""

    # ---- structure, signatures and copy audits -------------------------------------

    def production_edges(self, world: World, solution: Sequence[Any]) -> frozenset[tuple[str, str, str]]:
        """Type-level production dependencies ``(producer, relation, consumer)`` a solution realizes."""

    def subject_of(self, world: World, step: str) -> str:
        """What a rendered step exposes (a recipe, a task, a primitive): the unit exposures are counted in."""

    def signature(self, world: World, solution: Sequence[Any]) -> tuple:
        """The canonical motif signature: invariant to independent-step order and to renaming."""

    def signature_text(self, signature: tuple) -> str:
        """A compact text form of a signature."""

    def copy_audit(self, demo_world: World, demo: Sequence[str], target: World, target_sigs: set,
                   target_solutions: Sequence[Sequence[str]] | None = None) -> str | None:
        """Why a demonstration, copied (verbatim, renamed, relabelled, reordered, cut to a window), solves
        ``target``, or None."""

    def translate(self, solution: Sequence[str], ent: Mapping[str, str], prim: Mapping[str, str]) -> tuple[str, ...]:
        """A solution (rendered steps) with its entities and primitives relabelled."""

    # ---- pairs ---------------------------------------------------------------------

    def instantiate_replica(self, raw: Mapping[str, Any], seed: int, id_prefix: str, labels: str = "letters",
                            avoid: Any = frozenset()) -> Any:
        """A fresh-label (scheme ``labels``, ``worlds.LABEL_SCHEMES``; no name in ``avoid``, the other side's),
        reshuffled ``Replica`` of a base mapping."""

    def isomorphism(self, a: Any, b: Any, enum_a: Any = None, enum_b: Any = None) -> dict:
        """Prove two replicas of one base isomorphic under their label bijection (raises PairConstructionError)."""

    def build_pair(self, spec: Any, base_raw: dict, base: World) -> tuple[Any, dict]:
        """Build the pair of ``spec`` from its base mapping (examples dropped) and world: the ``Pair`` (manifest
        not yet filled) and the facts ``build_manifest`` reads."""

    def examples_chain_to_goal(self, world: World, examples: Sequence[Any]) -> bool:
        """Whether the valid one-step examples, followed from s0, reach a goal state (a leaked witness)."""

    # ---- text ----------------------------------------------------------------------

    def render_handbook(self, raw: Mapping[str, Any], rendering: str = "prose") -> str:
        """The complete world as handbook text, from a validated mapping, in ``rendering`` (``prose``: declarations
        as lines of words; ``tables``: as Markdown tables; the rules in the same words)."""

    def format_state(self, described: Any) -> str:
        """A described state in words."""

    def render_prompt(self, target_raw: Mapping[str, Any], demos: Sequence[Any], examples: Sequence[Any],
                      rendering: str = "prose") -> str:
        """The F/C synthesis prompt body of one side (the same template for F and C), its handbook in
        ``rendering``."""

    # ---- tiers and manifest facts --------------------------------------------------

    def tier_properties(self, world: World, enum: Any) -> dict[str, Any]:
        """The measured properties a tier is decided on (``worlds.tier_of``)."""

    def search_metrics(self, world: World, enum: Any) -> dict[str, Any]:
        """A manifest's ``solver_search_metrics`` of one target."""

    def constraint_count(self, world: World) -> int:
        """The number of hard constraints of ``world``."""

    def world_facts(self, world: World) -> dict[str, Any]:
        """A manifest's family-dependent world sizes: ``entities``, ``primitive_set``, ``grounded_steps`` and
        ``state_space_bound``."""

    # ---- baselines -----------------------------------------------------------------

    def goal_progress(self, world: World, state: Any) -> int:
        """How far ``state`` has come towards the goal (higher is closer; what a greedy solver climbs)."""

    def goal_unreachable(self, world: World, state: Any) -> bool:
        """Whether no continuation from ``state`` can meet the goal any more (where a greedy solver stops)."""

    def random_artifacts(self, world: World, rng: Any, samples: int) -> Iterator[str]:
        """``samples`` seeded random candidate texts of plausible shape (the random baseline)."""
