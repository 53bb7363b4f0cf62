"""The copy audit: would a demonstration, copied, renamed or cut short, already solve a target?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._checker import Status, check
from ._model import World
from ._signature import motif_signature
from ._structure import one_step

__all__ = ["copy_audit"]


def _renames_onto(window: Sequence[str], solution: Sequence[str], shared: frozenset = frozenset()) -> bool:
    """Whether one consistent, one-to-one relabelling turns ``window`` into ``solution``.

    Entities may be relabelled freely (one-to-one); primitives named in
    ``shared`` (those the demonstration's world shares with the target) keep
    their names, others may be relabelled one-to-one. A demonstration in the
    target's own vocabulary is thus matched up to a renaming of its entities.
    """
    if len(window) != len(solution):
        return False
    prim: dict[str, str] = {}
    ent: dict[Any, Any] = {}
    for a, b in zip(window, solution):
        sa, sb = one_step(a), one_step(b)
        if sa.name in shared and sa.name != sb.name:
            return False
        if len(sa.args) != len(sb.args) or prim.setdefault(sa.name, sb.name) != sb.name:
            return False
        for x, y in zip(sa.args, sb.args):
            if isinstance(x, int) or isinstance(y, int):
                if x != y:
                    return False
            elif ent.setdefault(x, y) != y:
                return False
    return len(set(prim.values())) == len(prim) and len(set(ent.values())) == len(ent)


def copy_audit(
    demo_world: World,
    demo: Sequence[str],
    target: World,
    target_sigs: set,
    target_solutions: Sequence[Sequence[str]] | None = None,
) -> str | None:
    """Why a demonstration would solve ``target`` when copied, or None.

    Covers the demonstration and every contiguous window of it (a trivially
    truncated copy), each verbatim (checked by the checker) and renamed: its
    motif signature equals a target solution's, or (when ``target_solutions``
    is given) one consistent relabelling of its entities (and of primitives the
    target does not have) turns it into a bounded target solution.
    """
    demo = tuple(demo)
    n = len(demo)
    shared = frozenset(p.name for p in demo_world.primitives) & frozenset(p.name for p in target.primitives)
    for length in range(n, 0, -1):
        for start in range(n - length + 1):
            window = demo[start : start + length]
            what = "the demonstration" if length == n else f"its steps {start + 1}..{start + length}"
            if check(target, "".join(s + "\n" for s in window)).status is Status.VALID:
                return f"{what}, copied verbatim, solve(s) target {target.id}"
            if motif_signature(demo_world, window) in target_sigs:
                return f"{what}, renamed, match(es) the motif signature of a solution of target {target.id}"
            if target_solutions is not None and any(_renames_onto(window, sol, shared) for sol in target_solutions):
                return f"{what}, relabelled consistently, become(s) a solution of target {target.id}"
    return None
