"""Peak memory of verify, compare and report on a run whose ledger holds many records.

    python scripts/bench/bench_big_ledger.py RUN_DIR [--records 1000000] [--checkout PATH ...]

RUN_DIR is a finished RES run (``preregbench run res --model scripted-oracle``).  The script copies it into a
temporary folder, replaces its ``records.jsonl`` by ``--records`` lines made from its first record (unique
item ids, the generated text padded so that a line is about ``--line-bytes`` long), makes ``manifest.json``
agree, and then runs, each in a fresh process, ``verify`` on the copy, ``compare`` of the copy with RUN_DIR and
``report --format md`` of the copy.  It prints each command's exit status, wall time and peak resident memory
(``ru_maxrss`` of the child), once per ``--checkout`` (default: this one), so that two checkouts are measured
on the same files in the same run.  The copy is deleted at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(source: Path, target: Path, records: int, line_bytes: int) -> int:
    shutil.copytree(source, target)
    ledger = target / "records.jsonl"
    first = json.loads(ledger.read_text(encoding="utf-8").splitlines()[0])
    base = len(json.dumps(first, sort_keys=True, separators=(",", ":")))
    first["generation"] = first["generation"] + "x" * max(0, line_bytes - base - 30)
    with ledger.open("w", encoding="utf-8") as handle:
        for index in range(records):
            first["item_id"] = f"{first['condition']}:{index}"
            first["index"] = index
            handle.write(json.dumps(first, sort_keys=True, separators=(",", ":")) + "\n")
    data_size, digest = 0, hashlib.sha256()
    with ledger.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
            data_size += len(chunk)
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        if entry["path"] == "records.jsonl":
            entry.update(size=data_size, sha256=digest.hexdigest())
    (target / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return data_size


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
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--line-bytes", type=int, default=1_650)
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to measure (repeatable)")
    args = parser.parse_args()
    checkouts = args.checkout or [ROOT]
    with tempfile.TemporaryDirectory(prefix="bench-big-ledger-") as scratch:
        big = Path(scratch) / "res" / args.run_dir.name
        size = build(args.run_dir.resolve(), big, args.records, args.line_bytes)
        print(f"ledger: {args.records} records, {size / 1e9:.2f} GB ({size / args.records:.0f} bytes a line)")
        commands = {
            "verify": ["-m", "benchmarks.core.verify", str(big)],
            "compare": ["-m", "benchmarks.core.compare", str(big), str(args.run_dir.resolve()), "--json",
                        str(Path(scratch) / "compare.json")],
            "report": ["-m", "benchmarks.core.report", str(big), "--format", "md"],
        }
        print(f"{'checkout':<40} {'command':<8} {'exit':>4} {'seconds':>8} {'peak RSS MiB':>13}")
        for checkout in checkouts:
            for name, argv in commands.items():
                status, seconds, peak = measure(checkout.resolve(), argv)
                print(f"{str(checkout):<40} {name:<8} {status:>4} {seconds:>8.1f} {peak:>13.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
