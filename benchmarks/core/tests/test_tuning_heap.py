"""tuning.keep_freed_heap: freed memory is reused instead of faulted back in, a user's own malloc settings win,
and PREREGBENCH_TUNING=off leaves the heap alone.

Each check runs in a fresh interpreter (the setting lasts for a process's life) and counts minor page faults,
which are events, not time: a buffer that comes back from the kernel faults once per page it touches.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from benchmarks.core.tuning import MALLOC_VARIABLES, SWITCH

GLIBC_LINUX = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# Four 8 MiB buffers at once, written and freed, five times over.  glibc's own thresholds move up to 8 MiB
# after the first round, but four such buffers leave more than twice that free at the top of the heap, which
# it then trims: every round faults the 32 MiB back in (about 8,000 pages).
_CHURN = textwrap.dedent("""
    import ctypes, json, resource, sys
    sys.path.insert(0, {root!r})
    from benchmarks.core.tuning import keep_freed_heap
    said = keep_freed_heap() if {keep!r} else None
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    size = 8 << 20
    def churn():
        blocks = [libc.malloc(size) for _ in range(4)]
        for block in blocks:
            ctypes.memset(block, 1, size)
        for block in blocks:
            libc.free(block)
    churn()
    churn()  # the heap has grown to its working size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        churn()
    print(json.dumps({{"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, "said": said,
                      "again": keep_freed_heap() if {keep!r} else None}}))
""")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def churn(keep: bool, **extra_env: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not (k in MALLOC_VARIABLES or k in ("GLIBC_TUNABLES", SWITCH))}
    env.update(extra_env)
    done = subprocess.run([sys.executable, "-c", _CHURN.format(root=ROOT, keep=keep)], env=env, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting applies to glibc on Linux only")
def test_freed_buffers_come_back_without_faults_once_the_heap_is_kept() -> None:
    plain = churn(keep=False)
    kept = churn(keep=True)
    assert plain["faults"] > 5 * 4 * 2048 // 2, plain  # glibc as it is: the freed buffers are faulted back in
    assert kept["faults"] < 500, kept  # reused: at most the interpreter's own small growth
    assert kept["said"].startswith("glibc ") and "freed memory kept" in kept["said"]
    assert kept["again"] == kept["said"]  # a second call changes nothing and says the same


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting applies to glibc on Linux only")
@pytest.mark.parametrize("variable, value", [("MALLOC_TRIM_THRESHOLD_", "131072"),
                                             ("GLIBC_TUNABLES", "glibc.malloc.perturb=0")])
def test_a_users_own_malloc_settings_are_kept(variable: str, value: str) -> None:
    result = churn(keep=True, **{variable: value})
    assert result["said"] == f"left as the environment sets it ({variable})"
    assert result["faults"] > 5 * 4 * 2048 // 2  # glibc runs with the user's settings: nothing was changed


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting applies to glibc on Linux only")
def test_with_tuning_off_the_heap_is_left_as_it_is() -> None:
    result = churn(keep=True, **{SWITCH: "off"})
    assert result["said"] == f"left as it is ({SWITCH}=off)"
    assert result["faults"] > 5 * 4 * 2048 // 2  # glibc as it is: the freed buffers are faulted back in


def test_the_setting_is_reported_to_provenance_only_once_made() -> None:
    code = textwrap.dedent(f"""
        import sys, json
        sys.path.insert(0, {ROOT!r})
        from benchmarks.core import tuning
        from benchmarks.core.provenance import hardware_summary
        before = hardware_summary(tuning.ProcessTuning().record())["c_heap"]
        said = tuning.keep_freed_heap()
        print(json.dumps([before, said, hardware_summary(tuning.ProcessTuning().record())["c_heap"]]))
    """)
    done = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    before, said, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before is None and after == said and said
