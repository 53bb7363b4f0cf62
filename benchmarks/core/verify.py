"""``preregbench verify RUN_DIR``: is a finished run what it claims to be, and was it preregistered?

Usage: ``preregbench verify RUN_DIR [--repo PATH]`` or ``python -m benchmarks.core.verify RUN_DIR [--repo PATH]``.

One line per check, then the final word:

* ``VERIFIED`` (exit 0): every file matches ``manifest.json``, the recorded
  hashes agree with the files and the repository, the fixtures rebuild, the
  rescorer agrees, the prereg was committed before the run started, the tree
  was clean, the model revision immutable and no deviation was recorded;
* ``EXPLORATORY`` (exit 1): complete and consistent, but not confirmatory (a
  dirty tree, a prereg that differs from its frozen snapshot or from the
  recorded commit or was committed after the run started, a recorded
  deviation, a mutable model revision, a fixture set that cannot be rebuilt);
* ``TAMPERED`` (exit 2): a file differs from ``manifest.json`` (size or
  sha256), is missing, or is in the run directory without being listed;
* ``INCONSISTENT`` (exit 2): the files disagree with one another, with the
  repository or with the rescorer (the first disagreeing unit is named);
* ``OVER_LIMIT`` (exit 3): a file is over one of the reading limits
  (:mod:`benchmarks.core.bounded`: a JSON file over 256 MiB, a ledger line
  over 64 MiB, nesting deeper than 64, a number longer than 64 characters);
  nothing else of the run directory is read or run;
* usage errors (no such directory, not a run directory, no git repository):
  one line, exit 4.

The final line names the first offending file and field.  ``--repo`` is the
git checkout the run was made from (default: the checkout holding the current
directory, else the suite's own); the prereg, the rescorer and the frozen
snapshots are read from it at the recorded commit (``git show COMMIT:PATH``),
the fixture generators from its working tree.

A run directory is data, never code.  Verify trusts the repository it was
given and the protocols of the registry (:mod:`benchmarks.core.registry`),
nothing a run directory ships or names: the repository is never looked up
from the run directory and may not lie inside it; the protocol is the one the
registry knows by the name in ``provenance.json`` (or, for a protocol folder
of the trusted repository, the folder whose prereg is committed at the
recorded commit, outside the run directory); a path read from a run's files
must stay inside the repository.  A symbolic link or special file anywhere in
the run directory is TAMPERED before any file is read, so no check reads
through a link.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from fixtures import FIXTURE_SETS

from . import bounded, registry
from ._canonical import FileReadError, json_text, read_json_file, sha256_bytes, sha256_json
from .commandline import CommandParser, run_command, usage_line
from .errors import PreregbenchError, one_line
from .ledger import LedgerError, read_identities, read_ledger
from .manifest import MANIFEST_FILE, ManifestError, file_sha256, manifest_differences, manifest_files
from .provenance import ProvenanceError, check_revision, read_provenance
from .run import FIXTURES_FILE, ProtocolRun
from .rundir import PROVENANCE_FILE, REPORT_FILE, SUITE_ROOT, Run

#: The frozen-material snapshot (prereg and fixture-set hashes), relative to the repository root.
SNAPSHOT_FILE = "snapshots/benchmarks/test_frozen_material.ambr"
RESCORER_FILE = "rescore.py"
RESCORER_TIMEOUT = 600

OK, EXPLORATORY, INCONSISTENT, TAMPERED = "ok", "EXPLORATORY", "INCONSISTENT", "TAMPERED"
OVER_LIMIT = "OVER_LIMIT"
VERIFIED = "VERIFIED"
_RANK = {OK: 0, EXPLORATORY: 1, INCONSISTENT: 2, TAMPERED: 3, OVER_LIMIT: 4}
EXIT = {VERIFIED: 0, EXPLORATORY: 1, INCONSISTENT: 2, TAMPERED: 2, OVER_LIMIT: 3}


class VerifyUsageError(PreregbenchError, ValueError):
    """verify was called on something that is not a run directory; the message is one line."""


@dataclass(frozen=True)
class Finding:
    """The outcome of one check: ``ok`` or the word it earns, the file and field it is about, and why."""

    word: str
    check: str
    detail: str
    file: str | None = None
    field: str | None = None

    def line(self) -> str:
        return f"{self.word:<12} {self.check}: {self.where()}"

    def where(self) -> str:
        """``FILE: field FIELD: detail`` (the file left out where the detail starts with it)."""
        named = self.file if self.file and not self.detail.startswith(self.file) else None
        return ": ".join(filter(None, [named, self.field and f"field {self.field}", self.detail]))


@dataclass(frozen=True)
class Outcome:
    word: str  # VERIFIED, EXPLORATORY, INCONSISTENT, TAMPERED or OVER_LIMIT
    findings: tuple[Finding, ...]

    @property
    def exit_status(self) -> int:
        return EXIT[self.word]

    @property
    def first(self) -> Finding | None:
        """The first finding of the worst kind (the one the final line names)."""
        return next((f for f in self.findings if f.word == self.word), None)

    def final_line(self) -> str:
        first = self.first
        return self.word if first is None else f"{self.word}: {first.where()}"


# --------------------------------------------------------------------------- git


def _git(repo: Path, *args: str, binary: bool = False) -> Any:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        return None
    return done.stdout if binary else done.stdout.decode("utf-8", "replace").strip()


def repository_of(path: Path) -> Path | None:
    top = _git(path, "rev-parse", "--show-toplevel")
    return Path(top).resolve() if top else None


def _parse_time(text: str) -> _dt.datetime | None:
    try:
        value = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)


_SNAPSHOT_ENTRY = re.compile(r"^\s*'([^']+)': '([0-9a-f]{64})',?\s*$")


def snapshot_hashes(text: str) -> dict[str, dict[str, str]]:
    """The amber snapshot's sections (``test_preregistrations_are_frozen``, ...) -> key -> sha256."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith("# name: "):
            current = sections.setdefault(line[len("# name: "):].strip(), {})
        elif current is not None:
            match = _SNAPSHOT_ENTRY.match(line)
            if match:
                current[match.group(1)] = match.group(2)
    return sections


