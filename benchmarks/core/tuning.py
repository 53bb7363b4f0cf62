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
collector              the cycle collector paused while the model loads, and what the load made moved
                       to the oldest generation (:func:`collector_paused`); while the units are
                       measured, what exists after the load (the model, its libraries' modules) is
                       frozen out of the collector's generations (``gc.freeze``), so full collections
                       do not walk torch's object graphs; ``preregbench run`` freezes everything at
                       the session end
threads                a protocol that asks for ``threads="auto"`` gets the CPUs other processes
                       leave idle when its model has loaded (:func:`cpu_threads`); off: torch's own
                       count
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
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import models

from . import _figures_ahead
from .protocol import Protocol
from .registry import find
from .report import render_figures, warm_figures
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


# --------------------------------------------------------------------------- threads

#: Environment variables through which a user fixes the intra-op thread count (torch reads them at import).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: Where the kernel counts the runnable tasks of the whole machine (Linux).
PROC_STAT = "/proc/stat"


def cpu_threads(default: int) -> int:
    """Intra-op threads for a CPU model whose protocol asks for ``threads="auto"``; ``default`` is torch's count.

    An explicit setting wins: with ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` set, ``default`` (which follows
    them) is kept.  Otherwise it is capped by the CPUs that other processes leave idle now: the usable CPUs less
    :func:`busy_cpus`, rounded, at least 1.  On a shared machine OpenMP threads wait at every parallel region
    for a preempted sibling, and one thread finishes sooner than two.  The count changes the schedule of the
    arithmetic, not the model's inputs; the RES model-phase benchmark compares the records of both settings.
    """
    if any(os.environ.get(name, "").strip() for name in THREAD_VARIABLES):
        return default
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or default
    busy = busy_cpus()
    if busy is None:
        return default
    return max(1, min(default, round(usable - busy)))


def busy_cpus(samples: int = 20, interval: float = 0.005) -> float | None:
    """How many CPUs other processes keep busy now: the runnable tasks besides this one, averaged over ``samples``
    reads of ``procs_running`` in /proc/stat ``interval`` seconds apart (0.1 s in all).

    The 1-minute load average is the fallback where /proc/stat cannot be read (None when neither can).  It
    trails the machine by a minute: right after another job ends it still counts that job.
    """
    counts = []
    try:
        for i in range(samples):
            if i:
                time.sleep(interval)
            with open(PROC_STAT, "rb") as handle:
                text = handle.read()
            start = text.index(b"\nprocs_running ") + len(b"\nprocs_running ")
            counts.append(max(0, int(text[start:text.index(b"\n", start)]) - 1))  # less this thread, running
    except (OSError, ValueError):
        counts = []
    if counts:
        return sum(counts) / len(counts)
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


# --------------------------------------------------------------------------- the collector


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while a model loads: importing torch and transformers and building the model
    make millions of long-lived objects, and every full collection they trigger walks all of them (about 0.5 s
    of a SmolLM2 load on a 2-core machine) to find almost no garbage.  A load is one bounded step, so nothing
    accumulates; the collector is on again afterwards if it was on before.

    Those objects would still sit in the youngest generation, and the first allocations after the load would
    walk them twice, in a young and then a middle collection (about 0.3 s for SmolLM2).  So they go straight
    to the oldest generation (``gc.freeze`` then ``gc.unfreeze``, which moves every tracked object there without
    a walk), unless something else holds frozen objects, which the unfreeze would release."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


# --------------------------------------------------------------------------- figures drawn ahead


def _loads_weights(name: str) -> bool:
    """Whether model ``name`` is one the transformers backend loads (bundled, a local folder, a hub id)."""
    try:
        return models.check_model_name(name) in {"bundled", "local", "hub"}
    except Exception:  # an unknown name fails in load_model with its own message
        return False


def draw_figures_ahead(protocol: Protocol, run_dir: Path) -> bool:
    """Fork a copy of this process that readies matplotlib now and draws ``run_dir``'s figures when its report
    is written; False when none was made (not Linux, torch already imported, another thread running)."""
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
        self._auto_threads = False

    def model_options(self, run: ProtocolRun, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("threads") == "auto":  # chosen once the model has loaded (model_loaded)
            self._auto_threads = True
            options = {**options, "threads": None}
        return options

    def before_model_load(self, run: ProtocolRun) -> None:
        protocol = run.protocol
        if type(protocol).report_figures is not Protocol.report_figures and _loads_weights(run.model):
            self.done["figures_ahead"] = draw_figures_ahead(protocol, run.location)

    @contextlib.contextmanager
    def loading_model(self, run: ProtocolRun) -> Iterator[None]:
        with collector_paused():
            yield
        self.done["collector_during_load"] = "paused; what the load made moved to the oldest generation"

    def model_loaded(self, run: ProtocolRun, model: Any) -> None:
        set_threads = getattr(model, "set_threads", None)
        if not self._auto_threads or set_threads is None or model.describe().device != "cpu":
            return
        import torch  # the model loaded on torch: it is imported already, this only names it

        count = cpu_threads(torch.get_num_threads())
        set_threads(count)
        self.done["threads"] = count

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

__all__ = ["DRAWN_AHEAD", "MALLOC_VARIABLES", "PROC_STAT", "ProcessTuning", "SWITCH", "THREAD_VARIABLES", "Untuned",
           "at_session_end", "busy_cpus", "collector_paused", "cpu_threads", "draw_figures_ahead", "enabled",
           "figures_drawn_ahead", "for_run", "heap_setting", "keep_freed_heap"]
