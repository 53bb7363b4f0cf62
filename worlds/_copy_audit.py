"""The copy audit: would a demonstration, copied, renamed, reordered or cut short, already solve a target?"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._checker import Status, check
from ._model import World
from ._registry import get_family
from ._signature import motif_signature
from ._structure import one_step

__all__ = ["copy_audit", "step_copy_audit"]


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


def _reorders_onto(window: Sequence[str], solution: Sequence[str], shared: frozenset, relabel: bool) -> bool:
    """Whether some order of ``window`` is ``solution`` as written (or, with ``relabel``, after one consistent
    one-to-one relabelling as in ``_renames_onto``).

    The relabelled case is a backtracking match of window steps onto unused solution steps that keeps one
    bijection of entities (and of non-shared primitives); it is exact, with no length cap.
    """
    if len(window) != len(solution):
        return False
    if not relabel:
        return Counter(window) == Counter(solution)
    ws = [one_step(s) for s in window]
    ss = [one_step(s) for s in solution]

    def bind(m: dict, inv: dict, a: Any, b: Any) -> bool:
        if a in m:
            return m[a] == b
        if b in inv:
            return False
        m[a], inv[b] = b, a
        return True

    def go(i: int, used: frozenset, prim: dict, pinv: dict, ent: dict, einv: dict) -> bool:
        if i == len(ws):
            return True
        a = ws[i]
        for j, b in enumerate(ss):
            if j in used or len(a.args) != len(b.args) or (a.name in shared and a.name != b.name):
                continue
            p2, pi2, e2, ei2 = dict(prim), dict(pinv), dict(ent), dict(einv)
            if not bind(p2, pi2, a.name, b.name):
                continue
            ok = True
            for x, y in zip(a.args, b.args):
                if isinstance(x, int) or isinstance(y, int):
                    ok = x == y
                else:
                    ok = bind(e2, ei2, x, y)
                if not ok:
                    break
            if ok and go(i + 1, used | {j}, p2, pi2, e2, ei2):
                return True
        return False

    return go(0, frozenset(), {}, {}, {}, {})


def copy_audit(
    demo_world: World,
    demo: Sequence[str],
    target: World,
    target_sigs: set,
    target_solutions: Sequence[Sequence[str]] | None = None,
) -> str | None:
    """Why a demonstration would solve ``target`` when copied, or None, by the target's family.

    ``target_sigs``: the motif signatures of every bounded target solution;
    ``target_solutions``: those solutions (enables the relabelled and reordered checks).
    """
    return get_family(target.family).copy_audit(demo_world, demo, target, target_sigs, target_solutions)


def step_copy_audit(
    demo_world: World,
    demo: Sequence[str],
    target: World,
    target_sigs: set,
    target_solutions: Sequence[Sequence[str]] | None = None,
) -> str | None:
    """Why a step-sequence demonstration would solve ``target`` when copied, or None.

    Covers the demonstration and every contiguous window of it (a trivially
    truncated copy), each verbatim (checked by the checker) and renamed: its
    motif signature equals a target solution's, or (when ``target_solutions``
    is given) one consistent relabelling of its entities (and of primitives the
    target does not have) turns it into a bounded target solution. With
    ``target_solutions`` it also covers reordered copies: some order of the
    window is a bounded target solution as written, or after such a
    relabelling.
    Every bounded solution is enumerated, so "some order is VALID in the
    target" is exactly "some order is one of ``target_solutions``".
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
            if target_solutions is not None:
                if any(_reorders_onto(window, sol, shared, False) for sol in target_solutions):
                    return f"{what}, reordered, solve(s) target {target.id}"
                if any(_reorders_onto(window, sol, shared, True) for sol in target_solutions):
                    return f"{what}, reordered and relabelled, become(s) a solution of target {target.id}"
    return None
