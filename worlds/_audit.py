"""Complete audit of every bounded grounded action sequence of a world.

Two views, both exhaustive over the world's grounded steps (the type-correct
alphabet of ``grounded_steps``):

- the *product* audit classifies every sequence of length 1..max_steps with
  the checker and with the independently written reference interpreter and
  requires them to agree field by field (status, reason, first failing step,
  committed state, cost, executed count);
- the *execution tree* audit follows execution: it extends only sequences
  whose every step was committed, one grounded step at a time, up to one step
  past the step cap (so the step-cap breach itself is classified). Each node
  is a distinct outcome of a distinct sequence; no sequence there shares a
  failing prefix with another.

Both count outcomes by (status, reason, failing step) and check that the
VALID sequences are exactly the enumerator's solutions. Used on TW-001 by the
tests (counts snapshot-frozen) and runnable on any small world.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._checker import Status, check, differential
from ._enumerate import enumerate_solutions, grounded_steps
from ._errors import WorldsError
from ._loader import world_from_mapping

__all__ = ["SequenceAudit", "audit_sequences"]

#: Largest product audit run (sequences); beyond it the call refuses.
MAX_AUDITED_SEQUENCES = 2_000_000


@dataclass(frozen=True)
class SequenceAudit:
    """Outcome counts of a complete sequence audit.

    world_id: the audited world.  alphabet: grounded steps.  max_steps: step cap.
    product_total: sequences of length 1..max_steps (0 when the product view was not run).
    product_counts: (status, reason, failing step) -> count over all of them.
    product_by_length: length -> {status: count}.
    tree_total: nodes of the execution tree (length 1..max_steps + 1).
    tree_counts: (status, reason, failing step) -> count over the tree.
    valid: the VALID sequences (rendered steps), sorted (from the execution tree; the
        product view, when run, must find the same set or a disagreement is recorded).
    enumerated: the enumerator's solutions, sorted.
    disagreements: sequences where checker and reference interpreter differ (empty when certified).
    """

    world_id: str
    alphabet: int
    max_steps: int
    product_total: int
    product_counts: dict
    product_by_length: dict
    tree_total: int
    tree_counts: dict
    valid: tuple
    enumerated: tuple
    disagreements: tuple

    def summary(self) -> dict[str, Any]:
        """JSON-able counts (keys as 'STATUS/reason/step' strings)."""

        def key(k):
            return f"{k[0]}/{k[1] or '-'}/{'-' if k[2] is None else k[2]}"

        return {
            "world_id": self.world_id,
            "alphabet": self.alphabet,
            "max_steps": self.max_steps,
            "product_total": self.product_total,
            "product_counts": {key(k): v for k, v in sorted(self.product_counts.items(), key=lambda kv: key(kv[0]))},
            "product_by_length": {str(k): dict(sorted(v.items())) for k, v in sorted(self.product_by_length.items())},
            "tree_total": self.tree_total,
            "tree_counts": {key(k): v for k, v in sorted(self.tree_counts.items(), key=lambda kv: key(kv[0]))},
            "valid": ["; ".join(s) for s in self.valid],
            "valid_equals_enumeration": self.valid == self.enumerated,
            "disagreements": len(self.disagreements),
        }


def _classify(world, raw, seq: tuple[str, ...], disagreements: list) -> tuple:
    text = "".join(s + "\n" for s in seq)
    r = check(world, text)
    got, want = differential(r, raw, text)
    if got != want:
        disagreements.append((seq, got, want))
    return got[:3], r


def audit_sequences(raw: Mapping[str, Any], product: bool = True) -> SequenceAudit:
    """Audit every bounded grounded sequence of the world mapping ``raw`` (see module docstring).

    ``product=False`` runs the execution tree alone (for worlds whose full
    product is too large); every VALID sequence commits all its steps, so the
    tree still finds them all. The product fields are then empty.
    """
    world = world_from_mapping(dict(raw))
    alphabet = [s.render() for s in grounded_steps(world)]
    cap = world.budget.max_steps
    total = sum(len(alphabet) ** k for k in range(1, cap + 1))
    if product and total > MAX_AUDITED_SEQUENCES:
        raise WorldsError(
            f"world {world.id}: {total} sequences exceed the audit limit {MAX_AUDITED_SEQUENCES}; "
            "audit a smaller world or lower its step cap"
        )
    disagreements: list = []
    counts: Counter = Counter()
    by_len: dict[int, Counter] = {}
    valid = []
    tree_valid = []
    for k in range(1, cap + 1 if product else 1):
        by_len[k] = Counter()
        for seq in itertools.product(alphabet, repeat=k):
            key, r = _classify(world, raw, seq, disagreements)
            counts[key] += 1
            by_len[k][key[0]] += 1
            if r.status is Status.VALID:
                valid.append(seq)
    tree: Counter = Counter()
    tree_total = 0
    frontier: list[tuple[str, ...]] = [()]
    for _k in range(1, cap + 2):
        nxt = []
        for prefix in frontier:
            for st in alphabet:
                seq = prefix + (st,)
                key, r = _classify(world, raw, seq, disagreements)
                tree[key] += 1
                tree_total += 1
                if r.status is Status.VALID:
                    tree_valid.append(seq)
                if r.executed == len(seq):  # every step committed: extend further
                    nxt.append(seq)
        frontier = nxt
    enum = enumerate_solutions(world)
    if product and sorted(valid) != sorted(tree_valid):
        disagreements.append(("product and execution tree find different VALID sets", (), ()))
    return SequenceAudit(
        world.id,
        len(alphabet),
        cap,
        total if product else 0,
        dict(counts),
        {k: dict(v) for k, v in by_len.items()},
        tree_total,
        dict(tree),
        tuple(sorted(tree_valid)),
        tuple(sorted(enum.solutions)),
        tuple(disagreements),
    )
