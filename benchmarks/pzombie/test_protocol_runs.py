"""End-to-end P-Zombie runs through pytester.

Scenario runs feed synthetic per-prompt records (benchmarks/pzombie/scenarios.py)
through the real conftest, metrics, rules, files and rescorer, so every
classification's outcome pattern is checked in seconds.  The bundled Gemma 3
270M run measures all 90 prompts under both presets in full fork isolation on
the CPU, with a bounded generation length.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import models
from benchmarks.core.rundir import SUITE_ROOT

from .protocol import CLASSIFICATIONS, HERE, PREREG
from .scenarios import EXPECTED, SCENARIOS, prefill_run

COMPLETENESS = ["test_prompts_built", "test_calibration_done", "test_every_prompt_recorded",
                "test_generation_and_routing_done", "test_no_prompt_failed", "test_same_inputs_under_every_preset",
                "test_records_file_written", "test_aggregate_written", "test_stats_written", "test_figures_written",
                "test_provenance_written"]
TEST_OF = {"token_control": "test_token_control", "combined": "test_combined", "eta2_target": "test_eta2_target",
           "h2": "test_h2"}
#: Generation bound of the bundled-model self-check (the preregistered 60 is for real runs).
SELF_CHECK_MAX_NEW_TOKENS = 4
P, F, S = "passed", "failed", "skipped"
#: Where the bundled models' converted weights live, read before any test can move HOME.
BUNDLED_CACHE = models.cache_root()


def run_pzombie(pytester: pytest.Pytester, results: Path, *args: str,
                timeout: float = 600.0) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    result = pytester.runpytest_subprocess(
        str(HERE), "-m", "cpu", "--device", "cpu", f"--rootdir={SUITE_ROOT}", f"--results-dir={results}",
        "-p", "no:cacheprovider", "-p", "no:randomly", *args, timeout=timeout,
    )
    reports = sorted((results / "pzombie").glob("*/report.json"))
    assert len(reports) == 1, result.stdout.str() + result.stderr.str()
    return result, json.loads(reports[0].read_text()), reports[0].parent


def outcomes(report: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, str]]:
    by_name = {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]}
    rules = {key: [by_name[f"{TEST_OF[key]}[{label}]"] for label in block.labels] for key, block in CLASSIFICATIONS.items()}
    return rules, {name: by_name[name] for name in COMPLETENESS}


def expected_pattern(key: str, label: str) -> list[str]:
    """Rules before the decided one pass, the decided one passes or fails by its role, the rest are preempted."""
    block = CLASSIFICATIONS[key]
    index = block.labels.index(label)
    return [P] * index + [P if block.rules[index].passes else F] + [S] * (len(block.labels) - index - 1)


def rescore(run_dir: Path) -> dict[str, Any]:
    # -S -I: no site-packages and no environment, so the rescorer cannot import anything from the suite.
    done = subprocess.run([sys.executable, "-S", "-I", str(HERE / "rescore.py"), str(run_dir)],
                          capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def assert_agreement(run_dir: Path, labels: dict[str, str]) -> dict[str, Any]:
    stats = json.loads((run_dir / "stats.json").read_text())
    rescored = rescore(run_dir)
    assert rescored["mismatches"] == []
    assert rescored["classifications"] == stats["classifications"] == labels
    for key in ("eta_squared", "eta_squared_over_total", "f", "p_exact", "p_approx", "r_squared_td"):
        for prefix in ("active", "baseline"):
            assert rescored["metrics"][f"{prefix}.{key}"] == pytest.approx(stats["metrics"][f"{prefix}.{key}"], rel=1e-6), key
    assert rescored["metrics"]["h2.eta_squared_gain"] == pytest.approx(stats["metrics"]["h2.eta_squared_gain"], abs=1e-12)
    return rescored


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_classification_is_reached_from_records_of_its_shape(pytester: pytest.Pytester, tmp_path: Path,
                                                                    scenario: str) -> None:
    """One run per shape; the "ambiguous" one runs under two xdist workers, which must share the one run."""
    results = tmp_path / "results"
    prefill_run(results, "scenario", scenario)
    workers = ("-n", "2") if scenario == "ambiguous" else ()
    result, report, run_dir = run_pzombie(pytester, results, "--run-id=scenario", "--model", "gemma-3-270m", *workers)
    rules, completeness = outcomes(report)
    assert completeness == {name: P for name in COMPLETENESS}, result.stdout.str()
    protocol = report["benchmark"]["protocols"]["pzombie"]
    assert protocol["status"] == "complete" and protocol["problems"] == []
    for key, label in EXPECTED[scenario].items():
        assert protocol["classifications"][key]["outcome"]["label"] == label
        assert rules[key] == expected_pattern(key, label), key
    assert_agreement(run_dir, EXPECTED[scenario])
    every_rule_passes = all(CLASSIFICATIONS[k].rules[CLASSIFICATIONS[k].labels.index(v)].passes
                            for k, v in EXPECTED[scenario].items())
    assert result.ret == (0 if every_rule_passes else 1)
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 160


def test_an_errored_prompt_is_counted_and_makes_the_run_incomplete(pytester: pytest.Pytester, tmp_path: Path) -> None:
    results = tmp_path / "results"
    prefill_run(results, "errors", "confirmed", errors=2)
    _, report, run_dir = run_pzombie(pytester, results, "--run-id=errors", "--model", "gemma-3-270m")
    _, completeness = outcomes(report)
    assert completeness["test_no_prompt_failed"] == F
    assert {v for k, v in completeness.items() if k != "test_no_prompt_failed"} == {P}
    protocol = report["benchmark"]["protocols"]["pzombie"]
    assert protocol["status"] == "broken"
    stats = json.loads((run_dir / "stats.json").read_text())
    assert stats["metrics"]["active.errors"] == 2 and stats["metrics"]["active.n_ok"] == 78
    assert stats["metrics"]["active.df_within"] == 74
    assert_agreement(run_dir, EXPECTED["confirmed"])
    aggregate = json.loads((run_dir / "aggregate.json").read_text())
    assert aggregate["presets"]["ACTIVE_MANIFOLD"]["errors"] == 2


def test_a_bad_scale_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = pytester.runpytest_subprocess(str(HERE), "-m", "cpu", "--device", "cpu", f"--rootdir={SUITE_ROOT}",
                                           f"--results-dir={tmp_path / 'results'}", "-p", "no:cacheprovider",
                                           "--model", "gemma-3-270m", "--scale=13B")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--scale '13B' is not a P-Zombie scale; choose one of: 270M, 1B, 4B, E2B" in result.stdout.str() + result.stderr.str()


def test_unavailable_preregistered_model_stops_before_any_test(pytester: pytest.Pytester, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = pytester.runpytest_subprocess(str(HERE), "-m", "cpu", "--device", "cpu", "--scale", "1B",
                                           f"--rootdir={SUITE_ROOT}", f"--results-dir={tmp_path / 'results'}",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "P-Zombie cannot run: google/gemma-3-1b-it@main" in text
    assert "gemma-3-270m" in text


def test_bundled_gemma3_270m_end_to_end(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All 90 prompts, both presets, fork isolation, on the bundled Gemma 3 270M; the rescorer must agree."""
    # pytester points HOME at a temporary folder: keep using the bundled model's converted cache.
    monkeypatch.setenv("PREREGBENCH_CACHE", str(BUNDLED_CACHE))
    start = time.perf_counter()
    result, report, run_dir = run_pzombie(
        pytester, tmp_path / "results", "--model", "gemma-3-270m", "--scale", "270M",
        f"--pzombie-max-new-tokens={SELF_CHECK_MAX_NEW_TOKENS}", timeout=1800.0,
    )
    wall = time.perf_counter() - start
    rules, completeness = outcomes(report)
    assert completeness == {name: P for name in COMPLETENESS}, result.stdout.str()
    protocol = report["benchmark"]["protocols"]["pzombie"]
    assert protocol["status"] == "complete"
    labels = {key: protocol["classifications"][key]["outcome"]["label"] for key in CLASSIFICATIONS}
    for key, label in labels.items():
        assert rules[key] == expected_pattern(key, label), key
    rescored = assert_agreement(run_dir, labels)
    assert rescored["records"] == 160
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert {r["engine"]["isolation"] for r in records} == {"fork"}
    assert len({r["engine"]["pid"] for r in records}) == 160  # a fresh process per prompt and preset
    for preset in PREREG.values.run.presets:
        calibration = json.loads((run_dir / f"calibration-{preset}.json").read_text())
        shas = {r["engine"]["start_state_sha256"] for r in records if r["preset"] == preset}
        assert shas == {calibration["frozen_state_sha256"]}  # every prompt started from the same frozen state
    assert all(r["new_tokens"] <= SELF_CHECK_MAX_NEW_TOKENS for r in records)
    provenance = protocol["provenance"]
    assert provenance["model"]["revision"].startswith("sha256:")
    assert provenance["extra"]["max_new_tokens"] == SELF_CHECK_MAX_NEW_TOKENS
    deviations = provenance["extra"]["deviations"]
    assert any("instead of the preregistered 'google/gemma-3-270m-it'" in d for d in deviations)
    assert any("bundled offline checkpoint" in d for d in deviations)
    assert f"max_new_tokens {SELF_CHECK_MAX_NEW_TOKENS} instead of 60" in deviations
    stats = json.loads((run_dir / "stats.json").read_text())
    m = stats["metrics"]
    print(f"Gemma 3 270M (bundled) P-Zombie run, max_new_tokens {SELF_CHECK_MAX_NEW_TOKENS}, fork isolation: "
          f"{json.dumps(labels, sort_keys=True)} in {wall:.1f} s; ACTIVE_MANIFOLD eta^2 {m['active.eta_squared']:.4f} "
          f"F {m['active.f']:.3f} p {m['active.p_exact']:.3g} R^2 {m['active.r_squared_td']:.4f}; "
          f"BASELINE eta^2 {m['baseline.eta_squared']:.4f} R^2 {m['baseline.r_squared_td']:.4f}")


def test_gpu_selection_without_cuda_skips_saying_so(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """`--device cuda -m gpu` marks the model-run tests gpu; without CUDA each skips with the reason, nothing runs."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA, so the gpu tests would run instead of skipping")
    result = pytester.runpytest_subprocess(str(HERE), "-m", "gpu", "--device", "cuda", "--model", "gemma-3-270m",
                                           f"--rootdir={SUITE_ROOT}", f"--results-dir={tmp_path / 'results'}",
                                           "-p", "no:cacheprovider", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) == len(COMPLETENESS) + sum(len(b.labels) for b in CLASSIFICATIONS.values())
    assert "passed" not in outcomes and "failed" not in outcomes
    assert "gpu test needs a CUDA device" in result.stdout.str()
    assert not list((tmp_path / "results").glob("pzombie/*/records.jsonl"))
