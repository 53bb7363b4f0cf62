"""The state a pytest session keeps about its runs: one run id, the results folder, the run of each protocol.

Shared by the plugin (which builds it at configure time and reports from it)
and the generated fixtures (which ask it for the run directory of their
protocol); it imports neither.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .rundir import Run, RunDirError, check_run_dir

#: A run id: a directory name of at most 64 characters that is safe everywhere (no separators, no leading dot).
RUN_ID_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


@dataclass
class SessionState:
    run_id: str
    started_at: str
    results_dir: Path
    runs: dict[str, Run] = field(default_factory=dict)
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    unwritable: set[str] = field(default_factory=set)  # protocols whose run directory cannot be used
    shard: str | None = None  # ``K/N`` of a shard session (``--shard``), else None


STATE = pytest.StashKey[SessionState]()
#: Set by ``preregbench run`` for ``--scale all``: (protocol folder, its arguments), so every scale is a
#: ``preregbench run`` of its own (:mod:`benchmarks.core.scales`).
SCALE_GROUP_FORM = pytest.StashKey[tuple[Path, list[str]]]()
#: The outcome of a ``--scale all`` session (a :class:`benchmarks.core.scales.GroupResult`).
SCALE_GROUP_RESULT = pytest.StashKey[Any]()


def benchmark_run(config: pytest.Config, protocol_dir: str | Path) -> Run:
    """The run of the protocol whose ``prereg.toml`` lies in ``protocol_dir`` (one per session)."""
    state = config.stash[STATE]
    folder = Path(protocol_dir).resolve()
    if not (folder / "prereg.toml").is_file():
        raise pytest.UsageError(f"{folder} holds no prereg.toml; a benchmark run belongs to a protocol folder")
    name = folder.name
    if name not in state.runs:
        try:
            check_run_dir(state.results_dir, name, state.run_id)
        except RunDirError as exc:
            raise pytest.UsageError(str(exc)) from None
        state.runs[name] = Run(name, state.run_id, state.results_dir, state.started_at, folder)
    return state.runs[name]


def check_run_id(run_id: str) -> str:
    """``run_id`` when it matches :data:`RUN_ID_PATTERN`; else a one-line ``pytest.UsageError``."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
        shown = repr(run_id) if len(run_id) <= 70 else f"{run_id[:40]!r}... ({len(run_id)} characters)"
        raise pytest.UsageError(
            f"--run-id {shown} is not valid; use 1 to 64 letters, digits, '.', '_' and '-', starting with a "
            "letter or digit (no path separators, spaces or newlines)"
        )
    return run_id


def check_results_dir(results: Path) -> Path:
    """``results`` when it is a directory that can be written, or a folder that can be created there.

    Reads only (nothing is created here); otherwise a one-line ``pytest.UsageError``.
    """
    problem = None
    if results.exists() and not results.is_dir():
        problem = "is not a directory"
    else:
        existing = results
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            problem = f"cannot be created: {existing} is not a directory"
        elif not os.access(existing, os.W_OK | os.X_OK):
            problem = ("is not writable" if existing == results
                       else f"cannot be created: {existing} is not writable")
    if problem:
        raise pytest.UsageError(f"--results-dir {results} {problem}; pass --results-dir=PATH naming a writable folder")
    return results



__all__ = ["RUN_ID_PATTERN", "SCALE_GROUP_FORM", "SCALE_GROUP_RESULT", "STATE", "SessionState", "benchmark_run", "check_results_dir", "check_run_id"]
