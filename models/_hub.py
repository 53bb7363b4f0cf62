"""Hub resolution for the transformers backend: a hub id's revision pinned to a commit sha (through the hub, or
offline through the local cache's layout), the ``from_pretrained`` options that load exactly that commit, and the
content hash that stands for a local folder's revision."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from ._base import ModelUnavailableError

_SHA1 = re.compile(r"^[0-9a-f]{40}$")
OFFLINE_ALTERNATIVES = "smollm2-135m-instruct, gemma-3-270m"


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_cache_dir(cache_dir: str | Path | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    return home / "hub"


def cached_revision(repo_id: str, revision: str, cache_dir: str | Path | None = None) -> str | None:
    """The commit sha that the local hub cache records for ``revision`` (a branch or tag), if its snapshot exists."""
    repo = hub_cache_dir(cache_dir) / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / revision
    if not ref.is_file():
        return None
    sha = ref.read_text().strip()
    if _SHA1.match(sha) and (repo / "snapshots" / sha).is_dir():
        return sha
    return None


def resolve_revision(repo_id: str, revision: str = "main", cache_dir: str | Path | None = None) -> tuple[str, str]:
    """Resolve ``revision`` to an immutable commit sha: (sha, "pinned" | "hub" | "cache").

    Online the hub answers (10 s timeout); offline, or when the hub fails, the
    local cache's ``refs/<revision>`` does.  Neither: :class:`ModelUnavailableError`.
    """
    if _SHA1.match(revision):
        return revision, "pinned"
    hub_problem = "HF_HUB_OFFLINE is set"
    if not hub_offline():
        try:
            from huggingface_hub import HfApi

            return HfApi().model_info(repo_id, revision=revision, timeout=10).sha, "hub"
        except Exception as exc:  # network down, unknown repo, gated model: all end in the cache look-up
            hub_problem = f"the hub did not answer ({type(exc).__name__})"
    sha = cached_revision(repo_id, revision, cache_dir)
    if sha is not None:
        return sha, "cache"
    cache = hub_cache_dir(cache_dir)
    raise ModelUnavailableError(
        f"{repo_id}@{revision}: cannot resolve the revision to a commit sha: {hub_problem}, and the local cache "
        f"{cache} has no models--{repo_id.replace('/', '--')}/refs/{revision} with its snapshot. Get the weights on "
        f"a machine with hub access (huggingface-cli download {repo_id} --revision {revision}) and copy that "
        f"models--... folder into {cache}, or pass a local model folder with --model PATH. Offline, the bundled "
        f"models run without any download: {OFFLINE_ALTERNATIVES}."
    )


def pinned_options(repo_id: str, revision: str,
                   cache_dir: str | Path | None = None) -> tuple[str, str, dict[str, Any]]:
    """(sha, how, options): the commit sha and how :func:`resolve_revision` found it, and the keyword arguments
    that make transformers' ``from_pretrained`` load exactly that commit (from the local cache alone when offline
    or when only the cache knew the sha)."""
    sha, how = resolve_revision(repo_id, revision, cache_dir)
    local_only = hub_offline() or how == "cache"
    return sha, how, {"revision": sha, "cache_dir": str(cache_dir) if cache_dir else None, "local_files_only": local_only}


def weights_unavailable(repo_id: str, sha: str, problem: OSError) -> ModelUnavailableError:
    """The error for a pinned commit whose weights ``from_pretrained`` could not load (``problem``)."""
    return ModelUnavailableError(
        f"{repo_id}@{sha}: the weights are not available ({problem}); offline, the bundled models run "
        f"without any download: {OFFLINE_ALTERNATIVES}"
    )


def folder_hash(folder: Path) -> str:
    """``sha256:<hex>`` over every file of a model folder (relative path and content)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"
