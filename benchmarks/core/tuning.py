"""How a protocol run's process is tuned for speed: every such trick in one place, behind one switch.

None of these changes a record: they change where memory comes from, when the
cycle collector walks, how many threads compute, and which process draws the
report's figures.  ``PREREGBENCH_TUNING=off`` in the environment turns all of
them off (the run is then measured by a plain Python process); what was done
is recorded in ``provenance.json`` under ``hardware.tuning`` (and the heap's
setting under ``hardware.c_heap``).

=====================  ===========================================================================
trick                  what it does
=====================  ===========================================================================
C heap                 ``preregbench run`` keeps freed memory in the process's glibc heap
                       (:func:`keep_freed_heap`): a forward pass frees and re-allocates the same
                       large temporaries, which otherwise come back as fresh zeroed pages
collector              while the units are measured, what exists after the model load (the model,
                       its libraries' modules) is frozen out of the cycle collector's generations
                       (``gc.freeze``), so full collections do not walk torch's object graphs;
                       ``preregbench run`` freezes everything at the session end
threads                a protocol that asks for ``threads="auto"`` gets the CPU count the machine
                       leaves idle (the model backend's choice); off: torch's own count
figures ahead          a run whose protocol draws report figures and whose model loads weights
                       forks a copy of the process before the load; it readies matplotlib on the
                       idle core and draws the figures when the report is written (Linux, before
                       torch is imported, no other thread; ``PREREGBENCH_FIGURES_IN_PROCESS=1``
                       keeps only this one off)
=====================  ===========================================================================
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from . import _figures_ahead
from .protocol import Protocol
from .report import pyplot, render_figures, warm_figures
from .run import ProtocolRun, RunTuning

#: The one switch: ``off`` (also ``0``, ``no``, ``false``) turns every trick of this module off.
SWITCH = "PREREGBENCH_TUNING"


def enabled() -> bool:
    """Whether the environment leaves process tuning on (the default)."""
    return os.environ.get(SWITCH, "").strip().lower() not in {"off", "0", "no", "false"}


# --------------------------------------------------------------------------- the C heap

#: glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Allocations of this size or more still go to the kernel directly: the largest mmap threshold glibc accepts
#: on a 64-bit system.
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap beyond this goes back to the kernel.
TRIM_THRESHOLD = 1 << 30
#: A user who sets any of these chose the allocator's behaviour; it is kept.
MALLOC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_heap: str | None = None


def keep_freed_heap() -> str:
    """Keep freed memory in this process's heap (glibc on Linux); returns what was done, in words.

    A forward pass allocates and frees the same large temporaries layer after
    layer; above glibc's mmap threshold each one goes back to the kernel on
    free and returns as fresh pages, each a page fault the kernel zeroes (a RES
    run on SmolLM2: about 650,000 minor faults in its model phase, about
    100,000 with the heap kept).  Idempotent.  Nothing changes where the C
    library is not glibc, where the environment already sets glibc's malloc
    parameters (``MALLOC_*_`` variables, ``glibc.malloc`` tunables in
    ``GLIBC_TUNABLES``), or where tuning is off.  The setting lasts until the
    process ends: glibc cannot read it back.
    """
    global _heap
    if _heap is None:
        _heap = _apply_heap() if enabled() else f"left as it is ({SWITCH}=off)"
    return _heap


def heap_setting() -> str | None:
    """What :func:`keep_freed_heap` did in this process, in words; None when it was not called."""
    return _heap


def _apply_heap() -> str:
    if not sys.platform.startswith("linux"):
        return f"left as it is ({sys.platform} is not Linux)"
    chosen = [name for name in MALLOC_VARIABLES if os.environ.get(name, "").strip()]
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        chosen.append("GLIBC_TUNABLES")
    if chosen:
        return f"left as the environment sets it ({', '.join(chosen)})"
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "left as it is (the C library is not glibc)"
    version.restype = ctypes.c_char_p
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return f"left as it is (glibc {version().decode()} refused the mallopt settings)"
    return (f"glibc {version().decode()}: freed memory kept (mmap threshold {MMAP_THRESHOLD >> 20} MiB, "
            f"trim threshold {TRIM_THRESHOLD >> 30} GiB)")


# --------------------------------------------------------------------------- figures drawn ahead


def _loads_weights(name: str) -> bool:
    """Whether model ``name`` is one the transformers backend loads (bundled, a local folder, a hub id)."""
    import models  # the model registry and its HTTP client: only a run that is about to load a model asks

    try:
        return models.check_model_name(name) in {"bundled", "local", "hub"}
    except Exception:  # an unknown name fails in load_model with its own message
        return False


def draw_figures_ahead(protocol: Protocol, run_dir: Path) -> bool:
    """Fork a copy of this process that readies matplotlib now and draws ``run_dir``'s figures when its report
    is written; False when none was made (not Linux, torch already imported, another thread running)."""
    from .registry import find

    def render(name: str, folder: Path, summary: Mapping[str, Any]) -> tuple[list, list[str]]:
        notes: list[str] = []
        return render_figures(find(name) or protocol, folder, summary, notes), notes

    return _figures_ahead.start(run_dir, warm_figures, render)


def figures_drawn_ahead(protocol: Any, run_dir: Path, summary: Mapping[str, Any]) -> tuple[list, list[str]] | None:
    """The figures and notes the copy waiting for ``run_dir`` drew (None when no copy waits or it failed):
    the report's ``drawn_ahead`` hook."""
    ahead = _figures_ahead.draw(protocol.name, run_dir, summary)
    if isinstance(ahead, tuple) and len(ahead) == 2 and isinstance(ahead[0], list) and isinstance(ahead[1], list):
        return ahead
    return None


