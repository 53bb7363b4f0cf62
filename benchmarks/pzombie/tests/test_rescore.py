"""The independent rescorer (rescore.py) against finished and tampered runs.

The rescorer runs as a user runs it, ``python -S -I`` from ``/`` (no
site-packages, nothing of the suite importable).  Runs are the scenario
records of ``scenarios.py`` recorded through the protocol's own run (the
ledger, identity, fixtures.json), or a finished pytester run of the protocol
on them; one primitive field of one unit is then changed on disk and the
rescorer must name that unit and field, recomputed from what is left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.core import ProtocolRun, Run, canonical_json, sha256_json
from benchmarks.core.provenance import utc_now
from benchmarks.core.selfcheck import read_report, run_protocol
from benchmarks.pzombie import px
from benchmarks.pzombie.engine import record_from_engine
from benchmarks.pzombie.metrics import token_diversity, zone_entropy_bits
from benchmarks.pzombie.protocol import PROTOCOL
from benchmarks.pzombie.scenarios import EXPECTED, SCENARIOS, prefill_run, synthetic_records
from benchmarks.pzombie.spec import HERE, PRESET_PREFIX, ZONES, calibration_file

SCRIPT = HERE / "rescore.py"
UNIT = "ACTIVE_MANIFOLD:logic-07"  # the unit every single-unit mutation changes


def rescore(run_dir: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    """Exit status, the printed JSON (None when nothing was printed) and stderr of one rescorer run."""
    done = subprocess.run([sys.executable, "-S", "-I", str(SCRIPT), str(run_dir), *args],
                          capture_output=True, text=True, cwd="/", check=False, timeout=120)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def rewrite(run_dir: Path, unit: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``change`` to the ledger line of ``unit`` in place on disk; return the line as it was."""
    path = run_dir / "records.jsonl"
    out, before = [], None
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["unit_id"] == unit:
            before = json.loads(line)
            change(record)
            line = json.dumps(record, sort_keys=True, separators=(",", ":"))
        out.append(line)
    assert before is not None, unit
    path.write_text("\n".join(out) + "\n")
    return before


def shift_weight(record: dict[str, Any]) -> None:
    """Move the zone weight of the smallest-weight zone up by 0.05 (H changes; the weights stay valid)."""
    weights = record["zone_weights"]
    weights[weights.index(min(weights))] += 0.05


def change_an_id(record: dict[str, Any]) -> None:
    """Change one input token id so that the number of distinct ids changes (and so TD)."""
    ids = record["input_token_ids"]
    repeated = next(i for i, t in enumerate(ids) if ids.count(t) > 1)
    ids[repeated] = max(ids) + 1


@pytest.fixture
def confirmed(tmp_path: Path) -> Path:
    return prefill_run(tmp_path / "results", "rescored", "confirmed")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_an_untouched_run_agrees_and_gets_its_classifications(tmp_path: Path, scenario: str) -> None:
    run_dir = prefill_run(tmp_path / "results", "rescored", scenario)
    status, out, err = rescore(run_dir)
    assert (status, err) == (0, "")
    assert out["disagreements"] == [] and out["records"] == 160
    assert out["classifications"] == EXPECTED[scenario]
    assert out["classification"] == EXPECTED[scenario]["combined"]
    assert out["metrics"]["active.n_ok"] == out["metrics"]["baseline.n_ok"] == 80


