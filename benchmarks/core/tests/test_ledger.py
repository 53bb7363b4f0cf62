from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.core import (
    Ledger,
    LedgerCorruptError,
    LedgerDuplicateError,
    LedgerError,
    LedgerTornError,
    LedgerTornTailWarning,
    read_ledger,
)
from benchmarks.core.ledger import LedgerUnsafeError, LedgerWriteError, read_identities
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
    proc = subprocess.Popen(command, env=env, cwd=SUITE_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _finish(proc: subprocess.Popen) -> int:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.wait()
    proc.stdout.close()
    return proc.returncode


def _assert_each_unit_once(path: Path, units: int) -> None:
    records = read_ledger(path, Unit)
    assert [r.unit for r in records] == list(range(units))
    for record in records:
        assert (record.digest, record.payload) == payload_for(record.unit)


def _step(proc: subprocess.Popen) -> str:
    """Let the stepped writer append the unit it announced; the next line it prints (``start N`` or ``done``)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return proc.stdout.readline()


def test_sigkill_at_random_points_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """A real writer process is killed five times mid-run; every unit ends up recorded exactly once.

    Driven by the writer's progress, never by the clock: the stepped writer
    announces each unit and appends it only when told to, so each attempt
    lets a seeded number of units through and then kills the writer either
    right after releasing a unit (the kill lands before, inside or after
    that unit's write and fsync) or once the writer has announced the next
    unit (the unit is whole on disk).  A loaded machine changes where inside
    a write a kill lands, never whether it lands.
    """
    path = tmp_path / "units.jsonl"
    units = 80
    rng = random.Random(20261130)
    kills = []
    for attempt in range(6):
        proc = _writer(path, units, "stepped")
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if attempt == 5:  # the last session finishes the run
            while line.startswith("start "):
                line = _step(proc)
            assert line == "done\n" and _finish(proc) == 0
            break
        release, mode = rng.randint(1, 12), rng.choice(["in flight", "settled"])
        for _ in range(release - 1):
            assert line.startswith("start "), line
            line = _step(proc)
        assert line.startswith("start "), line
        in_flight = int(line.split()[1])
        proc.stdin.write("go\n")
        proc.stdin.flush()
        if mode == "settled":
            assert proc.stdout.readline() == f"start {in_flight + 1}\n"
        proc.send_signal(signal.SIGKILL)
        assert _finish(proc) == -signal.SIGKILL
        kills.append((in_flight, mode))
    assert len(kills) == 5
    _assert_each_unit_once(path, units)
    torn = sorted(tmp_path.glob("units.jsonl.torn-*"))
    print(f"SIGKILL at (unit, state) {kills}; {len(torn)} torn tails moved aside; {units} units recorded once each")


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


# --------------------------------------------------------------------------- hostile text and file-system states


@dataclass(frozen=True)
class Said:
    SCHEMA_VERSION: ClassVar[int] = 1
    unit: str
    text: str


_ANY_CHARACTER = st.one_of(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
                           st.characters(exclude_categories=()))


def json_spelling(text: str) -> str:
    """``text`` as JSON can hold it: a lone high surrogate right before a lone low one is the character the pair
    encodes in UTF-16 (JSON spells both only as the escape pair); everything else as it is."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@example(texts=["x\ud800\udfffy", "\udfff\ud800", "\ud800"])
@given(texts=st.lists(st.text(_ANY_CHARACTER, max_size=40), min_size=1, max_size=4))
def test_any_python_string_round_trips_and_every_line_is_strict_utf8(tmp_path_factory: pytest.TempPathFactory,
                                                                     texts: list[str]) -> None:
    path = tmp_path_factory.mktemp("said") / "said.jsonl"
    written = [Said(f"u{i}", text) for i, text in enumerate(texts)]
    expected = [Said(record.unit, json_spelling(record.text)) for record in written]
    with Ledger(path, Said, key="unit") as ledger:
        for record in written:
            ledger.append(record)
    for line, record in zip(path.read_bytes().splitlines(), expected):
        assert json.loads(line.decode("utf-8"))["text"] == record.text  # strict UTF-8, any JSON reader agrees
    assert read_ledger(path, Said) == expected
    with Ledger(path, Said, key="unit") as again:
        assert list(again) == expected


def test_a_lone_high_then_low_surrogate_reads_back_as_the_pair_s_character(tmp_path: Path) -> None:
    """The one string JSON cannot spell apart: written as the escape pair, read back by every reader as one
    character; a lone low surrogate before a high one, and each alone, stay as they are."""
    path = tmp_path / "said.jsonl"
    with Ledger(path, Said, key="unit") as ledger:
        ledger.append(Said("a", "x\ud800\udfffy"))
        ledger.append(Said("b", "x\udfff\ud800y"))
    first = path.read_bytes().splitlines()[0]
    assert first == b'{"schema_version":1,"text":"x\\ud800\\udfffy","unit":"a"}'
    assert read_ledger(path, Said) == [Said("a", "x\U000103ffy"), Said("b", "x\udfff\ud800y")]


def test_a_lone_surrogate_is_escaped_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "said.jsonl"
    with Ledger(path, Said, key="unit") as ledger:
        ledger.append(Said("a", "x\ud800é"))
        ledger.append(Said("b", "é"))
    first, second = path.read_bytes().splitlines()
    assert first == b'{"schema_version":1,"text":"x\\ud800\\u00e9","unit":"a"}'  # that line only: ASCII escapes
    assert second == '{"schema_version":1,"text":"é","unit":"b"}'.encode()
    assert read_ledger(path, Said) == [Said("a", "x\ud800é"), Said("b", "é")]


def test_raw_surrogate_bytes_and_other_bad_utf8_name_the_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "said.jsonl"
    good = b'{"schema_version":1,"text":"ok","unit":"a"}\n'
    for bad, byte in ((b'{"schema_version":1,"text":"\xed\xa0\x80","unit":"b"}\n', "byte offset 28 of the line (0xed)"),
                      (b'{"schema_version":1,"text":"\xff","unit":"b"}\n', "byte offset 28 of the line (0xff)")):
        path.write_bytes(good + bad)
        with pytest.raises(LedgerCorruptError, match=re.escape(f"said.jsonl: line 2: {byte} is not UTF-8")):
            read_ledger(path, Said)
        with pytest.raises(LedgerCorruptError, match="line 2: byte offset 28"):
            read_identities(path)
    path.write_bytes(good + b'{"unit": "b", \n')
    with pytest.raises(LedgerCorruptError, match=r"line 2: not JSON \(Expecting property name .* at column 15\)"):
        Ledger(path, Said, key="unit")
    assert path.read_bytes() == good + b'{"unit": "b", \n'  # a corrupt ledger is never repaired or truncated


@pytest.mark.parametrize("content", [b"precious bytes with no newline", b'{"unit": "x"}\n{"torn'])
def test_a_symlinked_ledger_is_refused_and_its_target_left_byte_identical(tmp_path: Path, content: bytes) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(content)
    run = tmp_path / "run"
    run.mkdir()
    link = run / "records.jsonl"
    link.symlink_to(outside)
    for attempt in (lambda: Ledger(link, Said, key="unit"), lambda: read_ledger(link, Said),
                    lambda: read_identities(link)):
        with pytest.raises(LedgerUnsafeError, match="records.jsonl: is a symbolic link; a ledger is never opened"):
            attempt()
    dangling = run / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(LedgerUnsafeError, match="symbolic link"):
        Ledger(dangling, Said, key="unit")
    assert outside.read_bytes() == content
    assert sorted(p.name for p in run.iterdir()) == ["dangling.jsonl", "records.jsonl"]
    assert not (tmp_path / "nowhere.jsonl").exists()


def test_a_fifo_or_a_hard_linked_ledger_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(LedgerUnsafeError, match="is not a regular file"):
        Ledger(fifo, Said, key="unit")  # never blocks waiting for a writer
    path = tmp_path / "said.jsonl"
    with Ledger(path, Said, key="unit") as ledger:
        ledger.append(Said("a", "x"))
    before = path.read_bytes()
    os.link(path, tmp_path / "elsewhere.jsonl")
    with pytest.raises(LedgerUnsafeError, match="has 2 hard links"):
        Ledger(path, Said, key="unit")
    assert read_ledger(path, Said) == [Said("a", "x")] and path.read_bytes() == before  # reading is still fine


def test_a_torn_tail_never_overwrites_an_earlier_sidecar_or_follows_a_link(tmp_path: Path) -> None:
    path = tmp_path / "said.jsonl"
    with Ledger(path, Said, key="unit") as ledger:
        ledger.append(Said("a", "x"))
    whole = path.read_bytes()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep")
    (tmp_path / f"said.jsonl.torn-{len(whole)}").symlink_to(outside)
    for tail in (b'{"torn": 1', b'{"torn": 2'):
        path.write_bytes(whole + tail)
        with pytest.warns(LedgerTornTailWarning):
            Ledger(path, Said, key="unit").close()
        assert path.read_bytes() == whole
    sidecars = {p.name: p.read_bytes() for p in tmp_path.glob("said.jsonl.torn-*") if not p.is_symlink()}
    assert sidecars == {f"said.jsonl.torn-{len(whole)}.1": b'{"torn": 1', f"said.jsonl.torn-{len(whole)}.2": b'{"torn": 2'}
    assert outside.read_bytes() == b"keep"


# --------------------------------------------------------------------------- write faults


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EACCES, errno.EDQUOT])
@pytest.mark.parametrize("where", ["mid-line", "fsync"])
def test_a_refused_write_cuts_the_ledger_back_to_its_last_whole_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       code: int, where: str) -> None:
    path = tmp_path / "said.jsonl"
    ledger = Ledger(path, Said, key="unit")
    ledger.append(Said("a", "x" * 100))
    before = path.read_bytes()
    real_write = os.write

    def half_then_fail(fd: int, data: Any) -> int:  # the system takes part of the line, then refuses
        if fd != ledger._fd:
            return real_write(fd, data)
        if len(data) > 10:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(code, os.strerror(code))

    def fsync_fails(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    with monkeypatch.context() as patch:
        if where == "mid-line":
            patch.setattr(os, "write", half_then_fail)
        else:
            patch.setattr(os, "fsync", fsync_fails)
        with pytest.raises(LedgerWriteError) as raised:
            ledger.append(Said("b", "y" * 100))
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path}: write failed with {errno.errorcode[code]} (")
    assert f"unit 'b' is not recorded and the ledger was cut back to its last whole record ({len(before)} bytes)" in message
    assert raised.value.errno == code and raised.value.filename == str(path) and isinstance(raised.value, OSError)
    assert path.read_bytes() == before and "b" not in ledger
    ledger.append(Said("b", "y" * 100))  # the cause gone, the same ledger goes on
    ledger.close()
    assert read_ledger(path, Said) == [Said("a", "x" * 100), Said("b", "y" * 100)]


def test_a_file_size_limit_fails_the_write_with_efbig_and_keeps_whole_records(tmp_path: Path) -> None:
    """A real ``RLIMIT_FSIZE`` in a child with SIGXFSZ ignored: the write fails (EFBIG), nothing torn stays."""
    path = tmp_path / "units.jsonl"
    proc = _writer(path, 30, "efbig:300000")
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert _finish(proc) == 3
    assert line.startswith(f"{path}: write failed with EFBIG (File too large); unit ") and "cut back" in line
    size = path.stat().st_size
    assert 0 < size <= 300_000 and path.read_bytes().endswith(b"\n")
    records = read_ledger(path, Unit)  # whole records only: no torn tail, no sidecar
    assert records and all((r.digest, r.payload) == payload_for(r.unit) for r in records)
    assert not list(tmp_path.glob("units.jsonl.torn-*"))
    assert _finish(_writer(path, 30)) == 0  # without the limit the run resumes and finishes
    _assert_each_unit_once(path, 30)
