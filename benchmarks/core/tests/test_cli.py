"""The ``preregbench`` command: ``run``'s exit codes, ``list``, the ``pytest --help`` group, and run progress."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core import fixture_hashes
from benchmarks.core.progress import PROGRESS_FILE, Progress
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.runcmd import exit_code, protocols
from fixtures import FIXTURE_SETS


def preregbench(*args: str, limit_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.core.cli ARGS`` in a fresh process from the suite's root."""
    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=SUITE_ROOT, env=env, text=True,
                          capture_output=True, timeout=600, preexec_fn=limit)


def run_res(tmp_path: Path, *args: str, limit_bytes: int | None = None) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    results = tmp_path / "results"
    done = preregbench("run", "res", "--results-dir", str(results), "-p", "no:cacheprovider", "-p", "no:randomly",
                       *args, limit_bytes=limit_bytes)
    return done, sorted((results / "res").glob("*")) if (results / "res").is_dir() else []


def test_a_passing_scripted_run_exits_0_and_names_its_classification_and_report(tmp_path: Path) -> None:
    done, runs = run_res(tmp_path, "--model", "scripted-oracle")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert len(runs) == 1
    verdict, report = done.stdout.strip().splitlines()[-2:]
    assert "gate: RESPONSE_INTERFACE_GATE_PASSED" in verdict and "[complete, passed, exit 0]" in verdict
    shown = Path(report.split("report ", 1)[1])
    assert shown.parent == runs[0] and shown.is_file()
    progress = json.loads((runs[0] / PROGRESS_FILE).read_text())
    assert progress["phase"] == "finished" and progress["units_done"] == progress["units_total"] == 64
    assert "measuring 64/64 (100%)" in done.stdout + done.stderr  # the progress line passes pytest's capture
    heap = json.loads((runs[0] / "provenance.json").read_text())["hardware"]["c_heap"]
    if platform.libc_ver()[0] == "glibc" and not any(k.startswith("MALLOC_") or k == "GLIBC_TUNABLES" for k in os.environ):
        assert heap.startswith("glibc ") and "freed memory kept" in heap  # the run set its heap up, and says so
    else:
        assert heap.startswith("left as")


def test_a_failing_gate_exits_1(tmp_path: Path) -> None:
    done, runs = run_res(tmp_path, "--model", "scripted-constant")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED" in done.stdout.splitlines()[-2]
    assert "[complete, gate failed, exit 1]" in done.stdout
    assert json.loads((runs[0] / "report.json").read_text())["benchmark"]["protocols"]["res"]["status"] == "complete"


def test_a_broken_run_exits_2(tmp_path: Path) -> None:
    """A file-size limit inside the run makes the ledger write fail: the run is broken, not a failed gate."""
    done, runs = run_res(tmp_path, "--model", "scripted-oracle", limit_bytes=60_000)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-2000:]
    assert "broken" in done.stdout.splitlines()[-2] or "no run was made" in done.stderr


@pytest.mark.parametrize("args", [
    ("--model", "no-such-model"),
    ("--res-fixture-set", "no-such-variant"),
    ("--run-id", "../escape"),
])
def test_bad_usage_exits_4_with_one_line_and_writes_no_run(tmp_path: Path, args: tuple[str, ...]) -> None:
    done, runs = run_res(tmp_path, "--model", "scripted-oracle", *args)  # the last --model wins
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-2000:]
    assert runs == [] or not any(r.iterdir() for r in runs)


def test_an_unknown_protocol_or_command_is_usage() -> None:
    done = preregbench("run", "no-such-protocol")
    assert done.returncode == 4 and done.stderr.count("\n") == 1
    assert "available: campaign, cwr, imported, ladder, pzombie, res" in done.stderr
    assert preregbench("frobnicate").returncode == 4
    assert preregbench("list", "nonsense").returncode == 4


def test_list_names_protocols_models_and_fixture_sets_with_their_hashes() -> None:
    listed = preregbench("list").stdout.splitlines()
    assert [line.split()[0] for line in listed] == sorted(protocols())
    assert set(protocols()) >= {"res", "pzombie", "cwr", "ladder"}
    models = preregbench("list", "models").stdout
    assert "smollm2-135m-instruct" in models and "scripted-oracle" in models
    sets = {line.split()[0]: line.split()[-1] for line in preregbench("list", "fixture-sets").stdout.splitlines()}
    assert sets == fixture_hashes(FIXTURE_SETS)


def test_pytest_help_lists_one_preregbench_group_with_every_protocols_options() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    text = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=SUITE_ROOT,
                          env=env, text=True, capture_output=True, timeout=300).stdout
    assert "\npreregbench:\n" in text and "preregistered benchmark runs:" not in text
    group = text.split("\npreregbench:\n", 1)[1]
    for flag in ("--model", "--run-id", "--res-fixture-set", "--pzombie-", "--cwr-", "--ladder-state"):
        assert flag in group, flag


