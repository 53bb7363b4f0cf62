"""End-to-end ladder probes through pytester: the simulated fleet on one v2 round, coded outcomes, a probe
whose every unit errored, usage errors, resumption and refused resumes, each checked against the
independent rescorer."""

from __future__ import annotations

import hashlib
import json
import re
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
from benchmarks.ladder.instrument import NOT_PROVEN, gate_table, instrument_verdict
from benchmarks.ladder.records import UNITS_FILE, find_probes, read_probes
from benchmarks.ladder.report import fleet_report
from benchmarks.ladder.spec import CLAUSES, GATE, HERE, INSTRUMENT, PREREG
from benchmarks.ladder.worker import SIMULATED_FLEET

# The probes of this module run in a fresh pytest session of the test's own process: each checks what a
# probe writes, reports and refuses, not how a process starts or dies (a killed writer is modelled by a
# ledger cut mid-record).  The libraries and the scripted models' module are imported before pytester
# takes its snapshot of sys.modules, so every session shares them.
RUN_LIBRARIES_FIRST = ("benchmarks.ladder.scenarios", "benchmarks.ladder.worker")


#: The generated completeness checks (benchmarks.core) and the probe's own (test_completeness.py).
COMPLETENESS = ["test_every_unit_recorded_once", "test_records_carry_the_run_identity", "test_records_file_written",
                "test_provenance_complete", "test_fixtures_file_written", "test_summary_file_written",
                "test_result_files_written", "test_units_match_the_generator_and_its_evaluator",
                "test_condition_is_autonomous", "test_seed_hygiene", "test_outcomes_coded_and_parsed",
                "test_metadata_written", "test_analysis_files_written", "test_rescorer_agrees"]
ANALYSIS = ["test_failure_signature", "test_approve_rate_by_tier", "test_per_check_accuracy_and_depth_window"]


def run_ladder(pytester: pytest.Pytester, results: Path, *args: str, in_process: bool = False) -> pytest.RunResult:
    """A probe of the protocol; ``in_process`` for checks of what a run writes (see ``selfcheck.run_protocol``)."""
    return run_protocol(pytester, HERE, results, "-p", "benchmarks.ladder.scenarios", *args, in_process=in_process)


def probe(pytester: pytest.Pytester, results: Path, *args: str) -> pytest.RunResult:
    """A probe run in this process (see the note at the imports)."""
    return run_ladder(pytester, results, *args, in_process=True)


def report_of(results: Path) -> dict[str, Any]:
    return read_report(results, "ladder")[0]


def run_dir_of(results: Path) -> Path:
    return read_report(results, "ladder")[1]


outcomes = outcomes_by_name


def rescore(*folders: Path) -> dict[str, Any]:
    return run_rescorer(HERE / "rescore.py", *folders)


def expected_rule_pattern(label: str) -> dict[str, str]:
    """Pass before the decided rule, fail at it (unless it is the passing state), skip after it."""
    index = GATE.labels.index(label) if label in GATE.labels else len(GATE.labels)
    return {f"test_gate[{rule}]": "passed" if i < index else ("failed" if i == index else "skipped")
            for i, rule in enumerate(GATE.labels)}


def clause_test(clause: str) -> str:
    """The generated test of a clause's one rule, e.g. ``test_clause_a[A_OVERALL_OUT_OF_BAND]``."""
    return f"test_clause_{clause}[{CLAUSES[clause].labels[0]}]"


