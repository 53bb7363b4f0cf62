"""The ``preregbench`` command: a thin layer over the pytest forms, which stay the primary interface.

``preregbench new NAME`` writes a protocol skeleton (:mod:`benchmarks.core.new`).
"""

from __future__ import annotations

import sys

COMMANDS = {"new": "benchmarks.core.new", "report": "benchmarks.core.report"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help") or args[0] not in COMMANDS:
        known = ", ".join(sorted(COMMANDS))
        if args and args[0] not in ("-h", "--help"):
            print(f"preregbench: unknown command {args[0]!r}; commands: {known}", file=sys.stderr)
            return 2
        print(f"usage: preregbench COMMAND ...\ncommands: {known}\n  new NAME   write a runnable protocol skeleton\n"
              "  report RUN_DIR [--format html|md|both]   render a run's report.html / report.md\n"
              "  report --index RESULTS_DIR               render index.html of every run under RESULTS_DIR")
        return 0
    import importlib

    return importlib.import_module(COMMANDS[args[0]]).main(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
