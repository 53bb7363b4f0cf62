"""Exit 0 only when a run is complete and ``preregbench verify`` says VERIFIED.

Usage: ``preregbench completed RESULTS_DIR/PROTOCOL [RUN_ID]`` (also ``python -m benchmarks.core.completed``).
Without a run id the newest run directory is read.  The benchmark workflow
commits result artifacts only when this exits 0: the run finished every
technical-completeness check (its ``report.json``, :func:`run_status`) and
:mod:`benchmarks.core.verify` finds it VERIFIED (manifest, hashes, the
repository at the recorded commit, rebuilt fixtures, the rescorer, a clean
tree, an immutable model revision, no deviation).  An incomplete run is one
line (a report that is a link, not UTF-8, not JSON or not of the report's
shape names the file and the byte, line or key); a complete one prints
verify's lines.  Every other outcome is exit status 1; a usage error is one line, exit status 4.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._canonical import FileReadError, read_json_file
from .commandline import CommandParser, run_command
from .rundir import REPORT_FILE
from .verify import VERIFIED, VerifyUsageError, verify


def _verdict(report: Any, protocol: str) -> tuple[dict[str, Any] | None, str | None]:
    """The protocol's entry of a report and the shape problem when it has none."""
    benchmark = report.get("benchmark") if isinstance(report, dict) else None
    protocols = benchmark.get("protocols") if isinstance(benchmark, dict) else None
    if not isinstance(protocols, dict):
        return None, "holds no 'benchmark.protocols' object; it is not a preregbench report"
    entry = protocols.get(protocol)
    if entry is None:
        return None, f"no verdict for protocol {protocol!r}"
    if not isinstance(entry, dict) or not isinstance(entry.get("status"), str) \
            or not isinstance(entry.get("problems", []), list) or not isinstance(entry.get("classifications", {}), dict):
        return None, f"the verdict of {protocol!r} is not of the report's shape (status, problems, classifications)"
    return entry, None


def run_status(run_dir: Path) -> tuple[bool, str]:
    report_file = run_dir / REPORT_FILE
    if not os.path.lexists(report_file):
        return False, f"{run_dir}: no {REPORT_FILE}; the session did not finish"
    try:
        report = read_json_file(report_file)
    except FileReadError as exc:
        return False, str(exc)
    except OSError as exc:
        return False, f"{report_file}: cannot be read ({exc.strerror or exc})"
    entry, problem = _verdict(report, run_dir.parent.name)
    if entry is None:
        return False, f"{report_file}: {problem}"
    if entry["status"] != "complete":
        problems = "; ".join(map(str, entry.get("problems", []))) or "no completeness check ran"
        return False, f"{run_dir.name}: run is {entry['status']}: {problems}"
    try:
        labels = ", ".join(f"{name} = {c['outcome']['label']}" for name, c in entry.get("classifications", {}).items())
    except (TypeError, KeyError) as exc:
        return False, f"{report_file}: a classification of the verdict has no outcome label ({exc!r})"
    return True, f"{run_dir.name}: complete; {labels or 'no classification'}"


DESCRIPTION = ("Exit 0 only when a run is complete and preregbench verify says VERIFIED (the newest run of "
               "RESULTS_DIR/PROTOCOL, or RUN_ID); 1 otherwise, 4 on a usage error.")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("protocol_dir", type=Path, metavar="RESULTS_DIR/PROTOCOL", help="a protocol's results folder")
    parser.add_argument("run_id", nargs="?", default=None, help="the run to check (default: the newest)")


def command(args: argparse.Namespace) -> int:
    protocol_dir = args.protocol_dir
    if args.run_id is not None:
        run_dir = protocol_dir / args.run_id
    else:
        runs = sorted(p for p in protocol_dir.glob("*") if p.is_dir() and not p.is_symlink())
        if not runs:
            print(f"{protocol_dir}: no run directories", file=sys.stderr)
            return 1
        run_dir = runs[-1]
    ok, message = run_status(run_dir)
    print(message)
    if not ok:
        return 1
    try:
        outcome = verify(run_dir)
    except VerifyUsageError as exc:
        print(f"not verified: {exc}")
        return 1
    for finding in outcome.findings:
        print(finding.line())
    print(outcome.final_line())
    return 0 if outcome.word == VERIFIED else 1


def main(argv: list[str] | None = None) -> int:
    return run_command("preregbench completed", DESCRIPTION, add_arguments, command, argv)


if __name__ == "__main__":
    raise SystemExit(main())