def digest_tree(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (hidden lock files and the probe directory included)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def usage_line(result: pytest.RunResult) -> str:
    """The one line a usage error prints (exit status 4, no test run)."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    lines = [line for line in (result.stdout.str() + result.stderr.str()).splitlines() if "cannot run:" in line]
    assert len(lines) == 1, lines
    assert not re.search(r"\b\d+ (passed|failed|errors?|skipped)\b", result.stdout.str()), result.stdout.str()
    return lines[0]


def test_simulated_fleet_on_round_3(pytester: pytest.Pytester, tmp_path: Path, record_property) -> None:
    """Five scripted rungs (per-check accuracy 0.906, 0.984, 0.982, 0.996, 1) through the real probe machinery
    on v2-r3, seed 203; the gate table and the instrument verdict come from the ledgers and the rescorer agrees."""
    state, seed = PREREG.values.rounds.states[2], PREREG.values.rounds.seeds[2]
    folders = []
    for label, model in SIMULATED_FLEET.items():
        results = tmp_path / "fleet" / label
        result = probe(pytester, results, "--model", model, "--ladder-state", state, "--ladder-seed", str(seed))
        report = report_of(results)
        protocol = report["benchmark"]["protocols"]["ladder"]
        assert protocol["status"] == "complete", result.stdout.str()
        gate = protocol["classifications"]["gate"]["outcome"]["label"]
        tests = outcomes(report)
        assert {k: v for k, v in tests.items() if k.startswith("test_gate[")} == expected_rule_pattern(gate)
        others = {k: v for k, v in tests.items() if not k.startswith(("test_gate[", "test_clause_"))}
        assert others == {name: "passed" for name in COMPLETENESS + ANALYSIS}, others
        for clause, classification in CLAUSES.items():
            fired = protocol["classifications"][f"clause_{clause}"]["outcome"]["label"]
            assert tests[clause_test(clause)] == ("passed" if fired == classification.passing else "failed")
        [folder] = find_probes(results)
        assert folder.name == f"{state}-seed{seed}"
        rescored = rescore(folder)["probes"][0]
        assert rescored["gate"] == gate and rescored["mismatched_units"] == []
        assert {f"clause_{c}": v for c, v in rescored["clauses"].items()} == {
            f"clause_{c}": protocol["classifications"][f"clause_{c}"]["outcome"]["label"] for c in CLAUSES}
        folders.append(folder)

    probes = read_probes(folders)
    rows = gate_table(probes)
    verdict = instrument_verdict(rows, SIMULATED_FLEET)
    report = fleet_report(probes, SIMULATED_FLEET)
    print(report["table_text"])
    print(f"instrument: {verdict.verdict}: {verdict.reason}")
    feasibility = report["rounds"][state]["feasibility"]
    for key in ("depth", "max_ratio", "ratio_limit"):
        record_property(f"feasibility.{key}", feasibility[key])
    for label, rung in feasibility["rungs"].items():
        record_property(f"{label}.per_check_accuracy", rung["per_check_accuracy"])
        record_property(f"{label}.depth_window", rung["required_depth_window"])
    record_property("spearman_total", report["rounds"][state]["spearman_total"])
    print(json.dumps(feasibility, indent=1, sort_keys=True))
    # Section 4.5 on the simulated fleet: no common depth, and the anchor's ratio to the saturated rung's
    # bound is far above ln 0.65 / ln 0.90; the per-check accuracies come back near the simulated ones.
    assert feasibility["intersection"] is None
    assert feasibility["rungs"]["R4"]["bound"] and feasibility["max_ratio"] > feasibility["ratio_limit"]
    # Depth varies by episode, so the mean of a^k exceeds a^(mean k) and the inferred a reads a little high.
    assert feasibility["rungs"]["R0"]["per_check_accuracy"] == pytest.approx(0.906, abs=0.03)
    assert report["instrument"]["verdict"] == NOT_PROVEN

    # The same verdict as preregistered rule tests over the round directory.
    results = tmp_path / "instrument-run"
    result = run_protocol(pytester, HERE / "test_instrument.py", results, f"--ladder-round-dir={tmp_path / 'fleet'}",
                          in_process=True)
    protocol = report_of(results)["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    assert protocol["classifications"]["instrument"]["outcome"]["label"] == verdict.label
    assert protocol["classifications"]["retune_rule"]["outcome"]["label"] == "RETUNE_RULE_HELD"
    assert json.loads((run_dir_of(results) / "instrument.json").read_text())["instrument"]["label"] == verdict.label
    tests = outcomes(report_of(results))
    fired = INSTRUMENT.labels.index(verdict.label)
    assert [tests[f"test_instrument_rule[{label}]"] for label in INSTRUMENT.labels] == [
        "passed" if i < fired else "failed" if i == fired else "skipped" for i in range(len(INSTRUMENT.labels))]
    assert f"  instrument: {verdict.label} (" in result.stdout.str()
    errors = [row.result.metrics["overall_error"] for row in rows]
    # The composition model at work: error falls as per-check accuracy rises, and the saturated rung never errs.
    assert errors[0] > max(errors[1], errors[2]) > errors[3] >= errors[4] == 0
    assert rows[4].result.label == "OVERALL_ERROR_BELOW_BAND"
    assert rows[3].result.label == "OVERALL_ERROR_BELOW_BAND"
    assert verdict.verdict == NOT_PROVEN
    assert verdict.rounds[state]["missing"] == [] and not verdict.rounds[state]["all_pass"]
    # The failure signature: most errors are refusals of approvable cases.
    for folder in folders[:3]:
        analysis = json.loads((folder / "analysis.json").read_text())["analysis"]
        assert analysis["refusal_share_of_errors"] > 0.5
        assert analysis["error_on_approvable"] > analysis["error_on_rejectable"]


def test_coded_outcomes_are_counted(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Timeouts, HTTP errors and prose answers become coded units that the shares count; none is dropped.
    Under two xdist workers one worker runs the probe under the run's lock and the other reads its ledger."""
    results = tmp_path / "results"
    result = run_ladder(pytester, results, "--model", "scripted-ladder-flaky", "-n", "2")  # two xdist workers
    report = report_of(results)
    protocol = report["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    assert protocol["classifications"]["gate"]["outcome"]["label"] == "ERRORED_UNITS_OVER_LIMIT"
    assert protocol["classifications"]["clause_d"]["outcome"]["label"] == "D_ERRORED_OVER_LIMIT"
    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    assert len(units) == 150 == len({u["unit_id"] for u in units})
    kinds = {u["outcome"] for u in units}
    assert {"timeout", "errored", "unparsed", "correct", "wrong"} <= kinds
    rescored = rescore(folder)["probes"][0]
    assert rescored["gate"] == "ERRORED_UNITS_OVER_LIMIT" and rescored["mismatched_units"] == []
    errored = sum(u["outcome"] in ("timeout", "errored") for u in units)
    assert rescored["metrics"]["errored_share"] == pytest.approx(errored / 150)
    provenance = report["benchmark"]["protocols"]["ladder"]["provenance"]
    assert "deviations" in provenance and "deviations" not in provenance["extra"]


def test_probe_whose_every_unit_errored_is_a_complete_run(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Every call fails with a coded error: the gate is decided by its first rule (ERRORED_UNITS_OVER_LIMIT)
    without reading an error share; the clauses whose share has no scored unit skip, naming the metric."""
    results = tmp_path / "results"
    result = probe(pytester, results, "--model", "scripted-ladder-down")
    report = report_of(results)
    protocol = report["benchmark"]["protocols"]["ladder"]
    assert protocol["status"] == "complete", result.stdout.str()
    assert protocol["classifications"]["gate"]["outcome"]["label"] == "ERRORED_UNITS_OVER_LIMIT"
    tests = outcomes(report)
    assert [tests[f"test_gate[{label}]"] for label in GATE.labels] == expected_pattern(GATE, "ERRORED_UNITS_OVER_LIMIT")
    assert {c: tests[clause_test(c)] for c in "abcd"} == {"a": "skipped", "b": "skipped", "c": "failed", "d": "failed"}
    reasons = {t["nodeid"].split("::")[-1]: t["call"]["longrepr"] for t in report["tests"] if t["outcome"] == "skipped"}
    assert "clause_a is undefined: metric 'overall_error' was not measured" in reasons[clause_test("a")]
    assert "clause_b is undefined: metric 'tier45_error' was not measured" in reasons[clause_test("b")]
    assert {name: tests[name] for name in COMPLETENESS} == {name: "passed" for name in COMPLETENESS}
    assert tests["test_failure_signature"] == tests["test_approve_rate_by_tier"] == "passed"
    assert tests["test_per_check_accuracy_and_depth_window"] == "skipped"  # no scored approvable unit
    run_dir = run_dir_of(results)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["classifications"]["gate"] == "ERRORED_UNITS_OVER_LIMIT"
    assert sorted(summary["classification_problems"]) == ["clause_a", "clause_b"]
    [folder] = find_probes(results)
    units = [json.loads(line) for line in (folder / UNITS_FILE).read_text().splitlines()]
    assert len(units) == 150 and {u["outcome"] for u in units} == {"errored"}
    rescored = rescore(folder)["probes"][0]
    assert rescored["gate"] == "ERRORED_UNITS_OVER_LIMIT" and rescored["mismatched_units"] == []
    assert rescored["clauses"] == {"a": "UNDEFINED", "b": "UNDEFINED", "c": "C_GRADIENT_TOO_FLAT",
                                   "d": "D_ERRORED_OVER_LIMIT"}


def test_campaign_seed_stops_the_probe(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = probe(pytester, tmp_path / "results", "--model", SIMULATED_FLEET["R1"], "--ladder-seed", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Capability ladder cannot run: seed 2 is a campaign seed (1, 2, 3)" in usage_line(result)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--ladder-state", "v2-r9"), "--ladder-state 'v2-r9' is not valid; choose one of: v1-r1, v1-max, v2-r1, v2-r2"),
    (("--ladder-state", "v1-r1", "--ladder-dial", "distractors=6"),
     "--ladder-dial moves dials only in a retune; name the probe it retunes with --ladder-retune-of"),
])
def test_bad_probe_options_stop_before_any_test(pytester: pytest.Pytester, tmp_path: Path, args, message) -> None:
    result = probe(pytester, tmp_path / "results", "--model", SIMULATED_FLEET["R1"], *args)
    assert f"Capability ladder cannot run: {message}" in usage_line(result)
    assert not (tmp_path / "results").exists()


def test_killed_probe_resumes_without_loss_or_duplicates(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A ledger cut mid-record (as a killed writer leaves it) resumes to exactly 150 units, then agrees with the
    rescorer; the v1 retune path (registered dial, re-probe seed) is exercised on the way.  The finished run
    cannot be resumed under other settings: refused at collection, every file left as it was."""
    results = tmp_path / "results"
    args = ("--model", SIMULATED_FLEET["R1"], "--ladder-state", "v1-r1", "--ladder-seed", "102",
            "--ladder-retune-of", "v1-r1-seed101", "--ladder-dial", "distractors=6", "--run-id", "resume-me")
    probe(pytester, results, *args)
    [folder] = find_probes(results)
    assert folder.name == "v1-r1-retune-seed102"
    run_dir = results / "ladder" / "resume-me"
    first = json.loads((run_dir / "summary.json").read_text())
    ledger = folder / UNITS_FILE
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:70]) + lines[70][:40])
    for name in ("report.json", "summary.json", "analysis.json", f"{folder.name}/analysis.json"):
        (run_dir / name).unlink()  # a killed run has written none of its results
    result = probe(pytester, results, *args)
    assert report_of(results)["benchmark"]["protocols"]["ladder"]["status"] == "complete", result.stdout.str()
    units = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(units) == 150 == len({u["unit_id"] for u in units})
    assert list(folder.glob("units.jsonl.torn-*"))
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["retune_of"] == "v1-r1-seed101" and metadata["dials"]["distractors"] == 6
    assert metadata["generator_variant"] == "v1"
    assert rescore(folder)["probes"][0]["mismatched_units"] == []
    resumed = json.loads((run_dir / "summary.json").read_text())
    assert resumed["classifications"] == first["classifications"] and resumed["metrics"] == first["metrics"]
    # The finished probe cannot be re-read under other settings.
    before = digest_tree(run_dir)
    result = probe(pytester, results, *args, "--ladder-max-tokens", "64")
    line = usage_line(result)
    assert "Capability ladder cannot run: run resume-me" in line and "max_tokens: 8192 -> 64" in line
    assert digest_tree(run_dir) == before
    assert len(ledger.read_text().splitlines()) == 150


