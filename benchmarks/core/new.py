"""``preregbench new NAME``: write a runnable protocol skeleton.

Usage: ``preregbench new NAME [--into DIR | --package DIR]`` (also
``python -m benchmarks.core.new``).

The skeleton is a complete protocol on the core shape: a prereg with one
ordered classification, a :class:`~benchmarks.core.protocol.Protocol`
subclass with a toy two-choice task, a stdlib rescorer, a self-check that
scripted models reach each outcome (``tests/``), and a README with the
preregistration checklist and changelog.  ``docs/writing-a-protocol.md``
walks from it to a real protocol.

Where it goes:

* default: ``benchmarks/NAME/`` of the suite's checkout (run from inside it);
* ``--into DIR``: ``DIR/NAME/``, a protocol folder inside a checkout of your own
  (``pytest DIR/NAME -m cpu`` with the suite's plugin loaded);
* ``--package DIR``: a distribution of its own in ``DIR`` (``pyproject.toml``
  and the package ``NAME/``) that registers the protocol in the entry-point
  group ``preregbench.protocols``; once installed (``pip install -e DIR``),
  ``preregbench run NAME`` and every other command find it by name.

A refused name or target is one line and exit status 4, before anything is written.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import keyword
import os
import re
import sys
import zlib
from pathlib import Path
from string import Template

from . import registry
from .commandline import CommandParser, run_command, usage_line
from .errors import PreregbenchError
from .protocol import UsageProblem
from .registry import RegistryError

SKELETON = Path(__file__).resolve().parent / "skeleton"
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
#: The longest protocol name: it names a folder, a package, a results sub-folder and pytest options.
MAX_NAME = 40
#: Names a protocol cannot take: the suite's own packages and folders, and pytest's.
RESERVED = frozenset({"core", "test", "tests", "benchmarks", "fixtures", "models", "worlds", "snapshots", "scripts",
                      "docs", "results", "conftest", "canonical_hash", "pytest", "preregbench"})

#: Skeleton file -> the name it is written under.
FILES = {
    "__init__.py.tmpl": "__init__.py",
    "prereg.toml.tmpl": "prereg.toml",
    "protocol.py.tmpl": "protocol.py",
    "conftest.py.tmpl": "conftest.py",
    "rescore.py.tmpl": "rescore.py",
    "tests_init.py.tmpl": "tests/__init__.py",
    "test_protocol_runs.py.tmpl": "tests/test_protocol_runs.py",
    "README.md.tmpl": "README.md",
}
PACKAGE_FILE = "pyproject.toml.tmpl"


class ScaffoldError(PreregbenchError, ValueError):
    """The protocol cannot be written as asked; the message says what to do instead."""


def _suite_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / "pyproject.toml").is_file() and (folder / "benchmarks" / "core").is_dir():
            return folder
    raise ScaffoldError(f"{start} is not inside a preregbench checkout (no pyproject.toml beside benchmarks/core); "
                        "run this from the checkout or pass --into DIR")


def check_name(name: str) -> str:
    """``name`` when a protocol may take it; :class:`ScaffoldError` (one line) otherwise."""
    shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
    if not _NAME.match(name):
        raise ScaffoldError(f"protocol name {shown} must be a lowercase identifier: a letter, then letters, digits "
                            "and '_' (no spaces, newlines or path separators)")
    if len(name) > MAX_NAME:
        raise ScaffoldError(f"protocol name {shown} is longer than {MAX_NAME} characters; choose a shorter one")
    if keyword.iskeyword(name) or name in RESERVED or name in sys.stdlib_module_names:
        raise ScaffoldError(f"protocol name {shown} is taken (a Python keyword, a module of Python's standard "
                            "library, or a name of the suite); choose another")
    return name


def _free(folder: Path) -> None:
    if os.path.lexists(folder):
        what = "a symbolic link" if folder.is_symlink() else "a folder" if folder.is_dir() else "a file"
        raise ScaffoldError(f"{folder} already exists ({what}); choose another name or remove it first")


def scaffold(name: str, into: str | Path | None = None, today: _dt.date | None = None) -> Path:
    """Write the skeleton of protocol ``name`` into ``into/name`` (default ``<checkout>/benchmarks/name``)."""
    folder = _target(name, into)
    _write(folder, name, today)
    return folder


def _target(name: str, into: str | Path | None) -> Path:
    """The folder a new protocol ``name`` goes to, its name checked and the folder free (one-line refusals)."""
    check_name(name)
    parent = Path(into).absolute() if into is not None else _suite_root(Path.cwd().resolve()) / "benchmarks"
    if not parent.is_dir():
        raise ScaffoldError(f"{parent} is not a folder; create it or pass another --into")
    folder = parent.resolve() / name
    _free(folder)
    return folder


def scaffold_from_import(name: str, log: str | Path, into: str | Path | None = None, fmt: str | None = None,
                         task: str | None = None, importer: str = "imported") -> Path:
    """Write protocol ``name`` over imported samples into ``into/name``, its prereg drawn from the log ``log`` by
    the protocol ``importer`` (:meth:`Protocol.import_scaffold`); the log is read before anything is written."""
    folder = _target(name, into)
    try:
        shown = folder.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        shown = folder.as_posix()
    try:
        files = registry.get(importer).import_scaffold(name, log, shown, fmt=fmt, task=task)
    except (RegistryError, UsageProblem) as exc:
        raise ScaffoldError(str(exc)) from None
    try:
        folder.mkdir()
        for relative, text in sorted(files.items()):
            (folder / relative).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ScaffoldError(f"{folder}: cannot be written ({exc.strerror or exc})") from None
    return folder


def scaffold_package(name: str, root: str | Path, today: _dt.date | None = None) -> Path:
    """Write a distribution of its own in ``root`` holding protocol ``name`` and registering it by entry point;
    returns ``root``."""
    check_name(name)
    root = Path(root).absolute()
    if os.path.lexists(root) and (root.is_symlink() or not root.is_dir() or any(root.iterdir())):
        raise ScaffoldError(f"{root} exists and is not an empty folder; give a new folder for the package")
    if not root.parent.is_dir():
        raise ScaffoldError(f"{root.parent} is not a folder; create it first")
    root.mkdir(exist_ok=True)
    values = _write(root / name, name, today)
    text = Template((SKELETON / PACKAGE_FILE).read_text(encoding="utf-8")).substitute(values)
    (root / "pyproject.toml").write_text(text, encoding="utf-8")
    return root


def _write(folder: Path, name: str, today: _dt.date | None) -> dict[str, str]:
    today = today or _dt.date.today()
    try:
        shown = folder.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        shown = folder.as_posix()
    values = {
        "name": name,
        "title": f"{name.replace('_', ' ').capitalize()}: which of two numbers is larger",
        "classname": "".join(part.capitalize() for part in name.split("_")) + "Protocol",
        "date": today.isoformat(),
        "seed": str(int(today.strftime("%Y%m%d")) + zlib.crc32(name.encode()) % 1000),
        "folder": shown,
    }
    try:
        folder.mkdir()
        (folder / "tests").mkdir()
        for source, target in FILES.items():
            text = Template((SKELETON / source).read_text(encoding="utf-8")).substitute(values)
            (folder / target).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ScaffoldError(f"{folder}: cannot be written ({exc.strerror or exc})") from None
    return values


DESCRIPTION = "Write a runnable protocol skeleton (a toy two-choice task on the core shape)."


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("name", help=f"the protocol's name (a lowercase identifier of at most {MAX_NAME} characters)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--into", default=None, metavar="DIR",
                       help="write DIR/NAME/, a protocol folder in a checkout of yours (default: <checkout>/benchmarks)")
    where.add_argument("--package", default=None, metavar="DIR",
                       help="write a distribution of its own in DIR that registers the protocol by entry point "
                            "(install it with pip install -e DIR)")
    parser.add_argument("--from-import", default=None, metavar="LOG", dest="from_import",
                        help="write a protocol over imported samples instead, its prereg drawn from LOG (an inspect_ai "
                             ".eval/.json log or lm-evaluation-harness output); not with --package")
    parser.add_argument("--format", default=None, choices=("inspect", "lm-eval"),
                        help="the format of --from-import LOG (default: from the path)")
    parser.add_argument("--task", default=None, help="the task of a --from-import log of several tasks")


def command(args: argparse.Namespace) -> int:
    if args.from_import is not None:
        if args.package is not None:
            return usage_line("preregbench new", "--from-import writes a protocol folder; use it with --into DIR or "
                                                 "alone, not with --package")
        try:
            folder = scaffold_from_import(args.name, args.from_import, args.into, args.format, args.task)
        except ScaffoldError as exc:
            return usage_line("preregbench new", str(exc))
        print(f"wrote {folder}/: prereg.toml (drawn from {args.from_import}; set its thresholds before freezing), "
              "protocol.py, conftest.py, rescore.py, README.md")
        print(f"next: preregbench import FORMAT LOG --out IMPORT_DIR   then: pytest {folder} -m cpu "
              f"--{args.name}-source IMPORT_DIR")
        return 0
    try:
        if args.package is not None:
            folder = scaffold_package(args.name, args.package) / args.name
        else:
            folder = scaffold(args.name, args.into)
    except ScaffoldError as exc:
        return usage_line("preregbench new", str(exc))
    print(f"wrote {folder}/: {', '.join(FILES.values())}")
    if args.package is not None:
        print(f"next: pip install -e {args.package}   then: preregbench run {args.name} --model scripted-oracle")
    else:
        print(f"next: pytest {folder} -m cpu --model scripted-oracle   (then read docs/writing-a-protocol.md)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("preregbench new", DESCRIPTION, add_arguments, command, argv)


if __name__ == "__main__":
    raise SystemExit(main())
