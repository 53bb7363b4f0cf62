"""``preregbench report``: re-render a run's reports, a protocol's round report, or a results folder's index."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..commandline import USAGE_EXIT, CommandParser, run_command, usage_line
from ..errors import one_line
from ._view import ReportError
from ._write import FORMATS, write_index, write_reports, write_round_reports

USAGE = ("usage: preregbench report RUN_DIR|ROUND_DIR [--format html|md|both]\n"
         "       preregbench report --index RESULTS_DIR")
DESCRIPTION = ("Re-render report.html and report.md of a finished run (RUN_DIR), a protocol's report over a round "
               "of runs (ROUND_DIR), or the index.html of a results folder (--index RESULTS_DIR).")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("target", metavar="DIR", help="RUN_DIR, ROUND_DIR, or with --index the RESULTS_DIR")
    parser.add_argument("--format", dest="format", choices=FORMATS, default="both",
                        help="which reports to write (default: both)")
    parser.add_argument("--index", action="store_true", help="write DIR/index.html listing every run under DIR")


def command(args: argparse.Namespace) -> int:
    try:
        if args.index:
            print(write_index(args.target))
        else:
            for path in write_round_reports(args.target, args.format) or write_reports(args.target, args.format):
                print(path)
    except ReportError as exc:
        return usage_line("preregbench report", one_line(exc))
    except OSError as exc:
        print(f"preregbench report: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command("preregbench report", DESCRIPTION, add_arguments, command, argv)


__all__ = ["DESCRIPTION", "USAGE", "USAGE_EXIT", "add_arguments", "command", "main"]
