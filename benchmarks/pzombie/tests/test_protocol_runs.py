"""End-to-end P-Zombie runs through pytester.

Scenario runs feed synthetic per-prompt records (benchmarks/pzombie/scenarios.py,
recorded with the identity of a run) through the real protocol, metrics,
generated rule tests, files and rescorer, so every classification's outcome
pattern is checked in seconds; the same records check that a resume with
another model or other settings is refused before anything is written.  The
bundled Gemma 3 270M run measures all 90 prompts under both presets in full
fork isolation on the CPU, with a bounded generation length; it is SIGKILLed
partway, resumed under the same run id, and compared with an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import models
from benchmarks.core import ProtocolRun, ResumeRefused, Run, canonical_json, read_ledger
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.selfcheck import expected_pattern as core_expected_pattern
from benchmarks.core.selfcheck import outcomes_by_name, read_report, run_protocol, run_rescorer
from benchmarks.pzombie import px
from benchmarks.pzombie.engine import engine_config, record_from_engine
from benchmarks.pzombie.protocol import PROTOCOL
from benchmarks.pzombie.scenarios import EXPECTED, SCENARIOS, prefill_run
from benchmarks.pzombie.spec import CLASSIFICATIONS, HERE, PREREG, PzRecord, unit_id
from fixtures.pzombie import build_pzombie_prompts

#: The protocol's own completeness tests, then the generic ones core generates for every protocol.
COMPLETENESS = ["test_prompts_built", "test_calibration_done", "test_every_prompt_recorded",
                "test_generation_and_routing_done", "test_no_prompt_failed", "test_same_inputs_under_every_preset",
                "test_aggregate_written", "test_stats_written", "test_figures_written", "test_provenance_written",
                "test_every_unit_recorded_once", "test_records_carry_the_run_identity", "test_records_file_written",
                "test_provenance_complete", "test_fixtures_file_written", "test_summary_file_written",
                "test_result_files_written", "test_rescorer_agrees"]
TEST_OF = {"token_control": "test_token_control", "combined": "test_combined", "eta2_target": "test_eta2_target",
           "h2": "test_h2"}
#: Generation bound of the bundled-model self-check (the preregistered 60 is for real runs).
SELF_CHECK_MAX_NEW_TOKENS = 4
P, F, S = "passed", "failed", "skipped"
#: Where the bundled models' converted weights live, read before any test can move HOME.
BUNDLED_CACHE = models.cache_root()


def pzombie_args(results: Path, *args: str) -> tuple[str, ...]:
    """The command-line arguments of a P-Zombie run on the CPU writing under ``results``."""
    return (str(HERE), "-m", "cpu", "--device", "cpu", f"--rootdir={SUITE_ROOT}", f"--results-dir={results}",
            "-p", "no:cacheprovider", "-p", "no:randomly", *args)


def run_pzombie(pytester: pytest.Pytester, results: Path, *args: str,
                timeout: float = 600.0) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    result = run_protocol(pytester, HERE, results, "--device", "cpu", *args, timeout=timeout)
    report, run_dir = read_report(results, "pzombie", result)
    return result, report, run_dir


def outcomes(report: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, str]]:
    by_name = outcomes_by_name(report)
    rules = {key: [by_name[f"{TEST_OF[key]}[{label}]"] for label in block.labels] for key, block in CLASSIFICATIONS.items()}
    return rules, {name: by_name[name] for name in COMPLETENESS}


def expected_pattern(key: str, label: str) -> list[str]:
    """Rules before the decided one pass, the decided one passes or fails by its role, the rest are preempted."""
    return core_expected_pattern(CLASSIFICATIONS[key], label)


def rescore(run_dir: Path) -> dict[str, Any]:
    return run_rescorer(HERE / "rescore.py", run_dir)


def assert_agreement(run_dir: Path, labels: dict[str, str]) -> dict[str, Any]:
    stats = json.loads((run_dir / "stats.json").read_text())
    rescored = rescore(run_dir)
    assert rescored["disagreements"] == []
    assert rescored["classifications"] == stats["classifications"] == labels
    assert rescored["classification"] == labels["combined"]
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
    result = run_protocol(pytester, HERE, tmp_path / "results", "--device", "cpu", "--model", "gemma-3-270m",
                          "--scale=13B")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--scale '13B' is not a P-Zombie scale; choose one of: 270M, 1B, 4B, E2B" in result.stdout.str() + result.stderr.str()


def test_unavailable_preregistered_model_stops_before_any_test(pytester: pytest.Pytester, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = run_protocol(pytester, HERE, tmp_path / "results", "--device", "cpu", "--scale", "1B")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "P-Zombie cannot run: google/gemma-3-1b-it@main" in text
    assert "gemma-3-270m" in text


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (lock files included), by relative path."""
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


