"""Report figures drawn by a forked copy of the run's process (benchmarks.core._figures_ahead).

Each check runs in a fresh interpreter: the copy is made only before torch is imported and with no other
thread running, which a test worker cannot promise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.core.rundir import SUITE_ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the copy is forked on Linux only")


def fresh(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=SUITE_ROOT, text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["res", "pzombie", "cwr", "ladder"])
def test_the_copy_draws_the_same_svg_bytes_as_the_process_itself(tmp_path: Path, name: str) -> None:
    from benchmarks.core.tests._report_runs import make_run

    run_dir = make_run(tmp_path, name)
    result = fresh("""
        import hashlib, json, os, sys
        from pathlib import Path
        from benchmarks.core import _figures_ahead, report, tuning
        run_dir = Path(sys.argv[1])
        protocol = report.find_protocol(sys.argv[2])
        summary = json.loads(report.summary_file(run_dir, protocol).read_text())
        started = tuning.draw_figures_ahead(protocol, run_dir)
        ahead = _figures_ahead.draw(protocol.name, run_dir, summary)
        notes = []
        here = report.render_figures(protocol, run_dir, summary, notes)
        print(json.dumps({"started": started, "ahead": [[s, t, c, hashlib.sha256(b).hexdigest()] for s, t, c, b in ahead[0]],
                          "ahead_notes": ahead[1], "here": [[s, t, c, hashlib.sha256(b).hexdigest()] for s, t, c, b in here],
                          "here_notes": notes}))
    """, str(run_dir), name)
    assert result["started"] is True
    assert result["ahead"] and result["ahead"] == result["here"]  # same files, titles, captions and bytes
    assert result["ahead_notes"] == result["here_notes"]


def test_the_report_takes_the_copys_figures_and_falls_back_when_it_fails(tmp_path: Path) -> None:
    from benchmarks.core.tests._report_runs import make_run

    run_dir = make_run(tmp_path, "res")
    result = fresh("""
        import json, os, signal, sys
        from pathlib import Path
        from benchmarks.core import _figures_ahead, report, tuning
        run_dir = Path(sys.argv[1])
        protocol = report.find_protocol("res")
        out = {}
        # a copy that answers: its pid is in what it drew, so the drawing happened there
        _figures_ahead.start(run_dir, lambda: None, lambda name, folder, summary: ([("s", name, str(os.getpid()), b"<svg/>")], ["n"]))
        view = report.load_run(run_dir, drawn_ahead=tuning.DRAWN_AHEAD)
        out["taken"] = [[s, t, c] for s, t, c, _ in view.figures]
        out["parent"] = os.getpid()
        out["notes"] = view.notes
        # a copy whose drawing raises, and one killed before it is asked: the process draws itself
        def boom(name, folder, summary):
            raise RuntimeError("no figures here")
        _figures_ahead.start(run_dir, lambda: None, boom)
        out["after_failure"] = [s for s, *_ in report.load_run(run_dir, drawn_ahead=tuning.DRAWN_AHEAD).figures]
        _figures_ahead.start(run_dir, lambda: None, boom)
        os.kill(_figures_ahead._WAITING[run_dir.resolve()][0], signal.SIGKILL)
        out["after_kill"] = [s for s, *_ in report.load_run(run_dir, drawn_ahead=tuning.DRAWN_AHEAD).figures]
        out["left"] = len(_figures_ahead._WAITING)
        print(json.dumps(out))
    """, str(run_dir))
    (stem, name, pid), = result["taken"]
    assert stem == "s" and name == "res" and int(pid) != result["parent"] and "n" in result["notes"]
    assert result["after_failure"] == result["after_kill"] == ["margin_by_condition", "logit_vs_generated", "parser_coverage"]
    assert result["left"] == 0


def test_no_copy_when_opted_out_once_torch_is_imported_or_while_another_thread_runs(tmp_path: Path) -> None:
    result = fresh("""
        import json, sys, threading
        from pathlib import Path
        from benchmarks.core import _figures_ahead
        out = {"alone": _figures_ahead.usable()}
        import os
        os.environ["PREREGBENCH_FIGURES_IN_PROCESS"] = "1"
        out["opted_out"] = _figures_ahead.start(Path(sys.argv[1]), lambda: None, lambda *a: None)
        del os.environ["PREREGBENCH_FIGURES_IN_PROCESS"]
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        out["thread"] = _figures_ahead.start(Path(sys.argv[1]), lambda: None, lambda *a: None)
        stop.set(); worker.join()
        import torch  # noqa: F401
        out["torch"] = _figures_ahead.start(Path(sys.argv[1]), lambda: None, lambda *a: None)
        print(json.dumps(out))
    """, str(tmp_path))
    assert result == {"alone": True, "opted_out": False, "thread": False, "torch": False}


def test_a_copy_never_asked_leaves_with_the_process(tmp_path: Path) -> None:
    result = fresh("""
        import json, os, sys
        from pathlib import Path
        from benchmarks.core import _figures_ahead
        _figures_ahead.start(Path(sys.argv[1]), lambda: None, lambda *a: None)
        pid = _figures_ahead._WAITING[Path(sys.argv[1]).resolve()][0]
        # the copy holds a pipe to us; when it exits, reading its status tells us so
        _figures_ahead.discard(Path(sys.argv[1]))
        print(json.dumps({"pid": pid, "gone": not os.path.exists(f"/proc/{pid}"), "left": len(_figures_ahead._WAITING)}))
    """, str(tmp_path))
    assert result["gone"] and result["left"] == 0
    # and one the process never asks nor lets go ends when the process does: its request pipe reads end-of-file
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        from pathlib import Path
        from benchmarks.core import _figures_ahead
        _figures_ahead.start(Path(sys.argv[1]), lambda: None, lambda *a: None)
        print(_figures_ahead._WAITING[Path(sys.argv[1]).resolve()][0])
    """), str(tmp_path)], cwd=SUITE_ROOT, text=True, capture_output=True, timeout=120)
    pid = int(done.stdout.strip())
    # the copy is the child of an exited process: it was reparented and reaped by init once it left; wait on that
    # event through pidfd where available, else poll /proc until it is gone (it has nothing left to do)
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, ProcessLookupError, OSError):
        fd = None
    if fd is not None:
        import select

        try:
            assert select.select([fd], [], [], 60)[0], f"copy {pid} still running 60 s after its process ended"
        finally:
            os.close(fd)
    else:
        import time

        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{pid}")
