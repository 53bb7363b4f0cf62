"""Writer process for the kill-and-resume ledger test.

Usage: python -m benchmarks.core.tests._ledger_writer LEDGER UNITS [MAX_FILE_BYTES].
Resumes the ledger and appends every missing unit in order, each with a
payload derived from its index.  With MAX_FILE_BYTES the process runs under
that file-size limit, so the kernel stops a write part-way and kills the
writer with SIGXFSZ: a kill inside a record, at a chosen byte.
"""

from __future__ import annotations

import hashlib
import resource
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from typing import ClassVar

from benchmarks.core import Ledger


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


def main() -> None:
    path, units = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        limit = int(sys.argv[3])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it by default; let the kernel kill
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ledger = Ledger(path, Unit, key="unit")
    print("ready", flush=True)  # the parent starts its kill timer here, after imports and the resume scan
    with ledger:
        for unit in range(units):
            if unit in ledger:
                continue
            digest, text = payload_for(unit)
            ledger.append(Unit(unit=unit, digest=digest, payload=text))
            time.sleep(0.01)


if __name__ == "__main__":
    main()
