"""The ``preregbench`` command: one parser with a subcommand each, a thin layer over the pytest forms.

``preregbench --help`` lists the subcommands; ``preregbench SUBCOMMAND --help``
describes one.  A usage error of any subcommand (an unknown subcommand, a
missing or bad argument) is one line on stderr and exit status 4.
"""

from __future__ import annotations

import sys
from typing import Sequence

from . import completed, compare, importcmd, merge, new, runcmd, verify
from .commandline import CommandParser, UsageExit, usage_line
from .registry import RegistryError
from .report import _cli as report_cli

#: name -> (one-line help, description, add_arguments, command)
COMMANDS = {
    "run": ("run a protocol: PROTOCOL [--model NAME] [pytest options]; exit 0 pass, 1 gate failed, 2 broken, 4 usage",
            runcmd.RUN_DESCRIPTION, runcmd.add_run_arguments, runcmd.run_command_args),
    "list": ("list protocols, models or fixture-sets", "List the registered protocols, the models or the fixture sets.",
             runcmd.add_list_arguments, runcmd.list_command),
    "merge": ("join the shards of one run (--shard K/N) into one run directory and decide it: OUT SHARD_DIR...",
              merge.DESCRIPTION, merge.add_arguments, merge.command),
    "compare": ("compare two runs of one protocol on the same fixtures, unit by unit: RUN_A RUN_B",
                compare.DESCRIPTION, compare.add_arguments, compare.command),
    "verify": ("check a finished run: VERIFIED 0, EXPLORATORY 1, TAMPERED/INCONSISTENT 2, OVER_LIMIT 3, usage 4: "
               "RUN_DIR",
               verify.DESCRIPTION, verify.add_arguments, verify.command),
    "completed": ("exit 0 only for a complete run that verify finds VERIFIED: RESULTS_DIR/PROTOCOL [RUN_ID]",
                  completed.DESCRIPTION, completed.add_arguments, completed.command),
    "report": ("re-render a run's report: RUN_DIR [--format html|md|both], a protocol's round report: ROUND_DIR, "
               "or --index RESULTS_DIR", report_cli.DESCRIPTION, report_cli.add_arguments, report_cli.command),
    "import": ("import an inspect_ai log or lm-evaluation-harness output into an import directory: FORMAT SOURCE "
               "--out DIR", importcmd.DESCRIPTION, importcmd.add_arguments, importcmd.command),
    "new": ("write a runnable protocol skeleton: NAME [--into DIR | --package DIR]", new.DESCRIPTION,
            new.add_arguments, new.command),
}


def build_parser() -> CommandParser:
    parser = CommandParser(prog="preregbench", description="Run and check preregistered evaluation protocols (a thin "
                           "layer over the pytest forms, which stay the primary interface).")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for name, (summary, description, add_arguments, command) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary, description=description)
        add_arguments(sub)
        sub.set_defaults(handler=command)
    return parser


def usage() -> str:
    return build_parser().format_help().rstrip()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args:
        print(f"preregbench: give a COMMAND: {', '.join(COMMANDS)} (see preregbench --help)", file=sys.stderr)
        return 4
    try:
        parsed = parser.parse_args(args)
        return parsed.handler(parsed)
    except UsageExit as exc:
        if exc.line:
            print(exc.line, file=sys.stderr)
        return exc.status
    except RegistryError as exc:  # the installed protocols themselves are in conflict
        return usage_line("preregbench", str(exc))


if __name__ == "__main__":
    raise SystemExit(main())
