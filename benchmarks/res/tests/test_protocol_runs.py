"""End-to-end RES runs through pytester: every classification with a scripted model, and the bundled SmolLM2."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.selfcheck import (
    expected_pattern,
    outcomes_by_name,
    read_report,
    run_protocol,
    run_rescorer,
)
from benchmarks.res.spec import GATE, HERE, PREREG

# Runs that check what a run writes, reports and refuses go through a fresh pytest session of the test's own
# process (in_process=True); the bundled-model run, the two-worker run and the runs about how a session
# starts (unavailable model, no -m cpu) keep their own process.  The libraries and the scenario models'
# module are imported before pytester takes its snapshot of sys.modules, so every session shares them.
RUN_LIBRARIES_FIRST = ("benchmarks.res.scenarios",)


COMPLETENESS = ["test_fixtures_built", "test_logit_scoring_done", "test_greedy_generation_done", "test_parsing_done",
                "test_every_unit_recorded_once", "test_records_carry_the_run_identity", "test_records_file_written",
                "test_provenance_complete", "test_fixtures_file_written", "test_summary_file_written",
                "test_result_files_written", "test_rescorer_agrees"]


def run_res(pytester: pytest.Pytester, tmp_path: Path, *args: str,
            in_process: bool = False) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    """A RES run with the scenario models; ``in_process`` for checks of what a run writes (``selfcheck.run_protocol``)."""
    results = tmp_path / "results"
    result = run_protocol(pytester, HERE, results, "-p", "benchmarks.res.scenarios", *args, in_process=in_process)
    report, run_dir = read_report(results, "res", result)
    return result, report, run_dir


def outcomes(report: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    by_name = outcomes_by_name(report)
    rules = [by_name[f"test_gate[{label}]"] for label in GATE.labels]
    return rules, {name: by_name[name] for name in COMPLETENESS}


def rescore(run_dir: Path) -> dict[str, Any]:
    return run_rescorer(HERE / "rescore.py", run_dir)


P, F, S = "passed", "failed", "skipped"


@pytest.mark.parametrize(("model", "expected_label", "pattern"), [
    ("scripted-oracle", "RESPONSE_INTERFACE_GATE_PASSED", [P, P, P, P, P, S]),
    ("scripted-constant", "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED", [P, P, P, F, S, S]),
    ("scripted-res-mismatch", "RESPONSE_INTERFACE_MISMATCH", [P, F, S, S, S, S]),
    ("scripted-res-prose", "GENERATION_RESPONSE_UNPARSEABLE", [F, S, S, S, S, S]),
    ("scripted-res-five-factor", "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED", [P, P, F, S, S, S]),
    ("scripted-res-mixed", "MIXED_GATE_OUTCOME", [P, P, P, P, P, F]),
])
def test_every_classification_is_reachable(pytester: pytest.Pytester, tmp_path: Path, model: str,
                                           expected_label: str, pattern: list[str]) -> None:
    result, report, run_dir = run_res(pytester, tmp_path, "--model", model, in_process=True)
    rules, completeness = outcomes(report)
    assert rules == pattern == expected_pattern(GATE, expected_label)
    assert set(completeness.values()) == {"passed"}
    protocol = report["benchmark"]["protocols"]["res"]
    assert protocol["status"] == "complete"
    assert protocol["classifications"]["gate"]["outcome"]["label"] == expected_label
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert all(f"preempted by {expected_label}" in t["call"]["longrepr"] for t in skipped)
    assert result.ret == (0 if expected_label == "RESPONSE_INTERFACE_GATE_PASSED" else 1)
    assert f"  gate: {expected_label} (" in result.stdout.str()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["classifications"]["gate"] == expected_label
    assert summary["deviations"] == [f"model {model!r} instead of the preregistered 'Qwen/Qwen2.5-1.5B-Instruct'"]
    assert rescore(run_dir)["classification"] == expected_label
    # One status word for a decided run in summary.json and report.json; the provenance holds the deviations.
    assert summary["status"] == protocol["status"] == "complete"
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["deviations"] == summary["deviations"] and "deviations" not in provenance["extra"]
    assert provenance["extra"]["label_token_ids"] is None  # a scripted model has no tokenizer


def test_provenance_records_the_label_token_ids(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _, report, run_dir = run_res(pytester, tmp_path, "--model", "scripted-res-tokenizer", in_process=True)
    assert report["benchmark"]["protocols"]["res"]["status"] == "complete"
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["extra"]["label_token_ids"] == {"A": 330, "B": 426}
    # every generator the model loader seeds (models._hf seeds Python's random, NumPy and torch), by name
    torch_seed = PREREG.values.seeds["torch"]
    assert {k: provenance["seeds"][k] for k in ("python_random", "numpy", "torch")} == dict.fromkeys(
        ("python_random", "numpy", "torch"), torch_seed)
    header = PREREG.values.protocol
    assert json.loads((run_dir / "summary.json").read_text())["preregistration"] == {
        "name": "res", "title": header.title, "registered": "2026-09-13", "seed_document": header.seed_document}


def test_balanced_fixture_set_is_recorded_as_a_deviation(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _, report, run_dir = run_res(pytester, tmp_path, "--model", "scripted-oracle", "--res-fixture-set", "balanced",
                               in_process=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["fixture_set"] == "balanced"
    assert "fixture set 'balanced' instead of 'preregistered'" in summary["deviations"]
    assert report["benchmark"]["protocols"]["res"]["provenance"]["deviations"] == summary["deviations"]
    best = {condition: max(table.values()) for condition, table in summary["heuristic_audit"].items()}
    assert best == {"five_factor": 0.625, "minimal_owner_indexed": 0.6875}


def test_unavailable_preregistered_model_stops_before_any_test(pytester: pytest.Pytester, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = run_protocol(pytester, HERE, tmp_path / "results")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "RES cannot run: Qwen/Qwen2.5-1.5B-Instruct@main" in text
    assert "smollm2-135m-instruct" in text
    assert "passed" not in result.stdout.str().splitlines()[-1]


@pytest.mark.slow
def test_bundled_smollm2_end_to_end(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """All 64 fixtures, both measurements, on the real bundled model; the rescorer must agree."""
    start = time.perf_counter()
    result, report, run_dir = run_res(pytester, tmp_path, "--model", "smollm2-135m-instruct")
    wall = time.perf_counter() - start
    rules, completeness = outcomes(report)
    assert completeness == {name: "passed" for name in COMPLETENESS}, result.stdout.str()
    protocol = report["benchmark"]["protocols"]["res"]
    assert protocol["status"] == "complete"
    label = protocol["classifications"]["gate"]["outcome"]["label"]
    assert rules == expected_pattern(GATE, label)
    summary = json.loads((run_dir / "summary.json").read_text())
    rescored = rescore(run_dir)
    assert rescored["items"] == 64 and rescored["mismatched_items"] == []
    assert rescored["classification"] == summary["classifications"]["gate"] == label
    for key, value in rescored["metrics"].items():
        assert summary["metrics"][key] == pytest.approx(value), key
    provenance = protocol["provenance"]
    assert provenance["model"]["id"] == "smollm2-135m-instruct"
    assert provenance["model"]["revision"].startswith("sha256:")
    for name in ("fixtures.json", "records.jsonl", "summary.json", "provenance.json", "report.json"):
        assert (run_dir / name).is_file(), name
    print(f"SmolLM2 RES run: {label} in {wall:.1f} s; metrics {json.dumps(rescored['metrics'], sort_keys=True)}")



#: Ledger lines kept before the cut: inside the first batch, at a batch's end, inside later batches, and one
#: record short of the end (a batch of RES is 8 units).
KILL_POINTS = (1, 4, 8, 13, 30, 63)


@pytest.mark.slow
def test_a_killed_and_resumed_smollm2_run_equals_the_uninterrupted_one(pytester: pytest.Pytester, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled SmolLM2 run whole, then cut at six points mid-record (as a kill leaves it) and resumed: every
    field of every record, logits included, equals the uninterrupted run's, and the recorded units a resume
    measured again with their batch agree with the ledger (``resumes.json``)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one thread count for every session: the same sums, in order
    _, _, whole_dir = run_res(pytester, tmp_path / "whole", "--model", "smollm2-135m-instruct", "--run-id=cut")
    whole = {row["item_id"]: row for row in map(json.loads, (whole_dir / "records.jsonl").read_text().splitlines())}
    assert len(whole) == 64
    lines = (whole_dir / "records.jsonl").read_text().splitlines(keepends=True)
    for kept in KILL_POINTS:
        run_dir = tmp_path / f"cut-{kept}" / "results" / "res" / "cut"
        run_dir.mkdir(parents=True)
        for name in ("fixtures.json", "provenance.json"):
            (run_dir / name).write_bytes((whole_dir / name).read_bytes())
        (run_dir / "records.jsonl").write_text("".join(lines[:kept]) + lines[kept][: len(lines[kept]) // 2])
        result, report, again = run_res(pytester, tmp_path / f"cut-{kept}", "--model", "smollm2-135m-instruct",
                                        "--run-id=cut")
        assert again == run_dir and report["benchmark"]["protocols"]["res"]["status"] == "complete", kept
        resumed = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
        assert len(resumed) == 64 and {row["item_id"]: row for row in resumed} == whole, kept
        resumes = run_dir / "resumes.json"  # written only when a batch held recorded units: a cut inside a batch
        checks = json.loads(resumes.read_text()) if resumes.exists() else []
        assert all(check["differing"] == [] for check in checks), (kept, checks)
        assert len(checks) == (1 if kept % 8 else 0) and (not checks or len(checks[0]["remeasured"]) == kept % 8)

def test_two_xdist_workers_share_one_measurement(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Under -n 2 one worker measures under the run's lock; the other reads the same 64 records."""
    result, report, run_dir = run_res(pytester, tmp_path, "--model", "scripted-oracle", "-n", "2")
    rules, completeness = outcomes(report)
    assert rules == [P, P, P, P, P, S] and set(completeness.values()) == {"passed"}
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(lines) == 64 == len({json.loads(line)["item_id"] for line in lines})


