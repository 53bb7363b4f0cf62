"""Peak memory of a served ladder probe whose server answers megabytes per request, at two probe sizes.

    python scripts/bench/bench_answer_memory.py [--answer-mib 3.9] [--units 30 300] [--checkout PATH ...]

A stdlib stand-in of an OpenAI-compatible server on 127.0.0.1 answers every chat request with
``--answer-mib`` MiB of text before a decision line, as a server that ignores ``max_tokens`` would (the body
stays under the backend's 4 MiB limit).  For each ``--checkout`` (default: this one) and each probe size in
``--units`` (a multiple of the five tiers), the script runs ``preregbench run ladder`` against it in a fresh
process, then ``verify`` and ``compare`` (the run with itself) on the run directory, and prints each command's
exit status, wall time, peak resident memory (``ru_maxrss`` of the process and the children it waited for)
and the ledger's size, and for each command the ratio of the largest probe's peak to the smallest's.  A run
whose memory is flat in the number of units has ratios near 1.  Run directories go to a temporary folder,
deleted at the end.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _standin import completion, listing, serving
from bench_big_ledger import measure

ROOT = Path(__file__).resolve().parents[2]
TIERS = 5


def answer(mib: float) -> bytes:
    """A completion of ``mib`` MiB of reasoning before its decision line."""
    return completion("x" * int(mib * 1024 * 1024) + "\nDECISION: APPROVE", "verbose")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answer-mib", type=float, default=3.9)
    parser.add_argument("--units", type=int, nargs="+", default=[30, 300])
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to measure (repeatable)")
    args = parser.parse_args()
    if any(n < TIERS or n % TIERS for n in args.units):
        parser.error(f"--units: each size must be a positive multiple of {TIERS} (units per tier x 5 tiers)")
    body = answer(args.answer_mib)
    with serving(1, body, listing("verbose")) as (server,):
        return measure_all(args, body, server.url)


def measure_all(args: argparse.Namespace, body: bytes, url: str) -> int:
    print(f"answer body: {len(body) / 2**20:.2f} MiB per request; server {url}")
    print(f"{'checkout':<28} {'units':>5} {'command':<8} {'exit':>4} {'seconds':>8} {'peak RSS MiB':>13} "
          f"{'ledger MiB':>11}")
    with tempfile.TemporaryDirectory(prefix="bench-answer-memory-") as scratch:
        for checkout in (c.resolve() for c in (args.checkout or [ROOT])):
            peaks: dict[str, dict[int, float]] = {}
            for units in args.units:
                results = Path(scratch) / f"{checkout.name}-{units}"
                run_id = f"u{units}"
                run_dir = results / "ladder" / run_id
                commands = {
                    "run": ["-m", "benchmarks.core.cli", "run", "ladder", "--model", f"openai:verbose@{url}",
                            "--ladder-units-per-tier", str(units // TIERS), "--ladder-max-tokens", "16",
                            "--results-dir", str(results), "--run-id", run_id, "-p", "no:cacheprovider"],
                    "verify": ["-m", "benchmarks.core.cli", "verify", str(run_dir)],
                    "compare": ["-m", "benchmarks.core.cli", "compare", str(run_dir), str(run_dir),
                                "--json", str(results / "compare.json")],
                }
                for name, argv in commands.items():
                    status, seconds, peak = measure(checkout, argv)
                    ledger = sum(p.stat().st_size for p in run_dir.glob("*/units.jsonl")) / 2**20
                    peaks.setdefault(name, {})[units] = peak
                    print(f"{str(checkout)[-28:]:<28} {units:>5} {name:<8} {status:>4} {seconds:>8.1f} "
                          f"{peak:>13.0f} {ledger:>11.1f}", flush=True)
            low, high = min(args.units), max(args.units)
            print("  peak RSS ratio, " + ", ".join(
                f"{name} {by[high] / by[low]:.3f}" for name, by in peaks.items()) + f" ({high} vs {low} units)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
