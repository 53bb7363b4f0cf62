"""The reading limits (:mod:`benchmarks.core.bounded`): the parser, the line reader, and what verify, compare,
the ledger and the report do with input over a limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from benchmarks.core import bounded
from benchmarks.core._canonical import FileOverLimitError, FileReadError, read_json_file
from benchmarks.core.ledger import LedgerOverLimitError, read_ledger
from benchmarks.core.tests.test_verify import project, run_toy, verify  # noqa: F401  (the fixture is used by name)

SMALL = bounded.Limits(file_bytes=1000, line_bytes=100, depth=4, number_chars=10)


def test_nesting_is_counted_outside_strings_only() -> None:
    assert bounded.loads('[[["[[[[[[[["]]]', "x", SMALL) == [[["[[[[[[[["]]]
    assert bounded.loads('{"a": [[{"b": 1}]]}', "x", SMALL) == {"a": [[{"b": 1}]]}
    with pytest.raises(bounded.OverLimitError, match=r"x: nests arrays and objects deeper than the limit of 4"):
        bounded.loads('{"a": [[{"b": [1]}]]}', "x", SMALL)


def test_a_deep_value_is_refused_in_one_line_before_python_recurses() -> None:
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(bounded.OverLimitError, match="deeper than the limit of 64"):
        bounded.loads(text, "deep.json")


def test_numbers_are_held_to_their_length_and_to_a_float_s_range() -> None:
    assert bounded.loads('{"n": 1234567890, "s": "' + "9" * 500 + '"}', "x", SMALL)["n"] == 1234567890
    with pytest.raises(bounded.OverLimitError, match=r"x: the number 12345678901 \(11 characters\) is over the limit"):
        bounded.loads('[12345678901]', "x", SMALL)
    with pytest.raises(bounded.OverLimitError, match=r"x: the number 1e400 is beyond the range of a float"):
        bounded.loads('[1e400]', "x")
    with pytest.raises(bounded.OverLimitError, match=r"\(5000 characters\)"):
        bounded.loads("[" + "7" * 5000 + "]", "x")  # Python would otherwise refuse it with its own int limit
    assert bounded.loads("[1e308, -0.5e-300]", "x") == [1e308, -0.5e-300]


@given(st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False,
                                                                                       allow_infinity=False)
                    | st.text(), lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20))
def test_values_within_the_limits_read_as_json_reads_them(value: object) -> None:
    text = json.dumps(value)
    assert bounded.loads(text, "x") == json.loads(text)


def write_lines(path: Path, lines: list[bytes], tail: bytes = b"") -> int:
    path.write_bytes(b"".join(line + b"\n" for line in lines) + tail)
    return os.open(path, os.O_RDONLY)


def test_lines_come_one_at_a_time_with_their_numbers_and_the_torn_tail(tmp_path: Path) -> None:
    lines = [b"a" * n for n in (0, 1, 99, 100, 3)]
    fd = write_lines(tmp_path / "f", lines, tail=b"torn")
    try:
        reader = bounded.Lines(fd, "f", SMALL)
        assert list(reader) == list(enumerate(lines, start=1))
        assert reader.end == sum(len(line) + 1 for line in lines) and reader.tail == b"torn"
    finally:
        os.close(fd)


def test_a_line_over_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    fd = write_lines(tmp_path / "f", [b"{}", b"x" * 101])
    try:
        with pytest.raises(bounded.OverLimitError, match=r"f: line 2 is 101 bytes, over the limit of 100 bytes"):
            list(bounded.Lines(fd, "f", SMALL))
    finally:
        os.close(fd)


def test_a_line_without_end_is_refused_before_it_is_all_held(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with path.open("wb") as handle:
        handle.truncate(bounded.LIMITS.line_bytes + 5 * bounded.MIB)  # zeros, no LF: one endless line
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(bounded.OverLimitError, match=r"f: line 1 is at least \d+\.\d MiB, over the limit of 64\.0 MiB"):
            list(bounded.Lines(fd, "f"))
    finally:
        os.close(fd)


def test_a_json_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as handle:
        handle.truncate(bounded.LIMITS.file_bytes + 1)  # sparse: nothing written, nothing read
    with pytest.raises(FileOverLimitError, match=r"big\.json: 256\.0 MiB is over the limit of 256\.0 MiB"):
        read_json_file(path)
    assert issubclass(FileOverLimitError, FileReadError)


def test_a_ledger_line_over_a_limit_is_its_own_error(tmp_path: Path) -> None:
    from benchmarks.res.spec import ResRecord

    path = tmp_path / "records.jsonl"
    path.write_text('{"schema_version": 1, "n": ' + "1" * 100 + "}\n")
    with pytest.raises(LedgerOverLimitError, match=r"records\.jsonl: line 1: the number 1111"):
        read_ledger(path, ResRecord)


# --------------------------------------------------------------------------- run directories over a limit


def test_verify_reports_a_run_directory_over_a_limit_with_exit_3(pytester: pytest.Pytester, project: Path) -> None:
    run_dir = run_toy(pytester)
    ledger = run_dir / "records.jsonl"
    with ledger.open("ab") as handle:  # one endless line after the records (a sparse stretch of zeros)
        handle.truncate(ledger.stat().st_size + bounded.LIMITS.line_bytes + bounded.MIB)
    status, lines, stderr = verify(project, run_dir)
    assert status == 3, "\n".join(lines) + stderr
    assert lines[-1].startswith("OVER_LIMIT: records.jsonl: line "), lines
    assert "over the limit of 64.0 MiB for one line" in lines[-1]
    assert not any(line.split()[1].rstrip(":") in ("rescorer", "figures") for line in lines[:-1]), lines


def test_verify_reports_a_number_too_long_in_a_run_file_with_exit_3(pytester: pytest.Pytester, project: Path) -> None:
    run_dir = run_toy(pytester)
    summary = run_dir / "summary.json"
    summary.write_text(summary.read_text().replace("{", '{"huge": ' + "9" * 80 + ", ", 1))
    status, lines, _ = verify(project, run_dir)
    assert status == 3 and lines[-1].startswith("OVER_LIMIT"), lines
    assert "the number 99999999999999999999... (80 characters)" in lines[-1], lines


def test_compare_refuses_a_run_over_a_limit_with_exit_3(pytester: pytest.Pytester, project: Path,
                                                        tmp_path: Path) -> None:
    first = run_toy(pytester)
    second = first.with_name("copy")
    second.mkdir()
    for path in first.iterdir():
        if path.is_file():
            (second / path.name).write_bytes(path.read_bytes())
    provenance = second / "provenance.json"
    provenance.write_text('{"nested": ' + "[" * 80 + "1" + "]" * 80 + ", " + provenance.read_text()[1:])
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.compare", str(second), str(first), "--json",
                           str(tmp_path / "compare.json")], cwd=project, capture_output=True, text=True, check=False)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("preregbench compare: ") and "deeper than the limit of 64" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
