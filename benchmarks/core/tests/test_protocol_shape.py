"""The protocol shape, end to end through pytester: a protocol scaffolded by ``preregbench new`` into a
temporary project, run with scripted models; usage errors before any work; resume refusals that leave an
existing run byte-identical; the preempted-rule fix."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.modelrun import cuda_missing
from benchmarks.core.new import ScaffoldError, scaffold
from benchmarks.core.selfcheck import outcomes_by_name, run_rescorer

GENERATED_COMPLETENESS = [
    "test_every_unit_recorded_once", "test_records_carry_the_run_identity", "test_records_file_written",
    "test_provenance_complete", "test_fixtures_file_written", "test_summary_file_written", "test_result_files_written",
    "test_rescorer_agrees",
]
RULES = ["UNPARSEABLE", "LOW_ACCURACY"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """A project of its own (not the suite's checkout) holding one scaffolded protocol, ``protocols/toy``."""
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\n'
        'addopts = ["-p", "no:cacheprovider", "-p", "pytester", "-m", "not cpu and not gpu"]\n')
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    (pytester.path / "protocols").mkdir()
    (pytester.path / "protocols" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.new", "toy", "--into", "protocols"],
                          cwd=pytester.path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    return pytester.path / "protocols" / "toy"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("protocols/toy", "-p", "no:randomly", *args)


def the_run(pytester: pytest.Pytester) -> tuple[dict[str, Any], Path]:
    reports = sorted((pytester.path / "results" / "toy").glob("*/report.json"))
    assert len(reports) == 1, reports
    return json.loads(reports[0].read_text()), reports[0].parent


def digest_tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(result: pytest.RunResult, needle: str) -> str:
    lines = [line for line in (result.stdout.str() + result.stderr.str()).splitlines() if needle in line]
    assert lines, result.stdout.str() + result.stderr.str()
    return lines[0]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize(("model", "label"), [("scripted-oracle", "PASSED"), ("scripted-constant", "LOW_ACCURACY")])
def test_a_scaffolded_protocol_runs_and_its_rescorer_agrees(pytester: pytest.Pytester, project: Path, model: str,
                                                           label: str, workers: str) -> None:
    result = run(pytester, "-m", "cpu", "--model", model, "-n", workers)
    report, run_dir = the_run(pytester)
    entry = report["benchmark"]["protocols"]["toy"]
    assert entry["status"] == "complete", result.stdout.str()
    assert entry["classifications"]["gate"]["outcome"]["label"] == label
    outcomes = outcomes_by_name(report)
    assert {name: outcomes[name] for name in GENERATED_COMPLETENESS} == dict.fromkeys(GENERATED_COMPLETENESS, "passed")
    gate = [outcomes[f"test_gate[{rule}]"] for rule in RULES]
    assert gate == (["passed", "passed"] if label == "PASSED" else ["passed", "failed"])
    assert result.ret == (0 if label == "PASSED" else 1)
    rescored = run_rescorer(project / "rescore.py", run_dir)
    assert rescored["classification"] == label and rescored["mismatched_items"] == [] and rescored["items"] == 24
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["classifications"] == {"gate": label}
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(lines) == 24 == len({json.loads(line)["item_id"] for line in lines})
    identities = {json.dumps(json.loads(line)["identity"], sort_keys=True) for line in lines}
    assert len(identities) == 1 and json.loads(identities.pop())["model"] == model


def test_the_scaffold_s_own_self_check_passes(pytester: pytest.Pytester, project: Path) -> None:
    result = run(pytester)
    result.assert_outcomes(passed=2, deselected=10)


def test_scaffold_refuses_bad_names_and_existing_folders(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match="lowercase identifier"):
        scaffold("Bad-Name", tmp_path)
    scaffold("fine", tmp_path)
    with pytest.raises(ScaffoldError, match="already exists"):
        scaffold("fine", tmp_path)
    assert sorted(p.relative_to(tmp_path / "fine").as_posix() for p in (tmp_path / "fine").rglob("*")) == sorted(
        ["__init__.py", "prereg.toml", "protocol.py", "conftest.py", "rescore.py", "tests", "tests/__init__.py",
         "tests/test_protocol_runs.py", "README.md"])


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_unknown_model_is_one_usage_line_with_close_matches_and_leaves_no_run_directory(
        pytester: pytest.Pytester, project: Path, workers: str) -> None:
    result = run(pytester, "-m", "cpu", "--model", "scripted-oracel", "-n", workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = one_line(result, "toy cannot run: unknown model 'scripted-oracel'")
    assert "did you mean 'scripted-oracle'" in line and "available:" in line
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "results").exists()


@pytest.mark.parametrize("sidecars", ["kept", "deleted"])
def test_a_resume_with_another_model_is_refused_before_any_write(pytester: pytest.Pytester, project: Path,
                                                                  sidecars: str) -> None:
    first = run(pytester, "-m", "cpu", "--model", "scripted-oracle", "--run-id", "r1")
    assert first.ret == 0, first.stdout.str()
    run_dir = pytester.path / "results" / "toy" / "r1"
    if sidecars == "deleted":
        for name in ("provenance.json", "summary.json", "fixtures.json", "report.json"):
            (run_dir / name).unlink()
    before = digest_tree(run_dir)
    refused = run(pytester, "-m", "cpu", "--model", "scripted-constant", "--run-id", "r1")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    line = one_line(refused, "toy cannot run: run r1 was started with other settings")
    assert "model: 'scripted-oracle' -> 'scripted-constant'" in line
    assert digest_tree(run_dir) == before


def test_a_resume_with_the_same_model_finishes_the_run(pytester: pytest.Pytester, project: Path) -> None:
    """Half the units recorded (the rest lost to a kill): the resumed session measures exactly the missing ones."""
    run(pytester, "-m", "cpu", "--model", "scripted-constant", "--run-id", "r1")
    run_dir = pytester.path / "results" / "toy" / "r1"
    ledger = run_dir / "records.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:10]) + lines[10][:25])  # ten whole records and a torn one
    (run_dir / "report.json").unlink()
    (run_dir / "summary.json").unlink()
    result = run(pytester, "-m", "cpu", "--model", "scripted-constant", "--run-id", "r1")
    report, _ = the_run(pytester)
    assert report["benchmark"]["protocols"]["toy"]["status"] == "complete", result.stdout.str()
    assert ledger.read_bytes().splitlines(keepends=True) == lines
    assert list(run_dir.glob("records.jsonl.torn-*"))


def test_a_changed_setting_is_refused_too(pytester: pytest.Pytester, project: Path) -> None:
    run(pytester, "-m", "cpu", "--model", "scripted-oracle", "--run-id", "r1")
    run_dir = pytester.path / "results" / "toy" / "r1"
    before = digest_tree(run_dir)
    (project / "prereg.toml").write_text((project / "prereg.toml").read_text().replace("min_accuracy = 0.75",
                                                                                     "min_accuracy = 0.5"))
    refused = run(pytester, "-m", "cpu", "--model", "scripted-oracle", "--run-id", "r1")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "prereg_sha256:" in one_line(refused, "toy cannot run: run r1 was started with other settings")
    assert digest_tree(run_dir) == before


def test_records_of_an_older_layout_without_identity_are_refused(pytester: pytest.Pytester, project: Path) -> None:
    run(pytester, "-m", "cpu", "--model", "scripted-oracle", "--run-id", "r1")
    ledger = pytester.path / "results" / "toy" / "r1" / "records.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    for row in rows:
        del row["identity"]
    ledger.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    refused = run(pytester, "-m", "cpu", "--model", "scripted-oracle", "--run-id", "r1")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "line 1 of records.jsonl carries no run identity" in one_line(refused, "toy cannot run:")


def test_without_m_the_summary_says_no_protocol_ran(pytester: pytest.Pytester, project: Path) -> None:
    result = run(pytester)
    assert result.ret == 0
    assert ("no protocol run (toy): their model-run tests were deselected by -m 'not cpu and not gpu'; "
            "add -m cpu or -m gpu") in result.stdout.str()
    assert not (pytester.path / "results").exists()


def test_m_gpu_on_a_cpu_protocol_named_on_the_command_line_is_a_usage_error(pytester: pytest.Pytester,
                                                                             project: Path) -> None:
    result = run(pytester, "-m", "gpu", "--model", "scripted-oracle")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "run's device is cpu, so its model-run tests are marked cpu; use -m cpu" in one_line(result, "toy cannot run:")


@pytest.mark.skipif(cuda_missing() is None, reason="this machine has a CUDA device, so no GPU is missing")
def test_m_gpu_without_cuda_names_the_missing_gpu(pytester: pytest.Pytester, project: Path) -> None:
    result = run(pytester, "-m", "gpu", "--device", "cuda", "--model", "scripted-oracle")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = one_line(result, "toy cannot run: --device cuda needs a CUDA GPU")
    assert cuda_missing() in line
    assert not (pytester.path / "results").exists()


def test_a_preempted_rule_is_not_read_and_a_breakdown_with_an_undefined_metric_skips(
        pytester: pytest.Pytester, project: Path) -> None:
    """A rule after the deciding one reads a metric that is never measured (declared, never computed): it is
    skipped as preempted and the run stays complete; a breakdown classification that reads it skips, naming
    the metric."""
    prereg = project / "prereg.toml"
    prereg.write_text(prereg.read_text() + (
        '\n[[classification.rules]]\nlabel = "NEVER_MEASURED"\nall = ["calibration_error > 0.1"]\n'
        '\n[breakdown]\nname = "breakdown"\npassing = "CALIBRATED"\n\n[[breakdown.rules]]\n'
        'label = "MISCALIBRATED"\nall = ["calibration_error > 0.1"]\n'))
    module = project / "protocol.py"
    module.write_text(module.read_text().replace(
        "    classification: ClassificationSpec\n", "    classification: ClassificationSpec\n    breakdown: ClassificationSpec\n"
    ).replace('    record_key = "item_id"\n', '    record_key = "item_id"\n    breakdown_blocks = ("breakdown",)\n'
    ).replace("        return tuple(metrics_of([]))\n", "        return tuple(metrics_of([])) + ('calibration_error',)\n"))
    result = run(pytester, "-m", "cpu", "--model", "scripted-constant")
    report, _ = the_run(pytester)
    entry = report["benchmark"]["protocols"]["toy"]
    assert entry["status"] == "complete", result.stdout.str()
    outcomes = outcomes_by_name(report)
    labels = [*RULES, "NEVER_MEASURED"]
    gate = [outcomes[f"test_gate[{rule}]"] for rule in labels]
    assert gate == ["passed", "failed", "skipped"]
    tests = {t["nodeid"].split("::")[-1]: t for t in report["tests"]}
    assert "preempted by LOW_ACCURACY" in tests["test_gate[NEVER_MEASURED]"]["call"]["longrepr"]
    breakdown = tests["test_breakdown[MISCALIBRATED]"]
    assert breakdown["outcome"] == "skipped"
    assert "breakdown is undefined: metric 'calibration_error' was not measured" in breakdown["call"]["longrepr"]


def test_identity_conflicts_name_each_difference() -> None:
    from benchmarks.core.run import identity_conflicts

    old = {"model": "a", "revision": "sha256:1", "settings": {"n": 1, "k": 2}, "fixtures": {"set": "0" * 64}}
    assert identity_conflicts(old, old) == []
    assert identity_conflicts(old, {**old, "revision": None}) == []  # a revision not yet known is not compared
    new = {**old, "model": "b", "settings": {"n": 1, "k": 3}, "fixtures": {"set": "1" * 64}}
    assert identity_conflicts(old, new) == [
        "fixture set set: sha256 000000000000 -> 111111111111", "model: 'a' -> 'b'", "k: 2 -> 3"]


def test_options_refuse_bad_values_naming_the_valid_ones() -> None:
    from benchmarks.core.protocol import Option, UsageProblem

    variant = Option("fixture-set", "variant", choices=lambda: ["a", "b"], alias="--fixture-set")
    assert (variant.flag("res"), variant.dest("res")) == ("--res-fixture-set", "res_fixture_set")
    assert variant.check("res", "a") == "a" and variant.check("res", None) is None
    with pytest.raises(UsageProblem, match=r"--res-fixture-set 'c' is not valid; choose one of: a, b"):
        variant.check("res", "c")
    with pytest.raises(UsageProblem, match="--x-units must be at least 1, got 0"):
        Option("units", "n", type=int, minimum=1).check("x", 0)


def test_the_preregbench_command_dispatches_new(tmp_path: Path) -> None:
    from benchmarks.core import cli

    assert cli.main(["new", "demo", "--into", str(tmp_path)]) == 0
    assert (tmp_path / "demo" / "prereg.toml").is_file()
    assert cli.main(["new", "demo", "--into", str(tmp_path)]) == 4  # already there: one line, no traceback
    assert cli.main(["nonsense"]) == 4  # usage