#: Sidecar files of a run: everything beside the ledger that says which run it is.
SIDECARS = ("provenance.json", "fixtures.json", "calibration-ACTIVE_MANIFOLD.json", "calibration-BASELINE.json")


@pytest.mark.parametrize("sidecars", ["kept", "deleted"])
@pytest.mark.parametrize(("change", "conflict"), [
    (("--model", "smollm2-135m-instruct"), "model: 'gemma-3-270m' -> 'smollm2-135m-instruct'"),
    (("--pzombie-max-new-tokens=4",), "max_new_tokens: 60 -> 4"),
], ids=["another-model", "another-bound"])
def test_a_foreign_resume_is_refused_before_any_write(pytester: pytest.Pytester, tmp_path: Path, sidecars: str,
                                                      change: tuple[str, ...], conflict: str) -> None:
    """A --run-id whose records came from another model (or other settings) stops the session at collection with
    one line and exit status 4, whether or not the sidecar files are there; every file of the run stays as it was."""
    results = tmp_path / "results"
    run_dir = prefill_run(results, "earlier", "confirmed")
    if sidecars == "deleted":
        for name in SIDECARS:
            (run_dir / name).unlink()
    before = file_hashes(run_dir)
    assert "records.jsonl" in before and (sidecars == "kept") == ("provenance.json" in before)
    args = ("--model", "gemma-3-270m", *change) if change[0] != "--model" else change
    result = run_protocol(pytester, HERE, results, "--device", "cpu", "--run-id=earlier", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    line = next(line for line in text.splitlines() if "P-Zombie cannot run: " in line)
    assert "run earlier was started with other settings (" in line and conflict in line
    assert file_hashes(run_dir) == before
    assert sorted(p.name for p in (results / "pzombie").iterdir()) == ["earlier"]


def test_a_calibration_file_of_another_run_is_not_reused(tmp_path: Path) -> None:
    """A frozen state left by another model's run (its ledger and provenance gone) is refused by the resume
    check (before any test), not calibrated on."""
    results = tmp_path / "results"
    run_dir = prefill_run(results, "earlier", "confirmed")
    (run_dir / "records.jsonl").unlink()
    (run_dir / "provenance.json").unlink()
    other = ProtocolRun(PROTOCOL, Run("pzombie", "earlier", results, "2026-11-30T00:00:00Z", HERE),
                        model="smollm2-135m-instruct", device="cpu")
    before = file_hashes(run_dir)
    refusal = "calibration-ACTIVE_MANIFOLD.json belongs to another run .*model: 'gemma-3-270m' -> 'smollm2-135m-instruct'"
    with pytest.raises(ResumeRefused, match=refusal):
        other.check_resume()  # the check made at collection reads the protocol's own state files too
    with pytest.raises(ResumeRefused, match=refusal):
        PROTOCOL.stored_calibration(other, "ACTIVE_MANIFOLD")
    same = ProtocolRun(PROTOCOL, Run("pzombie", "earlier", results, "2026-11-30T00:00:00Z", HERE),
                       model="gemma-3-270m", device="cpu")
    assert PROTOCOL.stored_calibration(same, "BASELINE")["preset"] == "BASELINE"
    assert file_hashes(run_dir) == before


@pytest.mark.parametrize(("damage", "named"), [
    (b'{"preset": "BASELINE", "mean": "\xff"}', "cannot be read"),
    (b'{"preset": "BASELINE",', "cannot be read"),
    (b'[1, 2]', "holds a JSON list, not a calibration state"),
])
def test_a_damaged_calibration_file_is_refused_in_one_line(tmp_path: Path, damage: bytes, named: str) -> None:
    """A frozen state that is not UTF-8, not JSON or not an object is refused by the resume check, naming the
    file; nothing of the run is rewritten."""
    results = tmp_path / "results"
    run_dir = prefill_run(results, "earlier", "confirmed")
    (run_dir / "calibration-BASELINE.json").write_bytes(damage)
    same = ProtocolRun(PROTOCOL, Run("pzombie", "earlier", results, "2026-11-30T00:00:00Z", HERE),
                       model="gemma-3-270m", device="cpu")
    before = file_hashes(run_dir)
    with pytest.raises(ResumeRefused, match=f"calibration-BASELINE.json {re.escape(named)}") as refused:
        same.check_resume()
    assert "\n" not in str(refused.value)
    assert file_hashes(run_dir) == before


#: The killed run is stopped once this many records are whole in its ledger: every ACTIVE_MANIFOLD prompt and
#: some BASELINE prompts, so the resume must skip one preset entirely and finish the other from its frozen state.
KILL_AFTER_RECORDS = 90
#: Per preset, how many units on each side of the kill the uninterrupted reference run measures again.
REFERENCE_UNITS_EACH_SIDE = 2


def ledger_lines(path: Path) -> list[bytes]:
    """The whole lines of a ledger file (a torn tail, bytes after the last newline, is left out)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1].splitlines()


def kill_during_run(pytester: pytest.Pytester, results: Path, *args: str, after_records: int,
                    timeout: float = 1800.0) -> Path:
    """Start a P-Zombie pytest run in its own process group and SIGKILL the whole group once the ledger holds
    ``after_records`` whole records; return the run directory."""
    basetemp = pytester.path / "killed-basetemp"
    command = [sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *pzombie_args(results, *args)]
    log = pytester.path / "killed-run.log"
    with log.open("wb") as out:
        proc = pytester.popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while True:
                ledgers = list((results / "pzombie").glob("*/records.jsonl"))
                if ledgers and len(ledger_lines(ledgers[0])) >= after_records:
                    break
                assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before {after_records} records:\n" + \
                    log.read_text(errors="replace")
                assert time.monotonic() < deadline, f"no {after_records} records within {timeout} s"
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the pytest process, its loader process and any prompt child
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, log.read_text(errors="replace")
    assert not (ledgers[0].parent / "report.json").exists()  # killed before any test ran
    return ledgers[0].parent


def comparable(record: PzRecord) -> dict[str, Any]:
    """A record without what legitimately differs between two runs of the same unit: wall time and process id."""
    body = json.loads(canonical_json({f.name: getattr(record, f.name) for f in fields(record)}))
    body.pop("seconds")
    body["engine"].pop("pid")
    return body


def uninterrupted_reference(preset: str, prompt_ids: list[str]) -> tuple[str, list[PzRecord]]:
    """Calibrate ``preset`` from scratch and measure ``prompt_ids`` in one uninterrupted engine run, exactly as the
    protocol does (same engine constants, model options, generation settings and fork isolation)."""
    spec = PREREG.values
    rows = build_pzombie_prompts()
    by_id = {row["prompt_id"]: row for row in rows}
    cfg = engine_config("270M")
    run = px.run_prompts(
        px.ModelSpec("gemma-3-270m", {"device": "cpu", "dtype": spec.generation.dtype_cpu, "seed": spec.seeds["torch"]}),
        [{"id": pid, "text": by_id[pid]["text"]} for pid in prompt_ids],
        preset=preset, config=cfg,
        settings=px.generation_settings(preset, SELF_CHECK_MAX_NEW_TOKENS, cfg),
        isolation="fork",
        calibration_prompts=[{"id": r["prompt_id"], "text": r["text"]} for r in rows if r["phase"] == "calibration"],
        timeout_s=spec.run.prompt_timeout_s,
    )
    return run.frozen_state_sha256, [record_from_engine(r, by_id[r.prompt_id]) for r in run.records]


@pytest.mark.slow
def test_bundled_gemma3_270m_killed_and_resumed(pytester: pytest.Pytester, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """All 90 prompts, both presets, fork isolation, on the bundled Gemma 3 270M, with the run SIGKILLed partway
    (the whole pytest process group) and resumed under the same --run-id; the rescorer must agree and the records
    must equal those of an uninterrupted run."""
    # pytester points HOME at a temporary folder: keep using the bundled model's converted cache.
    monkeypatch.setenv("PREREGBENCH_CACHE", str(BUNDLED_CACHE))
    results = tmp_path / "results"
    run_args = ("--model", "gemma-3-270m", "--scale", "270M", f"--pzombie-max-new-tokens={SELF_CHECK_MAX_NEW_TOKENS}",
                "--run-id=killed")
    start = time.perf_counter()
    killed_dir = kill_during_run(pytester, results, *run_args, after_records=KILL_AFTER_RECORDS)
    killed_at = time.perf_counter() - start
    before_kill = ledger_lines(killed_dir / "records.jsonl")
    units_before = [json.loads(line)["unit_id"] for line in before_kill]
    assert len(units_before) == len(set(units_before)) >= KILL_AFTER_RECORDS
    calibrations_before = {preset: (killed_dir / f"calibration-{preset}.json").read_bytes()
                           for preset in PREREG.values.run.presets}
    provenance_before = json.loads((killed_dir / "provenance.json").read_text())

    result, report, run_dir = run_pzombie(pytester, results, *run_args, timeout=1800.0)
    wall = time.perf_counter() - start
    print(f"killed after {len(units_before)} records at {killed_at:.1f} s; resumed run done at {wall:.1f} s")
    assert run_dir == killed_dir
    rules, completeness = outcomes(report)
    assert completeness == {name: P for name in COMPLETENESS}, result.stdout.str()
    protocol = report["benchmark"]["protocols"]["pzombie"]
    assert protocol["status"] == "complete"
    labels = {key: protocol["classifications"][key]["outcome"]["label"] for key in CLASSIFICATIONS}
    for key, label in labels.items():
        assert rules[key] == expected_pattern(key, label), key
    rescored = assert_agreement(run_dir, labels)
    assert rescored["records"] == 160

    # The ledger: the records written before the kill are kept byte for byte, every unit is recorded once, and
    # every line is a whole record (a torn tail left by the kill is moved aside, never parsed).
    raw = (run_dir / "records.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.splitlines()
    assert lines[: len(before_kill)] == before_kill
    records = [json.loads(line) for line in lines]
    expected_units = {unit_id(preset, row["prompt_id"]) for preset in PREREG.values.run.presets
                      for row in build_pzombie_prompts() if row["phase"] == "measured"}
    assert len(expected_units) == 160
    assert sorted(r["unit_id"] for r in records) == sorted(expected_units)  # each of the 160 exactly once
    for sidecar in run_dir.glob("records.jsonl.torn-*"):
        assert b"\n" not in sidecar.read_bytes()  # only a partial line was set aside
        assert "torn last line" in result.stdout.str() + result.stderr.str()
    resumed_units = expected_units - set(units_before)
    assert resumed_units, "the kill came after the last record; nothing was resumed"

    # The frozen calibrator states are the ones from before the kill, and every prompt, measured before or after
    # it, started from its preset's frozen state.
    for preset in PREREG.values.run.presets:
        assert (run_dir / f"calibration-{preset}.json").read_bytes() == calibrations_before[preset]
        calibration = json.loads(calibrations_before[preset])
        shas = {r["engine"]["start_state_sha256"] for r in records if r["preset"] == preset}
        assert shas == {calibration["frozen_state_sha256"]}
    provenance_after = json.loads((run_dir / "provenance.json").read_text())
    assert provenance_before.pop("finished_at") is None and provenance_after.pop("finished_at")
    # The resumed session wrote the provenance again (core's run.start): the same model, identity, settings,
    # deviations and first start; the resumed session's start is listed after it.
    assert provenance_before.pop("resumed_at") == []
    (resumed_at,) = provenance_after.pop("resumed_at")
    assert resumed_at >= provenance_before["started_at"]
    # The machine is the same; how many threads each session's tuning chose depends on the load when its model
    # loaded (benchmarks.core.tuning), so those two fields are each session's own.
    for provenance in (provenance_before, provenance_after):
        hardware = provenance["hardware"]
        assert {"tuning", "torch_threads"} <= set(hardware)
        hardware.pop("tuning"), hardware.pop("torch_threads")
    assert provenance_after == provenance_before

    assert {r["engine"]["isolation"] for r in records} == {"fork"}
    assert len({r["engine"]["pid"] for r in records}) == 160  # a fresh process per prompt and preset
    assert all(r["new_tokens"] <= SELF_CHECK_MAX_NEW_TOKENS for r in records)
    provenance = protocol["provenance"]
    assert provenance["model"]["revision"].startswith("sha256:")
    assert provenance["extra"]["settings"]["max_new_tokens"] == SELF_CHECK_MAX_NEW_TOKENS
    deviations = provenance["deviations"]
    assert any("instead of the preregistered 'google/gemma-3-270m-it'" in d for d in deviations)
    assert any("bundled offline checkpoint" in d for d in deviations)
    assert f"max_new_tokens {SELF_CHECK_MAX_NEW_TOKENS} instead of 60" in deviations

    # Against an uninterrupted run: per preset, calibrate from scratch and measure the units on both sides of the
    # kill again; the frozen state and the records must be the same.
    stored = {r.unit_id: r for r in read_ledger(run_dir / "records.jsonl", PzRecord)}
    reference_start = time.perf_counter()
    compared = 0
    for preset in PREREG.values.run.presets:
        order = [row["prompt_id"] for row in build_pzombie_prompts() if row["phase"] == "measured"]
        before = [p for p in order if unit_id(preset, p) in set(units_before)]
        after = [p for p in order if unit_id(preset, p) in resumed_units]
        chosen = before[-REFERENCE_UNITS_EACH_SIDE:] + after[:REFERENCE_UNITS_EACH_SIDE]
        sha, reference = uninterrupted_reference(preset, chosen)
        assert sha == json.loads(calibrations_before[preset])["frozen_state_sha256"], preset
        assert [r.unit_id for r in reference] == [unit_id(preset, p) for p in chosen]
        for record in reference:
            assert comparable(record) == comparable(stored[record.unit_id]), record.unit_id
            compared += 1
    reference_wall = time.perf_counter() - reference_start

    stats = json.loads((run_dir / "stats.json").read_text())
    m = stats["metrics"]
    print(f"Gemma 3 270M (bundled) P-Zombie run, max_new_tokens {SELF_CHECK_MAX_NEW_TOKENS}, fork isolation, "
          f"killed after {len(units_before)} records at {killed_at:.1f} s, resumed {len(resumed_units)}: "
          f"{json.dumps(labels, sort_keys=True)} in {wall:.1f} s; ACTIVE_MANIFOLD eta^2 {m['active.eta_squared']:.4f} "
          f"F {m['active.f']:.3f} p {m['active.p_exact']:.3g} R^2 {m['active.r_squared_td']:.4f}; "
          f"BASELINE eta^2 {m['baseline.eta_squared']:.4f} R^2 {m['baseline.r_squared_td']:.4f}; "
          f"{compared} records equal to an uninterrupted run's in {reference_wall:.1f} s")


def test_gpu_selection_without_cuda_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """`--device cuda -m gpu` without CUDA stops the session before any test with one line naming the missing GPU."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA, so the gpu run would start instead of stopping")
    result = pytester.runpytest_subprocess(str(HERE), "-m", "gpu", "--device", "cuda", "--model", "gemma-3-270m",
                                           f"--rootdir={SUITE_ROOT}", f"--results-dir={tmp_path / 'results'}",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "P-Zombie cannot run: --device cuda needs a CUDA GPU and torch.cuda.is_available() is False" in text
    assert "passed" not in result.outlines[-1] and "skipped" not in result.outlines[-1]
    assert not list((tmp_path / "results").glob("pzombie/*/records.jsonl"))


@pytest.mark.parametrize("preset", ["ACTIVE_MANIFOLD", "BASELINE"])
def test_a_single_preset_run_decides_what_it_can_and_skips_the_rest(pytester: pytest.Pytester, tmp_path: Path,
                                                                     preset: str) -> None:
    """``--pzombie-preset``: H2/A2 (both presets) skips with its reason; without ACTIVE_MANIFOLD so do the rules that
    read it.  What is decided equals the two-preset run's, the run is complete, the rescorer agrees."""
    results = tmp_path / "results"
    prefill_run(results, "single", "confirmed", preset=preset)
    result, report, run_dir = run_pzombie(pytester, results, "--run-id=single", "--model", "gemma-3-270m",
                                          "--pzombie-preset", preset)
    rules, completeness = outcomes(report)
    assert completeness == {name: P for name in COMPLETENESS}, result.stdout.str()
    entry = report["benchmark"]["protocols"]["pzombie"]
    assert entry["status"] == "complete" and entry["problems"] == []
    stats = json.loads((run_dir / "stats.json").read_text())
    decided = {"token_control", "combined", "eta2_target"} if preset == "ACTIVE_MANIFOLD" else set()
    for key in CLASSIFICATIONS:
        if key in decided:
            assert rules[key] == expected_pattern(key, EXPECTED["confirmed"][key]), key
            assert stats["classifications"][key] == EXPECTED["confirmed"][key]
        else:
            assert set(rules[key]) == {S}, key
            assert stats["classifications"][key] is None and key in stats["undecided"]
    assert "H2/A2 compares ACTIVE_MANIFOLD with BASELINE" in stats["undecided"]["h2"]
    skipped = [t for t in report["tests"] if "test_h2" in t["nodeid"]]
    assert skipped and all("H2/A2 compares" in json.dumps(t) for t in skipped)
    assert f"preset {preset} only" in " ".join(stats["deviations"])
    rescored = rescore(run_dir)
    assert rescored["disagreements"] == []
    assert rescored["classifications"] == stats["classifications"]
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 80
    assert result.ret == 0  # every decided rule passes in this scenario; the skipped ones fail nothing
    checked = subprocess.run([sys.executable, "-m", "benchmarks.core.cli", "verify", str(run_dir)], cwd=SUITE_ROOT,
                             capture_output=True, text=True, check=False)  # in a process of its own (numpy)
    lines = [line for line in checked.stdout.splitlines() if line.split()[1:2] in (["figures:"], ["rescorer:"])]
    assert len(lines) == 2 and all(line.startswith("ok") for line in lines), checked.stdout