# --------------------------------------------------------------------------- the checks


class _Verifier:
    def __init__(self, run_dir: Path, repo: Path):
        self.run_dir = run_dir
        self.repo = repo
        self.findings: list[Finding] = []
        self.provenance: Any = None
        self.summary: dict[str, Any] | None = None
        self.report_entry: dict[str, Any] | None = None
        self.fixtures: dict[str, Any] | None = None
        self.commit: str | None = None
        self.prereg_path: str | None = None  # relative to the repository
        self.prereg_bytes: bytes | None = None  # the prereg at the recorded commit
        self.protocol: Any = None
        self.prereg_committed_at: str | None = None  # when the prereg was last committed up to the recorded commit

    def add(self, word: str, check: str, detail: str, file: str | None = None, field: str | None = None) -> None:
        self.findings.append(Finding(word, check, detail, file, field))

    def read(self, name: str, check: str) -> Any:
        try:
            return read_json_file(self.run_dir / name)
        except bounded.OverLimitError as exc:
            self.add(OVER_LIMIT, check, str(exc).replace(str(self.run_dir / name), name), name)
        except FileNotFoundError:
            self.add(INCONSISTENT, check, f"{name} is missing", name)
        except FileReadError as exc:
            self.add(INCONSISTENT, check, str(exc).replace(str(self.run_dir / name), name), name)
        except OSError as exc:
            self.add(INCONSISTENT, check, f"{name} cannot be read ({exc.strerror or exc})", name)
        return None

    # ----------------------------------------------------------------- what the run directory holds

    def check_entries(self) -> bool:
        """Whether the run directory holds only real folders and regular files (a link or a special file is
        TAMPERED, and nothing in the directory is read afterwards)."""
        for root, dirs, files in os.walk(self.run_dir, followlinks=False):
            folder = Path(root)
            for name in sorted(dirs) + sorted(files):
                path = folder / name
                relative = path.relative_to(self.run_dir).as_posix()
                try:
                    mode = os.lstat(path).st_mode
                except OSError as exc:
                    self.add(TAMPERED, "entries", f"cannot be examined ({exc.strerror or exc})", relative)
                    return False
                if stat.S_ISLNK(mode):
                    self.add(TAMPERED, "entries", "is a symbolic link; a run directory holds only real files and "
                             "folders, and verify reads nothing through a link", relative)
                    return False
                if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                    self.add(TAMPERED, "entries", "is not a regular file or folder (a FIFO, socket or device)",
                             relative)
                    return False
        return True

    # ----------------------------------------------------------------- manifest

    def check_manifest(self) -> None:
        check = "manifest"
        manifest = self.read(MANIFEST_FILE, check)
        if manifest is None:
            if not os.path.lexists(self.run_dir / MANIFEST_FILE):
                self.findings[-1] = Finding(INCONSISTENT, check, f"{MANIFEST_FILE} is missing: the session did not "
                                            "finish (resume it with the same --run-id)", MANIFEST_FILE)
            return
        files = manifest_files(manifest)
        if files is None:
            self.add(TAMPERED, check, "not a manifest (a 'files' list of path, size and sha256)", MANIFEST_FILE, "files")
            return
        try:
            differences = manifest_differences(self.run_dir, files)
        except (ManifestError, OSError) as exc:
            self.add(TAMPERED, check, str(exc))
            return
        for d in differences:
            if d.kind == "outside":
                self.add(TAMPERED, check, d.detail, MANIFEST_FILE, "files")
            else:
                self.add(TAMPERED, check, d.detail, d.path, d.kind if d.kind in ("size", "sha256") else None)
        if not differences:
            self.add(OK, check, f"{len({e['path'] for e in files})} files match their size and sha256")

    # ----------------------------------------------------------------- the run's own files

    def check_records_of_the_run(self) -> None:
        check = "run files"
        try:
            self.provenance = read_provenance(self.run_dir / PROVENANCE_FILE)
        except bounded.OverLimitError as exc:
            self.add(OVER_LIMIT, check, str(exc).replace(str(self.run_dir) + "/", ""), PROVENANCE_FILE)
            return
        except ProvenanceError as exc:
            self.add(INCONSISTENT, check, str(exc).replace(str(self.run_dir) + "/", ""), PROVENANCE_FILE)
            return
        if self.provenance is None:
            self.add(INCONSISTENT, check, f"{PROVENANCE_FILE} is missing", PROVENANCE_FILE)
            return
        prov = self.provenance
        before = len(self.findings)
        protocol = self.run_dir.parent.name
        if prov.protocol != protocol or prov.run_id != self.run_dir.name:
            self.add(INCONSISTENT, check, f"names run {prov.protocol}/{prov.run_id}, the directory is "
                     f"{protocol}/{self.run_dir.name}", PROVENANCE_FILE, "run_id")
        report = self.read(REPORT_FILE, check)
        if report is not None:
            entry = (((report.get("benchmark") or {}).get("protocols") or {}).get(protocol)
                     if isinstance(report, dict) else None)
            if not isinstance(entry, dict):
                self.add(INCONSISTENT, check, f"holds no verdict of {protocol!r}", REPORT_FILE, "benchmark.protocols")
            else:
                self.report_entry = entry
                if entry.get("status") != "complete":
                    problems = "; ".join(map(str, entry.get("problems") or [])) or "no completeness check ran"
                    self.add(INCONSISTENT, check, f"the run is {entry.get('status')!r}: {problems}", REPORT_FILE,
                             "status")
                recorded = (entry.get("provenance") or {}).get("prereg_sha256")
                if recorded != prov.prereg_sha256:
                    self.add(INCONSISTENT, check, f"prereg_sha256 {str(recorded)[:12]} != provenance.json's "
                             f"{prov.prereg_sha256[:12]}", REPORT_FILE, "provenance.prereg_sha256")
        summary_name = self._summary_name()
        summary = self.read(summary_name, check)
        if isinstance(summary, dict):
            self.summary = summary
            if summary.get("prereg_sha256") != prov.prereg_sha256:
                self.add(INCONSISTENT, check, f"prereg_sha256 {str(summary.get('prereg_sha256'))[:12]} != "
                         f"provenance.json's {prov.prereg_sha256[:12]}", summary_name, "prereg_sha256")
            if summary.get("fixtures_sha256") != dict(prov.fixtures_sha256):
                self.add(INCONSISTENT, check, "fixtures_sha256 differs from provenance.json's", summary_name,
                         "fixtures_sha256")
            if self.report_entry is not None:
                labels = {name: (c.get("outcome") or {}).get("label")
                          for name, c in (self.report_entry.get("classifications") or {}).items()}
                for name, label in labels.items():
                    if (summary.get("classifications") or {}).get(name) != label:
                        self.add(INCONSISTENT, check, f"{name} = {(summary.get('classifications') or {}).get(name)!r}"
                                 f", report.json says {label!r}", summary_name, f"classifications.{name}")
        elif summary is not None:
            self.add(INCONSISTENT, check, "not a JSON object", summary_name)
        fixtures = self.read(FIXTURES_FILE, check)
        if fixtures is not None:
            sets = fixtures.get("sets") if isinstance(fixtures, dict) else None
            if not isinstance(sets, dict):
                self.add(INCONSISTENT, check, "holds no 'sets' object", FIXTURES_FILE, "sets")
            else:
                self.fixtures = sets
                if sorted(sets) != sorted(prov.fixtures_sha256):
                    self.add(INCONSISTENT, check, f"sets {sorted(sets)}, provenance.json records "
                             f"{sorted(prov.fixtures_sha256)}", FIXTURES_FILE, "sets")
                for name, entry in sorted(sets.items()):
                    rows = entry.get("records") if isinstance(entry, dict) else None
                    digest = sha256_json(rows)
                    if not isinstance(entry, dict) or entry.get("sha256") != digest:
                        self.add(INCONSISTENT, check, f"set {name}: its records hash to {digest[:12]}, not to its "
                                 "recorded sha256", FIXTURES_FILE, f"sets.{name}.sha256")
                    elif prov.fixtures_sha256.get(name) not in (None, digest):
                        self.add(INCONSISTENT, check, f"set {name}: sha256 {digest[:12]} != provenance.json's "
                                 f"{prov.fixtures_sha256[name][:12]}", PROVENANCE_FILE, f"fixtures_sha256.{name}")
        if len(self.findings) == before:
            self.add(OK, check, "report, summary, fixtures and provenance agree on the prereg and fixture hashes")

    # ----------------------------------------------------------------- the repository

    def check_repository(self) -> None:
        prov = self.provenance
        if prov is None:
            return
        check = "git"
        commit, dirty = prov.git.get("commit"), prov.git.get("dirty")
        if not commit or _git(self.repo, "cat-file", "-e", f"{commit}^{{commit}}") is None:
            self.add(INCONSISTENT, check, f"commit {commit!r} is not in the repository {self.repo} (fetch it, or "
                     "pass --repo PATH of the checkout the run was made from)", PROVENANCE_FILE, "git.commit")
            return
        self.commit = commit
        if dirty is not False:
            self.add(EXPLORATORY, check, f"the checkout had uncommitted changes when the run started "
                     f"(git.dirty = {dirty!r})", PROVENANCE_FILE, "git.dirty")
        else:
            self.add(OK, check, f"commit {commit[:12]} exists and the tree was clean")

        check = "prereg"
        relative, problem = self._repository_path(prov.prereg_path)
        if relative is None:
            self.add(INCONSISTENT, check, f"{prov.prereg_path!r} {problem}", PROVENANCE_FILE, "prereg_path")
            return
        expected = self._registered_prereg()
        if expected is not None and expected != relative:
            self.add(INCONSISTENT, check, f"{relative} is not the prereg of protocol {prov.protocol!r}, which is "
                     f"{expected}", PROVENANCE_FILE, "prereg_path")
            return
        self.prereg_path = relative
        data = _git(self.repo, "show", f"{commit}:{self.prereg_path}", binary=True)
        if data is None:
            self.add(EXPLORATORY, check, f"{self.prereg_path} is not in commit {commit[:12]}: it was never committed "
                     "before the run", PROVENANCE_FILE, "prereg_path")
            return
        self.prereg_bytes = data
        committed = sha256_bytes(data)
        before = len(self.findings)
        if committed != prov.prereg_sha256:
            self.add(EXPLORATORY, check, f"the run read a prereg with sha256 {prov.prereg_sha256[:12]}, commit "
                     f"{commit[:12]} holds {committed[:12]}", PROVENANCE_FILE, "prereg_sha256")
        when = _git(self.repo, "log", "-1", "--format=%cI", commit, "--", self.prereg_path)
        committed_at, started = _parse_time(when or ""), _parse_time(prov.started_at)
        self.prereg_committed_at = when if committed_at is not None else None
        if committed_at is None or started is None:
            self.add(EXPLORATORY, check, f"cannot compare the prereg's commit time {when!r} with the run's start "
                     f"{prov.started_at!r}", PROVENANCE_FILE, "started_at")
        elif committed_at > started:
            self.add(EXPLORATORY, check, f"{self.prereg_path} was last committed at {when}, after the run started "
                     f"at {prov.started_at}", PROVENANCE_FILE, "started_at")
        snapshot = _git(self.repo, "show", f"{commit}:{SNAPSHOT_FILE}")
        frozen = snapshot_hashes(snapshot or "")
        preregs = frozen.get("test_preregistrations_are_frozen", {})
        if self.prereg_path not in preregs:
            self.add(EXPLORATORY, check, f"{self.prereg_path} is not frozen in {SNAPSHOT_FILE} at commit "
                     f"{commit[:12]}", SNAPSHOT_FILE, self.prereg_path)
        elif preregs[self.prereg_path] != prov.prereg_sha256:
            self.add(EXPLORATORY, check, f"the frozen sha256 {preregs[self.prereg_path][:12]} differs from the run's "
                     f"{prov.prereg_sha256[:12]}", SNAPSHOT_FILE, self.prereg_path)
        for name, digest in sorted(prov.fixtures_sha256.items()):
            frozen_set = frozen.get("test_fixture_sets_are_frozen", {}).get(name)
            if frozen_set is not None and frozen_set != digest:
                self.add(EXPLORATORY, check, f"fixture set {name}: frozen sha256 {frozen_set[:12]} differs from the "
                         f"run's {digest[:12]}", SNAPSHOT_FILE, name)
        if len(self.findings) == before:
            self.add(OK, check, f"{self.prereg_path} at {commit[:12]} is the one the run read, committed at {when} "
                     f"before the run started ({prov.started_at}) and frozen in the snapshot")

    # ----------------------------------------------------------------- fixtures, rebuilt

    def _repository_path(self, recorded: Any) -> tuple[str | None, str]:
        """``recorded`` (a path read from the run's files) as a clean path relative to the repository, or None and
        why not: it must name a file inside the repository, outside the run directory, reached through no link."""
        if not isinstance(recorded, str) or not recorded or "\x00" in recorded:
            return None, "is not a path"
        path = Path(recorded)
        if path.is_absolute():
            if ".." in path.parts:
                return None, "is not a normalized path"
            try:
                path = path.relative_to(self.repo)
            except ValueError:
                return None, f"is outside the repository {self.repo}"
        if not path.parts or ".." in path.parts or path.parts[0] in (".", "") or path.name != "prereg.toml":
            return None, f"is not a prereg.toml path inside the repository {self.repo}"
        target = self.repo / path
        if _under(target, self.run_dir):
            return None, "lies inside the run directory; a run directory is never read as part of the repository"
        walked = self.repo
        for part in path.parts[:-1]:
            walked = walked / part
            if walked.is_symlink():
                return None, f"is reached through the link {walked.relative_to(self.repo).as_posix()}"
        return path.as_posix(), ""

    def _registered_prereg(self) -> str | None:
        """The repository-relative prereg path of the registered protocol of the run's name, when that protocol
        lives in the repository (None when the registry does not know it or it lives elsewhere)."""
        found = registry.find(self.provenance.protocol) if self.provenance is not None else None
        if found is None:
            return None
        try:
            return (found.folder / "prereg.toml").relative_to(self.repo).as_posix()
        except ValueError:
            return None

    def _load_protocol(self) -> Any:
        """The run's protocol: the registered one of the name ``provenance.json`` records, else the protocol
        folder of the trusted repository whose prereg the run recorded and the recorded commit holds."""
        name = self.provenance.protocol if self.provenance is not None else None
        if not registry.valid_name(name):
            raise LookupError(f"provenance.json names no valid protocol ({name!r})")
        found = registry.find(name)
        if found is not None:
            return found
        if self.prereg_path is None or self.prereg_bytes is None:
            raise LookupError(f"the registry knows no protocol {name!r}, and the repository holds no committed "
                              "prereg of it at the recorded commit")
        folder = (self.repo / self.prereg_path).parent
        if folder.name != name:
            raise LookupError(f"the registry knows no protocol {name!r}, and {self.prereg_path} is not in a folder "
                              "of that name")
        if (folder / "protocol.py").is_symlink() or not _under(folder.resolve(), self.repo) \
                or _under(folder.resolve(), self.run_dir):
            raise LookupError(f"{folder} is not a protocol folder of the repository {self.repo}")
        protocol = registry.load_folder(folder)
        if protocol.name != name:
            raise LookupError(f"{folder}/protocol.py defines protocol {protocol.name!r}, not {name!r}")
        return protocol

    def check_fixtures(self) -> None:
        prov = self.provenance
        if prov is None or self.fixtures is None:
            return
        check = "fixtures"
        rebuilt: dict[str, Any] = {}
        unregistered = []
        for name in sorted(self.fixtures):
            if name in FIXTURE_SETS:
                rebuilt[name] = sha256_json(FIXTURE_SETS[name]())
            else:
                unregistered.append(name)
        problem = None
        if unregistered:
            try:
                self.protocol = self._load_protocol()
                rebuilt.update(self._rebuild_through_protocol(unregistered))
            except Exception as exc:  # the protocol cannot be rebuilt here: say so in one line
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        before = len(self.findings)
        for name in sorted(self.fixtures):
            recorded = prov.fixtures_sha256.get(name)
            if name not in rebuilt:
                why = problem or ("its generator is neither in fixtures.FIXTURE_SETS nor produced by the protocol "
                                  "with the run's settings")
                self.add(EXPLORATORY, check, f"set {name} was not rebuilt ({why})", FIXTURES_FILE, f"sets.{name}")
            elif rebuilt[name] != recorded:
                self.add(INCONSISTENT, check, f"set {name} rebuilt from its generator hashes to {rebuilt[name][:12]}, "
                         f"the run recorded {str(recorded)[:12]}", FIXTURES_FILE, f"sets.{name}")
        if len(self.findings) == before:
            self.add(OK, check, f"{len(rebuilt)} fixture sets rebuilt from their generators and seeds match")

    def _rebuild_through_protocol(self, names: Iterable[str]) -> dict[str, str]:
        """The hashes of the protocol's own fixture sets, built afresh with the run's model, device and settings
        (only when the options ``options_from_settings`` gives reproduce the recorded settings)."""

        protocol, prov = self.protocol, self.provenance
        identity = dict(prov.identity)
        with tempfile.TemporaryDirectory(prefix="preregbench-verify-") as scratch:
            options = protocol.options_from_settings(identity.get("settings") or {})
            # Units that are data the run directory holds (an imported log's samples) are rebuilt from it, read only.
            root = self.run_dir.parent.parent if getattr(protocol, "data_in_run_dir", False) else Path(scratch)
            run = ProtocolRun(protocol, Run(protocol.name, prov.run_id, root, prov.started_at, protocol.folder),
                              model=identity.get("model"), device=identity.get("device"),
                              scale=protocol.scale_from_settings(identity.get("settings") or {}),
                              revision=identity.get("revision"), options=options)
            if json.loads(json.dumps(run.settings_record)) != identity.get("settings"):
                return {}
            hashes = run.fixture_hashes
        return {name: hashes[name] for name in names if name in hashes}

    # ----------------------------------------------------------------- prospective or not

    def check_prospective(self) -> None:
        """A run that decides data made before it (an imported log, :meth:`Protocol.data_created`) is confirmatory
        only when the prereg was committed before that data existed; otherwise EXPLORATORY, saying so."""
        if self.protocol is None or self.prereg_committed_at is None:
            return
        found = self.protocol.data_created(self.run_dir)
        if found is None:
            if getattr(self.protocol, "data_in_run_dir", False):
                self.add(EXPLORATORY, "prospective", "the run's data records no creation time, so it cannot be shown "
                         "to postdate the prereg", FIXTURES_FILE)
            return
        when, what = found
        created, committed = _parse_time(when), _parse_time(self.prereg_committed_at)
        if created is None or committed is None:
            self.add(EXPLORATORY, "prospective", f"cannot compare {what}'s time {when!r} with the prereg's commit "
                     f"time {self.prereg_committed_at!r}", FIXTURES_FILE)
        elif created < committed:
            self.add(EXPLORATORY, "prospective", f"{what} at {when}, before {self.prereg_path} was committed at "
                     f"{self.prereg_committed_at}: the decision is exploratory, not confirmatory", FIXTURES_FILE)
        else:
            self.add(OK, "prospective", f"{what} at {when}, after {self.prereg_path} was committed at "
                     f"{self.prereg_committed_at}")

    # ----------------------------------------------------------------- the rescorer

    def check_shipped_code(self) -> bool:
        """Whether every file the protocol's rescorer executes from the run directory (``Protocol.shipped_code``)
        is byte for byte its repository file at the recorded commit: only then is the rescorer run, so that verify
        never executes code for which the run directory alone vouches."""
        check = "shipped code"
        try:
            protocol = self.protocol if self.protocol is not None else self._load_protocol()
        except Exception as exc:  # no protocol, no rescorer that could execute anything of the run
            self.add(INCONSISTENT, check, f"the run's protocol cannot be loaded ({one_line(exc)}); the rescorer is "
                     "not run", PROVENANCE_FILE, "protocol")
            return False
        shipped = dict(getattr(protocol, "shipped_code", {}))
        try:
            executed = protocol.executed_files(self.run_dir)
        except Exception as exc:  # the run directory does not say what its rescorer executes
            self.add(INCONSISTENT, check, f"what the rescorer executes cannot be read ({one_line(exc)}); the "
                     "rescorer is not run")
            return False
        for inside in executed:
            source, path = shipped.get(inside), self.run_dir / str(inside)
            if source is None:
                self.add(TAMPERED, check, f"the rescorer would execute {inside!r}, which is no copy of a repository "
                         "file; the rescorer is not run", str(inside))
                return False
            try:
                _size, copy = file_sha256(path)
            except (OSError, ManifestError) as exc:
                self.add(TAMPERED, check, f"cannot be read as a regular file ({exc})", inside)
                return False
            original = _git(self.repo, "show", f"{self.commit}:{source}", binary=True) if self.commit else None
            if original is None:
                self.add(INCONSISTENT, check, f"{source} is not in commit {str(self.commit)[:12]}; the rescorer, "
                         "which executes its copy, is not run", inside)
                return False
            if copy != sha256_bytes(original):
                self.add(TAMPERED, check, f"differs from {source} at commit {str(self.commit)[:12]}; the rescorer, "
                         "which executes it, is not run", inside)
                return False
        return True

    def check_rescorer(self) -> None:
        prov = self.provenance
        if prov is None or self.summary is None:
            return
        if not self.check_shipped_code():
            return
        check = "rescorer"
        folder = Path(self.prereg_path).parent.as_posix() if self.prereg_path else None
        with tempfile.TemporaryDirectory(prefix="preregbench-rescore-") as scratch:
            script, prereg = Path(scratch) / RESCORER_FILE, Path(scratch) / "prereg.toml"
            source = _git(self.repo, "show", f"{self.commit}:{folder}/{RESCORER_FILE}", binary=True) \
                if self.commit and folder else None
            if source is None:
                self.add(INCONSISTENT, check, f"{folder}/{RESCORER_FILE} is not in commit "
                         f"{str(self.commit)[:12]}; every protocol ships a rescorer", RESCORER_FILE)
                return
            script.write_bytes(source)
            if self.prereg_bytes is None:
                self.add(INCONSISTENT, check, "no committed prereg to rescore with", PROVENANCE_FILE, "prereg_path")
                return
            prereg.write_bytes(self.prereg_bytes)
            try:
                done = subprocess.run([sys.executable, "-S", "-I", str(script), str(self.run_dir.resolve()),
                                       "--prereg", str(prereg)], capture_output=True, text=True, cwd="/",
                                      timeout=RESCORER_TIMEOUT, check=False)
            except subprocess.TimeoutExpired:
                self.add(INCONSISTENT, check, f"did not finish within {RESCORER_TIMEOUT} s", RESCORER_FILE)
                return
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        if done.returncode not in (0, 1):
            self.add(INCONSISTENT, check, f"exit status {done.returncode}: {lines[-1] if lines else 'no message'}",
                     RESCORER_FILE)
            return
        try:
            out = bounded.loads(done.stdout, "the rescorer's output")
        except ValueError:
            out = None
        if not isinstance(out, dict) or not isinstance(out.get("disagreements"), list) or "classification" not in out:
            self.add(INCONSISTENT, check, "printed no JSON object with 'classification' and 'disagreements'",
                     RESCORER_FILE)
            return
        if out["disagreements"]:
            first = out["disagreements"][0]
            first = first if isinstance(first, dict) else {"unit": first}
            count = len(out["disagreements"])
            self.add(INCONSISTENT, check, f"unit {first.get('unit')!r}: recorded {first.get('recorded')!r}, recomputed "
                     f"{first.get('recomputed')!r} (the first of {count} disagreement{'s' if count > 1 else ''})",
                     self._ledger_name(), str(first.get("field")))
            return
        recorded_all = self.summary.get("classifications") or {}
        derived = out.get("classifications")
        if isinstance(derived, dict) and derived and set(derived) <= set(recorded_all):
            pairs = [(name, derived[name]) for name in recorded_all if name in derived]
        else:
            pairs = [(self._primary_classification(), out["classification"])]
        for name, label in pairs:
            recorded = recorded_all.get(name) if name else None
            if name is None or label != recorded:
                self.add(INCONSISTENT, check, f"derives {label!r}, the run recorded {name} = {recorded!r}",
                         self._summary_name(), f"classifications.{name}")
                return
        compared = 0
        for table in ("metrics", "intervals"):
            derived, shown = out.get(table), self.summary.get(table)
            if not isinstance(derived, dict) or not isinstance(shown, dict):
                continue
            for key in sorted(set(derived) & set(shown)):
                where = _first_difference(shown[key], derived[key], f"{table}.{key}", tolerance=1e-9, shared=True)
                compared += 1
                if where is not None:
                    path, recorded, recomputed = where
                    self.add(TAMPERED, check, f"shows {recorded!r}, the rescorer recomputes {recomputed!r} from the "
                             "ledger", self._summary_name(), path)
                    return
        self.add(OK, check, "no disagreement; derives " + ", ".join(f"{n} = {l}" for n, l in pairs)
                 + (f"; {compared} metrics and intervals of the summary recomputed alike" if compared else ""))

    # ----------------------------------------------------------------- every figure, recomputed

    def _run_here(self) -> Any:
        """A run of the protocol over this run directory (read only) with the recorded model, device and settings;
        a string saying why there is none when the settings cannot be reproduced here."""
        protocol, prov = self.protocol, self.provenance
        identity = dict(prov.identity)
        options = protocol.options_from_settings(identity.get("settings") or {})
        run = ProtocolRun(protocol, Run(protocol.name, prov.run_id, self.run_dir.parent.parent, prov.started_at,
                                        protocol.folder),
                          model=identity.get("model"), device=identity.get("device"),
                          scale=protocol.scale_from_settings(identity.get("settings") or {}),
                          revision=identity.get("revision"), options=options)
        if json.loads(json.dumps(run.settings_record)) != identity.get("settings"):
            return "the options this protocol derives from the recorded settings do not give them back"
        return run

    def check_figures(self) -> None:
        """The summary (what ``report.json``, ``report.html`` and ``report.md`` show) recomputed from the ledger by
        the protocol's own code: every unit recorded once, every record of this run, every metric, interval,
        classification and count equal to what the run wrote."""
        prov = self.provenance
        if prov is None or self.summary is None:
            return
        check = "figures"
        try:
            if self.protocol is None:
                self.protocol = self._load_protocol()
            run = self._run_here()
        except Exception as exc:  # the protocol cannot be run here: say so in one line
            self.add(EXPLORATORY, check, f"not recomputed: {type(exc).__name__}: {one_line(exc)}",
                     self._summary_name())
            return
        if isinstance(run, str):
            self.add(EXPLORATORY, check, f"not recomputed: {run}", self._summary_name())
            return
        protocol = self.protocol
        ledger = self.run_dir / protocol.ledger_name(run)
        name = ledger.relative_to(self.run_dir).as_posix()
        try:
            records = read_ledger(ledger, protocol.record_type, protocol.record_key)
            identities = read_identities(ledger)
        except (LedgerError, OSError) as exc:
            word = OVER_LIMIT if isinstance(exc, bounded.OverLimitError) else TAMPERED
            self.add(word, check, one_line(exc).replace(str(self.run_dir) + "/", ""), name)
            return
        expected = [protocol.unit_key(u) for u in run.units]
        recorded = [getattr(r, protocol.record_key) for r in records]
        expected_set, recorded_set = set(expected), set(recorded)
        missing = [k for k in expected if k not in recorded_set]
        foreign = [k for k in recorded if k not in expected_set]
        if missing or foreign:
            what = (f"unit {missing[0]!r} of the run is not recorded ({len(missing)} missing)" if missing
                    else f"unit {foreign[0]!r} is not a unit of the run ({len(foreign)} such)")
            self.add(TAMPERED, check, what, name)
            return
        for number, identity in enumerate(identities, start=1):
            if identity != dict(prov.identity):
                self.add(TAMPERED, check, f"line {number} carries another run identity than provenance.json's",
                         name, "identity")
                return
        try:
            measured = protocol.metrics(run, records)
            recomputed = json.loads(json_text(run.build_summary(records, measured), sort_keys=True, allow_nan=False))
        except Exception as exc:
            self.add(EXPLORATORY, check, f"not recomputed: {type(exc).__name__}: {one_line(exc)}",
                     self._summary_name())
            return
        where = _first_difference(self.summary, recomputed, "")
        if where is not None:
            path, shown, again = where
            # A summary that disagrees with a ledger the rescorer found consistent was changed after the run; one
            # that follows from a ledger whose own fields disagree (the rescorer names the unit) is its consequence.
            ledger_inconsistent = any(f.check == "rescorer" and f.word == INCONSISTENT for f in self.findings)
            self.add(INCONSISTENT if ledger_inconsistent else TAMPERED, check,
                     f"shows {shown!r}, the protocol recomputes {again!r} from the ledger", self._summary_name(),
                     path or "(the whole summary)")
            return
        self.add(OK, check, f"{len(records)} records, every unit once, of this run; the summary's "
                 f"{len(recomputed.get('metrics') or {})} metrics, intervals and classifications recomputed alike")

    def _ledger_name(self) -> str:
        records = (self.summary or {}).get("records")
        return records.get("file", "records.jsonl") if isinstance(records, dict) else "records.jsonl"

    def _summary_name(self) -> str:
        """The protocol's summary file (``summary.json`` unless the protocol names another, as P-Zombie's ``stats.json``)."""
        protocol = self.protocol
        if protocol is None and self.prereg_path is not None:
            try:
                protocol = self.protocol = self._load_protocol()
            except Exception:
                protocol = None
        if protocol is None and self.provenance is not None:  # before the repository is read: a registered one
            protocol = registry.find(self.provenance.protocol)
        return getattr(protocol, "summary_file", None) or "summary.json"

    def _primary_classification(self) -> str | None:
        if self.protocol is None:
            try:
                self.protocol = self._load_protocol()
            except Exception:
                self.protocol = None
        if self.protocol is not None:
            return next(iter(self.protocol.classifications.values())).name
        names = sorted((self.summary or {}).get("classifications") or {})
        return names[0] if len(names) == 1 else None

    # ----------------------------------------------------------------- confirmatory

    def check_confirmatory(self) -> None:
        prov = self.provenance
        if prov is None:
            return
        revision = prov.model.get("revision")
        try:
            check_revision(str(revision or ""))
            self.add(OK, "model", f"{prov.model.get('id')} at immutable revision {revision}")
        except ProvenanceError:
            self.add(EXPLORATORY, "model", f"revision {revision!r} is mutable (not a 40-hex commit sha or a "
                     "sha256 content hash)", PROVENANCE_FILE, "model.revision")
        raw = read_json_file(self.run_dir / PROVENANCE_FILE)
        deviations = raw.get("deviations") if "deviations" in raw else (raw.get("extra") or {}).get("deviations")
        if deviations:
            listed = "; ".join(map(str, deviations)) if isinstance(deviations, list) else str(deviations)
            self.add(EXPLORATORY, "deviations", f"the run recorded deviations: {listed}", PROVENANCE_FILE, "deviations")
        else:
            self.add(OK, "deviations", "none recorded")

    def check_limits(self) -> bool:
        """Whether every JSON file is within the size limit and every line of every JSONL file within the line
        limit (read a chunk at a time); a run directory over a limit is OVER_LIMIT and read no further."""
        check = "limits"
        for path in sorted(self.run_dir.rglob("*")):
            name = path.relative_to(self.run_dir).as_posix()
            if path.suffix not in (".json", ".jsonl") or not path.is_file():
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue  # the manifest check names a file that cannot be read
            try:
                if path.suffix == ".json":
                    bounded.check_file_size(fd, name)
                else:
                    for _line in bounded.Lines(fd, name):
                        pass
            except bounded.OverLimitError as exc:
                self.add(OVER_LIMIT, check, str(exc), name)
                return False
            finally:
                os.close(fd)
        return True

    def run(self) -> Outcome:
        if not self.check_entries():
            return Outcome(TAMPERED, tuple(self.findings))
        if not self.check_limits():
            return Outcome(OVER_LIMIT, tuple(self.findings))
        self.check_manifest()
        self.check_records_of_the_run()
        self.check_repository()
        self.check_fixtures()
        self.check_prospective()
        shard = (dict(self.provenance.identity or {}) if self.provenance is not None else {}).get("shard")
        if shard is not None:  # a part of a run: nothing of it is decided, so there is no verdict to check
            self.add(INCONSISTENT, "shard", f"the run directory is shard {shard} of a run and decides nothing; merge "
                     "the shards (preregbench merge OUT SHARD_DIR...) and verify the merged run",
                     PROVENANCE_FILE, "identity.shard")
        else:
            self.check_rescorer()
            self.check_figures()
            self.check_confirmatory()
        worst = max((f.word for f in self.findings), key=_RANK.__getitem__, default=OK)
        return Outcome(VERIFIED if worst == OK else worst, tuple(self.findings))


