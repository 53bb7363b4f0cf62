"""A run's report figures drawn by a forked copy of its process, made ready while the model loads.

Drawing a run's figures costs about half a second on a 2-core machine, more than half of it importing
matplotlib and loading its fonts, and the run's process pays it at the very end.  A run on a transformers
model spends its first seconds importing torch and loading weights on one core.  :func:`start`, called just
before that load, forks a copy of the process that imports matplotlib and draws a throwaway figure on the
other core, then waits.  When the report is written, :func:`draw` hands the copy the run's protocol name and
summary; it draws with the report's own code (``report.render_figures``, so the SVG bytes are those the
process would have drawn itself) and sends back the figures and notes.

The copy is made only where that is safe: on Linux, before torch is imported, with no other thread running
(and not at all with ``PREREGBENCH_FIGURES_IN_PROCESS=1`` in the environment).
It closes every inherited descriptor but its two pipes, ignores Ctrl-C (the run's process decides), touches
no file, writes nothing, and leaves with ``os._exit``; when the run's process goes away its pipe reads
end-of-file and the copy exits.  A copy that is gone, fails, or answers with something else is ignored and
the figures are drawn in the run's process as before.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

#: Set to a non-empty value, this environment variable keeps the drawing in the run's process.
OPT_OUT = "PREREGBENCH_FIGURES_IN_PROCESS"
#: run directory (resolved) -> (pid, request pipe, answer pipe) of its copy
_WAITING: dict[Path, tuple[int, int, int]] = {}


def usable() -> bool:
    """Whether forking a copy is safe here: Linux, torch not yet imported, the main thread alone, and the
    environment does not say ``PREREGBENCH_FIGURES_IN_PROCESS=1``."""
    return (not os.environ.get(OPT_OUT, "").strip() and sys.platform.startswith("linux") and "torch" not in sys.modules
            and threading.active_count() == 1 and threading.current_thread() is threading.main_thread())


def start(run_dir: Path, warm: Callable[[], None], render: Callable[[str, Path, Mapping[str, Any]], Any]) -> bool:
    """Fork the copy that will draw the figures of ``run_dir``; False when none was made.

    ``warm()`` runs in the copy at once (imports, a throwaway figure); ``render(name, run_dir, summary)`` runs
    there on request and returns what :func:`draw` hands back.
    """
    key = Path(run_dir).resolve()
    if key in _WAITING or not usable():
        return False
    request_r, request_w = os.pipe()
    answer_r, answer_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (request_r, request_w, answer_r, answer_w):
            os.close(fd)
        return False
    if pid == 0:  # the copy: never returns
        _serve(request_r, answer_w, warm, render)
    os.close(request_r)
    os.close(answer_w)
    _WAITING[key] = (pid, request_w, answer_r)
    return True


def _serve(request_r: int, answer_w: int, warm: Callable[[], None], render: Callable[..., Any]) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.closerange(3, request_r)
        os.closerange(request_r + 1, answer_w)
        os.closerange(answer_w + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096)
        try:
            warm()
        except Exception:
            pass  # the request draws from scratch then
        message = _read_all(request_r)
        if message:
            name, run_dir, summary = pickle.loads(message)
            answer = pickle.dumps(render(name, Path(run_dir), summary))
            view = memoryview(answer)
            while view:
                view = view[os.write(answer_w, view):]
            code = 0
    except BaseException:
        pass
    finally:
        os._exit(code)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def draw(name: str, run_dir: Path, summary: Mapping[str, Any]) -> Any | None:
    """What the copy waiting for ``run_dir`` draws for ``summary``; None when no copy waits or it fails."""
    waiting = _WAITING.pop(Path(run_dir).resolve(), None)
    if waiting is None:
        return None
    pid, request_w, answer_r = waiting
    try:
        try:
            message = pickle.dumps((name, str(run_dir), dict(summary)))
            view = memoryview(message)
            while view:
                view = view[os.write(request_w, view):]
        finally:
            os.close(request_w)
        answer = _read_all(answer_r)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0 or not answer:
            return None
        return pickle.loads(answer)
    except Exception:
        return None
    finally:
        os.close(answer_r)
        _reap(pid)


def discard(run_dir: Path) -> None:
    """Let the copy waiting for ``run_dir`` (if any) go without drawing: it reads end-of-file and exits."""
    waiting = _WAITING.pop(Path(run_dir).resolve(), None)
    if waiting is not None:
        pid, request_w, answer_r = waiting
        os.close(request_w)
        os.close(answer_r)
        _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # already waited for
