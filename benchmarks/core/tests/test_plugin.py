"""The verdict plugin, exercised through pytester on a synthetic three-rule protocol."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.completed import main as completed_main
from benchmarks.core.completed import run_status

TOY = Path(__file__).parent / "data" / "toy"

PASSING = {"coverage.a": 1.0, "coverage.b": 0.97, "accuracy": 0.9, "agreement": 0.8}
LOW_ACCURACY = {**PASSING, "accuracy": 0.59375}


def make_project(pytester: pytest.Pytester, metrics: dict[str, Any], complete: bool = True) -> None:
    shutil.copytree(TOY, pytester.path / "benchmarks" / "toy")
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\naddopts = ["-p", "no:cacheprovider"]\n')
    (pytester.path / "scenario.json").write_text(json.dumps({"metrics": metrics, "complete": complete}))


@pytest.fixture(params=[0, 2], ids=["n0", "n2"])
def workers(request: pytest.FixtureRequest) -> int:
    return request.param


def run(pytester: pytest.Pytester, workers: int, *args: str) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    result = pytester.runpytest_subprocess("-n", str(workers), "-rA", *args)
    reports = sorted((pytester.path / "results" / "toy").glob("*/report.json"))
    assert len(reports) == 1, f"expected one run directory with a report, found {reports}\n{result.stdout.str()}"
    return result, json.loads(reports[0].read_text()), reports[0].parent


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"].split("::", 1)[1]: t["outcome"] for t in report["tests"]}


def properties(report: dict[str, Any], name: str) -> dict[str, Any]:
    test = next(t for t in report["tests"] if t["nodeid"].endswith(name))
    return {k: v for entry in test.get("user_properties", []) for k, v in entry.items()}


def test_first_firing_rule_fails_and_later_rules_are_preempted(pytester: pytest.Pytester, workers: int) -> None:
    make_project(pytester, LOW_ACCURACY)
    result, report, run_dir = run(pytester, workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(report) == {
        "test_rule[UNPARSEABLE]": "passed",
        "test_rule[LOW_ACCURACY]": "failed",
        "test_rule[DISAGREEMENT]": "skipped",
        "test_records_written": "passed",
        "test_provenance_complete": "passed",
    }
    failed = next(t for t in report["tests"] if t["nodeid"].endswith("[LOW_ACCURACY]"))
    assert failed["call"]["longrepr"].strip().splitlines()[-1] == "LOW_ACCURACY: accuracy 0.5938 < 0.75"
    skipped = next(t for t in report["tests"] if t["nodeid"].endswith("[DISAGREEMENT]"))
    assert "preempted by LOW_ACCURACY" in skipped["call"]["longrepr"]
    props = properties(report, "[LOW_ACCURACY]")
    assert props["accuracy"] == 0.59375 and props["threshold.min_accuracy"] == 0.75
    assert props["classification"] == "LOW_ACCURACY"

    summary = report["benchmark"]["protocols"]["toy"]
    assert summary["status"] == "complete"
    assert summary["classifications"]["gate"]["outcome"]["label"] == "LOW_ACCURACY"
    assert [(r["rule"], r["role"]) for r in summary["classifications"]["gate"]["rules"]] == [
        ("UNPARSEABLE", "did_not_fire"), ("LOW_ACCURACY", "fired"), ("DISAGREEMENT", "preempted")]
    assert Path(summary["run_dir"]) == run_dir
    assert run_status(run_dir)[0]  # a failed gate is still a complete run (verify decides whether it is VERIFIED)
    result.stdout.fnmatch_lines(["*benchmark verdict*", "toy: run * COMPLETE (2/2 completeness checks passed)"])
    assert "  gate: LOW_ACCURACY (rule 2 of 3: accuracy 0.5938 < 0.75)\n" in result.stdout.str()


def test_all_pass_reaches_the_passing_state(pytester: pytest.Pytester, workers: int) -> None:
    make_project(pytester, PASSING)
    result, report, _ = run(pytester, workers)
    assert result.ret == pytest.ExitCode.OK
    assert set(outcomes(report).values()) == {"passed"}
    gate = report["benchmark"]["protocols"]["toy"]["classifications"]["gate"]
    assert gate["outcome"]["label"] == "GATE_PASSED" and gate["outcome"]["passed"] is True
    assert properties(report, "[DISAGREEMENT]")["classification"] == "GATE_PASSED"
    assert "  gate: GATE_PASSED (no failure rule fired)\n" in result.stdout.str()


def test_provenance_is_recorded_and_non_empty(pytester: pytest.Pytester, workers: int) -> None:
    make_project(pytester, PASSING)
    _, report, run_dir = run(pytester, workers)
    provenance = report["benchmark"]["protocols"]["toy"]["provenance"]
    for key in ("model", "seeds", "prereg_sha256", "runner_sha256", "fixtures_sha256", "packages", "hardware",
                "git", "started_at", "finished_at"):
        assert provenance[key], f"provenance field {key} is empty"
    assert provenance["model"]["revision"] and provenance["git"]["commit"] and provenance["git"]["dirty"] is not None
    assert provenance["hardware"]["cpu_model"] and provenance["hardware"]["cpu_cores"] >= 1
    assert provenance["hardware"]["ram_bytes"] > 0
    assert {"python", "pytest", "numpy"} <= set(provenance["packages"])
    assert provenance["seeds"] == {"python": 7}
    on_disk = json.loads((run_dir / "provenance.json").read_text())
    assert on_disk == provenance


def test_failed_completeness_marks_a_broken_run(pytester: pytest.Pytester, workers: int) -> None:
    make_project(pytester, PASSING, complete=False)
    result, report, run_dir = run(pytester, workers)
    summary = report["benchmark"]["protocols"]["toy"]
    assert summary["status"] == "broken"
    assert summary["completeness"] == {"tests": 2, "passed": 1, "failed": 1, "error": 0, "skipped": 0}
    result.stdout.fnmatch_lines(["toy: run * BROKEN (1/2 completeness checks passed)"])
    assert completed_main([str(run_dir.parent), run_dir.name]) == 1


def test_unmeasured_metric_is_a_broken_run_not_a_verdict(pytester: pytest.Pytester) -> None:
    make_project(pytester, {k: v for k, v in PASSING.items() if k != "agreement"})
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.stdout.fnmatch_lines(["*metric 'agreement' was not measured*", "toy: run * BROKEN*",
                                 "*problem: *test_rule*: the rule could not be evaluated"])


def test_bad_option_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    make_project(pytester, PASSING)
    result = pytester.runpytest_subprocess("--device", "tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--device 'tpu' is not valid; choose one of: cpu, cuda*"])
    result = pytester.runpytest_subprocess("--run-id", "../escape")
    result.stderr.fnmatch_lines(["*--run-id '../escape' is not valid*"])


def test_explicit_results_dir_and_run_id(pytester: pytest.Pytester, tmp_path: Path) -> None:
    make_project(pytester, PASSING)
    target = tmp_path / "elsewhere"
    result = pytester.runpytest_subprocess("-p", "no:xdist", f"--results-dir={target}", "--run-id=resume-1")
    assert result.ret == 0
    assert (target / "toy" / "resume-1" / "report.json").is_file()
    # A second session with the same run id reuses the stored records instead of recomputing them.
    (pytester.path / "scenario.json").write_text(json.dumps({"metrics": LOW_ACCURACY, "complete": True}))
    again = pytester.runpytest_subprocess("-p", "no:xdist", f"--results-dir={target}", "--run-id=resume-1")
    assert again.ret == 0


def test_gpu_tests_skip_with_a_reason_without_cuda(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    pytester.makepyfile(test_dev="import pytest\n\n@pytest.mark.gpu\ndef test_on_gpu():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-m", "gpu", "-rs")
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*gpu test needs a CUDA device: *"])


def test_verdict_tests_outside_a_protocol_folder_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    pytester.makepyfile(test_stray="import pytest\n\n@pytest.mark.completeness\ndef test_done():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_stray.py::test_done: rule and completeness tests belong to a protocol folder*"])
