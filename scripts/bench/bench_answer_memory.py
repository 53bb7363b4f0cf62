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
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIERS = 5


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, body: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.body = body


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(json.dumps({"object": "list", "data": [{"id": "verbose", "object": "model"}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(self.server.body)


def completion(mib: float) -> bytes:
    text = "x" * int(mib * 1024 * 1024) + "\nDECISION: APPROVE"
    return json.dumps({"id": "c", "object": "chat.completion", "model": "verbose",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def measure(checkout: Path, argv: list[str]) -> tuple[int, float, float]:
    """(exit status, seconds, peak RSS in MiB) of ``python ARGV`` run from ``checkout``."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, *argv], cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(child.pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - start, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answer-mib", type=float, default=3.9)
    parser.add_argument("--units", type=int, nargs="+", default=[30, 300])
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to measure (repeatable)")
    args = parser.parse_args()
    if any(n < TIERS or n % TIERS for n in args.units):
        parser.error(f"--units: each size must be a positive multiple of {TIERS} (units per tier x 5 tiers)")
    body = completion(args.answer_mib)
    server = _Server(body)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    print(f"answer body: {len(body) / 2**20:.2f} MiB per request; server {url}")
    print(f"{'checkout':<28} {'units':>5} {'command':<8} {'exit':>4} {'seconds':>8} {'peak RSS MiB':>13} "
          f"{'ledger MiB':>11}")
    try:
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
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
