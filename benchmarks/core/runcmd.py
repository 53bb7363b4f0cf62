"""``preregbench run PROTOCOL [OPTIONS]`` and ``preregbench list [protocols|models|fixture-sets]``.

``run`` is the pytest form with the marker chosen for the user: ``preregbench
run res --model smollm2-135m-instruct`` runs ``pytest benchmarks/res -m cpu
--model smollm2-135m-instruct`` in this process (``-m gpu`` when ``--device
cuda`` is given) and turns the verdict into an exit code a CI job can gate on:

====  ==================================================================
0     the run is complete and every classification is a passing state
1     the run is complete and a classification is a failing state (the gate failed)
2     the run is broken or unchecked (a completeness check failed, a write
      failed, the run was interrupted, nothing was measured)
4     usage: an unknown protocol or model, a bad option value, a refused resume
====  ==================================================================

Every other argument goes to pytest unchanged, so every protocol option
(``--res-fixture-set``, ``--run-id``, ``--results-dir``, ...) works as it does
under ``pytest``.  The last two lines printed name the classification and the
report's path.  ``--scale all`` runs every scale the protocol preregisters, each
as a run of its own under one group directory, and exits with the worst
scale's code (:mod:`benchmarks.core.scales`).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from fixtures import FIXTURE_SETS
from models import available_models

from . import registry, tuning
from ._canonical import sha256_json
from .commandline import CommandParser, run_command, usage_line
from .rundir import SUITE_ROOT
from .scales import option_value
from .session import SCALE_GROUP_FORM, SCALE_GROUP_RESULT

EXIT_PASSED, EXIT_GATE_FAILED, EXIT_BROKEN, EXIT_USAGE = 0, 1, 2, 4



def protocols() -> dict[str, Path]:
    """Name -> folder of every registered protocol that can be loaded here (:mod:`benchmarks.core.registry`)."""
    found = {}
    for name in registry.names():
        protocol = registry.find(name)
        if protocol is not None:
            found[name] = protocol.folder
    return found


def _protocol_folder(name: str) -> Path | None:
    if registry.valid_name(name):
        protocol = registry.find(name)
        if protocol is not None:
            return protocol.folder
    path = Path(name)
    if (path / "prereg.toml").is_file() and (path / "conftest.py").is_file():
        return path.resolve()
    return None


class _Verdict:
    """A plugin that keeps the benchmark summary the suite's reporter built for this session, or the outcome
    of a ``--scale all`` session (whose scales are ``preregbench run`` processes of their own)."""

    def __init__(self, folder: Path, args: list[str]) -> None:
        self.summary: dict[str, Any] | None = None
        self.group: Any = None
        self._form = (folder, list(args))

    @pytest.hookimpl(wrapper=True)
    def pytest_cmdline_main(self, config: Any) -> Any:
        config.stash[SCALE_GROUP_FORM] = self._form
        try:
            return (yield)
        finally:
            self.group = config.stash.get(SCALE_GROUP_RESULT, None)

    def pytest_sessionfinish(self, session: Any) -> None:
        reporter = session.config.pluginmanager.get_plugin("benchmark-reporter")
        if reporter is not None:
            self.summary = reporter.summary()
        tuning.at_session_end()  # the process ends with this session


def exit_code(pytest_status: int, entry: dict[str, Any] | None) -> int:
    """The CLI's exit code from pytest's exit status and the protocol's summary entry (or None)."""
    if pytest_status == 4:
        return EXIT_USAGE
    if entry is not None and entry.get("shard"):  # a shard decides nothing: complete is all it can be
        return EXIT_PASSED if entry["status"] == "complete" else EXIT_BROKEN
    if entry is None or entry["status"] != "complete" or not entry["classifications"]:
        return EXIT_BROKEN
    outcomes = [c["outcome"] for c in entry["classifications"].values()]
    return EXIT_PASSED if all(o["passed"] for o in outcomes) else EXIT_GATE_FAILED


RUN_DESCRIPTION = __doc__.split("\n\n", 1)[1].rstrip()


def add_run_arguments(parser: CommandParser) -> None:
    parser.add_argument("protocol", help="a registered protocol (preregbench list), or a folder holding prereg.toml "
                        "and conftest.py")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="...",
                        help="pytest and protocol options (--model NAME, --run-id ID, --results-dir PATH, ...)")


