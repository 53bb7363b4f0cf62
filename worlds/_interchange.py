"""Is a C demonstration's structure interchangeable with the withheld motif in the target's solution set?

The copy audit asks whether a demonstration, copied, solves the target. This
audit asks a different question: whether the C demonstration realizes a
production edge that, across the bounded target solutions, marks exactly the
solutions the withheld motif marks. Then learning that edge from the C
demonstration singles out the same solutions the motif does (in PAIR-SCH-03
"prep stays on the bench with mix_a" and "prep feeds mix_b across machines" are
one choice described twice), and the pair does not withhold anything.

An edge other than the motif is *interchangeable* with it when the set of
bounded target solutions holding it equals the set holding the motif, and
that set is a proper, non-empty part of the solutions. When the motif is held
by every bounded target solution no other edge can stand in for it: an edge
every solution also holds is a co-requisite of the target, not a substitute,
so motif-required pairs have nothing to flag here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._model import World
from ._structure import production_edges

__all__ = ["interchangeable_edges"]


def interchangeable_edges(
    base: World,
    target_solutions: Sequence[Sequence[str]],
    motif: tuple[str, str, str],
    demo_world: World,
    demo_steps: Sequence[str],
) -> list[tuple[str, str, str]]:
    """Edges of the demonstration (``demo_steps`` run in ``demo_world``, base labels) interchangeable with
    ``motif`` over ``target_solutions`` (bounded solutions of ``base``); sorted, empty when none."""
    edges = [production_edges(base, s) for s in target_solutions]

    def holders(e: tuple[str, str, str]) -> frozenset[int]:
        return frozenset(i for i, es in enumerate(edges) if e in es)

    with_motif = holders(motif)
    if not with_motif or len(with_motif) == len(edges):
        return []
    return sorted(e for e in production_edges(demo_world, demo_steps) if e != motif and holders(e) == with_motif)
