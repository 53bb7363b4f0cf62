"""The ``preregbench`` command: a thin layer over the pytest forms, which stay the primary interface.

Each command lives in its own module and is imported only when it is used.
"""

from __future__ import annotations

import importlib
import sys

#: command -> (module, function, one-line description)
COMMANDS = {
    "run": ("benchmarks.core.runcmd", "main_run", "run a protocol: PROTOCOL [--model NAME] [pytest options]; exit 0 pass, 1 gate failed, 2 broken, 4 usage"),
    "list": ("benchmarks.core.runcmd", "main_list", "list protocols, models or fixture-sets"),
    "compare": ("benchmarks.core.compare", "main", "compare two runs of one protocol on the same fixtures, unit by unit: RUN_A RUN_B"),
    "verify": ("benchmarks.core.verify", "main", "check a finished run: VERIFIED 0, EXPLORATORY 1, TAMPERED/INCONSISTENT 2, usage 4: RUN_DIR"),
    "report": ("benchmarks.core.report", "main", "re-render a run's report: RUN_DIR [--format html|md|both], a protocol's round report: ROUND_DIR, or --index RESULTS_DIR"),
    "new": ("benchmarks.core.new", "main", "write a runnable protocol skeleton: NAME"),
}


def usage() -> str:
    lines = ["usage: preregbench COMMAND [ARGS ...]", "commands:"]
    lines += [f"  {name:8s} {description}" for name, (_, _, description) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 4
    if args[0] not in COMMANDS:
        print(f"preregbench: unknown command {args[0]!r}; commands: {', '.join(COMMANDS)} (preregbench --help)",
              file=sys.stderr)
        return 4
    module, function, _ = COMMANDS[args[0]]
    return getattr(importlib.import_module(module), function)(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
