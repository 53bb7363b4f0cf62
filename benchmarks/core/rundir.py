"""One directory per run: ``<results-dir>/<protocol>/<run-id>/``.

Every process of a pytest session (xdist workers included) shares the run id,
so they all write into the same directory.  Work that must happen once per run
(loading a model and computing the records) is guarded by a file lock, as the
pytest-xdist documentation prescribes for session-scoped work.

The run directory is a real directory inside the results folder: neither it
nor its protocol folder may be a symbolic link (or a file), and it must
resolve to a place under the results folder; otherwise :class:`RunDirError`
(one line) before anything is read or written there.  Files of the run are
written atomically (:func:`~benchmarks.core._canonical.atomic_write_json`)
and read as regular files only, never through a link.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import secrets
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from filelock import FileLock

from .errors import PreregbenchError
from ._canonical import FileWriteError, atomic_write_json, read_json_file
from .ledger import Ledger
from .prereg import Prereg
from .provenance import (
    Provenance,
    check_revision,
    git_state,
    hardware_summary,
    package_versions,
    read_provenance,
    runner_hash,
)

R = TypeVar("R")

CORE_DIR = Path(__file__).resolve().parent
SUITE_ROOT = CORE_DIR.parent.parent
PROVENANCE_FILE = "provenance.json"
REPORT_FILE = "report.json"


class RunDirError(PreregbenchError, ValueError):
    """The run directory is not a real directory inside the results folder; the message is one line."""


def check_run_dir(results_dir: Path, protocol: str, run_id: str) -> Path:
    """``<results_dir>/<protocol>/<run_id>`` when it is, or can become, a real directory inside ``results_dir``.

    Reads only.  A symbolic link or a file at the protocol folder or the run
    directory, or a run directory resolving outside the results folder, is
    :class:`RunDirError`.
    """
    results = Path(results_dir)
    location = results / protocol / run_id
    for path in (results / protocol, location):
        if path.is_symlink():
            raise RunDirError(f"{path} is a symbolic link; a run directory must be a real directory inside {results} "
                              "(remove the link, or point --results-dir=PATH where the results should go)")
        if path.exists() and not path.is_dir():
            raise RunDirError(f"{path} exists and is not a directory; move it away or choose another --run-id")
    if location.exists() and not location.resolve().is_relative_to(results.resolve()):
        raise RunDirError(f"{location} resolves to {location.resolve()}, outside {results}; "
                          "point --results-dir=PATH at the folder that should hold the run")
    return location


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise RunDirError(f"{path} is a symbolic link; the suite never writes or locks through a link "
                          "(remove it, or start a new run without --run-id)")


def checkout_root(protocol_dir: Path) -> Path:
    """The root of the git checkout holding the protocol folder (the suite's own root when it is in none).

    Provenance records this checkout's commit and dirty flag, and the prereg's path relative to it, so
    that ``preregbench verify`` finds the preregistration at the recorded commit.
    """
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=protocol_dir, capture_output=True,
                              text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return SUITE_ROOT
    top = done.stdout.strip()
    return Path(top).resolve() if top else SUITE_ROOT


def new_run_id() -> str:
    """``20261130T035206Z-3f9a1c``: sortable by start time, unique by its random suffix."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Run:
    protocol: str
    run_id: str
    results_dir: Path
    started_at: str
    protocol_dir: Path  # the folder that holds the protocol's prereg.toml

    @property
    def location(self) -> Path:
        """The run directory's path, checked (:func:`check_run_dir`) but not created."""
        return check_run_dir(self.results_dir, self.protocol, self.run_id)

    @property
    def dir(self) -> Path:
        """The run directory, created when missing (a real directory inside the results folder)."""
        path = self.location
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FileWriteError(path, exc, "the run directory could not be created; nothing of the run was "
                                 "written (choose a writable --results-dir=PATH)") from exc
        return path

    def path(self, name: str) -> Path:
        return self.dir / name

    def write_json(self, name: str, value: Any) -> Path:
        return atomic_write_json(self.path(name), value)

    def read_json(self, name: str) -> Any:
        """The JSON value of a file of the run (a link, bad UTF-8 or bad JSON: one-line ``FileReadError``)."""
        return read_json_file(self.path(name))

    def ledger(self, name: str, schema: type[R], key: str) -> Ledger[R]:
        return Ledger(self.path(name), schema, key)

    @contextlib.contextmanager
    def lock(self, name: str, timeout: float = -1) -> Iterator[None]:
        """Hold an inter-process lock named ``name`` for this run (``sub/name`` locks beside ``sub/name``)."""
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = target.parent / f".{target.name}.lock"
        _refuse_link(lock)
        with FileLock(str(lock), timeout=timeout):
            yield

    def once(self, name: str, compute: Callable[[], Any]) -> Any:
        """Return the JSON value stored under ``name``, computing and storing it first if absent.

        Exactly one process computes; the others wait on the lock and read.
        """
        with self.lock(name):
            target = self.path(name)
            if os.path.lexists(target):  # a link counts as present, and read_json refuses it
                return self.read_json(name)
            value = compute()
            self.write_json(name, value)
            return self.read_json(name)

    def record_provenance(
        self,
        *,
        model: Mapping[str, Any],
        seeds: Mapping[str, int],
        prereg: Prereg,
        fixtures: Mapping[str, str],
        extra: Mapping[str, Any] | None = None,
        identity: Mapping[str, Any] | None = None,
        deviations: Sequence[str] = (),
        tuning: Mapping[str, Any] | None = None,
    ) -> Provenance:
        """Write ``provenance.json`` for this run (the session end adds ``finished_at``)."""
        check_revision(str(model.get("revision", "")))
        if not model.get("id"):
            raise ValueError("provenance needs the model's id")
        digest, count = runner_hash(self.protocol_dir, CORE_DIR, SUITE_ROOT)
        checkout = checkout_root(self.protocol_dir)
        try:
            prereg_path = prereg.path.resolve().relative_to(checkout).as_posix()
        except ValueError:
            prereg_path = prereg.path.resolve().as_posix()
        started, resumed = self.started_at, ()
        previous = self.load_provenance()
        if previous is not None:  # a resumed run keeps its first start and lists every later session's
            started, resumed = previous.started_at, tuple(previous.resumed_at)
            if self.started_at not in (started, *resumed):
                resumed += (self.started_at,)
        record = Provenance(
            protocol=self.protocol,
            run_id=self.run_id,
            started_at=started,
            model=dict(model),
            seeds=dict(seeds),
            prereg_path=prereg_path,
            prereg_sha256=prereg.sha256,
            runner_sha256=digest,
            runner_files=count,
            fixtures_sha256=dict(sorted(fixtures.items())),
            packages=package_versions(),
            hardware=hardware_summary(tuning),
            git=git_state(checkout),
            deviations=tuple(deviations),
            extra=dict(extra or {}),
            identity=dict(identity or {}),
            resumed_at=resumed,
        )
        self.write_json(PROVENANCE_FILE, asdict(record))
        return record

    def load_provenance(self) -> Provenance | None:
        """The run's provenance, None when it has none yet; a damaged file is a one-line ``ProvenanceFileError``."""
        return read_provenance(self.location / PROVENANCE_FILE)


def protocol_dir_of(path: Path, stop: Path) -> Path | None:
    """The nearest folder at or above ``path`` (not above ``stop``) holding a prereg.toml."""
    path = Path(path).resolve()
    stop = Path(stop).resolve()
    for folder in [path, *path.parents] if path.is_dir() else list(path.parents):
        if (folder / "prereg.toml").is_file():
            return folder
        if folder == stop or stop not in folder.parents:
            break
    return None

