"""End-to-end CWR runs through pytester: every classification with a scripted responder, and the bundled SmolLM2.

Runs whose checks are about what a run writes and reports (the classifications, the refused resume, a bad
option) run in a fresh pytest session of the test's own process, sharing its imported libraries and built
pairs; the resumed run, the two xdist workers, the unavailable model and the bundled model run in processes of
their own.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.selfcheck import (
    expected_pattern,
    outcomes_by_name,
    read_report,
    run_protocol,
    run_rescorer,
)
from benchmarks.cwr import protocol as protocol_module
from benchmarks.cwr.protocol import GATE, HERE, PREREG

# Before any pytester snapshot: the in-process runs below import numpy's compiled modules, and the scenario
# models they register hold classes of benchmarks.cwr.scripted.
RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)

COMPLETENESS = ["test_every_condition_has_units", "test_generation_done", "test_parsing_and_grading_done",
                "test_error_coded_units_are_counted", "test_baselines_done",
                "test_every_unit_recorded_once", "test_records_carry_the_run_identity", "test_records_file_written",
                "test_provenance_complete", "test_fixtures_file_written", "test_summary_file_written",
                "test_result_files_written", "test_rescorer_agrees"]
#: Generation bound of the reduced SmolLM2 self-check (recorded in its summary as a deviation).
SMOLLM2_MAX_NEW_TOKENS = 16
#: Units per condition in the reduced SmolLM2 self-check.
SMOLLM2_UNITS = 1


def run_cwr(pytester: pytest.Pytester, tmp_path: Path, *args: str,
            in_process: bool = False) -> tuple[pytest.RunResult, dict[str, Any], Path]:
    results = tmp_path / "results"
    result = run_protocol(pytester, HERE, results, *args, in_process=in_process)
    report, run_dir = read_report(results, "cwr", result)
    return result, report, run_dir


def outcomes(report: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    by_name = outcomes_by_name(report)
    rules = [by_name[f"test_cwr[{label}]"] for label in GATE.labels]
    return rules, {name: by_name[name] for name in COMPLETENESS}


def rescore(run_dir: Path) -> dict[str, Any]:
    return run_rescorer(HERE / "rescore.py", run_dir)


def pattern_for(label: str) -> list[str]:
    return expected_pattern(GATE, label)


P, F, S = "passed", "failed", "skipped"


#: The self-check split (4 generated bases, 2 replicas): every attribution gate open.
SELFCHECK = ("--cwr-split", "selfcheck", "--cwr-seed-file", str(HERE / "selfcheck.seed"))
#: Showcase bases whose every bounded target solution needs the withheld motif (the others are witness-only).
MOTIF_REQUIRED_BASES = ("PAIR-SCH-01", "PAIR-SCH-02", "PAIR-TW-01", "PAIR-TW-02", "PAIR-TW-03", "PAIR-TW-05")


@pytest.mark.parametrize(("model", "pairs", "expected_label"), [
    # the showcase pair set holds witness-only pairs, so no showcase run licenses attribution
    ("scripted-cwr-f-only", None, "WITNESS_ONLY_PAIRS_IN_CLAIM"),
    # without them, seven of the eight bases show F and C demonstrations of unequal primitive exposure
    ("scripted-cwr-most-c", MOTIF_REQUIRED_BASES, "EXPOSURE_NOT_MATCHED"),
    # PAIR-SCH-02 alone is exposure-matched and motif-required, and the greedy baseline solves its targets
    ("scripted-oracle", ("PAIR-SCH-02",), "BASELINE_SOLVES_TARGETS"),
    # on the self-check split every gate is open: 4 concordant bases leave the clustered interval about
    # [-0.49, 0.49], which spans delta; a C side far better than F rejects a deficit of delta even at this size
    ("scripted-oracle", SELFCHECK, "INCONCLUSIVE"),
    ("scripted-cwr-c-only", SELFCHECK, "DEFICIT_OF_DELTA_REJECTED"),
    # mastery is per family over the worlds scored: one dataflow probe in five missed fails the gate although the
    # pooled P accuracy (about 0.905) would pass tau
    ("scripted-cwr-program-slips", SELFCHECK, "PRIMITIVE_MASTERY_NOT_ESTABLISHED"),
    # RECOMBINATION_DEFICIT_SUPPORTED: scripted-cwr-f-only over the development split (test_splits.py)
])
def test_every_classification_is_reachable(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           model: str, pairs: tuple[str, ...] | None, expected_label: str) -> None:
    args: tuple[str, ...] = ()
    if pairs is not None and pairs[0].startswith("--"):
        args = pairs
    elif pairs is not None:  # a run over some showcase bases only (the protocol module reads its pairs here)
        every = protocol_module.run_pairs
        monkeypatch.setattr(protocol_module, "run_pairs",
                            lambda *a: tuple(p for p in every(*a) if p.pair_id.split("~r")[0] in pairs))
    result, report, run_dir = run_cwr(pytester, tmp_path, "--model", model, *args, in_process=True)
    rules, completeness = outcomes(report)
    assert rules == pattern_for(expected_label), result.stdout.str()
    assert set(completeness.values()) == {"passed"}, completeness
    protocol = report["benchmark"]["protocols"]["cwr"]
    assert protocol["status"] == "complete"
    assert protocol["classifications"]["cwr"]["outcome"]["label"] == expected_label
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert all(f"preempted by {expected_label}" in t["call"]["longrepr"] for t in skipped)
    assert result.ret == (0 if expected_label == "RECOMBINATION_DEFICIT_SUPPORTED" else 1)
    assert f"  cwr: {expected_label} (" in result.stdout.str()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["classifications"]["cwr"] == expected_label
    assert summary["deviations"] == [f"model {model!r} instead of the preregistered {PREREG.values.model.id!r}"]
    preregistered = [g for g in summary["sensitivity"]
                     if g["delta"] == PREREG.values.thresholds["delta"] and g["tau"] == PREREG.values.thresholds["tau"]]
    assert [g["classification"] for g in preregistered] == [expected_label]
    mastery = summary["mastery"]  # the per-family table the gate's least accuracy comes from
    assert summary["metrics"]["mastery.min_family_accuracy"] == min(row["accuracy"] or 0.0 for row in mastery.values())
    run_pairs_ = list(summary["pairs"])
    replicas = len(run_pairs_) // len({p.split("~r")[0] for p in run_pairs_})
    for family, row in mastery.items():  # every base's two targets probed; its replicas scored too
        assert row["p_units"] > 0 and row["worlds_scored"] == row["worlds_probed"] * replicas, family
    if model == "scripted-cwr-program-slips":
        assert summary["metrics"]["P.accuracy"] >= PREREG.values.thresholds["tau"]
        assert mastery["token_workshop"]["established"] and not mastery["dataflow"]["established"]
        html = (run_dir / "report.html").read_text()  # the report's mastery figure names the family below tau
        assert "Primitive mastery per family" in html and "right on 4 base targets (8 worlds scored), below tau" in html
    rescored = rescore(run_dir)
    assert rescored["classification"] == expected_label and rescored["mismatched_units"] == []
    for key, value in rescored["metrics"].items():
        assert summary["metrics"][key] == pytest.approx(value), key
    interaction = summary["diagnostics"]["execution_interaction"]  # every scenario answers E right or E wrong
    assert interaction["E_F_minus_E_C"]["estimate"] == pytest.approx(
        summary["metrics"]["E_F.accuracy"] - summary["metrics"]["E_C.accuracy"])
    assert interaction["E_F_minus_E_C"]["upper"] - interaction["E_F_minus_E_C"]["lower"] > 0
    by_context = summary["execution_by_context"]  # E_C (main E), E_F, context-free E
    assert sorted(by_context) == ["E_C", "E_F", "E_none"] and by_context["E_C"]["units"] and by_context["E_F"]["units"]
    # a split run's controls are on its pair targets only (no shipped world, so no context-free E)
    assert (by_context["E_none"]["units"] == 0) == ("--cwr-split" in args)
    assert sum(b["units"] for b in by_context.values()) == summary["units"]["E"]
    for name, block in by_context.items():
        if not block["units"]:
            assert block["accuracy"] is None and rescored["metrics"][f"{name}.accuracy"] is None
            continue
        assert block["accuracy"] == pytest.approx(rescored["metrics"][f"{name}.accuracy"]), name
        assert block["correct"] == round(block["accuracy"] * block["units"]), name


def test_two_xdist_workers_share_one_measurement(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Under -n 2 one worker measures under the run's lock; the other reads the same records."""
    _, report, run_dir = run_cwr(pytester, tmp_path, "--model", "scripted-oracle", "-n", "2")
    rules, completeness = outcomes(report)
    assert rules == pattern_for("WITNESS_ONLY_PAIRS_IN_CLAIM") and set(completeness.values()) == {"passed"}
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(lines) == sum(summary["units"].values()) == len({json.loads(line)["item_id"] for line in lines})


