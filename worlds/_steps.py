"""``StepFamily``: the Family interface for families whose artifacts are step sequences.

A step-sequence family's artifact is a sequence of grounded steps
``name(arg, ...)`` in the shared step grammar (``_grammar``), executed one at a
time from the initial state.  Everything generic about such artifacts is
implemented here once, over the reachable state graph and the grounded
alphabet: parsing and argument resolution, enumeration, trajectories,
signatures, copy audits, replicas, the isomorphism certificate, pair
construction, one-step examples, prompts, tier properties, search metrics and
the baselines' random candidates.

A subclass gives the semantics (``validate``, ``build``, ``apply``,
``limits``, ``constraints``, ``goal``, ``describe_state``,
``state_from_described``) and, where the family takes part in pairs, prompts
or differential replay, the hooks below whose defaults refuse or do nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import _grammar
from ._construct import build_step_pair
from ._copy_audit import step_copy_audit
from ._enumerate import enumerate_solutions, grounded_steps
from ._errors import PairConstructionError, WorldsError
from ._examples import step_examples_chain_to_goal
from ._grammar import Step, parse_candidate
from ._graph import step_search_metrics
from ._model import INT_TYPE, Failure, Reason, World
from ._pairs import instantiate_step_replica, translate_steps
from ._prompt import render_step_prompt
from ._render import GRAMMAR_TEXT, step_handbook
from ._signature import step_signature, step_signature_text, total_order
from ._structure import one_step, step_isomorphism
from ._tiers import step_tier_properties

__all__ = ["StepFamily", "resolve_step"]


def resolve_step(world: World, st: Step) -> Failure | None:
    """Primitive known, arity, and each argument in order: an integer in range for an ``int`` parameter, else
    a known entity of the parameter's type."""
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


