"""Benchmark: the memoized enumerator against naive brute force on growing token_workshop worlds.

Run ``python -m worlds.bench_enumeration``. Not a test: it prints one row per
world with the enumerator's wall time and visited (state, steps left, cost
left) nodes next to brute force (every sequence of grounded steps up to the
step cap, each run through the checker), and the ratio of the two times.
Brute force runs only while its estimated time stays under the per-world
budget; beyond that the row says "skipped (over budget)".
"""

from __future__ import annotations

import itertools
import sys
import time

from worlds import (
    Status,
    check_steps,
    enumerate_solutions,
    grounded_steps,
    world_from_mapping,
)

#: seconds of brute force allowed per world (estimated before running it)
BRUTE_BUDGET_S = 3.0


def ladder_world(n: int) -> dict:
    """A token_workshop mapping with ``n`` refining stages.

    Tokens s0..sn; ``adv_i`` turns one s_i into one s_{i+1} with the bench as a
    catalyst; ``recycle(x)`` turns any stage token back into s0. The goal is
    one s_n; the step cap and cost cap are n + 1, so a solution may waste one
    step. The grounded alphabet has 2n + 1 steps.
    """
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
    return {
        "schema_version": 1,
        "id": f"TW-L{n:02d}",
        "family": "token_workshop",
        "title": f"{n}-stage refining ladder",
        "token_types": ["stage", "tool"],
        "budget": {"max_steps": n + 1, "max_cost": n + 1, "inventory_cap": 2},
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


def main(max_n: int = 8) -> int:
    print(
        f"{'world':8} {'alphabet':>8} {'cap':>4} {'solutions':>9} {'enum s':>9} "
        f"{'enum nodes':>10} {'brute s':>9} {'brute seqs':>11} {'brute/enum':>10}"
    )
    per_seq = None  # seconds per brute-force sequence, measured on the smaller worlds
    for n in range(1, max_n + 1):
        world = world_from_mapping(ladder_world(n))
        g = len(grounded_steps(world))
        cap = world.budget.max_steps
        t0 = time.perf_counter()
        enum = enumerate_solutions(world)
        t_enum = time.perf_counter() - t0
        total = sum(g**k for k in range(1, cap + 1))
        row = (
            f"{world.id:8} {g:8d} {cap:4d} {len(enum.solutions):9d} {t_enum:9.4f} "
            f"{enum.states:10d} "
        )
        if per_seq is not None and per_seq * total > BRUTE_BUDGET_S:
            print(row + f"{'skipped (over budget)':>32}  (~{per_seq * total:.0f} s for {total} seqs)")
            continue
        t0 = time.perf_counter()
        seen, valid = brute_force(world)
        t_brute = time.perf_counter() - t0
        per_seq = t_brute / seen
        assert valid == len(enum.solutions), f"{world.id}: brute force {valid} != enumerator {len(enum.solutions)}"
        print(row + f"{t_brute:9.4f} {seen:11d} {t_brute / t_enum:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
