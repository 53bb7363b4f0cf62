"""What every ``preregbench`` subcommand shares: one argument parser class, one usage exit status.

A command module (``runcmd``, ``verify``, ``compare``, ``report``, ``new``,
``completed``) defines ``add_arguments(parser)`` and ``command(args) -> int``;
:mod:`benchmarks.core.cli` puts them together as subcommands of one parser,
and the module's own ``main(argv)`` (for ``python -m``) runs the same two
through :func:`run_command`.  Either way a usage error is one line on stderr
naming the command and what to do, exit status 4, and ``--help`` exits 0.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, NoReturn, Sequence

#: The exit status of every usage error (pytest's, for the same reason: nothing was run).
USAGE_EXIT = 4


class UsageExit(Exception):
    """Raised by :class:`CommandParser` instead of exiting: ``status`` and the one line to print (if any)."""

    def __init__(self, status: int, line: str | None = None):
        super().__init__(line or "")
        self.status = status
        self.line = line


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit status 4, raised as :class:`UsageExit`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        raise UsageExit(USAGE_EXIT, f"{self.prog}: {line} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, end="" if message.endswith("\n") else "\n", file=sys.stderr)
        raise UsageExit(status)


def usage_line(prog: str, message: str) -> int:
    """Print the one line of a usage error found after parsing; the usage exit status."""
    print(f"{prog}: {' '.join(str(message).split())}", file=sys.stderr)
    return USAGE_EXIT


def run_command(prog: str, description: str, add_arguments: Callable[[CommandParser], None],
                command: Callable[[argparse.Namespace], int], argv: Sequence[str] | None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) for one command and run it; a usage error is one line, exit 4."""
    parser = CommandParser(prog=prog, description=description)
    add_arguments(parser)
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageExit as exc:
        if exc.line:
            print(exc.line, file=sys.stderr)
        return exc.status
    return command(args)


__all__ = ["CommandParser", "USAGE_EXIT", "UsageExit", "run_command", "usage_line"]
