"""Every preregistered scale of a protocol in one command: ``--scale all``.

``preregbench run PROTOCOL --scale all`` and ``pytest PROTOCOL_FOLDER --scale
all`` run one whole run per scale the protocol preregisters
(:meth:`Protocol.preregistered_scales`), in the prereg's order, each in a
process of its own, under one parent directory (a *scale group*)::

    <results-dir>/<protocol>-scales/<group-id>/
        group.json                  protocol, group id, scales, the arguments
        <protocol>/<scale>/         one ordinary run per scale (run id = the scale)
        ...                         what the protocol writes across scales

Each scale is an ordinary run: its own verdict, provenance, manifest and
ledger, checked by ``preregbench verify`` alone.  Every other argument goes to
every scale unchanged (``--model`` then stands in for every scale, a recorded
deviation of each run).  ``--run-id GROUP`` resumes a group: every scale is
started again with its own run id, so a finished scale is decided again from
its ledger without measuring, and a killed one resumes where it stopped, with
the resume checks of a single run (other arguments than the recorded ones are
refused by the first scale, before it measures).  A usage error of a scale
stops the group; a scale that ends broken does not stop the others.  An
interrupt stops the group after the scale that was running has saved what it
measured.

After the last scale the protocol writes its cross-scale report into the
parent (:meth:`Protocol.scale_report`); ``preregbench report GROUP_DIR``
renders it again and ``preregbench compare GROUP_A GROUP_B`` compares two
groups scale by scale.

The exit status is the worst of the scales' (a usage error first, then the
highest): with ``preregbench run``, 0 when every scale passed, 1 when a gate
failed, 2 when a scale is broken or undecided, 4 for a usage error; with
``pytest``, pytest's statuses combined the same way.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._canonical import FileReadError, atomic_write_json, read_json_file
from .errors import PreregbenchError
from .provenance import utc_now
from .rundir import RunDirError, check_run_dir, new_run_id
from .session import RUN_ID_PATTERN

SCALE_ALL = "all"
GROUP_FILE = "group.json"
GROUP_KIND = "scale-group"
#: Options every scale gets from the group, never from the command line.
OWNED_OPTIONS = ("--scale", "--run-id", "--results-dir")
EXIT_USAGE = 4


class ScaleGroupError(PreregbenchError, ValueError):
    """A scale group cannot be started, resumed or read; the message is one line saying why and what to do."""


def group_folder_name(protocol: str) -> str:
    return f"{protocol}-scales"


def scale_run_dir(parent: Path, protocol: str, scale: str) -> Path:
    """The run directory of one scale of a group."""
    return Path(parent) / protocol / scale


def option_value(args: Sequence[str], flag: str) -> str | None:
    """The last value given to ``flag`` (``--flag VALUE`` or ``--flag=VALUE``), or None."""
    found = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def without_owned(args: Sequence[str]) -> list[str]:
    """``args`` without the options the group sets for every scale (:data:`OWNED_OPTIONS`)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in OWNED_OPTIONS:
            skip = True
            continue
        if any(arg.startswith(flag + "=") for flag in OWNED_OPTIONS):
            continue
        out.append(arg)
    return out


def scale_args(base: Sequence[str], parent: Path, scale: str) -> list[str]:
    """The arguments of one scale's session: the group's own, then its scale, the parent as its results folder
    and the scale as its run id."""
    return [*base, "--scale", scale, "--results-dir", str(parent), "--run-id", scale]


@dataclass(frozen=True)
class ScaleOutcome:
    scale: str
    run_dir: Path
    #: the exit status of the scale's process; None when it was not started (the group stopped before it)
    status: int | None


@dataclass(frozen=True)
class GroupResult:
    protocol: str
    group_id: str
    parent: Path
    outcomes: tuple[ScaleOutcome, ...]
    #: files the protocol wrote across the scales
    written: tuple[Path, ...]
    #: why the group stopped early or its cross-scale report was not written ("" when neither)
    problem: str = ""

    @property
    def status(self) -> int:
        """The worst status of the scales: a usage error first, then the highest; 2 for a scale never run."""
        statuses = [o.status for o in self.outcomes]
        if EXIT_USAGE in statuses:
            return EXIT_USAGE
        worst = max((2 if s is None else s) for s in statuses) if statuses else 2
        return max(worst, 2) if self.problem else worst


