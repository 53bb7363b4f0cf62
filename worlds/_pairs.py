"""Replicas for F/C pairs: fresh-label replicas, abstract fingerprints, copy checks.

``instantiate_replica`` turns a latent base world mapping into a target replica
with fresh entity and primitive names, shuffled declaration order and a fresh
id. ``abstract_fingerprint`` summarises what a replica must share with its
twin (budget, constraint count, alphabet size, reachable state graph size,
solution count, optimum length, multiset of motif signatures); equal
fingerprints are necessary for matched transition graphs, not a proof of
isomorphism. ``copy_solves`` says whether a demonstration, verbatim, renamed or
truncated to a prefix, already solves a target.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from ._checker import Status, check
from ._errors import WorldsError
from ._enumerate import Bounds, enumerate_solutions, grounded_steps
from ._graph import reachable_graph
from ._loader import world_from_mapping
from ._model import World
from ._registry import get_family
from ._signature import motif_signature

__all__ = [
    "LABEL_SCHEMES",
    "Fingerprint",
    "Replica",
    "abstract_fingerprint",
    "copy_solves",
    "fresh_names",
    "instantiate_replica",
    "instantiate_step_replica",
    "label_scheme",
    "replica_labels",
    "rename_mapping",
    "translate_steps",
]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def rename_mapping(
    raw: Mapping[str, Any],
    ent: Mapping[str, str],
    prim: Mapping[str, str],
    types: Mapping[str, str] | None = None,
) -> dict:
    """A copy of a world mapping with entities renamed by ``ent``, primitives by ``prim``
    and entity types (token types, machine kinds, value types) by ``types``, by the mapping's family.

    Examples are dropped (their text names the old labels). Names the family
    keeps (recipe parameter names, the schedule primitive ``start``) stay.
    """
    m = copy.deepcopy(dict(raw))
    m.pop("examples", None)
    get_family(m["family"]).relabel(m, ent, prim, dict(types or {}))
    return m


@dataclass(frozen=True)
class Replica:
    """A target replica: its mapping, its loaded world, and the base -> replica name maps.

    ``types`` maps the base's entity types (token types, machine kinds, value types).
    """

    raw: dict
    world: World
    entities: dict[str, str]
    primitives: dict[str, str]
    types: dict[str, str] = field(default_factory=dict)

    def rename(self, raw: Mapping[str, Any]) -> dict:
        """Another mapping over the base's labels (a variant of the base) written in this replica's labels."""
        return rename_mapping(raw, self.entities, self.primitives, self.types)

    def translate(self, solution) -> tuple[str, ...]:
        """A base-world solution (rendered steps) written with the replica's names."""
        return get_family(self.world.family).translate(solution, self.entities, self.primitives)


def translate_steps(solution, ent: Mapping[str, str], prim: Mapping[str, str]) -> tuple[str, ...]:
    """Rendered steps with their entity arguments relabelled by ``ent`` and primitives by ``prim``."""
    out = []
    for s in solution:
        name, _, rest = s.partition("(")
        args = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()]
        new = [a if a.isdigit() else ent[a] for a in args]
        out.append(f"{prim.get(name, name)}({', '.join(new)})")
    return tuple(out)


_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def _letters_label(rng: random.Random) -> str:
    return "".join(rng.choice(_LETTERS) for _ in range(6))


def _syllables_label(rng: random.Random) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(3))


#: How a replica's fresh names are drawn.  ``letters`` (every frozen pair's scheme): six random lowercase
#: letters (``xqbunk``).  ``syllables`` (the renaming diagnostic's): three consonant-vowel syllables, a
#: pronounceable nonce word (``tavoki``), which a tokenizer splits differently and a reader can say.
LABEL_SCHEMES = {"letters": _letters_label, "syllables": _syllables_label}


def label_scheme(name: str):
    """The label drawer of scheme ``name`` (a WorldsError naming the schemes for an unknown one)."""
    if name not in LABEL_SCHEMES:
        raise WorldsError(f"label scheme {name!r} is unknown; the schemes are {', '.join(LABEL_SCHEMES)}")
    return LABEL_SCHEMES[name]


def fresh_names(rng: random.Random, n: int, taken: set[str], accept=lambda name: True,
                labels: str = "letters", avoid: Set[str] = frozenset()) -> list[str]:
    """``n`` fresh names of scheme ``labels`` for ``rng``, none in ``taken`` (which grows by them), each
    ``accept``-ed.

    The draws from ``rng`` are the same whatever the scheme (six random letters per name), so the id and the
    declaration order a replica draws after its names do not change with the scheme: another scheme replaces
    each drawn name by one of its own, drawn from a generator seeded by the scheme and the drawn names, and
    skips the names in ``avoid`` (the other side's: a smaller space than six letters can repeat one).  Under
    ``letters`` ``avoid`` is not read (the pair build refuses two sides that share a name).
    """
    draw = label_scheme(labels)
    blocked = set(taken) | set(avoid)
    out: list[str] = []
    while len(out) < n:
        name = _letters_label(rng)
        if name not in taken and accept(name):
            taken.add(name)
            out.append(name)
    if labels == "letters":
        return out
    other = random.Random(f"{labels}/{'/'.join(out)}")
    taken.difference_update(out)
    replaced: list[str] = []
    while len(replaced) < n:
        name = draw(other)
        if name not in blocked and accept(name):
            blocked.add(name)
            replaced.append(name)
    taken.update(replaced)
    return replaced


