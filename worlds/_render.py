"""Prompt text: a world written out as a complete handbook, and the artifact grammar in words.

``render_world`` asks the world's family to write every part of
W = (S, A, T, s0, G, C, B) so that a reader with no other source can execute
any candidate by hand: entities and their types, each primitive with its
typed parameters and effect, the hard constraints with their scope, the
budget, the initial state and the goal.  Declaration order follows the
mapping (a replica's shuffled order is kept); a ``World`` without its mapping
is written in sorted order (``raw_of_world``).

A handbook has two faithful renderings (``RENDERINGS``): ``prose`` (every
frozen prompt's) writes each declaration as a line of words; ``tables`` (the
representation diagnostic's) writes the same declarations as Markdown tables,
with the kind of world, the rules of execution, the constraints, the budget,
the start and the goal in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._errors import WorldsError
from ._loader import world_from_mapping
from ._model import World
from ._registry import get_family

__all__ = ["GRAMMAR_TEXT", "RENDERINGS", "check_rendering", "constraints_and_budget", "counts_text", "format_state",
           "markdown_table", "raw_of_world", "render_world", "step_handbook"]

#: The handbook renderings: declarations as lines of words, or as Markdown tables.
RENDERINGS = ("prose", "tables")

#: The artifact grammar as shown to a solver (the same text for F and C).
GRAMMAR_TEXT = """\
Answer format: write the solution as a list of steps, one step per line, in execution order.
A step is a primitive name followed by its arguments in parentheses, separated by commas,
for example  name(arg1, arg2)  or  name()  for a primitive without parameters.
An argument is an entity name or a non-negative integer written without leading zeros.
Blank lines and lines starting with # are ignored; any other text makes the answer malformed.
The answer must contain at least one step."""


def raw_of_world(world: World) -> dict:
    """A world mapping equivalent to ``world`` (sorted declaration order, no examples), by its family."""
    fam = get_family(world.family)
    if fam.raw_of_world is None:
        raise WorldsError(f"no handbook renderer for family {world.family!r} from a World; pass its world mapping")
    b = world.budget
    base: dict[str, Any] = {
        "schema_version": 1,
        "id": world.id,
        "family": world.family,
        "title": world.title,
        "budget": {"max_steps": b.max_steps, "max_cost": b.max_cost, **dict(b.extra)},
    }
    base.update(fam.raw_of_world(world))
    return base


def format_state(family: str, described: Any) -> str:
    """A state of family ``family`` (as its ``describe_state`` gives it) in words."""
    return get_family(family).format_state(described)


def check_rendering(rendering: str) -> str:
    """``rendering`` if it is one of ``RENDERINGS``; else a WorldsError naming them."""
    if rendering not in RENDERINGS:
        raise WorldsError(f"handbook rendering {rendering!r} is unknown; the renderings are {', '.join(RENDERINGS)}")
    return rendering


def render_world(world_or_raw: World | Mapping[str, Any], rendering: str = "prose") -> str:
    """The complete world as handbook text in ``rendering`` (validated first; raises WorldFileError on a bad
    mapping)."""
    check_rendering(rendering)
    if isinstance(world_or_raw, World):
        m = raw_of_world(world_or_raw)
    else:
        world_from_mapping(dict(world_or_raw))
        m = dict(world_or_raw)
    return get_family(m["family"]).render_handbook(m, rendering)


def markdown_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Lines of a Markdown table (cells as given; ``|`` never occurs in a world's names or numbers)."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def step_handbook(m: Mapping[str, Any], body: list[str]) -> str:
    """A step-sequence family's handbook: the world's heading line, then the family's ``body`` lines."""
    return "\n".join([f"World {m['id']}"] + body) + "\n"


def constraints_and_budget(heading: str, rules: list[str], budget: Mapping[str, Any], family_cap: str) -> list[str]:
    """The handbook's hard-constraint and budget sections (``- none`` when there are no rules)."""
    return [
        "",
        heading,
        *(rules or ["- none"]),
        "",
        "Budget:",
        f"- at most {budget['max_steps']} steps",
        f"- total cost at most {budget['max_cost']}",
        family_cap,
    ]


def counts_text(d: Mapping[str, int]) -> str:
    """Token counts in words: ``2 ore, 1 coal`` (``nothing`` when empty)."""
    return ", ".join(f"{n} {k}" for k, n in d.items()) if d else "nothing"