@pytest.mark.parametrize("sidecars", ["kept", "deleted"])
def test_resume_with_another_model_is_refused_before_any_write(pytester: pytest.Pytester, tmp_path: Path,
                                                              sidecars: str) -> None:
    """Every ledger line carries the run's identity, so the refusal holds without provenance.json and
    metadata.json; the existing run's files stay byte-identical."""
    results = tmp_path / "results"
    common = ("--ladder-units-per-tier", "2", "--run-id", "mine")
    probe(pytester, results, "--model", SIMULATED_FLEET["R1"], *common)
    run_dir = results / "ladder" / "mine"
    [folder] = find_probes(results)
    if sidecars == "deleted":
        (run_dir / "provenance.json").unlink()
        (folder / "metadata.json").unlink()
    before = digest_tree(run_dir)
    result = probe(pytester, results, "--model", SIMULATED_FLEET["R2"], *common)
    line = usage_line(result)
    assert f"model: {SIMULATED_FLEET['R1']!r} -> {SIMULATED_FLEET['R2']!r}" in line
    assert f"rung: {SIMULATED_FLEET['R1']!r} -> {SIMULATED_FLEET['R2']!r}" in line
    assert digest_tree(run_dir) == before


@pytest.mark.parametrize(("damage", "named"), [
    (b'{"probe": "v2-r2-seed202", "rung": "caf\xe9"}', "not UTF-8 at byte 39"),
    (b'{"probe": "v2-r2-seed202",\n  "rung": ', "not JSON (line 2, column"),
    (b'["a", "list"]', "holds a JSON list, not an object"),
])
def test_damaged_metadata_is_refused_with_one_line_before_any_write(pytester: pytest.Pytester, tmp_path: Path,
                                                                    damage: bytes, named: str) -> None:
    """A metadata.json that is not UTF-8, not JSON or not an object is named with the byte or line; the
    session stops before any test and leaves every file of the run as it was."""
    results = tmp_path / "results"
    common = ("--model", SIMULATED_FLEET["R1"], "--ladder-units-per-tier", "2", "--run-id", "damaged")
    probe(pytester, results, *common)
    [folder] = find_probes(results)
    (folder / "metadata.json").write_bytes(damage)
    run_dir = results / "ladder" / "damaged"
    before = digest_tree(run_dir)
    line = usage_line(probe(pytester, results, *common))
    assert "metadata.json" in line and named in line, line
    assert digest_tree(run_dir) == before


def test_a_probe_killed_before_its_first_unit_is_resumed_only_with_its_settings(pytester: pytest.Pytester,
                                                                                 tmp_path: Path) -> None:
    """metadata.json is written before the first unit; with no record and no provenance.json left, a resume
    with other limits is refused from it alone, and nothing is rewritten."""
    results = tmp_path / "results"
    common = ("--model", SIMULATED_FLEET["R1"], "--run-id", "early")
    probe(pytester, results, *common, "--ladder-units-per-tier", "2")
    [folder] = find_probes(results)
    (folder / UNITS_FILE).write_bytes(b"")
    (results / "ladder" / "early" / "provenance.json").unlink()
    run_dir = results / "ladder" / "early"
    before = digest_tree(run_dir)
    line = usage_line(probe(pytester, results, *common, "--ladder-units-per-tier", "3"))
    assert "written by another probe" in line and "units_per_tier: 2 -> 3" in line, line
    assert digest_tree(run_dir) == before