def test_a_killed_run_resumes_without_losing_or_repeating_a_unit(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Cut the ledger mid-record (as a kill would), drop the summary, resume with the same run id."""
    _, _, run_dir = run_cwr(pytester, tmp_path, "--model", "scripted-oracle", "--run-id=resumed")
    ledger = run_dir / "records.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    kept = len(lines) // 2
    ledger.write_text("".join(lines[:kept]) + lines[kept][: len(lines[kept]) // 2])
    for name in ("summary.json", "report.json"):
        (run_dir / name).unlink()
    _, report, again = run_cwr(pytester, tmp_path, "--model", "scripted-oracle", "--run-id=resumed")
    assert again == run_dir
    rules, completeness = outcomes(report)
    assert rules == pattern_for("WITNESS_ONLY_PAIRS_IN_CLAIM") and set(completeness.values()) == {"passed"}
    ids = [json.loads(line)["item_id"] for line in ledger.read_text().splitlines()]
    assert len(ids) == len(lines) == len(set(ids))
    assert len(list(run_dir.glob("records.jsonl.torn-*"))) == 1


def file_states(run_dir: Path) -> dict[str, tuple[str, int]]:
    """Every file of a run directory (lock files included): its sha256 and modification time."""
    return {path.relative_to(run_dir).as_posix(): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
            for path in sorted(run_dir.rglob("*")) if path.is_file()}


#: Sidecar files of a run: everything but the ledger (and the lock files) that a run writes into its directory.
SIDECARS = ("fixtures.json", "provenance.json", "baselines.json", "grading.json", "summary.json", "report.json",
            "manifest.json", "progress.json", "report.html", "report.md")
#: The folder of grading material beside the sidecar files (world files, reference interpreter).
GRADING_DIR = "grading"


@pytest.mark.parametrize("sidecars", ["kept", "deleted"])
def test_a_resume_with_another_model_is_refused_before_any_write(pytester: pytest.Pytester, tmp_path: Path,
                                                                 sidecars: str) -> None:
    """Every ledger line carries the run's identity, so the refusal needs no sidecar file, and it writes nothing."""
    reduced = "--cwr-units-per-condition=2"
    _, report, run_dir = run_cwr(pytester, tmp_path, "--model", "scripted-oracle", "--run-id=foreign", reduced,
                                 in_process=True)
    assert report["benchmark"]["protocols"]["cwr"]["status"] == "complete"
    if sidecars == "deleted":
        for name in SIDECARS:
            (run_dir / name).unlink()
        shutil.rmtree(run_dir / GRADING_DIR)
        shutil.rmtree(run_dir / "report_figures")
        assert sorted(p.name for p in run_dir.iterdir() if not p.name.startswith(".")) == ["records.jsonl"]
    before = file_states(run_dir)
    result = run_protocol(pytester, HERE, tmp_path / "results", "--model", "scripted-cwr-f-only", "--run-id=foreign",
                          reduced, in_process=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    line = next((line for line in text.splitlines() if "CWR cannot run:" in line), text)
    assert "run foreign was started with other settings" in line, text
    assert "model: 'scripted-oracle' -> 'scripted-cwr-f-only'" in line, line
    assert " passed" not in result.stdout.str().splitlines()[-1]
    assert file_states(run_dir) == before
    assert [p.name for p in (tmp_path / "results" / "cwr").iterdir()] == ["foreign"]


def test_unavailable_preregistered_model_stops_before_any_test(pytester: pytest.Pytester, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = run_protocol(pytester, HERE, tmp_path / "results")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert f"CWR cannot run: {PREREG.values.model.id}@main" in text
    assert "smollm2-135m-instruct" in text


def test_bad_option_value_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = run_protocol(pytester, HERE, tmp_path / "results", "--model", "scripted-oracle", "--cwr-max-new-tokens=0",
                          in_process=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--cwr-max-new-tokens must be a positive integer, got 0" in result.stderr.str() + result.stdout.str()


@pytest.mark.slow
def test_bundled_smollm2_reduced_pass(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Every condition, a few units each, bounded generation, on the real bundled model; the rescorer must agree."""
    start = time.perf_counter()
    result, report, run_dir = run_cwr(pytester, tmp_path, "--model", "smollm2-135m-instruct",
                                      f"--cwr-units-per-condition={SMOLLM2_UNITS}",
                                      f"--cwr-max-new-tokens={SMOLLM2_MAX_NEW_TOKENS}")
    wall = time.perf_counter() - start
    rules, completeness = outcomes(report)
    assert completeness == {name: "passed" for name in COMPLETENESS}, result.stdout.str()
    protocol = report["benchmark"]["protocols"]["cwr"]
    assert protocol["status"] == "complete"
    label = protocol["classifications"]["cwr"]["outcome"]["label"]
    assert rules == pattern_for(label)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["units"] == {c: SMOLLM2_UNITS for c in ("P", "R", "E", "F", "C")}
    assert summary["max_new_tokens"] == {c: min(n, SMOLLM2_MAX_NEW_TOKENS)
                                         for c, n in PREREG.values.measurement.max_new_tokens.items()}
    assert any(d.startswith(f"generation bounds capped at {SMOLLM2_MAX_NEW_TOKENS} tokens") for d in summary["deviations"])
    assert f"reduced pass: {SMOLLM2_UNITS} units per condition instead of all" in summary["deviations"]
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert all(r["max_new_tokens"] == summary["max_new_tokens"][r["condition"]] for r in records)
    assert all(r["prompt_tokens"] and r["prompt_tokens"] > 0 for r in records)
    assert all(0 < r["generation_tokens"] <= r["max_new_tokens"] for r in records)
    assert summary["token_counts"]["F"]["prompt"] == sum(r["prompt_tokens"] for r in records if r["condition"] == "F")
    rescored = rescore(run_dir)
    assert rescored["mismatched_units"] == [] and rescored["classification"] == label
    provenance = protocol["provenance"]
    assert provenance["model"]["id"] == "smollm2-135m-instruct"
    assert provenance["model"]["revision"].startswith("sha256:")
    print(f"SmolLM2 CWR reduced run: {label} in {wall:.1f} s; "
          f"parse statuses {json.dumps(summary['parse_statuses'], sort_keys=True)}; "
          f"metrics {json.dumps(rescored['metrics'], sort_keys=True)}")
