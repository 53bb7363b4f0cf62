"""Heavier exhaustive checks of the showcase pairs, printed as figures (not a test).

For every pair base world: the complete bounded-sequence audit (every grounded
sequence up to the step cap through the checker and the reference
interpreter, which must agree; the VALID set must equal the enumerator's).
Worlds with more than ``--max-sequences`` bounded sequences get the execution
tree audit only (their product count is shown in parentheses). Then, for
every showcase pair: construction time, enumeration memo nodes of the target
and the isomorphism certificate's size.

    python -m worlds.audit_pairs [--max-sequences N]
"""

from __future__ import annotations

import argparse
import time
import tomllib

from ._audit import audit_sequences
from ._construct import build_pair
from ._enumerate import grounded_steps
from ._loader import world_from_mapping
from ._pair_spec import load_pair_spec
from ._showcase import pair_spec_paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-sequences", type=int, default=400_000, help="skip worlds with more bounded sequences")
    args = ap.parse_args(argv)
    bases = sorted({load_pair_spec(p).base.resolve() for p in pair_spec_paths()})
    print(f"{'world':9} {'alphabet':>8} {'cap':>3} {'sequences':>10} {'valid':>5} {'tree':>6} {'disagree':>8} {'secs':>7}")
    print(f"{'':9} {'':>8} {'':>3} {'(product)':>10} {'':>5} {'nodes':>6}")
    failed = False
    for path in bases:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
        world = world_from_mapping(raw)
        n = len(grounded_steps(world))
        total = sum(n**k for k in range(1, world.budget.max_steps + 1))
        product = total <= args.max_sequences
        t = time.perf_counter()
        a = audit_sequences(raw, product=product)
        dt = time.perf_counter() - t
        ok = a.valid == a.enumerated and not a.disagreements
        failed |= not ok
        seqs = f"{a.product_total:10}" if product else f"{'(' + str(total) + ')':>10}"
        print(
            f"{world.id:9} {a.alphabet:8} {a.max_steps:3} {seqs} {len(a.valid):5} "
            f"{a.tree_total:6} {len(a.disagreements):8} {dt:7.2f}{'' if ok else '  MISMATCH'}"
        )
    print()
    print(f"{'pair':12} {'build s':>8} {'target sols':>11} {'memo nodes':>10} {'states':>6} {'edges':>6} novelty")
    for p in pair_spec_paths():
        t = time.perf_counter()
        pair, facts = build_pair(load_pair_spec(p))
        dt = time.perf_counter() - t
        iso = facts["isomorphism"]
        print(
            f"{pair.pair_id:12} {dt:8.3f} {len(facts['target_enum'].solutions):11} {facts['target_enum'].states:10} "
            f"{iso['states']:6} {iso['transitions']:6} {pair.novelty}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
