"""Writer process for the kill-and-resume ledger test.

Usage: python _ledger_writer.py LEDGER UNITS.  Resumes the ledger and appends
every missing unit in order, each with a payload derived from its index.
"""

from __future__ import annotations

import hashlib
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