class StepFamily:
    """Base class of step-sequence families (see the module docstring).

    Hooks a subclass may give (defaults in parentheses): ``production_edges``
    (refused), ``dependency`` (every pair of steps dependent), ``subject``
    (the primitive's name), ``state_map`` and ``relabel`` (refused),
    ``type_labels`` / ``reserved_labels`` (none), ``shuffled_tables`` /
    ``shuffled_lists`` (none), ``isolated_examples`` (none),
    ``handbook_lines`` / ``format_state`` (refused), ``raw_of_world`` (None),
    ``situation_lines`` / ``goal_words`` (refused), ``extra_tier_properties``
    (none), ``state_space_bound`` (0), ``reference_replay`` /
    ``replay_state`` (refused), ``goal_progress`` (0), ``state_lines`` and
    ``generator`` (None).
    """

    name: str
    fields: tuple[str, ...] = ()
    budget_fields: tuple[str, ...] = ()
    step_type = Step
    step_cap_name = "step cap"
    solution_noun = "solutions"
    relabels_primitives = True
    grammar_name = "worlds artifact grammar v1"
    grammar_digest_text = (_grammar.__doc__ or "") + GRAMMAR_TEXT
    reference_sources: tuple = ()
    state_lines = None
    generator = None
    #: mapping tables and lists of a world file whose order a replica shuffles, in this order.
    shuffled_tables: tuple[str, ...] = ()
    shuffled_lists: tuple[str, ...] = ()
    #: the family fields of a mapping rebuilt from a World, or None (see ``Family.raw_of_world``).
    raw_of_world = None

    def _lacks(self, what: str):
        return WorldsError(f"family {self.name!r} defines no {what}")

    # ---- the world file ------------------------------------------------------------

    def sort_declarations(self, raw: dict) -> None:
        return None

    def relabel(self, raw: dict, ent: Mapping[str, str], prim: Mapping[str, str], types: Mapping[str, str]) -> None:
        raise ValueError(f"no renaming defined for family {self.name!r}")

    # ---- artifacts and the checker -------------------------------------------------

    def parse(self, text: str):
        return parse_candidate(text)

    def resolve(self, world: World, state: Any, step: Step) -> Failure | None:
        return resolve_step(world, step)

    def transition(self, world: World, state: Any, step: Step):
        return self.apply(world, state, step.name, step.args)

    def goal_miss(self, world: World, state: Any) -> str:
        return "every step is legal but the goal does not hold at the end"

    def trajectory(self, world: World, solution: Sequence[str]) -> list[Any]:
        out, s = [], world.initial_state
        for text in solution:
            st = one_step(text)
            s = self.apply(world, s, st.name, st.args)[0]
            out.append(s)
        return out

    # ---- enumeration and the reference interpreter ---------------------------------

    enumerate = staticmethod(enumerate_solutions)

    def alphabet(self, world: World, state: Any, index: int) -> list[Step]:
        return list(grounded_steps(world))

    def reference_replay(self, raw: Mapping[str, Any], text: str):
        raise self._lacks("reference interpreter")

    def replay_state(self, state: Any) -> tuple:
        raise self._lacks("reference interpreter state")

    # ---- structure, signatures and copy audits -------------------------------------

    def production_edges(self, world: World, solution: Sequence) -> frozenset[tuple[str, str, str]]:
        raise PairConstructionError(f"no production edges defined for family {self.name!r}")

    def subject(self, world: World, step: Step) -> str:
        """What a step exposes (default: its primitive)."""
        return step.name

    def subject_of(self, world: World, step: str) -> str:
        return self.subject(world, one_step(step))

    def dependency(self, world: World, steps: tuple[Step, ...]) -> list[set[int]]:
        """For each step, the indices of earlier steps it directly depends on (default: every earlier step)."""
        return total_order(world, steps)

    def signature(self, world: World, solution: Sequence) -> tuple:
        return step_signature(world, solution, self.dependency)

    def signature_text(self, signature: tuple) -> str:
        return step_signature_text(signature)

    def copy_audit(self, demo_world, demo, target, target_sigs, target_solutions=None) -> str | None:
        return step_copy_audit(demo_world, demo, target, target_sigs, target_solutions)

    def translate(self, solution, ent: Mapping[str, str], prim: Mapping[str, str]) -> tuple[str, ...]:
        return translate_steps(solution, ent, prim)

    def state_map(self, state: Any, ent: Mapping[str, str]) -> Any:
        """``state`` with its entities relabelled by ``ent`` (replicas' examples and isomorphism certificate)."""
        raise PairConstructionError(f"no state translation for family {self.name!r}")

    # ---- pairs ---------------------------------------------------------------------

    def type_labels(self, raw: Mapping[str, Any]) -> list[str]:
        """The type names a replica relabels, in declaration order (default: none)."""
        return []

    def reserved_labels(self, raw: Mapping[str, Any]) -> set[str]:
        """Names a replica keeps and no fresh label may take (default: none)."""
        return set()

    def instantiate_replica(self, raw: Mapping[str, Any], seed: int, id_prefix: str, labels: str = "letters",
                            avoid=frozenset()):
        return instantiate_step_replica(self, raw, seed, id_prefix, labels, avoid)

    def isomorphism(self, a, b, enum_a=None, enum_b=None) -> dict:
        return step_isomorphism(a, b)

    def build_pair(self, spec, base_raw: dict, base: World):
        return build_step_pair(spec, base_raw, base)

    def isolated_examples(self, world: World, steps: Sequence[Step]) -> tuple:
        """(valid, invalid) one-step examples of a subject's steps on states the family constructs, each
        ``(state, rendered step)`` or None (default: none; reachable states are used)."""
        return None, None

    def examples_chain_to_goal(self, world: World, examples) -> bool:
        return step_examples_chain_to_goal(world, examples)

    # ---- text ----------------------------------------------------------------------

    def handbook_lines(self, raw: Mapping[str, Any], rendering: str = "prose") -> list[str]:
        """The handbook's lines after its heading, in ``rendering`` (``worlds.RENDERINGS``)."""
        raise WorldsError(f"no handbook renderer for family {self.name!r}")

    def render_handbook(self, raw: Mapping[str, Any], rendering: str = "prose") -> str:
        return step_handbook(raw, self.handbook_lines(raw, rendering))

    def format_state(self, described: Any) -> str:
        raise WorldsError(f"no state renderer for family {self.name!r}")

    def situation_lines(self, source_raw: Mapping[str, Any]) -> list[str]:
        """A demonstration's start and goal lines in the prompt."""
        raise self._lacks("prompt text")

    def goal_words(self, world: World) -> str:
        """The goal in words, as the prompt's task states it."""
        raise self._lacks("prompt text")

    def render_prompt(self, target_raw, demos, examples, rendering: str = "prose") -> str:
        return render_step_prompt(target_raw, demos, examples, rendering)

    # ---- tiers and manifest facts --------------------------------------------------

    def extra_tier_properties(self, world: World, optimal: Sequence[Sequence[str]]) -> dict[str, Any]:
        """Tier properties beyond the common ones, from the optimal bounded solutions (default: none)."""
        return {}

    def tier_properties(self, world: World, enum) -> dict[str, Any]:
        return step_tier_properties(world, enum, lambda optimal: self.extra_tier_properties(world, optimal))

    def search_metrics(self, world: World, enum) -> dict[str, Any]:
        return step_search_metrics(world, enum)

    def constraint_count(self, world: World) -> int:
        return len(world.spec.constraints)

    def state_space_bound(self, world: World) -> int:
        """An upper bound on the states, from the budget's finiteness devices (default: 0, none known)."""
        return 0

    def world_facts(self, world: World) -> dict[str, Any]:
        return {
            "entities": len(world.entities),
            "primitive_set": [f"{p.name}({', '.join(q.type for q in p.params)})" for p in world.primitives],
            "grounded_steps": len(grounded_steps(world)),
            "state_space_bound": self.state_space_bound(world),
        }

    # ---- baselines -----------------------------------------------------------------

    def goal_progress(self, world: World, state: Any) -> int:
        return 0

    def goal_unreachable(self, world: World, state: Any) -> bool:
        return False

    def random_artifacts(self, world: World, rng, samples: int) -> Iterator[str]:
        alphabet = [s.render() for s in grounded_steps(world)]
        for _ in range(samples):
            length = rng.randint(1, world.budget.max_steps)
            yield "".join(rng.choice(alphabet) + "\n" for _ in range(length))