# (mutation, field it must name, how the recomputed value follows from the mutated line)
MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str, Callable[[dict[str, Any]], Any]]] = {
    "a zone weight": (shift_weight, "zone_entropy", lambda r: zone_entropy_bits(r["zone_weights"])),
    "an input token id": (change_an_id, "token_diversity", lambda r: token_diversity(r["input_token_ids"])),
    "the recorded H": (lambda r: r.update(zone_entropy=r["zone_entropy"] + 1e-6), "zone_entropy",
                       lambda r: zone_entropy_bits(r["zone_weights"])),
    "the recorded TD": (lambda r: r.update(token_diversity=0.123), "token_diversity",
                        lambda r: token_diversity(r["input_token_ids"])),
    "the dominant zone": (lambda r: r.update(zone="synthesis" if r["zone"] != "synthesis" else "math"), "zone",
                          lambda r: ZONES[max(range(len(ZONES)), key=lambda i: (r["zone_weights"][i], -i))]),
    "the category": (lambda r: r.update(category="creative"), "category", lambda r: "logic"),
    "the prompt text": (lambda r: r.update(prompt=r["prompt"] + " "), "prompt", lambda r: r["prompt"][:-1]),
    "the unit id": (lambda r: r.update(unit_id="ACTIVE_MANIFOLD:logic-08x"), "unit_id",
                    lambda r: "ACTIVE_MANIFOLD:logic-07"),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_one_changed_field_is_a_disagreement_naming_its_unit(confirmed: Path, mutation: str) -> None:
    change, field, expected = MUTATIONS[mutation]
    before = rewrite(confirmed, UNIT, change)
    after = next(r for r in lines(confirmed) if r["prompt_id"] == before["prompt_id"] and r["preset"] == before["preset"])
    status, out, err = rescore(confirmed)
    assert status == 1, err
    named = [d for d in out["disagreements"] if d["field"] == field]
    assert named == [{"unit": after["unit_id"], "field": field, "recorded": after[field],
                      "recomputed": pytest.approx(expected(after), abs=1e-12)}]
    assert {d["unit"] for d in out["disagreements"]} == {after["unit_id"]}


def test_a_changed_weight_also_names_a_changed_dominant_zone(confirmed: Path) -> None:
    """Raising the smallest weight above the largest moves the argmax: both H and the zone disagree."""
    def overtake(record: dict[str, Any]) -> None:
        weights = record["zone_weights"]
        weights[weights.index(min(weights))] = max(weights) * 2

    rewrite(confirmed, UNIT, overtake)
    status, out, _ = rescore(confirmed)
    assert status == 1
    assert [(d["unit"], d["field"]) for d in out["disagreements"]] == [(UNIT, "zone_entropy"), (UNIT, "zone")]


def test_disagreements_come_in_ledger_order(confirmed: Path) -> None:
    order = [r["unit_id"] for r in lines(confirmed)]
    late, early = order[150], order[3]
    rewrite(confirmed, late, shift_weight)
    rewrite(confirmed, early, change_an_id)
    status, out, _ = rescore(confirmed)
    assert status == 1
    assert [(d["unit"], d["field"]) for d in out["disagreements"]] == [(early, "token_diversity"), (late, "zone_entropy")]


def test_the_statistics_are_recomputed_from_the_weights_not_from_the_recorded_h(confirmed: Path) -> None:
    """Every recorded H set to one value: 160 disagreements, and the verdicts still follow from the weights."""
    untouched = rescore(confirmed)[1]
    path = confirmed / "records.jsonl"
    tampered = []
    for record in lines(confirmed):
        record["zone_entropy"] = 1.0
        tampered.append(json.dumps(record, sort_keys=True))
    path.write_text("\n".join(tampered) + "\n")
    status, out, _ = rescore(confirmed)
    assert status == 1 and len(out["disagreements"]) == 160
    assert {d["field"] for d in out["disagreements"]} == {"zone_entropy"}
    assert out["classifications"] == untouched["classifications"] == EXPECTED["confirmed"]
    assert out["metrics"] == untouched["metrics"]


def test_a_shifted_weight_moves_the_recomputed_statistics(confirmed: Path) -> None:
    """The changed unit's recomputed H enters eta squared: the metric moves, the recorded stats do not matter."""
    untouched = rescore(confirmed)[1]["metrics"]
    rewrite(confirmed, UNIT, shift_weight)
    moved = rescore(confirmed)[1]["metrics"]
    assert moved["active.eta_squared"] != untouched["active.eta_squared"]
    assert moved["active.mean_h.logic"] != untouched["active.mean_h.logic"]
    assert moved["baseline.eta_squared"] == untouched["baseline.eta_squared"]


def engine_shaped_run(results: Path) -> Path:
    """The confirmed scenario with the engine's own per-record counts, and one prompt whose process timed out
    before tokenising (the runner's error record: no input ids, no weights), recorded through the protocol."""
    records = synthetic_records("confirmed")
    shaped = []
    for record in records:
        engine = {"input_tokens": len(record.input_token_ids),
                  "distinct_input_tokens": len(set(record.input_token_ids)),
                  "zone_entropy_of_mean": px.zone_entropy(record.zone_weights_mean)}
        shaped.append(dataclasses.replace(record, engine=engine))
    timed_out = px.PxRecord(prompt_id="math-02", preset="BASELINE", phase="measured", isolation="fork",
                            error="timeout", error_detail="no record within 600 s", zones=list(ZONES),
                            finish_reason="error", pid=1, start_state_sha256="0" * 64)
    row = {"category": "math", "text": next(r.prompt for r in records if r.prompt_id == "math-02")}
    shaped = [record_from_engine(timed_out, row) if r.unit_id == "BASELINE:math-02" else r for r in shaped]
    run = ProtocolRun(PROTOCOL, Run("pzombie", "engine", results, utc_now(), HERE), model="gemma-3-270m", device="cpu")
    revision = "sha256:" + sha256_json("engine-shaped")
    run.record({"id": "synthetic-engine-shaped", "revision": revision,
                "note": "synthetic records (test_rescore.py), not a model run"}, shaped)
    state = {"engine_shaped": True}
    for preset in PRESET_PREFIX:  # the frozen states a finished run has, so that a session picks it up as resumed
        run.write_json(calibration_file(preset), {
            "preset": preset, "calibration_prompt_ids": [r["prompt_id"] for r in PROTOCOL.prompts(run, "calibration")],
            "identity": run.identity(revision), "frozen_state": state, "frozen_state_sha256": sha256_json(state)})
    return run.dir


def test_engine_counts_and_a_timed_out_prompt(tmp_path: Path) -> None:
    """A timed-out prompt without input ids is recorded (TD null) and read; the engine's counts are checked."""
    run_dir = engine_shaped_run(tmp_path / "results")
    failed = next(r for r in lines(run_dir) if r["unit_id"] == "BASELINE:math-02")
    assert failed["input_token_ids"] == [] and failed["token_diversity"] is None and failed["error"] == "timeout"
    status, out, err = rescore(run_dir)
    assert (status, out["disagreements"], err) == (0, [], "")
    assert out["metrics"]["baseline.errors"] == 1 and out["metrics"]["baseline.n_ok"] == 79
    assert out["metrics"]["baseline.df_within"] == 75

    rewrite(run_dir, UNIT, lambda r: r["engine"].update(input_tokens=r["engine"]["input_tokens"] + 1,
                                                        zone_entropy_of_mean=0.25))
    status, out, _ = rescore(run_dir)
    assert status == 1
    assert [(d["unit"], d["field"], d["recorded"]) for d in out["disagreements"]] == [
        (UNIT, "engine.input_tokens", 41), (UNIT, "engine.zone_entropy_of_mean", 0.25)]


def ledger_text(run_dir: Path, text: str | bytes) -> list[str]:
    path = run_dir / "records.jsonl"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return []


def line_change(run_dir: Path, change: Callable[[dict[str, Any]], Any]) -> list[str]:
    rewrite(run_dir, UNIT, change)
    return []


def first_line_twice(run_dir: Path) -> list[str]:
    text = (run_dir / "records.jsonl").read_text()
    return ledger_text(run_dir, text.splitlines()[0] + "\n" + text)


def torn(run_dir: Path) -> list[str]:
    return ledger_text(run_dir, (run_dir / "records.jsonl").read_text() + '{"unit_id": "x"')


def bad_prereg(run_dir: Path) -> list[str]:
    (run_dir / "bad.toml").write_text("[run\n")
    return ["--prereg", str(run_dir / "bad.toml")]


def damaged_fixtures(run_dir: Path) -> list[str]:
    (run_dir / "fixtures.json").write_text('{"sets": {}}')
    return []


def no_ledger(run_dir: Path) -> list[str]:
    (run_dir / "records.jsonl").unlink()
    return []


# what is damaged: (how, words the one-line message must hold)
DAMAGE: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "no ledger": (no_ledger, "records.jsonl: no such file"),
    "not UTF-8": (lambda d: ledger_text(d, b'{"unit_id": "\xff"}\n'), "records.jsonl: not UTF-8 at byte 13"),
    "torn last line": (torn, "the last line is torn"),
    "not JSON": (lambda d: ledger_text(d, "{nope\n"), "records.jsonl: line 1: not JSON"),
    "NaN": (lambda d: line_change(d, lambda r: r.update(token_diversity=math.nan)), "NaN is not JSON"),
    "a list line": (lambda d: ledger_text(d, "[1, 2]\n"), "line 1: a JSON list, not a record"),
    "empty ledger": (lambda d: ledger_text(d, ""), "records.jsonl: no records"),
    "a missing field": (lambda d: line_change(d, lambda r: r.pop("zone_weights")), f"({UNIT}): no field 'zone_weights'"),
    "a negative weight": (lambda d: line_change(d, lambda r: r["zone_weights"].__setitem__(0, -0.1)),
                          f"({UNIT}): zone_weights is [-0.1"),
    "a text token id": (lambda d: line_change(d, lambda r: r["input_token_ids"].__setitem__(0, "7")),
                        f"({UNIT}): input_token_ids is ['7'"),
    "no ids without an error": (lambda d: line_change(d, lambda r: r.update(input_token_ids=[])),
                                "a record without an error has no input_token_ids"),
    "another preset": (lambda d: line_change(d, lambda r: r.update(preset="TURBO")),
                       "preset is 'TURBO', expected one of ACTIVE_MANIFOLD, BASELINE"),
    "a unit twice": (first_line_twice, "is recorded twice (first on line 1)"),
    "damaged fixtures.json": (damaged_fixtures, "fixtures.json: no measured prompts of fixture set 'pzombie-prompts'"),
    "a missing prereg": (lambda d: ["--prereg", str(d / "none.toml")], "none.toml: no such file"),
    "a prereg that is not TOML": (bad_prereg, "bad.toml: not TOML"),
    "another protocol's prereg": (lambda d: ["--prereg", str(HERE.parent / "res" / "prereg.toml")],
                                  "not a P-Zombie preregistration"),
    "an unknown option": (lambda d: ["--strict"], "unknown option '--strict'"),
    "two run directories": (lambda d: [str(d)], "one run directory only"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_unreadable_input_is_one_line_and_exit_status_2(confirmed: Path, damage: str) -> None:
    make, words = DAMAGE[damage]
    extra = make(confirmed)
    status, out, err = rescore(confirmed, *extra)
    assert status == 2 and out is None
    assert err.count("\n") == 1 and err.startswith("rescore.py: ") and "Traceback" not in err
    assert words in err


def test_no_run_directory_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-S", "-I", str(SCRIPT)], capture_output=True, text=True, cwd="/",
                          check=False, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "rescore.py: no run directory given; usage: rescore.py RUN_DIR [--prereg PATH]\n"


def test_a_finished_run_agrees_and_a_tampered_copy_names_the_unit(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A finished pytester run of the protocol: the rescorer agrees with its stats.json and report; a copy with
    one zone weight changed and a copy with one input token id changed each disagree on that unit only."""
    results = tmp_path / "results"
    prefill_run(results, "finished", "ambiguous")
    result = run_protocol(pytester, HERE, results, "--device", "cpu", "--model", "gemma-3-270m", "--run-id=finished")
    report, run_dir = read_report(results, "pzombie", result)
    assert (run_dir / "stats.json").is_file() and (run_dir / "report.json").is_file()
    stats = json.loads((run_dir / "stats.json").read_text())
    decided = {k: v["outcome"]["label"] for k, v in report["benchmark"]["protocols"]["pzombie"]["classifications"].items()}

    status, out, err = rescore(run_dir)
    assert (status, out["disagreements"], err) == (0, [], "")
    assert out["classifications"] == stats["classifications"] == decided == EXPECTED["ambiguous"]
    assert out["classification"] == decided["combined"] == "ETA2_HIGH_TOKEN_CONTROL_FAIL"
    for name, value in stats["metrics"].items():
        if name in out["metrics"] and value is not None:
            assert out["metrics"][name] == pytest.approx(value, rel=1e-6, abs=1e-12), name

    for change, field in ((shift_weight, "zone_entropy"), (change_an_id, "token_diversity")):
        copy = tmp_path / f"copy-{field}"
        shutil.copytree(run_dir, copy)
        rewrite(copy, UNIT, change)
        status, out, _ = rescore(copy)
        assert status == 1
        assert [(d["unit"], d["field"]) for d in out["disagreements"]] == [(UNIT, field)]


def test_a_run_with_a_prompt_that_never_reached_the_tokeniser(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The timed-out prompt without input ids is counted: only test_no_prompt_failed fails (the run is broken),
    the input and routing checks pass, and the rescorer agrees with the run's statistics."""
    results = tmp_path / "results"
    engine_shaped_run(results)
    result = run_protocol(pytester, HERE, results, "--device", "cpu", "--model", "gemma-3-270m", "--run-id=engine")
    report, run_dir = read_report(results, "pzombie", result)
    outcome = {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]}
    assert outcome["test_no_prompt_failed"] == "failed"
    assert outcome["test_generation_and_routing_done"] == outcome["test_same_inputs_under_every_preset"] == "passed"
    assert outcome["test_stats_written"] == outcome["test_aggregate_written"] == "passed", result.stdout.str()
    assert report["benchmark"]["protocols"]["pzombie"]["status"] == "broken"
    stats = json.loads((run_dir / "stats.json").read_text())
    status, out, _ = rescore(run_dir)
    assert status == 0 and out["classifications"] == stats["classifications"]
    assert stats["metrics"]["baseline.errors"] == out["metrics"]["baseline.errors"] == 1


_module = importlib.util.spec_from_file_location("pzombie_rescore_fuzzed", SCRIPT)
rescorer = importlib.util.module_from_spec(_module)
_module.loader.exec_module(rescorer)
#: One record as the ledger holds it (the ledger's own keys left out; the rescorer does not read them).
BASE_RECORD = json.loads(canonical_json(synthetic_records("confirmed")[5]))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
NUMBERS = st.integers(-10, 10**20) | st.integers(10**300, 10**400) | st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(BASE_RECORD)), st.one_of(
    JSON_VALUES, st.lists(NUMBERS, min_size=5, max_size=5), st.just("<removed>"))), min_size=1, max_size=3))
def test_any_damaged_record_exits_0_1_or_2_never_a_traceback(changes: list[tuple[str, Any]]) -> None:
    record = json.loads(json.dumps(BASE_RECORD))
    for name, value in changes:
        if value == "<removed>":
            record.pop(name, None)
        else:
            record[name] = value
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "records.jsonl").write_text(json.dumps(record) + "\n")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = rescorer.main([folder])
    assert status in (0, 1, 2)
    if status == 2:
        assert out.getvalue() == "" and err.getvalue().count("\n") == 1
    else:
        assert json.loads(out.getvalue())["records"] == 1
