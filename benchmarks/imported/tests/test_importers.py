"""Importers on real logs: what an import holds, and one line for every log that cannot be imported."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.imported.importers import ImportRefused, import_inspect, import_lm_eval, import_log, read_import

from .conftest import LMEVAL
from .inspect_logs import edit_json_log

SMOLLM2 = LMEVAL / "smollm2"


def cli(*args: str | Path, cwd: Path = SUITE_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=300)


def copy_lm_eval(tmp_path: Path, name: str = "smollm2") -> tuple[Path, Path, Path]:
    """A copy of a committed lm-eval output: (folder, results file, samples file)."""
    target = tmp_path / name
    shutil.copytree(LMEVAL / name, target)
    results = next(target.glob("*/results_*.json"))
    samples = next(target.glob("*/samples_*.jsonl"))
    return target, results, samples


# --------------------------------------------------------------------------- what an import holds


def test_an_lm_eval_run_imports_every_sample_with_its_provenance() -> None:
    header, samples = import_lm_eval(SMOLLM2)
    results = next(SMOLLM2.glob("*/results_*.json"))
    sample_file = next(SMOLLM2.glob("*/samples_*.jsonl"))
    assert (header["format"], header["task"], header["task_version"]) == ("lm-eval", "tiny_addition", 1.0)
    assert header["source"]["sha256"] == hashlib.sha256(sample_file.read_bytes()).hexdigest()
    assert header["source"]["results"]["sha256"] == hashlib.sha256(results.read_bytes()).hexdigest()
    assert header["packages"]["lm_eval"] == "0.4.13" and header["created_at"].startswith("2026-12-06T15:41:51")
    assert "b179c952" in header["model"]
    assert [s.unit for s in samples] == [f"{i}#1" for i in range(24)]
    first = samples[0]
    assert first.input == "Question: What is 15 plus 18?\nAnswer:" and first.target == "1"
    assert first.scores == {"acc": 0.0} and first.metadata["parity"] == "odd" and first.answer == "2"
    assert sum(s.scores["acc"] for s in samples) / 24 == header["log_metrics"]["tiny_addition"]["acc,none"]


def test_an_inspect_log_keeps_errored_samples_as_errors(inspect_logs: dict[str, Path]) -> None:
    header, samples = import_inspect(inspect_logs["eval"])
    assert (header["format"], header["task"], header["model"]) == ("inspect", "tiny_addition", "mockllm/model")
    assert (header["samples"], header["units"], header["epochs"], header["errored"]) == (6, 12, 2, 2)
    assert header["packages"]["inspect_ai"] and header["created_at"] and header["earliest_sample_at"]
    errored = [s for s in samples if s.error is not None]
    assert [s.unit for s in errored] == ["add-03#1", "add-03#2"]
    assert all(s.scores == {} and "scripted failure" in s.error for s in errored)
    scored = {s.unit: s.scores["match"] for s in samples if s.error is None}
    assert scored["add-00#1"] == "C" and scored["add-02#2"] == "I"  # 0 + 5 right; 2 + 7 = 9, a multiple of 3: wrong
    same = import_inspect(inspect_logs["json"])[1]
    assert [(s.unit, s.scores, s.input_sha256) for s in same] == [(s.unit, s.scores, s.input_sha256) for s in samples]


def test_an_import_directory_reads_back_through_the_ledger_reader(tmp_path: Path, inspect_logs: dict[str, Path]) -> None:
    written = import_log("inspect", inspect_logs["eval"], tmp_path / "import")
    header, samples = read_import(tmp_path / "import")
    assert header == json.loads(json.dumps(written)) and len(samples) == 12
    with pytest.raises(ImportRefused, match="exists and is not an empty folder"):
        import_log("inspect", inspect_logs["eval"], tmp_path / "import")


# --------------------------------------------------------------------------- logs that cannot be imported


def test_truncated_and_corrupted_logs_are_one_line_naming_the_file(tmp_path: Path, inspect_logs: dict[str, Path]) -> None:
    data = inspect_logs["eval"].read_bytes()
    (tmp_path / "cut.eval").write_bytes(data[: len(data) // 2])
    (tmp_path / "noise.eval").write_bytes(b"\x00not a log" * 50)
    text = inspect_logs["json"].read_bytes()
    (tmp_path / "cut.json").write_bytes(text[: len(text) // 2])
    for name in ("cut.eval", "noise.eval", "cut.json"):
        with pytest.raises(ImportRefused, match="not a readable inspect_ai log") as caught:
            import_inspect(tmp_path / name)
        assert str(caught.value).startswith(str(tmp_path / name)) and "\n" not in str(caught.value)
    folder, _, samples = copy_lm_eval(tmp_path)
    lines = samples.read_bytes()
    samples.write_bytes(lines[: len(lines) - 300])
    with pytest.raises(ImportRefused, match="torn line"):
        import_lm_eval(folder)


def test_the_import_command_refuses_with_one_line_and_writes_nothing(tmp_path: Path, inspect_logs: dict[str, Path]) -> None:
    data = inspect_logs["eval"].read_bytes()
    (tmp_path / "cut.eval").write_bytes(data[:1000])
    done = cli("import", "inspect", tmp_path / "cut.eval", "--out", tmp_path / "out")
    assert done.returncode == 4 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"{tmp_path / 'cut.eval'}: not a readable inspect_ai log" in done.stderr
    assert not (tmp_path / "out").exists()
    done = cli("import", "lm-eval", SMOLLM2, "--out", tmp_path / "ok")
    assert done.returncode == 0, done.stderr
    assert "imported 24 units (24 samples, 0 errored) of task 'tiny_addition'" in done.stdout
    assert (tmp_path / "ok" / "samples.jsonl").read_text().count("\n") == 24
    done = cli("import", "csv", SMOLLM2, "--out", tmp_path / "other")
    assert done.returncode == 4 and "imports no format 'csv'; formats: inspect, lm-eval" in done.stderr


def test_a_run_of_several_tasks_needs_task(tmp_path: Path) -> None:
    mixed = LMEVAL / "mixed"
    with pytest.raises(ImportRefused, match=r"holds 2 tasks \(tiny_addition, tiny_addition_terse\); choose one"):
        import_lm_eval(mixed)
    header, samples = import_lm_eval(mixed, task="tiny_addition_terse")
    assert header["task"] == "tiny_addition_terse" and samples[0].input == "What is 15 plus 18?"
    with pytest.raises(ImportRefused, match="holds no task 'tiny'"):
        import_lm_eval(mixed, task="tiny")


def test_a_sample_recorded_twice_is_refused(tmp_path: Path, inspect_logs: dict[str, Path]) -> None:
    edited = edit_json_log(inspect_logs["json"], lambda log: log["samples"].append(copy.deepcopy(log["samples"][1])),
                           tmp_path / "twice.json")
    with pytest.raises(ImportRefused, match="sample 'add-01' epoch 1 appears twice"):
        import_inspect(edited)
    folder, _, samples = copy_lm_eval(tmp_path)
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    samples.write_text("".join(lines + lines[3:4]), encoding="utf-8")
    with pytest.raises(ImportRefused, match="sample '3' epoch 1 appears twice"):
        import_lm_eval(folder)


def test_samples_edited_after_the_header_are_refused(tmp_path: Path, inspect_logs: dict[str, Path]) -> None:
    def flip(log: dict) -> None:
        log["samples"][0]["scores"]["match"]["value"] = "I"

    with pytest.raises(ImportRefused, match="sample 'add-00': its match scores average 0.5, the log's reductions "
                                            "record 1; the samples were changed after the header was written"):
        import_inspect(edit_json_log(inspect_logs["json"], flip, tmp_path / "flipped.json"))
    folder, _, samples = copy_lm_eval(tmp_path)
    original = samples.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    record = json.loads(lines[0])
    record["acc"] = 1.0
    samples.write_text(json.dumps(record) + "\n" + "".join(lines[1:]), encoding="utf-8")
    with pytest.raises(ImportRefused, match="the results give acc 0.25, the samples average 0.291667"):
        import_lm_eval(folder)
    record = json.loads(lines[0])
    record["doc"]["question"] = "What is 1 plus 1?"
    samples.write_text(json.dumps(record) + "\n" + "".join(lines[1:]), encoding="utf-8")
    with pytest.raises(ImportRefused, match="doc_id 0: its doc does not hash to the recorded doc_hash"):
        import_lm_eval(folder)
    samples.write_text("".join(lines[1:] + lines[:1]), encoding="utf-8")  # reordered: every sample intact
    with pytest.raises(ImportRefused, match="do not hash to the task hash"):
        import_lm_eval(folder)


def test_without_inspect_ai_the_line_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if inspect_ai were not installed
    (tmp_path / "x.eval").write_bytes(b"PK")
    with pytest.raises(ImportRefused, match=r"install the 'inspect' extra \(pip install 'preregbench\[inspect\]'\)"):
        import_inspect(tmp_path / "x.eval")


def test_a_number_over_the_reading_limit_is_refused_in_a_sample_line(tmp_path: Path) -> None:
    folder, _, samples = copy_lm_eval(tmp_path)
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    samples.write_text(lines[0].replace('"doc_id": 0', '"doc_id": ' + "9" * 100, 1) + "".join(lines[1:]),
                       encoding="utf-8")
    with pytest.raises(ImportRefused, match=r"line 1: the number 99999999999999999999\.\.\. \(100 characters\) is over "
                                            "the limit of 64 characters"):
        import_lm_eval(folder)
    samples.write_text(lines[0].replace('"acc": 0.0', '"acc": 1e999', 1) + "".join(lines[1:]), encoding="utf-8")
    with pytest.raises(ImportRefused, match="line 1: the number 1e999 is beyond the range of a float"):
        import_lm_eval(folder)


def test_a_log_that_ended_in_an_error_is_imported_as_a_deviation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.imported.protocol import PROTOCOL

    from .inspect_logs import make_log

    log = make_log(tmp_path / "logs", monkeypatch, fail_on_error=True)
    header, samples = import_inspect(log)
    assert (header["status"], header["units"], header["errored"]) == ("error", 12, 2)
    import_log("inspect", log, tmp_path / "import")

    class Reading:  # what the protocol asks of a run to read its import
        def option(self, name: str) -> str | None:
            return str(tmp_path / "import") if name == "source" else None

    assert PROTOCOL.deviations(Reading()) == ["the log's status is 'error', not 'success'"]


def test_an_archive_that_unpacks_past_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A zip bomb named like an inspect_ai log: 40 MiB of zeros in a few kilobytes, against a limit of 16 MiB."""
    import dataclasses
    import zipfile

    from benchmarks.core import bounded

    bomb = tmp_path / "bomb.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("samples/1_epoch_1.json", "w") as member:
            for _ in range(40):
                member.write(bytes(1024 * 1024))
    assert bomb.stat().st_size < 1024 * 1024
    limits = bounded.LIMITS
    try:
        bounded.LIMITS = dataclasses.replace(limits, file_bytes=16 * 1024 * 1024)
        with pytest.raises(ImportRefused, match=r"its members unpack to 40\.0 MiB, over the limit of 16\.0 MiB"):
            import_inspect(bomb)
    finally:
        bounded.LIMITS = limits