def _shuffled_dict(rng: random.Random, d: dict) -> dict:
    items = list(d.items())
    rng.shuffle(items)
    return dict(items)


def instantiate_replica(raw: Mapping[str, Any], seed: int, id_prefix: str = "R", labels: str = "letters",
                        avoid: Set[str] = frozenset()) -> Replica:
    """A replica of base mapping ``raw`` with fresh labels (of scheme ``labels``, none in ``avoid``), shuffled
    order and a fresh id, by its family."""
    return get_family(raw.get("family")).instantiate_replica(raw, seed, id_prefix, labels, avoid)


def replica_labels(replica: Replica) -> set[str]:
    """Every fresh name a replica gave (entities, primitives, types)."""
    return set(replica.entities.values()) | set(replica.primitives.values()) | set(replica.types.values())


def instantiate_step_replica(fam, raw: Mapping[str, Any], seed: int, id_prefix: str,
                             labels: str = "letters", avoid: Set[str] = frozenset()) -> Replica:
    """The replica of a step-sequence base (``StepFamily``): fresh names for the entities, for the primitives
    when the family relabels them and for the types ``fam.type_labels`` names; the tables and lists the family
    names shuffled, in that order."""
    rng = random.Random(seed)
    base = world_from_mapping(dict(raw))
    ents = [e for e, _ in base.entities]
    prims = [p.name for p in base.primitives] if fam.relabels_primitives else []
    kinds = fam.type_labels(raw)
    taken = set(ents) | {p.name for p in base.primitives} | set(kinds) | set(base.entity_types)
    taken |= fam.reserved_labels(raw)
    fresh = fresh_names(rng, len(ents) + len(prims) + len(kinds), taken, labels=labels, avoid=avoid)
    ent = dict(zip(ents, fresh))
    prim = dict(zip(prims, fresh[len(ents) :]))
    types = dict(zip(kinds, fresh[len(ents) + len(prims) :]))
    m = rename_mapping(raw, ent, prim, types)
    m["id"] = f"{id_prefix}-{rng.randrange(16**6):06x}"
    m["title"] = f"world {m['id']}"
    for key in fam.shuffled_tables:
        if key in m:
            m[key] = _shuffled_dict(rng, m[key])
    for key in fam.shuffled_lists:
        if key in m:
            rng.shuffle(m[key])
    return Replica(m, world_from_mapping(m), ent, prim, types)


@dataclass(frozen=True)
class Fingerprint:
    """Abstract, label-free summary of a world that F and C replicas must share."""

    family: str
    max_steps: int
    max_cost: int
    budget_extra: tuple
    constraint_count: int
    alphabet: int
    reachable_states: int
    edges: int
    solutions: int
    optimal_length: int | None
    signatures: tuple


def abstract_fingerprint(world: World, bounds: Bounds | None = None) -> Fingerprint:
    """The label-free fingerprint of ``world``."""
    enum = enumerate_solutions(world, bounds)
    sigs = Counter(motif_signature(world, s) for s in enum.solutions)
    graph = reachable_graph(world)
    return Fingerprint(
        world.family,
        world.budget.max_steps,
        world.budget.max_cost,
        world.budget.extra,
        get_family(world.family).constraint_count(world),
        len(grounded_steps(world)),
        len(graph["nodes"]),
        len(graph["edges"]),
        len(enum.solutions),
        enum.optimal_length,
        tuple(sorted(sigs.items())),
    )


def copy_solves(demo_world: World, demo: tuple[str, ...], target: World) -> str | None:
    """Why ``demo`` (a solution of ``demo_world``) would solve ``target`` when copied, or None.

    Rejected when the demonstration or any of its prefixes is VALID in the
    target as written (a verbatim or truncated copy), or has the motif
    signature of some target solution (a renamed copy, possibly truncated).
    """
    target_sigs = {
        motif_signature(target, s) for s in enumerate_solutions(target).solutions
    }
    for k in range(len(demo), 0, -1):
        prefix = demo[:k]
        what = "the demonstration" if k == len(demo) else f"its first {k} step(s)"
        if check(target, "".join(s + "\n" for s in prefix)).status is Status.VALID:
            return f"{what}, copied verbatim, solve(s) the target"
        if motif_signature(demo_world, prefix) in target_sigs:
            return f"{what}, renamed, match(es) a target solution's motif signature"
    return None
