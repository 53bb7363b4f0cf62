"""``preregbench import FORMAT SOURCE --out DIR`` (also ``python -m benchmarks.core.importcmd``): an existing
evaluation's log into an import directory a protocol run decides.

The formats come from the protocol that imports them (:meth:`Protocol.importers`,
found through the registry; default the suite's ``imported`` protocol):
``inspect`` (an inspect_ai ``.eval`` or ``.json`` log) and ``lm-eval``
(lm-evaluation-harness ``--output_path`` output with ``--log_samples``).  A
log that cannot be imported (not of the format, truncated or corrupted, of
several tasks where ``--task`` chooses none, a sample recorded twice, samples
that disagree with the log's own header) is one line naming the file and the
problem, exit status 4, and nothing is written.  On success the command
prints what was imported and the command that decides it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import registry
from .commandline import CommandParser, run_command, usage_line
from .errors import PreregbenchError
from .registry import RegistryError

EXIT_OK = 0
PROG = "preregbench import"

DESCRIPTION = ("Import an existing evaluation's log (inspect_ai: a .eval or .json log; lm-evaluation-harness: its "
               "--output_path folder or results_*.json with the --log_samples JSONL) into an import directory: one "
               "line per sample and epoch, with the log's provenance and sha256. Decide it with preregbench run "
               "PROTOCOL --imported-source DIR. Exit 0, 4 when the log cannot be imported (one line naming the file).")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("format", metavar="FORMAT", help="the log's format: inspect or lm-eval")
    parser.add_argument("source", type=Path, metavar="SOURCE", help="the log file (inspect) or output folder (lm-eval)")
    parser.add_argument("--out", type=Path, required=True, help="the import directory to write (new or empty)")
    parser.add_argument("--task", default=None, help="the task to import from a log of several tasks")
    parser.add_argument("--protocol", default="imported", help="the protocol whose importers read the log "
                        "(default: imported)")


def command(args: argparse.Namespace) -> int:
    try:
        protocol = registry.get(args.protocol)
    except RegistryError as exc:
        return usage_line(PROG, str(exc))
    importers = dict(protocol.importers())
    if args.format not in importers:
        known = ", ".join(sorted(importers)) or "none"
        return usage_line(PROG, f"protocol {protocol.name!r} imports no format {args.format!r}; formats: {known}")
    try:
        header = importers[args.format](args.source, args.out, task=args.task)
    except PreregbenchError as exc:
        return usage_line(PROG, str(exc))
    print(f"imported {header.get('units')} units ({header.get('samples')} samples, {header.get('errored')} errored) "
          f"of task {header.get('task')!r}, model {header.get('model')}, from {args.source} "
          f"(sha256 {str(header.get('source', {}).get('sha256'))[:12]}) into {args.out}")
    print(f"decide it: preregbench run {protocol.name} --{protocol.name}-source {args.out}   (a protocol folder of "
          f"yours drafted by preregbench new NAME --from-import: --NAME-source {args.out})")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_command(PROG, DESCRIPTION, add_arguments, command, argv)


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["DESCRIPTION", "add_arguments", "command", "main"]
