"""Generator throughput per frozen state and the timed 1,200-episode balance check.

Usage: python benchmarks/ladder/bench_generators.py [--episodes-per-tier 60] [--seed 100]

Prints, per state, episodes per second (generation includes the generator's
own evaluator-authority check on every episode) and the ratio against v1-r1
measured in the same run; then the design-level balance check of round 3:
1,200 episodes (240 per tier), the approvable share per tier against the
40-72% band, and its wall-clock time; then the 300-per-tier balance of every
state (the size the fixture tests use).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fixtures.ladder import STATES, TIERS, generate_episodes

BAND = (0.40, 0.72)


def throughput(state: str, per_tier: int, seed: int) -> tuple[float, int]:
    start = time.perf_counter()
    n = sum(len(generate_episodes(STATES[state], tier, seed, per_tier)) for tier in TIERS)
    return n / (time.perf_counter() - start), n


def balance(state: str, per_tier: int, seed: int) -> tuple[dict[int, float], float]:
    start = time.perf_counter()
    shares = {tier: sum(e.ground_truth == "approve" for e in generate_episodes(STATES[state], tier, seed, per_tier))
              / per_tier for tier in TIERS}
    return shares, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes-per-tier", type=int, default=60)
    parser.add_argument("--seed", type=int, default=100)
    args = parser.parse_args(argv)

    print(f"generator throughput ({args.episodes_per_tier} episodes per tier, seed {args.seed})")
    baseline = None
    for name in STATES:
        rate, n = throughput(name, args.episodes_per_tier, args.seed)
        baseline = baseline or rate
        print(f"  {name:<7} {n:5d} episodes  {rate:8.0f} episodes/s  x{rate / baseline:.2f} vs v1-r1")

    shares, wall = balance("v2-r3", 240, args.seed)
    inside = all(BAND[0] <= s <= BAND[1] for s in shares.values())
    print(f"round-3 balance check, 1,200 episodes (240 per tier): {wall:.2f} s; approvable share "
          + ", ".join(f"t{t} {100 * s:.1f}%" for t, s in shares.items())
          + f"; range {100 * min(shares.values()):.1f}-{100 * max(shares.values()):.1f}%"
          + f" ({'inside' if inside else 'OUTSIDE'} 40-72%)")
    ok = inside
    for name in STATES:
        shares, wall = balance(name, 300, args.seed)
        inside = all(BAND[0] <= s <= BAND[1] for s in shares.values())
        ok = ok and inside
        print(f"  {name:<7} 300 per tier: {wall:.2f} s; " + ", ".join(f"t{t} {100 * s:.1f}%" for t, s in shares.items())
              + ("" if inside else "  OUTSIDE 40-72%"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
