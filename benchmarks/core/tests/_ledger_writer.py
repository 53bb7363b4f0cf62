"""Writer process for the kill-and-resume and write-fault ledger tests.

Usage: python -m benchmarks.core.tests._ledger_writer LEDGER UNITS [MODE]

Resumes the ledger and appends every missing unit in order, each with a
payload derived from its index.  MODE:

* absent: append every missing unit and exit 0;
* ``stepped``: before each unit print ``start <unit>`` and wait for a line on
  stdin before appending it, so that the parent decides how far the writer
  gets and where its kill lands (print ``done`` at the end);
* a number: run under that file-size limit with SIGXFSZ at its default
  action, so the kernel stops a write part-way and kills the writer: a kill
  inside a record, at a chosen byte;
* ``efbig:<number>``: the same limit with SIGXFSZ ignored (as the suite's
  plugin sets it), so the write fails with EFBIG; print the error's one line
  and exit 3.
"""

from __future__ import annotations

import hashlib
import resource
import signal
import sys
import warnings
from dataclasses import dataclass
from typing import ClassVar

from benchmarks.core import Ledger
from benchmarks.core.ledger import LedgerWriteError


@dataclass(frozen=True)
class Unit:
    SCHEMA_VERSION: ClassVar[int] = 1
    unit: int
    digest: str
    payload: str


def payload_for(unit: int) -> tuple[str, str]:
    seed = hashlib.sha256(str(unit).encode()).hexdigest()
    size = 64 + int(seed[:6], 16) % 200_000  # up to ~200 kB so that a kill can land inside a write
    text = (seed * (size // 64 + 1))[:size]
    return hashlib.sha256(text.encode()).hexdigest(), text


def _limit(size: int, action: signal.Handlers) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    signal.signal(signal.SIGXFSZ, action)


def main() -> int:
    path, units = sys.argv[1], int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    if mode.isdigit():
        _limit(int(mode), signal.SIG_DFL)  # Python ignores SIGXFSZ by default; let the kernel kill
    elif mode.startswith("efbig:"):
        _limit(int(mode.split(":", 1)[1]), signal.SIG_IGN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ledger = Ledger(path, Unit, key="unit")
    print("ready", flush=True)
    with ledger:
        for unit in range(units):
            if unit in ledger:
                continue
            if mode == "stepped":
                print(f"start {unit}", flush=True)
                if not sys.stdin.readline():
                    return 1
            digest, text = payload_for(unit)
            try:
                ledger.append(Unit(unit=unit, digest=digest, payload=text))
            except LedgerWriteError as exc:
                print(exc, flush=True)
                return 3
    if mode == "stepped":
        print("done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
