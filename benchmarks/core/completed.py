"""Exit 0 only when a run finished every technical-completeness check.

Usage: ``python -m benchmarks.core.completed RESULTS_DIR/PROTOCOL [RUN_ID]``.
Without a run id the newest run directory is read.  The benchmark workflow
commits result artifacts only when this exits 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .rundir import REPORT_FILE


def run_status(run_dir: Path) -> tuple[bool, str]:
    report_file = run_dir / REPORT_FILE
    if not report_file.is_file():
        return False, f"{run_dir}: no {REPORT_FILE}; the session did not finish"
    report = json.loads(report_file.read_text(encoding="utf-8"))
    protocol = run_dir.parent.name
    entry = report.get("benchmark", {}).get("protocols", {}).get(protocol)
    if entry is None:
        return False, f"{report_file}: no verdict for protocol {protocol!r}"
    if entry["status"] != "complete":
        problems = "; ".join(entry["problems"]) or "no completeness check ran"
        return False, f"{run_dir.name}: run is {entry['status']}: {problems}"
    labels = ", ".join(f"{name} = {c['outcome']['label']}" for name, c in entry["classifications"].items())
    return True, f"{run_dir.name}: complete; {labels or 'no classification'}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    protocol_dir = Path(args[0])
    if len(args) == 2:
        run_dir = protocol_dir / args[1]
    else:
        runs = sorted(p for p in protocol_dir.glob("*") if p.is_dir())
        if not runs:
            print(f"{protocol_dir}: no run directories", file=sys.stderr)
            return 1
        run_dir = runs[-1]
    ok, message = run_status(run_dir)
    print(message)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