def run_command_args(args: argparse.Namespace) -> int:
    return run([args.protocol, *args.pytest_args])


def run(argv: list[str], plugins: list[Any] | None = None) -> int:
    """``preregbench run PROTOCOL ARGS...`` (``argv`` = the protocol and the pytest arguments; ``plugins``: further
    plugin objects of the session)."""
    name, rest = argv[0], list(argv[1:])
    folder = _protocol_folder(name)
    if folder is None:
        return usage_line("preregbench run", f"{registry.unknown_message(name, registry.names())} (or give a folder "
                          "holding prereg.toml and conftest.py)")
    if "-m" not in rest and not any(a.startswith("-m") and len(a) > 2 for a in rest):
        device = option_value(rest, "--device") or ""
        rest = ["-m", "gpu" if device.startswith("cuda") else "cpu", *rest]

    # This process runs the protocol and ends with it: its C heap keeps freed memory for reuse instead of
    # returning it to the kernel after every large temporary of a forward pass (benchmarks/core/tuning.py).
    tuning.keep_freed_heap()
    verdict = _Verdict(folder, rest)
    status = int(pytest.main([str(folder), "-p", "benchmarks.core.plugin", *rest], plugins=[verdict, *(plugins or [])]))
    if verdict.group is not None:  # --scale all: every scale printed its lines, the group its summary
        return int(verdict.group.status)
    entry = None
    if verdict.summary is not None:
        entry = verdict.summary["protocols"].get(folder.name)
    code = exit_code(status, entry)
    if code == EXIT_USAGE:
        return code
    if entry is None:
        print(f"preregbench run: {folder.name}: no run was made (pytest exit status {status})", file=sys.stderr)
        return code
    labels = "; ".join(f"{c}: {e['outcome']['label']}" for c, e in entry["classifications"].items()) or "no classification"
    if entry.get("shard"):
        labels = f"shard {entry['shard']}, decided after merge"
    report = Path(entry["run_dir"]) / "report.json"
    html = report.with_name("report.html")
    shown = html if html.is_file() else report
    meaning = {EXIT_PASSED: "measured" if entry.get("shard") else "passed", EXIT_GATE_FAILED: "gate failed",
               EXIT_BROKEN: "nothing decided" if entry["status"] == "complete" else entry["status"]}[code]
    print(f"preregbench run: {folder.name} {entry['run_id']}: {labels} [{entry['status']}, {meaning}, exit {code}]")
    print(f"preregbench run: report {shown}")
    return code


LIST_CHOICES = ("protocols", "models", "fixture-sets")


def add_list_arguments(parser: CommandParser) -> None:
    parser.add_argument("what", nargs="?", choices=LIST_CHOICES, default="protocols", help="what to list "
                        "(default: protocols)")


def list_command(args: argparse.Namespace) -> int:
    return list_things(args.what)


def list_things(what: str = "protocols") -> int:
    if what == "protocols":
        for name, folder in protocols().items():
            header = tomllib.loads((folder / "prereg.toml").read_text(encoding="utf-8")).get("protocol", {})
            title = header.get("title") or ""
            print(f"{name:10s} {folder.relative_to(SUITE_ROOT) if folder.is_relative_to(SUITE_ROOT) else folder}  {title}")
    elif what == "models":
        for name, summary in sorted(available_models().items()):
            print(f"{name:40s} {summary}")
        print("also: a hub id (pinned with --revision), a local path, or openai:MODEL@BASE_URL for a served model")
    else:
        for name, build in sorted(FIXTURE_SETS.items()):
            rows = build()
            size = f"{len(rows)} rows" if hasattr(rows, "__len__") else ""
            print(f"{name:28s} {size:>10}  sha256 {sha256_json(rows)}")
    return 0


def main_run(argv: list[str] | None = None) -> int:
    return run_command("preregbench run", RUN_DESCRIPTION, add_run_arguments, run_command_args, argv)


def main_list(argv: list[str] | None = None) -> int:
    return run_command("preregbench list", "List the registered protocols, the models or the fixture sets.",
                       add_list_arguments, list_command, argv)
