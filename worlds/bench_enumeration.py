"""Benchmark: the memoized enumerator against naive brute force on token_workshop ladder worlds.

Run ``python -m worlds.bench_enumeration`` (``--quick`` for a seconds-long
subset). Not a test: it prints one row per world with the enumerator's wall
time and visited (state, steps left, cost left) nodes next to brute force
(every sequence of grounded steps up to the step cap, each run through the
checker, no pruning), and the ratio of the two times, both measured in the
same run.

Two tables:

- growing ladders ``TW-Lnn`` (step cap n + 1). Brute force runs only while its
  time, estimated from the previous world's seconds per sequence, stays under
  ``BRUTE_BUDGET_S``; beyond that the row says "skipped (over budget)" and
  shows the estimate.
- depth 8 ``TW-Lnn-C8``: small ladders (alphabets 3, 5 and 7; ``--quick``: 3)
  with the step and cost caps raised to 8. Brute force always runs to the
  end here, so every depth-8 ratio is measured. The last line of a full run
  gives the smallest depth-8 ratio against the target ``DEPTH8_TARGET``.

The enumerator's time is the median of ``ENUM_REPEATS`` runs (each takes
milliseconds, where one scheduler pause would swing the ratio); brute force
runs once. Both sides are timed with what the script built before them
frozen out of the cycle collector (``gc.freeze`` after a collection): a
side's own garbage is collected as usual, but no side pays for walking the
objects earlier rows left behind (without it, a millisecond-long enumeration
timed after the growing table took 1.9 ms instead of 0.4 ms).

Every row where brute force ran checks that it visited exactly
``sum(|alphabet|**k for k in 1..cap)`` sequences and that its VALID count equals
the enumerator's solution count; a mismatch stops the script with an error.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import statistics
import sys
import time
from dataclasses import dataclass

from worlds import (
    Status,
    check_steps,
    enumerate_solutions,
    grounded_steps,
    world_from_mapping,
)

#: seconds of brute force allowed per growing-ladder world (estimated before running it)
BRUTE_BUDGET_S = 3.0

#: step cap of the measured deep rows
DEPTH8_CAP = 8

#: ladder stages of the depth-8 worlds: full run (grounded alphabets 3, 5 and 7) and --quick (alphabet 3)
DEPTH8_STAGES = (1, 2, 3)
DEPTH8_STAGES_QUICK = (1,)

#: enumerator runs per world; its time is their median (one run takes milliseconds)
ENUM_REPEATS = 5

#: largest growing ladder, full run and --quick
MAX_N = 8
MAX_N_QUICK = 3

#: brute-force/enumerator time ratio the depth-8 rows aim for
DEPTH8_TARGET = 100.0


class BenchmarkMismatch(RuntimeError):
    """Brute force and the enumerator disagree (a bug in one of them)."""


def ladder_world(n: int, cap: int | None = None) -> dict:
    """A token_workshop mapping with ``n`` refining stages.

    Tokens s0..sn; ``adv_i`` turns one s_i into one s_{i+1} with the bench as a
    catalyst; ``recycle(x)`` turns any stage token back into s0. The goal is
    one s_n. The step cap and cost cap are ``cap`` (default n + 1, so a
    solution may waste one step); the inventory cap is 2. The grounded
    alphabet has 2n + 1 steps. With a ``cap`` the id is ``TW-Lnn-C<cap>``.
    """
    if n < 1:
        raise ValueError(f"ladder_world needs n >= 1 stages, got {n}")
    limit = n + 1 if cap is None else cap
    if limit < n:
        raise ValueError(f"ladder_world({n}) needs a step cap >= {n} to reach s{n}, got {limit}")
    stages = [f"s{i}" for i in range(n + 1)]
    recipes = [
        {
            "name": f"adv_{i}",
            "inputs": {stages[i]: 1},
            "catalysts": ["bench"],
            "outputs": {stages[i + 1]: 1},
            "cost": 1,
        }
        for i in range(n)
    ]
    recipes.append(
        {
            "name": "recycle",
            "params": [{"name": "x", "type": "stage"}],
            "inputs": {"x": 1},
            "outputs": {"s0": 1},
            "cost": 1,
        }
    )
    suffix = "" if cap is None else f"-C{cap}"
    return {
        "schema_version": 1,
        "id": f"TW-L{n:02d}{suffix}",
        "family": "token_workshop",
        "title": f"{n}-stage refining ladder, step cap {limit}",
        "token_types": ["stage", "tool"],
        "budget": {"max_steps": limit, "max_cost": limit, "inventory_cap": 2},
        "tokens": {**{s: "stage" for s in stages}, "bench": "tool"},
        "initial": {"s0": 2, "bench": 1},
        "recipes": recipes,
        "goal": {"require": {stages[-1]: 1}},
    }


def brute_force(world) -> tuple[int, int]:
    """(sequences checked, valid sequences) over every grounded sequence up to the step cap."""
    steps = grounded_steps(world)
    seen = valid = 0
    for k in range(1, world.budget.max_steps + 1):
        for seq in itertools.product(steps, repeat=k):
            seen += 1
            if check_steps(world, seq).status is Status.VALID:
                valid += 1
    return seen, valid


def sequence_count(alphabet: int, cap: int) -> int:
    """Number of sequences of length 1..cap over an alphabet of ``alphabet`` steps."""
    return sum(alphabet**k for k in range(1, cap + 1))


@dataclass(frozen=True)
class Row:
    """One world's measurement.

    alphabet: grounded steps of the world; cap: its step cap.
    solutions, enum_nodes: the enumerator's solution count and memo nodes.
    brute_seqs: sequences brute force checked (when skipped: the count it would check).
    brute_valid: VALID sequences brute force found; None when skipped.
    enum_s, brute_s: wall seconds (perf_counter); brute_s is None when skipped.
    estimate_s: predicted brute-force seconds for a skipped row, else None.
    """

    world_id: str
    alphabet: int
    cap: int
    solutions: int
    enum_nodes: int
    brute_seqs: int
    brute_valid: int | None
    enum_s: float
    brute_s: float | None
    estimate_s: float | None = None

    @property
    def ratio(self) -> float | None:
        """Measured brute-force time over enumerator time; None when brute force was skipped."""
        if self.brute_s is None:
            return None
        return self.brute_s / max(self.enum_s, 1e-9)


#: Open :func:`_settled_heap` blocks; the outermost one unfreezes when it ends.
_open_blocks = 0


@contextlib.contextmanager
def _settled_heap():
    """Collect, then freeze every surviving object for the block.

    Blocks nest (a run's rows, a row's timings): survivors stay frozen until the outermost block ends, so
    each inner block's collection walks only what was made since the last freeze, not the whole heap again
    (in a long-lived process, a test worker holding torch and transformers, one full walk takes about
    0.4 s on a 2-core machine).  Every timed block still starts with every live object frozen.
    """
    global _open_blocks
    gc.collect()
    gc.freeze()
    _open_blocks += 1
    try:
        yield
    finally:
        _open_blocks -= 1
        if _open_blocks == 0:
            gc.unfreeze()


@_settled_heap()  # one walk of the whole heap per row; its timed blocks walk only what is new
def measure(raw: dict, per_seq: float | None = None, budget_s: float | None = None) -> Row:
    """Enumerate and (unless its estimate ``per_seq * sequences`` exceeds ``budget_s``) brute-force one world."""
    world = world_from_mapping(raw)
    g = len(grounded_steps(world))
    cap = world.budget.max_steps
    total = sequence_count(g, cap)
    times = []
    for _ in range(ENUM_REPEATS):
        with _settled_heap():
            t0 = time.perf_counter()
            enum = enumerate_solutions(world)
            times.append(time.perf_counter() - t0)
    t_enum = statistics.median(times)
    base = dict(
        world_id=world.id,
        alphabet=g,
        cap=cap,
        solutions=len(enum.solutions),
        enum_nodes=enum.states,
        enum_s=t_enum,
    )
    if budget_s is not None and per_seq is not None and per_seq * total > budget_s:
        return Row(**base, brute_seqs=total, brute_valid=None, brute_s=None, estimate_s=per_seq * total)
    with _settled_heap():
        t0 = time.perf_counter()
        seen, valid = brute_force(world)
        t_brute = time.perf_counter() - t0
    if seen != total:
        raise BenchmarkMismatch(f"{world.id}: brute force checked {seen} sequences, expected {total}")
    if valid != len(enum.solutions):
        raise BenchmarkMismatch(
            f"{world.id}: brute force found {valid} valid sequences, the enumerator {len(enum.solutions)}"
        )
    return Row(**base, brute_seqs=seen, brute_valid=valid, brute_s=t_brute)


@_settled_heap()
def ladder_rows(max_n: int, budget_s: float = BRUTE_BUDGET_S, emit=None) -> list[Row]:
    """Rows for TW-L01..TW-L<max_n>, brute force skipped once its estimate exceeds ``budget_s``."""
    rows: list[Row] = []
    per_seq = None  # seconds per brute-force sequence, measured on the previous measured world
    for n in range(1, max_n + 1):
        row = measure(ladder_world(n), per_seq, budget_s)
        if row.brute_s is not None:
            per_seq = row.brute_s / row.brute_seqs
        rows.append(row)
        if emit:
            emit(row)
    return rows


@_settled_heap()
def depth8_rows(stages=DEPTH8_STAGES, emit=None) -> list[Row]:
    """Rows for the depth-8 ladders; brute force always runs to the end."""
    rows = []
    for n in stages:
        row = measure(ladder_world(n, cap=DEPTH8_CAP))
        rows.append(row)
        if emit:
            emit(row)
    return rows


HEADER = (
    f"{'world':10} {'alphabet':>8} {'cap':>4} {'solutions':>9} {'enum s':>9} "
    f"{'enum nodes':>10} {'brute s':>9} {'brute seqs':>11} {'brute/enum':>10}"
)


def format_row(row: Row) -> str:
    head = (
        f"{row.world_id:10} {row.alphabet:8d} {row.cap:4d} {row.solutions:9d} {row.enum_s:9.4f} "
        f"{row.enum_nodes:10d} "
    )
    if row.brute_s is None:
        return head + f"{'skipped (over budget)':>32}  (~{row.estimate_s:.0f} s for {row.brute_seqs} seqs)"
    return head + f"{row.brute_s:9.4f} {row.brute_seqs:11d} {row.ratio:10.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worlds.bench_enumeration",
        description="Memoized enumerator against brute force on token_workshop ladder worlds.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"growing ladders up to n={MAX_N_QUICK} and only the alphabet-3 depth-8 world (seconds)",
    )
    args = parser.parse_args(argv)
    max_n = MAX_N_QUICK if args.quick else MAX_N
    stages = DEPTH8_STAGES_QUICK if args.quick else DEPTH8_STAGES

    def emit(row: Row) -> None:
        print(format_row(row), flush=True)

    print(f"growing ladders (step cap n + 1; brute force skipped when estimated over {BRUTE_BUDGET_S:g} s)")
    print(HEADER)
    ladder_rows(max_n, emit=emit)
    print()
    print(f"depth {DEPTH8_CAP} (step cap {DEPTH8_CAP}; brute force always runs to the end)")
    print(HEADER)
    deep = depth8_rows(stages, emit=emit)
    if args.quick:
        print(f"quick run: the {DEPTH8_TARGET:g}x target applies to the full run's depth-{DEPTH8_CAP} rows")
        return 0
    worst = min(deep, key=lambda r: r.ratio)
    verdict = "meets" if worst.ratio >= DEPTH8_TARGET else "MISSES"
    print(
        f"smallest measured depth-{DEPTH8_CAP} ratio: {worst.ratio:.1f}x ({worst.world_id}); "
        f"{verdict} the target {DEPTH8_TARGET:g}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