def read_group(parent: Path) -> dict[str, Any] | None:
    """``group.json`` of a scale group directory, or None when ``parent`` is no group; :class:`ScaleGroupError`
    when the file is there but damaged."""
    path = Path(parent) / GROUP_FILE
    if path.is_symlink():
        raise ScaleGroupError(f"{path} is a symbolic link; a scale group's files are read only as real files")
    if not path.is_file():
        return None
    try:
        found = read_json_file(path)
    except FileReadError as exc:
        raise ScaleGroupError(str(exc)) from None
    scales = found.get("scales") if isinstance(found, dict) else None
    if not isinstance(found, dict) or found.get("kind") != GROUP_KIND or not isinstance(found.get("protocol"), str) \
            or not isinstance(scales, list) or not all(isinstance(s, str) and RUN_ID_PATTERN.match(s) for s in scales) \
            or not RUN_ID_PATTERN.match(found["protocol"]):
        raise ScaleGroupError(f"{path} is not the group.json of a scale group (kind {GROUP_KIND!r}, a protocol and "
                              "a list of scales, each a run id); give a directory written by --scale all")
    return found


def group_runs(parent: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    """(group.json, scale -> run directory) of a scale group; :class:`ScaleGroupError` when it is none."""
    group = read_group(parent)
    if group is None:
        raise ScaleGroupError(f"{parent}: no {GROUP_FILE}; not a scale group (written by --scale all)")
    return group, {scale: scale_run_dir(parent, group["protocol"], scale) for scale in group["scales"]}


def start_group(results: Path, protocol: Any, group_id: str, base: Sequence[str]) -> Path:
    """The group directory ``<results>/<protocol>-scales/<group_id>``, with its ``group.json`` (written when the
    group is new; a resumed group's must name the same protocol and scales)."""
    try:
        parent = check_run_dir(results, group_folder_name(protocol.name), group_id)
    except RunDirError as exc:
        raise ScaleGroupError(str(exc)) from None
    scales = list(protocol.preregistered_scales())
    found = read_group(parent) if parent.exists() else None
    if found is not None:
        if found["protocol"] != protocol.name or found["scales"] != scales:
            raise ScaleGroupError(f"{parent / GROUP_FILE} is a group of {found['protocol']} at scales "
                                  f"{', '.join(found['scales'])}, not of {protocol.name} at {', '.join(scales)}; "
                                  "choose another --run-id")
        return parent
    if parent.exists() and any(parent.iterdir()):
        raise ScaleGroupError(f"{parent} exists and holds no {GROUP_FILE}; choose another --run-id")
    parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(parent / GROUP_FILE, {
        "kind": GROUP_KIND, "protocol": protocol.name, "group_id": group_id, "scales": scales,
        "arguments": list(base), "started_at": utc_now(),
    })
    return parent


class _Forward:
    """While a scale runs: a SIGTERM to the group is passed on to the scale's process, and the group stops."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self._previous: Any = None

    def __enter__(self) -> "_Forward":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._terminate)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

    def _terminate(self, signum: int, frame: Any) -> None:
        self.stopped = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)


def run_scales(protocol: Any, results: Path, group_id: str | None, base: Sequence[str],
               command: Callable[[list[str]], list[str]], *, cwd: Path | None = None,
               echo: Callable[[str], None] | None = None) -> GroupResult:
    """Run every preregistered scale of ``protocol`` as its own run under one parent, then the protocol's
    cross-scale report.

    ``base``: the arguments every scale gets (without :data:`OWNED_OPTIONS`); ``command(args)``: the command
    line of one scale's process given its arguments; ``group_id``: a group to resume, or None for a new one.
    """
    say = echo or (lambda line: print(line, flush=True))
    scales = tuple(protocol.preregistered_scales())
    if not scales:
        raise ScaleGroupError(f"--scale {SCALE_ALL}: {protocol.label} preregisters no scales; leave out --scale")
    if option_value(base, "--shard") is not None:
        raise ScaleGroupError(f"--scale {SCALE_ALL} runs whole runs; shard one scale at a time (--scale NAME --shard K/N)")
    group_id = group_id or new_run_id()
    parent = start_group(results, protocol, group_id, base)
    outcomes: list[ScaleOutcome] = []
    problem = ""
    with _Forward() as forward:
        for scale in scales:
            run_dir = scale_run_dir(parent, protocol.name, scale)
            if problem:
                outcomes.append(ScaleOutcome(scale, run_dir, None))
                continue
            say(f"--scale {SCALE_ALL}: {protocol.name} {scale} ({len(outcomes) + 1} of {len(scales)}) -> {run_dir}")
            try:
                forward.child = subprocess.Popen(command(scale_args(base, parent, scale)), cwd=cwd)
                status = forward.child.wait()
            except KeyboardInterrupt:
                assert forward.child is not None
                status = forward.child.wait()  # the scale got the same interrupt and saves what it measured
                forward.stopped = True
            except OSError as exc:
                raise ScaleGroupError(f"the process of scale {scale} could not be started: {exc}") from None
            outcomes.append(ScaleOutcome(scale, run_dir, status))
            if status == EXIT_USAGE:
                problem = f"scale {scale} stopped on a usage error; the later scales were not started"
            elif forward.stopped:
                problem = f"interrupted during scale {scale}; resume with --run-id {group_id}"
    written: tuple[Path, ...] = ()
    runs = {o.scale: o.run_dir for o in outcomes}
    try:
        written = tuple(protocol.scale_report(parent, runs))
    except (PreregbenchError, OSError, ValueError) as exc:
        problem = problem or f"the cross-scale report was not written: {exc}"
    return GroupResult(protocol.name, group_id, parent, tuple(outcomes), written, problem)


def summary_lines(result: GroupResult) -> list[str]:
    """What the group prints at its end: one line per scale (what its run decided), the group's status and
    where its report is."""
    lines = []
    for o in result.outcomes:
        state = "not started" if o.status is None else f"exit {o.status}"
        lines.append(f"{result.protocol} {o.scale}: {run_labels(o.run_dir, result.protocol) or 'no report'} [{state}]")
    if result.problem:
        lines.append(result.problem)
    report = next((p for p in result.written if p.name == "report.html"), None)
    where = report or (result.parent / GROUP_FILE)
    lines.append(f"{result.protocol} scale group {result.group_id}: exit {result.status}; {where}")
    return lines


def python_command(*head: str) -> Callable[[list[str]], list[str]]:
    """The command line of a scale: this interpreter, ``head``, then the scale's arguments."""
    return lambda args: [sys.executable, *head, *args]


def run_labels(run_dir: Path, protocol: str) -> str:
    """What one scale's run decided, from its ``report.json`` ("" when it has none that can be read)."""
    try:
        report = read_json_file(Path(run_dir) / "report.json")
    except (FileReadError, OSError):
        return ""
    entry = ((report.get("benchmark") or {}).get("protocols") or {}).get(protocol) if isinstance(report, dict) else None
    if not isinstance(entry, dict):
        return ""
    labels = "; ".join(f"{name}: {(found.get('outcome') or {}).get('label')}"
                       for name, found in (entry.get("classifications") or {}).items() if isinstance(found, dict))
    return f"{labels or 'no classification'} ({entry.get('status')})"


__all__ = ["GROUP_FILE", "OWNED_OPTIONS", "SCALE_ALL", "GroupResult", "ScaleGroupError", "ScaleOutcome",
           "group_folder_name", "group_runs", "option_value", "python_command", "read_group", "run_scales",
           "run_labels", "scale_args", "scale_run_dir", "start_group", "summary_lines", "without_owned"]
