"""Helpers for a protocol's end-to-end self-checks through ``pytester``.

A self-check runs the protocol's own tests in a subprocess (``-m cpu`` on a
scripted or bundled model), reads the run's ``report.json`` and asserts the
outcome pattern of the rule tests, the completeness tests and the verdict of
the protocol's independent rescorer.  These helpers hold what every
protocol's ``test_protocol_runs.py`` would otherwise repeat.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from .rules import Classification
from .rundir import SUITE_ROOT

__all__ = ["expected_pattern", "outcomes_by_name", "project_root", "proportion_fields", "read_report", "import_run_libraries",
           "run_in_process", "run_protocol", "run_rescorer"]


def project_root(folder: Path) -> Path:
    """The nearest folder at or above ``folder`` with a ``pyproject.toml`` (the suite's root for its protocols)."""
    folder = Path(folder).resolve()
    return next((p for p in [folder, *folder.parents] if (p / "pyproject.toml").is_file()), SUITE_ROOT)


def _protocol_command(protocol_dir: Path, results: Path, *args: str) -> list[str]:
    return [str(protocol_dir), "-m", "cpu", f"--rootdir={project_root(protocol_dir)}", f"--results-dir={results}",
            "-p", "no:cacheprovider", "-p", "no:randomly", *args]


def run_protocol(pytester: pytest.Pytester, protocol_dir: Path, results: Path, *args: str,
                 timeout: float | None = None, in_process: bool = False) -> pytest.RunResult:
    """Run the tests in ``protocol_dir`` marked ``cpu`` in a fresh pytest process, results under ``results``.

    ``in_process=True`` runs the same command in a fresh pytest session of this process instead
    (:func:`run_in_process`), for checks of what a run writes and reports rather than of how a
    process starts, stops or is kept apart from another one.
    """
    command = _protocol_command(protocol_dir, results, *args)
    if in_process:
        return run_in_process(pytester, *command)
    return pytester.runpytest_subprocess(*command, timeout=timeout)


def run_protocol_once(protocol_dir: Path, results: Path, *args: str,
                      timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The command of :func:`run_protocol` in a fresh pytest process, without a ``pytester``: for a module- or
    session-scoped fixture whose one run several tests read (each test changes only copies of it).  The
    environment is this process's without pytest's own variables (``PYTEST_XDIST_WORKER`` and the like); it runs
    in the folder holding ``results``, as a ``pytester`` run runs in its own temporary folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    results.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "pytest", *_protocol_command(protocol_dir, results, *args)],
                          cwd=results.parent, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _is_test_module(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf == "conftest" or leaf.startswith("test_") or name.endswith("_test")


class _ImportedModules:
    """Plugin of an in-process session: the modules imported when its configuration ends."""

    def __init__(self) -> None:
        self.modules: dict[str, Any] = {}

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.modules = dict(sys.modules)


#: Libraries a protocol run imports on first use whose compiled modules refuse a second import in one process
#: (numpy's, and scipy's and matplotlib's through it).
RUN_LIBRARIES = ("numpy.fft", "numpy.random", "scipy.stats", "scipy.optimize", "matplotlib.pyplot")


def import_run_libraries(*modules: str) -> None:
    """Import :data:`RUN_LIBRARIES` (matplotlib on its Agg backend) and ``modules`` into this process.

    ``pytester`` drops, when a test ends, every module imported during the test; numpy cannot
    be imported again afterwards, and a module that registers models (a protocol's scripted
    scenarios) must stay the one whose classes the registry holds.  A test module whose tests
    run protocols in process (:func:`run_in_process`) names them in ``RUN_LIBRARIES_FIRST``; the root
    conftest's module fixture calls this before any ``pytester`` takes its snapshot (not at import: a
    protocol run collects those modules without running them).
    """
    import importlib

    import matplotlib

    matplotlib.use("Agg", force=True)
    for name in (*RUN_LIBRARIES, *modules):
        importlib.import_module(name)


def run_in_process(pytester: pytest.Pytester, *command: str) -> pytest.RunResult:
    """``pytester.runpytest_inprocess(*command)``, keeping the library modules the session imported.

    ``pytester`` drops every module a session imported once it ends.  Library modules
    (the suite's own packages among them) are kept for the rest of the test, as any pytest
    session keeps them between tests, so a later session of the same test reuses them and
    their caches of pure computations (the CWR pairs) instead of importing them again; test
    modules and conftests are dropped, so each session collects its tests afresh.  The
    caller's module names its libraries in ``RUN_LIBRARIES_FIRST`` (see :func:`import_run_libraries`).
    """
    missing = [name for name in RUN_LIBRARIES if name not in sys.modules]
    if missing:
        raise RuntimeError(f"run_in_process: {', '.join(missing)} not imported before the test; give its module "
                           "RUN_LIBRARIES_FIRST (the root conftest imports them before pytester's snapshot)")
    imported = _ImportedModules()
    try:
        return pytester.runpytest_inprocess(*command, plugins=[imported])
    finally:
        for name, module in imported.modules.items():
            if name not in sys.modules and not _is_test_module(name):
                sys.modules[name] = module


def read_report(results: Path, protocol: str, result: pytest.RunResult | None = None) -> tuple[dict[str, Any], Path]:
    """The one run's ``report.json`` of ``protocol`` under ``results`` and its run directory."""
    reports = sorted((results / protocol).glob("*/report.json"))
    context = (result.stdout.str() + result.stderr.str()) if result is not None else str(reports)
    assert len(reports) == 1, context
    return json.loads(reports[0].read_text()), reports[0].parent


def outcomes_by_name(report: dict[str, Any]) -> dict[str, str]:
    """Test name (the last part of its node id, parameters included) -> outcome."""
    return {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]}


def expected_pattern(classification: Classification, label: str) -> list[str]:
    """Rule outcomes when ``label`` decides: earlier rules pass, the decided one fails unless it is a
    passing state, later ones are skipped as preempted."""
    index = classification.labels.index(label)
    decided = "passed" if classification.rules[index].passes else "failed"
    return ["passed"] * index + [decided] + ["skipped"] * (len(classification.labels) - index - 1)


def run_rescorer(script: Path, *args: str | Path) -> dict[str, Any]:
    """Run a stdlib-only rescorer under ``python -S -I`` (no site-packages, no environment, cwd ``/``),
    so it cannot import anything from the suite; its stdout is JSON."""
    done = subprocess.run([sys.executable, "-S", "-I", str(script), *map(str, args)],
                          capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def best_time(parse: Callable[[str], Any], text: str, repeat: int) -> float:
    """The best of 3 timings of ``repeat`` calls of ``parse(text)``, the cyclic garbage collector paused."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(repeat):
                parse(text)
            best = min(best, time.perf_counter() - start)
    finally:
        gc.enable()
    return best


def check_linear_time(parse: Callable[[str], Any], make: Callable[[int], str], what: str) -> None:
    """Assert that one text of 64 KB takes about as long as 64 texts of 1 KB of the same shape.

    ``make(n)`` builds a text of about ``n`` characters.  A linear parser gives a ratio near 1 and a quadratic one
    near 64; the bound (8 x plus 5 ms, and 1 s for the large text) holds on a loaded machine.
    """
    small, large = make(1024), make(65536)
    per_small = best_time(parse, small, 64)
    per_large = best_time(parse, large, 1)
    assert per_large < 1.0, f"{what}: {per_large:.3f} s for a 64 KB text"
    assert per_large <= 8 * per_small + 0.005, f"{what}: 64 KB in {per_large:.4f} s, 64 x 1 KB in {per_small:.4f} s"


#: The name of a reported share: one of these words is a part of it (``tier1.error``, ``parser_coverage``,
#: ``error_on_approvable``, ``refusal_share_of_errors``, ...).
PROPORTION_NAME = re.compile(r"(?:^|[._])(accuracy|coverage|validity|error|share|rate|agreement)(?:$|[._])")
#: Summary sections that report no measured share: preregistered values, the rule outcomes (their reasons quote
#: the metrics) and provenance.
NOT_MEASURED = ("thresholds", "outcomes", "rule_order", "settings", "preregistration", "model", "packages",
                "hardware", "git")


def proportion_fields(document: Any, skip: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """(path, value, interval) of every share a summary or stats file reports; interval None when it has none.

    A share is a float or null under a key named like one (:data:`PROPORTION_NAME`).  In the top-level
    ``metrics`` map (numbers only: the rules read it) a share's interval is ``intervals[<metric name>]`` of the
    same document; anywhere else it is the sibling key ``<key>_interval``.  Paths are dotted; a path equal to or
    below one in ``skip`` (or :data:`NOT_MEASURED`) is left out.
    """
    found: list[tuple[str, Any, Any]] = []
    skipped = NOT_MEASURED + tuple(skip)

    def wanted(path: str) -> bool:
        return not any(path == s or path.startswith(s + ".") for s in skipped)

    def share_like(value: Any) -> bool:
        return value is None or isinstance(value, float)  # a ratio is a float; counts (``error_units``) are ints

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key in sorted(node):
                value, here = node[key], f"{path}.{key}" if path else str(key)
                if not wanted(here) or (not path and key == "intervals"):
                    continue
                if not path and key == "metrics" and isinstance(value, dict):
                    intervals = document.get("intervals") if isinstance(document.get("intervals"), dict) else {}
                    found.extend((f"metrics.{name}", v, intervals.get(name)) for name, v in sorted(value.items())
                                 if PROPORTION_NAME.search(name) and share_like(v) and wanted(f"metrics.{name}"))
                elif PROPORTION_NAME.search(str(key)) and share_like(value):
                    found.append((here, value, node.get(f"{key}_interval")))
                else:
                    walk(value, here)
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{path}.{index}")

    walk(document, "")
    return found

