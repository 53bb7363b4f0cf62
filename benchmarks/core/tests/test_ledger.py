from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from benchmarks.core import (
    Ledger,
    LedgerCorruptError,
    LedgerDuplicateError,
    LedgerError,
    LedgerTornError,
    LedgerTornTailWarning,
    read_ledger,
)
from benchmarks.core.ledger import read_identities
from benchmarks.core.rundir import SUITE_ROOT

from ._ledger_writer import Unit, payload_for


@dataclass(frozen=True)
class Row:
    SCHEMA_VERSION: ClassVar[int] = 2
    unit: str
    score: float
    tags: tuple[str, ...] = ()
    error: str | None = None


def test_append_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "units.jsonl"
    with Ledger(path, Row, key="unit") as ledger:
        ledger.append(Row("a", 0.5, ("x",)))
        ledger.append(Row("b", 1.0, error="timeout"))
        assert "a" in ledger and "c" not in ledger
    lines = path.read_text().splitlines()
    assert lines[0] == '{"error":null,"schema_version":2,"score":0.5,"tags":["x"],"unit":"a"}'
    assert read_ledger(path, Row) == [Row("a", 0.5, ("x",)), Row("b", 1.0, (), "timeout")]


def test_duplicate_unit_is_refused_and_resume_keeps_records(tmp_path: Path) -> None:
    path = tmp_path / "units.jsonl"
    with Ledger(path, Row, key="unit") as ledger:
        ledger.append(Row("a", 0.5))
        with pytest.raises(LedgerDuplicateError, match="'a' is already recorded"):
            ledger.append(Row("a", 0.7))
    with Ledger(path, Row, key="unit") as again:
        assert again.done == {"a"}
        again.append(Row("b", 0.1))
    assert [r.unit for r in read_ledger(path, Row)] == ["a", "b"]


def test_wrong_record_type_and_invalid_values_are_refused(tmp_path: Path) -> None:
    with Ledger(tmp_path / "u.jsonl", Row, key="unit") as ledger:
        with pytest.raises(TypeError, match="expected a Row record"):
            ledger.append(Unit(1, "d", "p"))  # type: ignore[arg-type]
        with pytest.raises(LedgerError, match="tags"):
            ledger.append(Row("a", 0.5, tags=(1,)))  # type: ignore[arg-type]
        assert len(ledger) == 0


def test_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    with Ledger(path, Row, key="unit"):
        with pytest.raises(LedgerError, match="another process"):
            Ledger(path, Row, key="unit")