def verify(run_dir: str | os.PathLike[str], repo: str | os.PathLike[str] | None = None) -> Outcome:
    """Every check of ``run_dir``; :class:`VerifyUsageError` when it is not a run directory or no repository is found."""
    folder = Path(run_dir)
    if not os.path.lexists(folder):
        raise VerifyUsageError(f"{folder}: no such directory; pass RESULTS_DIR/PROTOCOL/RUN_ID")
    if folder.is_symlink() or not folder.is_dir():
        raise VerifyUsageError(f"{folder}: not a directory (a run directory is a real directory "
                               "RESULTS_DIR/PROTOCOL/RUN_ID)")
    if not any(os.path.lexists(folder / name) for name in (PROVENANCE_FILE, MANIFEST_FILE, REPORT_FILE)):
        raise VerifyUsageError(f"{folder}: not a run directory (no {PROVENANCE_FILE}, {MANIFEST_FILE} or "
                               f"{REPORT_FILE}); pass RESULTS_DIR/PROTOCOL/RUN_ID")
    folder = folder.resolve()
    if repo is not None:
        checkout = repository_of(Path(repo)) if Path(repo).is_dir() else None
        if checkout is None:
            raise VerifyUsageError(f"--repo {repo}: not a git checkout; pass the checkout the run was made from")
    else:  # never looked up from the run directory: a downloaded run may carry a repository of its own
        cwd = Path.cwd().resolve()
        checkout = None if _under(cwd, folder) else repository_of(cwd)
        checkout = checkout or repository_of(SUITE_ROOT)
        if checkout is None:
            raise VerifyUsageError("no git checkout holds the current directory; pass --repo PATH of the checkout "
                                   "the run was made from")
    if _under(checkout, folder):
        raise VerifyUsageError(f"the repository {checkout} lies inside the run directory {folder}; verify trusts no "
                               "code shipped with a run: pass --repo PATH of the checkout the run was made from")
    return _Verifier(folder, checkout).run()


