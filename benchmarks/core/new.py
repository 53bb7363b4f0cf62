"""``preregbench new NAME``: write a runnable protocol skeleton under ``benchmarks/NAME/``.

Usage: ``preregbench new NAME [--into DIR]`` or ``python -m benchmarks.core.new NAME [--into DIR]``.

The skeleton is a complete protocol on the core shape: a prereg with one
ordered classification, a :class:`~benchmarks.core.protocol.Protocol`
subclass with a toy two-choice task, a stdlib rescorer, a self-check that
scripted models reach each outcome, and a README with the preregistration
checklist and changelog.  ``benchmarks/core/WRITING_A_PROTOCOL.md`` walks
from it to a real protocol.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import keyword
import re
import sys
import zlib
from pathlib import Path
from string import Template

SKELETON = Path(__file__).resolve().parent / "skeleton"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

#: Skeleton file -> the name it is written under.
FILES = {
    "__init__.py.tmpl": "__init__.py",
    "prereg.toml.tmpl": "prereg.toml",
    "protocol.py.tmpl": "protocol.py",
    "conftest.py.tmpl": "conftest.py",
    "rescore.py.tmpl": "rescore.py",
    "test_protocol_runs.py.tmpl": "test_protocol_runs.py",
    "README.md.tmpl": "README.md",
}


class ScaffoldError(ValueError):
    """The protocol cannot be written as asked; the message says what to do instead."""


def _suite_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / "pyproject.toml").is_file() and (folder / "benchmarks" / "core").is_dir():
            return folder
    raise ScaffoldError(f"{start} is not inside a preregbench checkout (no pyproject.toml beside benchmarks/core); "
                        "run this from the checkout or pass --into DIR")


def scaffold(name: str, into: str | Path | None = None, today: _dt.date | None = None) -> Path:
    """Write the skeleton of protocol ``name`` into ``into/name`` (default ``<checkout>/benchmarks/name``)."""
    if not _NAME.match(name) or keyword.iskeyword(name) or name in {"core", "test", "tests"}:
        raise ScaffoldError(f"protocol name {name!r} must be a lowercase identifier (letters, digits, '_'), "
                            "not a Python keyword and not core/test/tests")
    parent = Path(into).resolve() if into is not None else _suite_root(Path.cwd().resolve()) / "benchmarks"
    folder = parent / name
    if folder.exists():
        raise ScaffoldError(f"{folder} already exists; choose another name or remove it first")
    if not parent.is_dir():
        raise ScaffoldError(f"{parent} is not a folder; create it or pass another --into")
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
    folder.mkdir()
    for source, target in FILES.items():
        text = Template((SKELETON / source).read_text(encoding="utf-8")).substitute(values)
        (folder / target).write_text(text, encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="preregbench new", description="Write a runnable protocol skeleton.")
    parser.add_argument("name", help="the protocol's folder name (a lowercase identifier)")
    parser.add_argument("--into", default=None, help="folder to create NAME/ in (default: <checkout>/benchmarks)")
    args = parser.parse_args(argv)
    try:
        folder = scaffold(args.name, args.into)
    except ScaffoldError as exc:
        print(f"preregbench new: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {folder}/: {', '.join(FILES.values())}")
    print(f"next: pytest {folder} -m cpu --model scripted-oracle   (then read benchmarks/core/WRITING_A_PROTOCOL.md)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
