"""Throughput of served ladder probes against pools of loopback servers with a fixed latency, and the harness's
own cost per unit.

    python scripts/bench/bench_throughput.py [--latency-ms 200] [--sizes 150 1440] [--in-flight 1 4 16 64]
                                             [--endpoints 1 2 4] [--harness-units 10000]

Each stand-in server (stdlib, on 127.0.0.1) answers every chat completion with a decision line after sleeping
``--latency-ms``; its ``/models`` lists the model alike on every endpoint.  For each probe size (a multiple of the
five tiers), each pool size and each depth of ``--ladder-in-flight``, the script runs ``preregbench run ladder``
on the pool in a fresh process, with all units in one batch, and reads the measurement's wall time from the
records (with one batch, each unit's ``latency_s`` is the batch's wall time).  It prints that time, the speedup
against the sequential run (one endpoint, one request in flight) of the same size, the ideal time
(units x latency / (endpoints x in-flight)) and the share of the ideal reached (ideal / measured).

Then it runs probes of ``--harness-units`` units and of 5 units on a scripted worker (no latency), each under
cProfile, and prints the harness's own cost per unit, (wall of the large probe - wall of the small one) / (units
- 5), so that the start of the process and the session cancel out, and where that time goes, by part of the code
(the ledger's writes and fsyncs, the episode generator, the protocol's records, JSON, pytest, the rest): the
difference of the two profiles' own times, per unit.  Run directories go to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _standin import completion, listing, serving

ROOT = Path(__file__).resolve().parents[2]
TIERS = 5
MODEL = "bench"
SCRIPTED = "ladder-worker-a0.906-seed7"  # a simulated worker of the ladder: answers at once


def probe(results: Path, run_id: str, model: str, units: int, in_flight: int, *,
          profile: Path | None = None) -> tuple[float, float]:
    """Run one ladder probe in a fresh process: the measurement's wall time in seconds, from its records, and the
    process's wall time."""
    argv = ["-m", "benchmarks.core.cli", "run", "ladder", "--model", model, "--ladder-units-per-tier",
            str(units // TIERS), "--ladder-max-tokens", "16", "--ladder-batch-size", str(units), "--ladder-in-flight",
            str(in_flight), "--results-dir", str(results), "--run-id", run_id, "-p", "no:cacheprovider"]
    if profile is not None:
        argv = ["-m", "cProfile", "-o", str(profile), *argv]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = time.perf_counter() - start
    ledgers = list((results / "ladder" / run_id).glob("*/units.jsonl"))
    if done.returncode not in (0, 1) or len(ledgers) != 1:
        raise SystemExit(f"the probe {run_id} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    units_seen = [json.loads(line) for line in ledgers[0].read_text().splitlines()]
    if len(units_seen) != units or any(u["error_code"] for u in units_seen):
        raise SystemExit(f"the probe {run_id} recorded {len(units_seen)} units, some errored; see {ledgers[0]}")
    return max(u["latency_s"] for u in units_seen), wall


PARTS = (  # (name, what a profiled function's file name contains), first match wins
    ("ledger writes and fsync", ("benchmarks/core/ledger.py", "posix.fsync", "{built-in method posix.fsync}")),
    ("episode generator", ("fixtures/ladder",)),
    ("ladder records and parser", ("benchmarks/ladder",)),
    ("JSON", ("json/", "canonical_hash", "benchmarks/core/_canonical.py", "benchmarks/core/bounded.py")),
    ("pytest and plugins", ("_pytest", "pluggy", "xdist", "syrupy", "pytest_")),
    ("suite core", ("benchmarks/core",)),
)


def part_of(file: str, function: str) -> str:
    where = f"{file}:{function}"
    return next((n for n, marks in PARTS if any(m in where for m in marks)), "the rest (imports, Python, I/O)")


def where_time_goes(profile: Path) -> dict[str, float]:
    """Own time (tottime) of the profiled process by part of the code; a built-in function's time (``isinstance``,
    ``compile``) goes to the parts of its callers, as much to each as it spent called from there."""
    stats = pstats.Stats(str(profile))
    totals: dict[str, float] = {}
    for (file, _line, function), (_cc, _nc, own, _cum, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if file == "~" and callers and function not in ("<built-in method posix.fsync>",):
            for (caller_file, _l, caller_function), timing in callers.items():
                name = part_of(caller_file, caller_function)
                totals[name] = totals.get(name, 0.0) + timing[2]
        else:
            name = part_of(file, function)
            totals[name] = totals.get(name, 0.0) + own
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[150, 1440])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--endpoints", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--harness-units", type=int, default=10_000)
    args = parser.parse_args()
    if any(n < TIERS or n % TIERS for n in [*args.sizes, args.harness_units]):
        parser.error(f"sizes and --harness-units must be positive multiples of {TIERS}")
    latency = args.latency_ms / 1000
    with serving(max(args.endpoints), completion("DECISION: APPROVE", MODEL), listing(MODEL), latency) as servers:
        return measure_all(args, latency, [server.url for server in servers])


def measure_all(args: argparse.Namespace, latency: float, urls: list[str]) -> int:
    print(f"latency {args.latency_ms:g} ms per request; {len(urls)} stand-in servers")
    print(f"{'units':>5} {'endpoints':>9} {'in-flight':>9} {'total':>5} {'seconds':>8} {'speedup':>8} "
          f"{'ideal s':>8} {'of ideal':>8}")
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as scratch:
        results = Path(scratch)
        for units in args.sizes:
            sequential = None
            for endpoints in args.endpoints:
                for depth in args.in_flight:
                    model = f"openai:{MODEL}@" + ",".join(urls[:endpoints])
                    seconds, _ = probe(results, f"n{units}-e{endpoints}-c{depth}", model, units, depth)
                    if endpoints == 1 and depth == 1:
                        sequential = seconds
                    ideal = units * latency / (endpoints * min(depth, units))
                    speedup = f"{sequential / seconds:8.2f}" if sequential else f"{'-':>8}"
                    print(f"{units:>5} {endpoints:>9} {depth:>9} {endpoints * depth:>5} {seconds:>8.2f} "
                          f"{speedup} {ideal:>8.2f} {ideal / seconds:>8.2f}", flush=True)
        walls, parts = {}, {}
        for n in (TIERS, args.harness_units):
            profile = results / f"harness-{n}.prof"
            _, walls[n] = probe(results, f"harness-{n}", SCRIPTED, n, 1, profile=profile)
            parts[n] = where_time_goes(profile)
        extra = args.harness_units - TIERS
        per_unit = (walls[args.harness_units] - walls[TIERS]) / extra
        print(f"harness: {args.harness_units} units on a scripted worker (no latency), one ledger fsync a unit, "
              f"under cProfile: {walls[args.harness_units]:.1f} s, {TIERS} units {walls[TIERS]:.1f} s; "
              f"{per_unit * 1000:.2f} ms a unit")
        grown = {name: parts[args.harness_units].get(name, 0.0) - parts[TIERS].get(name, 0.0)
                 for name in parts[args.harness_units]}
        total = sum(max(0.0, s) for s in grown.values())
        for name, seconds in sorted(grown.items(), key=lambda item: -item[1]):
            print(f"  {name:<34} {seconds / extra * 1000:8.3f} ms a unit {max(0.0, seconds) / total:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