def _first_difference(shown: Any, again: Any, path: str, tolerance: float = 0.0,
                      shared: bool = False) -> tuple[str, Any, Any] | None:
    """The first place (a dotted path, keys in sorted order) where two JSON values differ, with both values there;
    None when they agree.  Numbers agree within ``tolerance`` (relative); ``1`` and ``1.0`` agree.  With
    ``shared``, objects are compared on the keys both hold (a rescorer recomputes some fields of an interval,
    not every one the summary shows)."""
    if isinstance(shown, dict) and isinstance(again, dict):
        keys = set(shown) & set(again) if shared else set(shown) | set(again)
        for key in sorted(keys, key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in shown or key not in again:
                return where, shown.get(key, "<absent>"), again.get(key, "<absent>")
            found = _first_difference(shown[key], again[key], where, tolerance, shared)
            if found is not None:
                return found
        return None
    if isinstance(shown, list) and isinstance(again, list):
        if len(shown) != len(again):
            return f"{path}[len]", len(shown), len(again)
        for index, (a, b) in enumerate(zip(shown, again)):
            found = _first_difference(a, b, f"{path}[{index}]", tolerance, shared)
            if found is not None:
                return found
        return None
    numbers = (int, float)
    if isinstance(shown, numbers) and isinstance(again, numbers) and not isinstance(shown, bool) \
            and not isinstance(again, bool):
        if shown == again or abs(shown - again) <= tolerance * max(abs(shown), abs(again)):
            return None
        return path, shown, again
    return None if shown == again and type(shown) is type(again) else (path, shown, again)


def _under(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both resolved)."""
    return path == folder or folder in path.parents


DESCRIPTION = ("Check a finished run: manifest, hashes, repository, fixtures, rescorer. VERIFIED exit 0, "
               "EXPLORATORY 1, TAMPERED or INCONSISTENT 2, OVER_LIMIT 3 (a file over a reading limit), usage 4.")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("run_dir", help="RESULTS_DIR/PROTOCOL/RUN_ID")
    parser.add_argument("--repo", default=None, help="the git checkout the run was made from "
                        "(default: the one holding the current directory, else the suite's own)")


def command(args: argparse.Namespace) -> int:
    try:
        outcome = verify(args.run_dir, args.repo)
    except VerifyUsageError as exc:
        return usage_line("preregbench verify", str(exc))
    for finding in outcome.findings:
        print(finding.line())
    print(outcome.final_line())
    return outcome.exit_status


def main(argv: list[str] | None = None) -> int:
    return run_command("preregbench verify", DESCRIPTION, add_arguments, command, argv)


if __name__ == "__main__":
    raise SystemExit(main())
