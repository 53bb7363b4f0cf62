"""Progress of a measurement: a terminal line and ``progress.json`` in the run directory.

A run reports its phase (``loading model``, ``measuring``, ``writing results``,
``finished``; a protocol may name its own, such as ``calibrating``) and, while
measuring, how many units are recorded out of how many, the elapsed time, the
rate and an estimate of the time left.

* **Terminal.** When standard error is a terminal, one line rewritten in place
  after every unit; otherwise a plain line every ``every`` units (a tenth of
  the run, at least one) or when ``interval_s`` seconds (30) have passed since
  the last line, and one at every change of phase.  The line is written past
  pytest's output capture, so it shows while the fixtures run (and from xdist
  workers, whose standard error is the terminal's).
* **``progress.json``.** Rewritten atomically (a temporary file renamed over
  it) at every change of phase, at the last unit, and otherwise at most once a
  second, so another process can watch a run by reading it.  A failure to
  write it is reported once on the terminal and never stops the run: progress
  is not a result.

Fields of ``progress.json``: ``protocol``, ``run_id``, ``phase``,
``units_done`` (recorded, this session and earlier ones), ``units_total``,
``units_this_session``, ``elapsed_s`` (since this session's measurement
began), ``rate_units_per_s`` (this session), ``eta_s`` (null until a rate is
known), ``updated_at`` (UTC, ISO 8601).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

from ._canonical import FileWriteError, atomic_write_json
from .provenance import utc_now

PROGRESS_FILE = "progress.json"

#: (text, in_place) -> None
Emit = Callable[[str, bool], None]


def terminal_emitter(config: Any | None) -> tuple[Emit, bool]:
    """A writer to the terminal that bypasses pytest's capture, and whether standard error is a terminal."""
    capman = config.pluginmanager.getplugin("capturemanager") if config is not None else None

    def write(text: str) -> None:
        stream = sys.stderr
        stream.write(text)
        stream.flush()

    def emit(text: str, in_place: bool) -> None:
        line = ("\r" + text + "\x1b[K") if in_place else (text + "\n")
        if capman is not None:
            with capman.global_and_fixture_disabled():
                write(line)
        else:
            write(line)

    if capman is not None:
        with capman.global_and_fixture_disabled():
            tty = sys.stderr.isatty()
    else:
        tty = sys.stderr.isatty()
    return emit, tty


def _clock_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """The progress of one session's measurement of one protocol run."""

    def __init__(self, run_dir: Path, protocol: str, run_id: str, total: int, done: int = 0, *,
                 emit: Emit | None = None, tty: bool = False, every: int | None = None, interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], str] | None = None):
        self.path = Path(run_dir) / PROGRESS_FILE
        self.protocol, self.run_id = protocol, run_id
        self.total, self.done, self.session = int(total), int(done), 0
        self.emit, self.tty = emit, tty
        self.every = every if every is not None else max(1, self.total // 10)
        self.interval_s = interval_s
        self.clock = clock
        self.now = now or _utc_now
        self.phase_name = "starting"
        self.started = clock()
        #: When the first unit of this session began to be measured (the ``measuring`` phase): the rate counts
        #: from here, so that loading a model is not taken for slow measurement.
        self.measuring_since: float | None = None
        self._last_line = self.started
        self._last_file = float("-inf")
        self._since_line = 0
        self._write_failed = False
        self.lines = 0  # terminal lines (or in-place updates) written: what the tests count

    # ----------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        now = self.clock()
        elapsed = max(0.0, now - self.started)
        measuring = max(0.0, now - (self.measuring_since if self.measuring_since is not None else self.started))
        rate = self.session / measuring if self.session and measuring > 0 else None
        left = self.total - self.done
        eta = (left / rate) if rate else (0.0 if left == 0 else None)
        return {
            "protocol": self.protocol,
            "run_id": self.run_id,
            "phase": self.phase_name,
            "units_done": self.done,
            "units_total": self.total,
            "units_this_session": self.session,
            "elapsed_s": round(elapsed, 3),
            "rate_units_per_s": None if rate is None else round(rate, 4),
            "eta_s": None if eta is None else round(eta, 1),
            "updated_at": self.now(),
        }

    def line(self, state: dict[str, Any] | None = None) -> str:
        s = state or self.state()
        rate = s["rate_units_per_s"]
        rate_text = f"{rate:.2f} units/s" if rate is not None else "rate ?"
        share = f"{100.0 * s['units_done'] / s['units_total']:.0f}%" if s["units_total"] else "-"
        return (f"{self.protocol} {self.run_id}: {s['phase']} {s['units_done']}/{s['units_total']} ({share}) "
                f"elapsed {_clock_text(s['elapsed_s'])}, {rate_text}, left {_clock_text(s['eta_s'])}")

    # ----------------------------------------------------------------- events

    def phase(self, name: str) -> None:
        """Enter phase ``name``: always written to the file and the terminal."""
        if name == self.phase_name:
            return
        self.phase_name = name
        if name == "measuring" and self.measuring_since is None:
            self.measuring_since = self.clock()
        state = self.state()
        self._write(state)
        self._say(state, force=True)

    def advance(self, count: int = 1) -> None:
        """``count`` more units recorded."""
        self.done += count
        self.session += count
        self._since_line += count
        now = self.clock()
        last = self.done >= self.total
        state = self.state()
        if last or now - self._last_file >= 1.0:
            self._write(state)
        self._say(state, force=last)

    # ----------------------------------------------------------------- output

    def _say(self, state: dict[str, Any], force: bool) -> None:
        if self.emit is None:
            return
        now = self.clock()
        due = self.tty or force or self._since_line >= self.every or now - self._last_line >= self.interval_s
        if not due:
            return
        text = self.line(state)
        if not self.lines and not self.tty:
            text = "\n" + text  # off the end of pytest's line of test outcomes
        self.emit(text, self.tty and not force)
        self.lines += 1
        self._last_line = now
        self._since_line = 0

    def _write(self, state: dict[str, Any]) -> None:
        self._last_file = self.clock()
        if not self.path.parent.is_dir():
            return
        try:
            atomic_write_json(self.path, state)
        except (FileWriteError, ValueError, OSError) as exc:
            if not self._write_failed and self.emit is not None:
                self.emit(f"{self.protocol} {self.run_id}: progress.json not written ({exc}); the run goes on", False)
            self._write_failed = True


def _utc_now() -> str:
    return utc_now()


__all__ = ["PROGRESS_FILE", "Progress", "terminal_emitter"]