@pytest.mark.parametrize(("status", "entry", "code"), [
    (4, None, 4),
    (0, None, 2),
    (1, {"status": "broken", "classifications": {"gate": {"outcome": {"passed": False}}}}, 2),
    (0, {"status": "unchecked", "classifications": {"gate": {"outcome": {"passed": True}}}}, 2),
    (0, {"status": "complete", "classifications": {}}, 2),
    (0, {"status": "complete", "classifications": {"a": {"outcome": {"passed": True}}}}, 0),
    (1, {"status": "complete", "classifications": {"a": {"outcome": {"passed": True}}, "b": {"outcome": {"passed": False}}}}, 1),
])
def test_exit_code_table(status: int, entry: dict | None, code: int) -> None:
    assert exit_code(status, entry) == code


# --------------------------------------------------------------------------- progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def progress(tmp_path: Path, total: int, *, tty: bool = False, done: int = 0, every: int | None = None):
    lines: list[tuple[str, bool]] = []
    clock = Clock()
    p = Progress(tmp_path, "toy", "r1", total, done, emit=lambda text, in_place: lines.append((text, in_place)),
                 tty=tty, every=every, clock=clock, now=lambda: "2026-12-01T00:00:00+00:00")
    return p, lines, clock


def test_plain_progress_prints_a_line_every_tenth_of_the_run_and_at_each_phase(tmp_path: Path) -> None:
    p, lines, clock = progress(tmp_path, 100)
    p.phase("measuring")
    for _ in range(100):
        clock.t += 0.01
        p.advance()
    p.phase("finished")
    texts = [t.strip() for t, _ in lines]
    assert len(texts) == 1 + 10 + 1
    assert texts[1].startswith("toy r1: measuring 10/100 (10%)") and texts[-2].startswith("toy r1: measuring 100/100")
    assert not any(in_place for _, in_place in lines)
    state = json.loads((tmp_path / PROGRESS_FILE).read_text())
    assert state["phase"] == "finished" and state["units_done"] == 100 and state["eta_s"] == 0.0


def test_the_rate_counts_measurement_only_not_the_model_load(tmp_path: Path) -> None:
    """60 s of loading, then 10 units at 3 units/s: the rate says 3, not 10 / 63; elapsed says 63 s."""
    p, _, clock = progress(tmp_path, 100)
    p.phase("loading model")
    clock.t += 60.0
    p.phase("measuring")
    for _ in range(10):
        clock.t += 1 / 3
        p.advance()
    state = p.state()
    assert state["rate_units_per_s"] == 3.0 and state["elapsed_s"] == 63.333
    assert state["eta_s"] == 30.0  # 90 units left at 3 units/s
    assert "elapsed 1:03, 3.00 units/s, left 0:30" in p.line()


def test_plain_progress_prints_after_30_seconds_without_a_line(tmp_path: Path) -> None:
    p, lines, clock = progress(tmp_path, 1000)
    p.advance()
    assert lines == []
    clock.t += 30.0
    p.advance()
    assert len(lines) == 1 and "2/1000" in lines[0][0]
    assert "0.07 units/s" in lines[0][0]  # 2 units in 30 s


def test_a_terminal_gets_one_line_rewritten_in_place_per_unit(tmp_path: Path) -> None:
    p, lines, clock = progress(tmp_path, 5, tty=True, done=2)
    for _ in range(3):
        clock.t += 1.0
        p.advance()
    assert len(lines) == 3 and [in_place for _, in_place in lines] == [True, True, False]
    assert "3/5" in lines[0][0] and "5/5 (100%)" in lines[-1][0]
    assert "units_this_session" in (tmp_path / PROGRESS_FILE).read_text()
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["units_this_session"] == 3


def test_progress_json_is_rewritten_at_most_once_a_second_between_phases(tmp_path: Path) -> None:
    p, _, clock = progress(tmp_path, 50)
    p.phase("measuring")
    written = []
    for _ in range(10):
        clock.t += 0.25
        p.advance()
        written.append(json.loads((tmp_path / PROGRESS_FILE).read_text())["units_done"])
    assert written == [0, 0, 0, 4, 4, 4, 4, 8, 8, 8]


def test_a_progress_file_that_cannot_be_written_is_said_once_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / PROGRESS_FILE).mkdir()  # a directory where the file should go: every rename fails
    p, lines, clock = progress(tmp_path, 3, every=100)
    for name in ("measuring", "writing results", "finished"):
        p.phase(name)
    complaints = [t for t, _ in lines if "progress.json not written" in t]
    assert len(complaints) == 1 and "the run goes on" in complaints[0]


def test_the_run_command_freezes_what_lives_when_its_session_ends() -> None:
    import gc
    from types import SimpleNamespace

    from benchmarks.core.runcmd import _Verdict

    class _Reporter:
        def summary(self) -> dict:
            return {"protocols": {}}

    session = SimpleNamespace(config=SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: _Reporter())))
    verdict = _Verdict(Path("benchmarks/res"), [])
    gc.unfreeze()
    try:
        verdict.pytest_sessionfinish(session)
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()
    assert verdict.summary == {"protocols": {}}
    assert frozen > 1000  # the modules and objects of this process, out of the collector's way until exit