def test_the_old_fixture_set_flag_still_works(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``--fixture-set`` is kept as an alias of ``--res-fixture-set`` for one release."""
    _, _, run_dir = run_res(pytester, tmp_path, "--model", "scripted-oracle", "--fixture-set", "balanced", in_process=True)
    assert json.loads((run_dir / "summary.json").read_text())["fixture_set"] == "balanced"


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("sidecars", ["kept", "deleted"])
def test_a_resume_with_another_model_is_refused_before_any_write(pytester: pytest.Pytester, tmp_path: Path,
                                                                  sidecars: str) -> None:
    """The records themselves carry the model: with or without provenance.json and summary.json, a resume
    with another model stops before any test with one line, and every file of the run stays as it was."""
    _, _, run_dir = run_res(pytester, tmp_path, "--model", "scripted-oracle", "--run-id", "first", in_process=True)
    if sidecars == "deleted":
        for name in ("provenance.json", "summary.json", "fixtures.json"):
            (run_dir / name).unlink()
    before = tree_digest(run_dir)
    result = run_protocol(pytester, HERE, tmp_path / "results", "-p", "benchmarks.res.scenarios",
                          "--model", "scripted-constant", "--run-id", "first", in_process=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert ("RES cannot run: run first was started with other settings "
            "(model: 'scripted-oracle' -> 'scripted-constant')") in text
    assert tree_digest(run_dir) == before


def test_a_resume_with_another_fixture_set_is_refused(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _, _, run_dir = run_res(pytester, tmp_path, "--model", "scripted-oracle", "--run-id", "first", in_process=True)
    before = tree_digest(run_dir)
    result = run_protocol(pytester, HERE, tmp_path / "results", "--model", "scripted-oracle", "--run-id", "first",
                          "--res-fixture-set", "balanced", in_process=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "fixture_set: 'preregistered' -> 'balanced'" in text
    assert tree_digest(run_dir) == before


def test_without_m_cpu_the_summary_says_no_protocol_ran(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``pytest benchmarks/res`` without ``-m cpu`` measures nothing, and says so instead of looking like a run."""
    result = pytester.runpytest_subprocess(str(HERE / "prereg.toml"), str(HERE / "tests" / "test_fixture_audit.py"),
                                           f"--rootdir={SUITE_ROOT}", f"--results-dir={tmp_path / 'results'}",
                                           "-p", "no:cacheprovider")
    assert result.ret == 0
    assert ("no protocol run (RES): their model-run tests were deselected by -m 'not cpu and not gpu and not slow'; "
            "add -m cpu or -m gpu") in result.stdout.str()
    assert not (tmp_path / "results").exists()


def test_a_bad_option_value_is_one_usage_line_naming_the_valid_ones(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = run_protocol(pytester, HERE, tmp_path / "results", "--model", "scripted-oracle", "--res-fixture-set", "x",
                          in_process=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("RES cannot run: --res-fixture-set 'x' is not valid; choose one of: preregistered, balanced"
            in result.stdout.str() + result.stderr.str())
    assert not (tmp_path / "results").exists()
