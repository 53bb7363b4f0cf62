"""The C heap of a process that runs a model on the CPU: freed memory stays in the process.

A forward pass allocates and frees the same large temporaries layer after layer
(SmolLM2 at the RES batch: several 9 MB activations per layer).  glibc's malloc
hands allocations above its mmap threshold to the kernel and back on every free,
and trims the top of its heap once more than twice that threshold lies free; every
such buffer then comes back as fresh pages, each one a page fault the kernel
zeroes.  A RES run on SmolLM2 took about 650,000 minor faults in its model phase
that way (a few seconds on a virtual machine, where a fault also costs the host).
:func:`keep_freed_heap` raises both limits for the rest of the process, so freed
buffers are reused: the same run takes about 100,000, the first batch growing the
heap once.  Only where memory comes from changes, not what is computed; the peak
resident size stays what it was, and the process keeps its heap until it exits.
"""

from __future__ import annotations

import ctypes
import os
import sys

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

_state: str | None = None


def keep_freed_heap() -> str:
    """Keep freed memory in this process's heap (glibc on Linux); returns what was done, in words.

    Idempotent.  Nothing changes where the C library is not glibc, or where the environment already sets
    glibc's malloc parameters (``MALLOC_*_`` variables, or ``glibc.malloc`` tunables in ``GLIBC_TUNABLES``).
    The setting lasts until the process ends: glibc has no way to read it back and restore it.
    """
    global _state
    if _state is not None:
        return _state
    _state = _apply()
    return _state


def heap_setting() -> str | None:
    """What :func:`keep_freed_heap` did in this process, in words; None when it was not called."""
    return _state


def _apply() -> str:
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
