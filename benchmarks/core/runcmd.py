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
(``--res-batch-size``, ``--run-id``, ``--results-dir``, ...) works as it does
under ``pytest``.  The last line printed names the classification and the
report's path.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

from .rundir import SUITE_ROOT

EXIT_PASSED, EXIT_GATE_FAILED, EXIT_BROKEN, EXIT_USAGE = 0, 1, 2, 4

RUN_USAGE = "usage: preregbench run PROTOCOL [--model NAME] [pytest and protocol options ...]"
LIST_USAGE = "usage: preregbench list [protocols|models|fixture-sets]"


def protocols(root: Path = SUITE_ROOT) -> dict[str, Path]:
    """Name -> folder of every protocol of the suite (a folder under ``benchmarks/`` with a prereg and a conftest)."""
    found = {}
    for prereg in sorted((root / "benchmarks").glob("*/prereg.toml")):
        if (prereg.parent / "conftest.py").is_file():
            found[prereg.parent.name] = prereg.parent
    return found


def _protocol_folder(name: str) -> Path | None:
    known = protocols()
    if name in known:
        return known[name]
    path = Path(name)
    if (path / "prereg.toml").is_file() and (path / "conftest.py").is_file():
        return path.resolve()
    return None


def _value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


class _Verdict:
    """A plugin that keeps the benchmark summary the suite's reporter built for this session."""

    def __init__(self) -> None:
        self.summary: dict[str, Any] | None = None

    def pytest_sessionfinish(self, session: Any) -> None:
        reporter = session.config.pluginmanager.get_plugin("benchmark-reporter")
        if reporter is not None:
            self.summary = reporter.summary()
        # The process ends with this session.  Moving every live object (torch's and transformers'
        # modules, the model) into the collector's permanent generation spares the full collections
        # still to come (pytest's unraisable-exception plugin runs two at unconfigure, the
        # interpreter one at exit) a walk over object graphs that live to the end anyway: about
        # 1 s of a RES run on SmolLM2.  Objects still die by reference count.
        gc.freeze()


def exit_code(pytest_status: int, entry: dict[str, Any] | None) -> int:
    """The CLI's exit code from pytest's exit status and the protocol's summary entry (or None)."""
    if pytest_status == 4:
        return EXIT_USAGE
    if entry is None or entry["status"] != "complete" or not entry["classifications"]:
        return EXIT_BROKEN
    outcomes = [c["outcome"] for c in entry["classifications"].values()]
    return EXIT_PASSED if all(o["passed"] for o in outcomes) else EXIT_GATE_FAILED


def run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(RUN_USAGE)
        print(__doc__.split("\n\n", 1)[1].rstrip())
        return 0 if argv else EXIT_USAGE
    name, rest = argv[0], list(argv[1:])
    folder = _protocol_folder(name)
    if folder is None:
        known = ", ".join(protocols())
        print(f"preregbench run: no protocol {name!r}; protocols: {known} (or a folder holding prereg.toml and conftest.py)",
              file=sys.stderr)
        return EXIT_USAGE
    if "-m" not in rest and not any(a.startswith("-m") and len(a) > 2 for a in rest):
        device = _value(rest, "--device") or ""
        rest = ["-m", "gpu" if device.startswith("cuda") else "cpu", *rest]

    import pytest

    from models._heap import keep_freed_heap

    # This process runs the protocol and ends with it: its C heap keeps freed memory for reuse instead of
    # returning it to the kernel after every large temporary of a forward pass (see models/_heap.py).
    keep_freed_heap()
    verdict = _Verdict()
    status = int(pytest.main([str(folder), *rest], plugins=[verdict]))
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
    report = Path(entry["run_dir"]) / "report.json"
    html = report.with_name("report.html")
    shown = html if html.is_file() else report
    meaning = {EXIT_PASSED: "passed", EXIT_GATE_FAILED: "gate failed", EXIT_BROKEN: entry["status"]}[code]
    print(f"preregbench run: {folder.name} {entry['run_id']}: {labels} [{entry['status']}, {meaning}, exit {code}]")
    print(f"preregbench run: report {shown}")
    return code


def list_things(argv: list[str]) -> int:
    what = argv[0] if argv else "protocols"
    if what in ("-h", "--help"):
        print(LIST_USAGE)
        return 0
    if len(argv) > 1 or what not in ("protocols", "models", "fixture-sets"):
        print(f"preregbench list: cannot list {' '.join(argv)!r}; {LIST_USAGE.removeprefix('usage: ')}", file=sys.stderr)
        return EXIT_USAGE
    if what == "protocols":
        import tomllib

        for name, folder in protocols().items():
            header = tomllib.loads((folder / "prereg.toml").read_text(encoding="utf-8")).get("protocol", {})
            title = header.get("title") or ""
            print(f"{name:10s} {folder.relative_to(SUITE_ROOT) if folder.is_relative_to(SUITE_ROOT) else folder}  {title}")
    elif what == "models":
        from models import available_models

        for name, summary in sorted(available_models().items()):
            print(f"{name:40s} {summary}")
        print("also: a hub id (pinned with --revision), a local path, or openai:MODEL@BASE_URL for a served model")
    else:
        from fixtures import FIXTURE_SETS

        from ._canonical import sha256_json

        for name, build in sorted(FIXTURE_SETS.items()):
            rows = build()
            size = f"{len(rows)} rows" if hasattr(rows, "__len__") else ""
            print(f"{name:28s} {size:>10}  sha256 {sha256_json(rows)}")
    return 0


def main_run(argv: list[str]) -> int:
    return run(argv)


def main_list(argv: list[str]) -> int:
    return list_things(argv)
