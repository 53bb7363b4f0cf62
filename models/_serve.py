"""Serve a local model folder with `transformers serve` on loopback, for the HTTP backend.

``serve_locally`` starts the OpenAI-compatible server that ships with
transformers (extra ``serving``) on a free 127.0.0.1 port, waits until
``/health`` answers, yields the base URL and the model name requests must use,
and stops the server on exit.  It works offline: the folder is loaded from disk.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ._base import ModelUnavailableError

__all__ = ["serve_locally"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@contextmanager
def serve_locally(folder: str | Path, logs: str | Path, *, threads: int = 1, startup_timeout: float = 120.0,
                  stop_timeout: float = 20.0) -> Iterator[tuple[str, str]]:
    """Serve ``folder`` on a free loopback port; yields ``(base_url, model_name)``.

    The server is started with the folder as its forced model, so requests must
    name exactly that path (any other name is answered with HTTP 400).  It
    computes on ``threads`` OpenMP threads: on two shared cores one thread kept
    an 8-token request near 0.4 s where two made it ten times slower.  Its
    stdout and stderr go to ``logs``; a server that exits or does not answer
    within ``startup_timeout`` raises ``ModelUnavailableError`` with the end of
    its stderr.
    """
    folder = str(folder)
    logs = Path(logs)
    logs.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", "--host", "127.0.0.1",
               "--port", str(port), "--device", "cpu", "--dtype", "float32", folder]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    with open(logs / "stdout.txt", "wb") as out, open(logs / "stderr.txt", "wb") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise ModelUnavailableError(
                    f"transformers serve exited with {process.returncode}:\n{_tail(logs / 'stderr.txt')}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ModelUnavailableError(
                    f"transformers serve did not answer /health within {startup_timeout:.0f} s:\n"
                    f"{_tail(logs / 'stderr.txt')}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", folder
    finally:
        process.terminate()  # in-flight requests are finished first; do not wait for them long
        try:
            process.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