def test_every_torn_tail_is_detected_never_parsed(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    with Ledger(path, Row, key="unit") as ledger:
        ledger.append(Row("a", 0.5))
        ledger.append(Row("b", 0.25))
    whole = path.read_bytes()
    first_end = whole.index(b"\n") + 1
    for cut in range(first_end + 1, len(whole)):  # every proper prefix of the second line
        path.write_bytes(whole[:cut])
        with pytest.raises(LedgerTornError, match=f"torn line of {cut - first_end} bytes at offset {first_end}"):
            read_ledger(path, Row)
        with pytest.warns(LedgerTornTailWarning):
            ledger = Ledger(path, Row, key="unit")
        with ledger:
            assert ledger.done == {"a"}
            assert ledger.torn is not None and ledger.torn.size == cut - first_end
            assert ledger.torn.sidecar.read_bytes() == whole[first_end:cut]
            ledger.append(Row("b", 0.25))
        assert path.read_bytes() == whole
        ledger.torn.sidecar.unlink()


def test_bad_whole_line_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    path.write_text('{"schema_version":2,"unit":"a","score":0.5}\n{"schema_version":2,"unit":"b"}\n')
    with pytest.raises(LedgerCorruptError, match=r"line 2: field 'score': missing required key"):
        read_ledger(path, Row)
    path.write_text('{"schema_version":1,"unit":"a","score":0.5}\n')
    with pytest.raises(LedgerCorruptError, match="schema_version 1, expected 2"):
        Ledger(path, Row, key="unit")
    path.write_text('{"schema_version":2,"unit":"a","score":0.5}\n{"schema_version":2,"unit":"a","score":0.5}\n')
    with pytest.raises(LedgerCorruptError, match="already recorded on line 1"):
        Ledger(path, Row, key="unit")


def _writer(path: Path, units: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SUITE_ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "benchmarks.core.tests._ledger_writer", str(path), str(units), *extra]
    proc = subprocess.Popen(command, env=env, cwd=SUITE_ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _finish(proc: subprocess.Popen) -> int:
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
    return proc.returncode


def _assert_each_unit_once(path: Path, units: int) -> None:
    records = read_ledger(path, Unit)
    assert [r.unit for r in records] == list(range(units))
    for record in records:
        assert (record.digest, record.payload) == payload_for(record.unit)


def test_sigkill_at_random_points_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """A real writer process is killed several times mid-run; every unit ends up recorded exactly once."""
    path = tmp_path / "units.jsonl"
    units = 80
    rng = random.Random(20261130)
    kills = 0
    for _ in range(40):
        proc = _writer(path, units)
        time.sleep(rng.uniform(0.02, 0.2))
        if proc.poll() is not None:
            assert _finish(proc) == 0
            break
        proc.send_signal(signal.SIGKILL)
        code = _finish(proc)
        if code == 0:  # it finished between the poll and the signal
            break
        assert code == -signal.SIGKILL
        kills += 1
    else:
        pytest.fail("the writer never finished in 40 attempts")
    assert kills >= 3, f"only {kills} kills landed before the writer finished; the test needs more work per run"
    _assert_each_unit_once(path, units)
    torn = sorted(tmp_path.glob("units.jsonl.torn-*"))
    print(f"{kills} SIGKILLs, {len(torn)} torn tails moved aside, {units} units recorded once each")


def test_writer_killed_inside_a_record_resumes_exactly(tmp_path: Path) -> None:
    """The kernel cuts a write at a random byte and kills the writer (SIGXFSZ); resuming recovers."""
    path = tmp_path / "units.jsonl"
    units = 30
    rng = random.Random(11)
    torn_kills = 0
    for _ in range(5):
        size = path.stat().st_size if path.exists() else 0
        proc = _writer(path, units, str(size + rng.randint(1, 400_000)))
        code = _finish(proc)
        if code == 0:
            break
        assert code == -signal.SIGXFSZ
        torn_kills += 1
        assert path.read_bytes()[-1:] != b"\n", "the kill must have landed inside a record"
        with pytest.raises(LedgerTornError):
            read_ledger(path, Unit)
    assert torn_kills >= 3
    assert _finish(_writer(path, units)) == 0
    _assert_each_unit_once(path, units)
    sidecars = sorted(tmp_path.glob("units.jsonl.torn-*"))
    assert len(sidecars) == torn_kills  # every torn tail was moved aside, none was parsed or dropped silently


def test_identity_is_written_into_every_line_and_read_back_without_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "units.jsonl"
    identity = {"model": "m", "revision": "sha256:" + "0" * 64, "settings": {"n": 1}}
    with Ledger(path, Row, key="unit", identity=identity) as ledger:
        ledger.append(Row("a", 0.5))
        ledger.identity = None  # a writer without identity: the line carries none
        ledger.append(Row("b", 1.0))
    assert read_identities(path) == [identity, None]
    assert read_ledger(path, Row) == [Row("a", 0.5), Row("b", 1.0)]
    with Ledger(path, Row, key="unit") as again:
        assert again.identities == [identity, None]
    with path.open("ab") as handle:
        handle.write(b'{"unit": "c", "sco')  # a torn tail is ignored by the identity reader
    assert read_identities(path) == [identity, None]
    assert read_identities(tmp_path / "missing.jsonl") == []


def test_identity_must_be_an_object_and_is_no_record_field(tmp_path: Path) -> None:
    path = tmp_path / "units.jsonl"
    path.write_text('{"identity": 3, "schema_version": 2, "score": 0.5, "tags": [], "unit": "a", "error": null}\n')
    with pytest.raises(LedgerCorruptError, match="'identity' must be a JSON object"):
        read_ledger(path, Row)

    @dataclass(frozen=True)
    class Clashing:
        SCHEMA_VERSION: ClassVar[int] = 1
        unit: str
        identity: str

    with pytest.raises(TypeError, match="belong to the ledger"):
        Ledger(tmp_path / "other.jsonl", Clashing, key="unit")