# --------------------------------------------------------------------------- the run's tuning


class ProcessTuning(RunTuning):
    """The tuning of a run's process (see the module's table); one per run."""

    def __init__(self) -> None:
        self.done: dict[str, Any] = {}

    def model_options(self, run: ProtocolRun, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("threads") == "auto":
            self.done["threads"] = "auto: the CPUs the machine leaves idle when the model is loaded"
        return options

    def before_model_load(self, run: ProtocolRun) -> None:
        protocol = run.protocol
        if type(protocol).report_figures is not Protocol.report_figures and _loads_weights(run.model):
            self.done["figures_ahead"] = draw_figures_ahead(protocol, run.location)

    @contextlib.contextmanager
    def measuring(self, run: ProtocolRun) -> Iterator[None]:
        # What exists now (the model, its libraries' modules) outlives the measurement: frozen out of
        # the cycle collector's generations, it is not walked again by every full collection the
        # batches trigger (each one a walk over torch's and transformers' object graphs, about 0.1 s on
        # a 2-core machine).  Unfrozen when the measurement ends, so a long-lived process (a test
        # worker running many protocols) collects it as before.
        gc.freeze()
        self.done["collector"] = "frozen while the units were measured"
        try:
            yield
        finally:
            gc.unfreeze()

    def record(self) -> dict[str, Any]:
        return {"enabled": True, **({"c_heap": _heap} if _heap is not None else {}), **self.done}


class Untuned(RunTuning):
    """Tuning switched off: a plain process (``threads="auto"`` becomes torch's own count)."""

    def record(self) -> dict[str, Any]:
        return {"enabled": False, "switch": f"{SWITCH}=off"}


def for_run(run: ProtocolRun) -> RunTuning:
    """The tuning a run gets in this process (off with ``PREREGBENCH_TUNING=off``)."""
    return ProcessTuning() if enabled() else Untuned()


def at_session_end() -> None:
    """``preregbench run``'s process ends with its session: every live object (torch's and transformers'
    modules, the model) moves to the collector's permanent generation, sparing the full collections still to
    come (pytest's unconfigure, the interpreter's exit) a walk over graphs that live to the end anyway (about
    1 s of a RES run on SmolLM2).  Objects still die by reference count."""
    if enabled():
        gc.freeze()


#: The report's hook for figures a copy drew ahead (passed to ``report.write_reports`` by the plugin).
DRAWN_AHEAD: Callable[[Any, Path, Mapping[str, Any]], Any] = figures_drawn_ahead

__all__ = ["DRAWN_AHEAD", "ProcessTuning", "SWITCH", "Untuned", "at_session_end", "draw_figures_ahead", "enabled",
           "figures_drawn_ahead", "for_run", "heap_setting", "keep_freed_heap", "pyplot"]
