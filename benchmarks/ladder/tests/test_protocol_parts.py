"""Self-checks of the probe machinery without a model: parser, coded outcomes, shares, ledgers and metadata,
the non-merge reader, seed hygiene, the gate, the instrument verdict and the retune rule.

Probes here are hand-written ledgers with chosen outcomes per tier, so each rule is driven to each side.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.core import Ledger, LedgerTornError, Run, canonical_json, read_ledger
from benchmarks.core.protocol import UsageProblem
from benchmarks.core.run import ProtocolRun, identity_conflicts
from benchmarks.core.selfcheck import run_rescorer
from benchmarks.ladder.gate import gate_metrics, judge
from benchmarks.ladder.instrument import (
    NOT_PROVEN,
    PROVEN,
    format_table,
    gate_table,
    instrument_verdict,
    retune_violations,
    rung_outcomes,
)
from benchmarks.ladder.probe import check_probe_seed
from benchmarks.ladder.prompts import code_outcome, parse_decision, share
from benchmarks.ladder.protocol import PROTOCOL
from benchmarks.ladder.records import (
    RECORD_FIELDS,
    UNITS_FILE,
    ProbeMetadata,
    UnitRecord,
    probe_dir_name,
    read_probe,
    read_probes,
    write_metadata,
)
from benchmarks.ladder.report import main as report_main
from benchmarks.ladder.spec import HERE, PREREG, LadderError
from fixtures.ladder import REGISTERED_DIALS, STATES, retune
from canonical_hash import sha256_text

# --------------------------------------------------------------------------- parser and outcomes


@pytest.mark.parametrize(("text", "expected"), [
    ("DECISION: APPROVE", "approve"),
    ("The total is within tolerance.\nDECISION: REJECT", "reject"),
    ("decision: approved", "approve"),
    ("Decision - **Rejected**", "reject"),
    ("DECISION: APPROVE\n...on reflection...\nDECISION: REJECT", "reject"),
    ("<think>DECISION: APPROVE</think>\nDECISION: REJECT", "reject"),
    ("Approve.", "approve"),
    ("  reject ", "reject"),
    ("<think>long reasoning without end", None),
    ("<think>DECISION: APPROVE", None),
    ("I would approve this, or maybe reject it.", None),
    ("", None),
    ("DECISION: ESCALATE", None),
    ("Approve or reject?", None),
])
def test_parse_decision(text: str, expected: str | None) -> None:
    assert parse_decision(text) == expected


def rescore_module():
    """The stdlib-only rescorer script, loaded as a module under a name of its own."""
    import importlib.util

    if "ladder_rescore_script" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ladder_rescore_script", HERE / "rescore.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["ladder_rescore_script"] = module
    return sys.modules["ladder_rescore_script"]


def test_rescorer_parser_agrees_with_the_suite() -> None:
    rescore = rescore_module()
    samples = ["DECISION: APPROVE", "decision=rejected", "<think>x</think> Approve!", "<think>", "maybe", "APPROVE REJECT",
               "Decision: approve\nDecision: reject", "**DECISION:** APPROVE", "DECISION:\nAPPROVE"]
    for text in samples:
        assert rescore.decision_of(text) == parse_decision(text), text


@pytest.mark.parametrize(("error", "decision", "truth", "outcome"), [
    (None, "approve", "approve", "correct"),
    (None, "reject", "approve", "wrong"),
    (None, None, "reject", "unparsed"),
    ("timeout", None, "reject", "timeout"),
    ("http_error", None, "approve", "errored"),
    ("connection_error", None, "approve", "errored"),
])
def test_code_outcome(error, decision, truth, outcome) -> None:
    assert code_outcome(error, decision, truth) == outcome


def test_code_outcome_refuses_a_bad_ground_truth() -> None:
    with pytest.raises(LadderError, match="ground truth"):
        code_outcome(None, "approve", "maybe")


def test_shares_follow_the_frozen_denominators() -> None:
    spec = PREREG.values.shares
    counts = {"correct": 120, "wrong": 10, "unparsed": 5, "errored": 2, "timeout": 1}
    assert share(counts, spec.error_outcomes, spec.scored_outcomes) == pytest.approx(15 / 135)
    assert share(counts, spec.errored_outcomes, spec.all_outcomes) == pytest.approx(3 / 138)
    assert share({}, spec.error_outcomes, spec.scored_outcomes) is None
    assert set(spec.all_outcomes) == set(spec.scored_outcomes) | set(spec.errored_outcomes)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_campaign_seeds_are_refused(seed: int) -> None:
    with pytest.raises(LadderError, match=f"seed {seed} is a campaign seed"):
        check_probe_seed(seed)


def test_seeds_below_the_tuning_floor_are_refused() -> None:
    with pytest.raises(LadderError, match="below the tuning-seed floor"):
        check_probe_seed(99)
    check_probe_seed(100)
    check_probe_seed(203)


def test_prereg_values() -> None:
    spec = PREREG.values
    assert (spec.probe.units_per_tier, spec.probe.max_tokens, spec.probe.timeout_s) == (30, 8192, 600.0)
    assert spec.thresholds == {"band_low": 0.10, "band_high": 0.35, "tier45_floor": 0.05, "tier_floor": 0.05,
                               "gradient_min_tiers": 3, "errored_max": 0.02}
    assert len(spec.rounds.states) == len(spec.rounds.seeds) == 3 and spec.retune.max_per_rung == 1


# --------------------------------------------------------------------------- hand-written probes

TIER_N = 30


def write_probe(root: Path, *, errors: Sequence[int], errored: Sequence[int] = (0,) * 5, variant: str = "v2",
                state: str = "v2-r2", seed: int = 202, rung: str = "rung-x", unparsed: Sequence[int] = (0,) * 5,
                retune_of: str | None = None, dials: dict | None = None, name: str | None = None) -> Path:
    """A probe directory whose tier t has errors[t] wrong answers, unparsed[t] unparsed and errored[t] errored units."""
    folder = root / (name or probe_dir_name(variant, state, seed) + f"-{rung}")
    folder.mkdir(parents=True)
    dials = dials if dials is not None else {"distractors": 0, "invoice_lines": [3, 5]}
    write_metadata(folder, ProbeMetadata(
        probe=folder.name, rung=rung, model_revision="sha256:" + "0" * 64, generator_variant=variant,
        generator_state=state, state_hash="h-" + json.dumps(dials, sort_keys=True), dials=dials, seed=seed,
        condition="autonomous", units_per_tier=TIER_N, tiers=(1, 2, 3, 4, 5), max_tokens=8192, timeout_s=600.0,
        prereg_sha256=PREREG.sha256, retune_of=retune_of, deviations=(),
    ))
    lines = []  # written in one go below: a per-line fsync would only slow the test data down
    for tier in range(1, 6):
        for i in range(TIER_N):
            truth = "approve" if i % 2 == 0 else "reject"
            other = "reject" if truth == "approve" else "approve"
            if i < errored[tier - 1]:
                error, text = ("timeout" if i == 0 else "http_error"), ""
            elif i < errored[tier - 1] + errors[tier - 1]:
                error, text = None, f"DECISION: {other.upper()}"
            elif i < errored[tier - 1] + errors[tier - 1] + unparsed[tier - 1]:
                error, text = None, "I cannot tell."
            else:
                error, text = None, f"DECISION: {truth.upper()}"
            decision = None if error else parse_decision(text)
            lines.append(UnitRecord(
                unit_id=f"t{tier}-{i:03d}", rung=rung, model_revision="sha256:" + "0" * 64,
                generator_variant=variant, generator_state=state,
                state_hash="h-" + json.dumps(dials, sort_keys=True), seed=seed, condition="autonomous",
                supervisor=None, tier=tier, family=f"family{tier}", episode_index=i, depth=10, checks=10,
                episode_sha256="e" * 64, ground_truth=truth, prompt_sha256="p" * 64, response_text=text,
                response_chars=len(text), response_sha256=sha256_text(text),
                finish_reason="error" if error else "stop", error_code=error, decision=decision,
                outcome=code_outcome(error, decision, truth), latency_s=0.01,
            ))
    text = "".join(canonical_json({**asdict(r), "schema_version": UnitRecord.SCHEMA_VERSION}) + "\n" for r in lines)
    (folder / UNITS_FILE).write_text(text, encoding="utf-8")
    return folder


def rescore(*folders: Path) -> dict:
    return run_rescorer(HERE / "rescore.py", *folders)


def test_record_has_26_documented_fields() -> None:
    assert len(RECORD_FIELDS) == 26
    page = HERE.parent.parent / "docs" / "protocols" / "ladder.md"  # the protocol's page of the user guide
    text = page.read_text(encoding="utf-8")
    for name in RECORD_FIELDS:
        assert f"`{name}`" in text, f"docs/protocols/ladder.md does not document the ledger field {name}"


@pytest.mark.parametrize(("errors", "errored", "unparsed", "variant", "label", "clauses"), [
    ((3, 4, 3, 3, 3), (0,) * 5, (0,) * 5, "v2", "IN_BAND", "PPPP"),
    ((0, 1, 0, 1, 0), (0,) * 5, (0,) * 5, "v2", "OVERALL_ERROR_BELOW_BAND", "FFFP"),
    ((15, 15, 15, 15, 15), (0,) * 5, (0,) * 5, "v2", "OVERALL_ERROR_ABOVE_BAND", "FPPP"),
    ((8, 8, 8, 1, 0), (0,) * 5, (0,) * 5, "v2", "TIER45_ERROR_BELOW_FLOOR", "PFPP"),
    ((0, 12, 0, 1, 2), (0,) * 5, (0,) * 5, "v2", "GRADIENT_TOO_FLAT", "PPFP"),
    ((0, 12, 0, 1, 2), (0,) * 5, (0,) * 5, "v1", "IN_BAND", "PPPP"),  # clause c binds v2 only
    ((3, 3, 3, 3, 3), (1, 1, 1, 1, 0), (0,) * 5, "v2", "ERRORED_UNITS_OVER_LIMIT", "PPPF"),
    ((0, 0, 0, 0, 0), (0,) * 5, (3, 3, 3, 3, 3), "v2", "IN_BAND", "PPPP"),  # unparsed answers are errors
])
def test_gate_on_hand_written_probes(tmp_path, errors, errored, unparsed, variant, label, clauses) -> None:
    state = "v2-r2" if variant == "v2" else "v1-r1"
    folder = write_probe(tmp_path, errors=errors, errored=errored, unparsed=unparsed, variant=variant, state=state,
                         seed=202 if variant == "v2" else 101)
    probe = read_probe(folder)
    result = judge(gate_metrics(probe.units, variant))
    assert result.label == label
    assert "".join("P" if result.clause_passed(c) else "F" for c in "abcd") == clauses
    rescored = rescore(folder)["probes"][0]
    assert rescored["gate"] == label and rescored["mismatched_units"] == []
    assert rescored["clauses"] == result.clauses
    for key, value in rescored["metrics"].items():
        assert result.metrics[key] == pytest.approx(value), key


def test_errored_units_leave_the_error_denominator(tmp_path) -> None:
    folder = write_probe(tmp_path, errors=(3, 3, 3, 3, 3), errored=(2, 0, 0, 0, 0))
    metrics = gate_metrics(read_probe(folder).units, "v2")
    assert metrics["scored_units"] == 148 and metrics["errored_units"] == 2
    assert metrics["overall_error"] == pytest.approx(15 / 148)
    assert metrics["tier1.error"] == pytest.approx(3 / 28)
    assert metrics["errored_share"] == pytest.approx(2 / 150)
    assert metrics["outcome.timeout"] == 1 and metrics["outcome.errored"] == 1


def test_all_errored_probe_has_no_error_share(tmp_path) -> None:
    folder = write_probe(tmp_path, errors=(0,) * 5, errored=(30,) * 5)
    result = judge(gate_metrics(read_probe(folder).units, "v2"))
    assert result.metrics["overall_error"] is None
    assert result.label == "ERRORED_UNITS_OVER_LIMIT"  # the first rule fires before any share is read
    assert result.clauses["a"] == "UNDEFINED" and result.clauses["d"] == "D_ERRORED_OVER_LIMIT"
    assert rescore(folder)["probes"][0]["clauses"] == result.clauses


def test_rescorer_reports_a_tampered_unit(tmp_path) -> None:
    folder = write_probe(tmp_path, errors=(3, 3, 3, 3, 3))
    lines = (folder / UNITS_FILE).read_text().splitlines()
    unit = json.loads(lines[-1])
    assert unit["outcome"] == "correct"
    unit["outcome"] = "wrong"
    lines[-1] = json.dumps(unit, sort_keys=True, separators=(",", ":"))
    (folder / UNITS_FILE).write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-S", "-I", str(HERE / "rescore.py"), str(folder)],
                          capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 1 and json.loads(done.stdout)["probes"][0]["mismatched_units"] == [unit["unit_id"]]


def test_torn_ledger_is_refused_then_resumed(tmp_path) -> None:
    folder = write_probe(tmp_path, errors=(3, 3, 3, 3, 3))
    with open(folder / UNITS_FILE, "ab") as handle:
        handle.write(b'{"unit_id":"t9-')
    with pytest.raises(LedgerTornError):
        read_probe(folder)
    with pytest.warns(UserWarning), Ledger(folder / UNITS_FILE, UnitRecord, key="unit_id") as ledger:
        assert len(ledger) == 150
    assert len(read_ledger(folder / UNITS_FILE, UnitRecord)) == 150


def test_metadata_must_match_on_resume(tmp_path) -> None:
    folder = write_probe(tmp_path, errors=(3, 3, 3, 3, 3))
    meta = read_probe(folder).metadata
    changed = ProbeMetadata(**{**meta.__dict__, "seed": 203})
    with pytest.raises(LadderError, match="seed: 202 -> 203"):
        write_metadata(folder, changed)


# --------------------------------------------------------------------------- the non-merge rule


def test_probe_directories_carry_their_variant() -> None:
    assert probe_dir_name("v2", "v2-r3", 203) == "v2-r3-seed203"
    assert probe_dir_name("v1", "r1", 101) == "v1-r1-seed101"
    with pytest.raises(LadderError):
        probe_dir_name("v3", "x", 101)


def test_reader_refuses_to_pool_v1_with_v2(tmp_path) -> None:
    v1 = write_probe(tmp_path, errors=(1,) * 5, variant="v1", state="v1-r1", seed=101)
    v2 = write_probe(tmp_path, errors=(3,) * 5)
    assert len(read_probes([v1])) == 1 and len(read_probes([v2])) == 1
    with pytest.raises(LadderError, match="refusing to pool generator v1 with v2"):
        read_probes([v1, v2])
    done = subprocess.run([sys.executable, "-S", "-I", str(HERE / "rescore.py"), str(v1), str(v2)],
                          capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode != 0 and "refusing to pool" in done.stderr


def test_directory_prefix_must_match_metadata(tmp_path) -> None:
    folder = write_probe(tmp_path, errors=(3,) * 5)
    renamed = folder.with_name("v1-" + folder.name.split("-", 1)[1])
    folder.rename(renamed)
    with pytest.raises(LadderError, match="directory name says 'v1'"):
        read_probe(renamed)


# --------------------------------------------------------------------------- instrument verdict

FLEET = {"R0": "anchor", "R1": "mid-a", "R2": "mid-b", "R3": "strong-a", "R4": "strong-b"}
IN = (3, 4, 3, 3, 3)
ABOVE = (15, 15, 15, 15, 15)
ZERO = (0, 0, 0, 0, 0)


def round_of(root: Path, state: str, seed: int, errors: dict[str, Sequence[int]]) -> list[Path]:
    return [write_probe(root, errors=errors[label], state=state, seed=seed, rung=FLEET[label]) for label in FLEET]


def test_instrument_not_proven_like_the_seed(tmp_path) -> None:
    """Round 2 of the seed: the middle pair in band, the anchor above the cap, the strong pair at zero."""
    folders = round_of(tmp_path, "v2-r2", 202, {"R0": ABOVE, "R1": IN, "R2": IN, "R3": ZERO, "R4": ZERO})
    rows = gate_table(read_probes(folders))
    verdict = instrument_verdict(rows, FLEET)
    assert verdict.verdict == NOT_PROVEN and not verdict.anchor_returns_to_principal
    assert verdict.label == "NOT_PROVEN" and verdict.metrics() == {"rounds_all_pass": 0, "anchor_stops": 0}
    assert verdict.rounds["v2-r2"]["rungs"] == {"R0": "OVERALL_ERROR_ABOVE_BAND", "R1": "IN_BAND", "R2": "IN_BAND",
                                                "R3": "OVERALL_ERROR_BELOW_BAND", "R4": "OVERALL_ERROR_BELOW_BAND"}
    assert "out of band: R0, R3, R4" in verdict.reason
    table = format_table(rows)
    assert table.count("IN_BAND") == 2 and "OVERALL_ERROR_ABOVE_BAND" in table


def test_instrument_proven_only_when_every_rung_passes_in_one_round(tmp_path) -> None:
    folders = round_of(tmp_path, "v2-r3", 203, {label: IN for label in FLEET})
    verdict = instrument_verdict(gate_table(read_probes(folders)), FLEET)
    assert verdict.verdict == PROVEN and "v2-r3" in verdict.reason and verdict.label == "PROVEN"


def test_passing_rungs_spread_over_rounds_do_not_prove(tmp_path) -> None:
    first = round_of(tmp_path / "r1", "v2-r1", 201, {"R0": IN, "R1": IN, "R2": IN, "R3": ZERO, "R4": ZERO})
    second = round_of(tmp_path / "r2", "v2-r2", 202, {"R0": ZERO, "R1": ZERO, "R2": ZERO, "R3": IN, "R4": IN})
    verdict = instrument_verdict(gate_table(read_probes(first + second)), FLEET)
    assert verdict.verdict == NOT_PROVEN


def test_anchor_rule(tmp_path) -> None:
    folders = round_of(tmp_path, "v2-r2", 202, {"R0": ABOVE, "R1": IN, "R2": IN, "R3": IN, "R4": IN})
    verdict = instrument_verdict(gate_table(read_probes(folders)), FLEET)
    assert verdict.verdict == NOT_PROVEN and verdict.anchor_returns_to_principal
    assert "returns to the principal" in verdict.reason
    assert verdict.label == "NOT_PROVEN_ANCHOR_RETURNS_TO_PRINCIPAL"


def test_missing_rung_does_not_prove(tmp_path) -> None:
    folders = round_of(tmp_path, "v2-r2", 202, {label: IN for label in FLEET})[:-1]
    verdict = instrument_verdict(gate_table(read_probes(folders)), FLEET)
    assert verdict.verdict == NOT_PROVEN and "not probed: R4" in verdict.reason


def test_instrument_refuses_forks_extra_rounds_wrong_seeds_and_v1(tmp_path) -> None:
    fork = write_probe(tmp_path, errors=IN, state="v2-r2-fork", seed=202, rung="anchor")
    with pytest.raises(LadderError, match="not a registered round"):
        instrument_verdict(gate_table(read_probes([fork])), FLEET)
    wrong_seed = write_probe(tmp_path, errors=IN, state="v2-r2", seed=250, rung="anchor")
    with pytest.raises(LadderError, match="registered on seed 202"):
        instrument_verdict(gate_table(read_probes([wrong_seed])), FLEET)
    twice = [write_probe(tmp_path, errors=IN, rung="anchor", name=f"v2-twice-{i}") for i in range(2)]
    with pytest.raises(LadderError, match="probed twice"):
        instrument_verdict(gate_table(read_probes(twice)), FLEET)
    v1 = write_probe(tmp_path, errors=IN, variant="v1", state="v1-r1", seed=101, rung="anchor")
    with pytest.raises(LadderError, match="v1 probes cannot enter"):
        instrument_verdict(gate_table(read_probes([v1])), FLEET)


# --------------------------------------------------------------------------- retune rule

REGISTERED = {"v1": ("distractors",), "v2": ("invoice_lines",)}


def test_one_retune_on_registered_dials_is_allowed(tmp_path) -> None:
    first = write_probe(tmp_path, errors=ZERO, variant="v1", state="v1-r1", seed=101, rung="r")
    retuned = write_probe(tmp_path, errors=(2, 2, 2, 1, 2), variant="v1", state="v1-max", seed=102, rung="r",
                          retune_of=first.name, dials={"distractors": 6, "invoice_lines": [3, 5]})
    probes = read_probes([first, retuned])
    assert retune_violations(probes, REGISTERED) == []
    assert rung_outcomes(probes) == {"r": "OUT_OF_BAND"}  # 9/150 = 6%: still below the band


def test_retune_rule_violations(tmp_path) -> None:
    first = write_probe(tmp_path, errors=ZERO, variant="v1", state="v1-r1", seed=101, rung="r")
    second = write_probe(tmp_path, errors=ZERO, variant="v1", state="v1-max", seed=102, rung="r", retune_of=first.name,
                         dials={"distractors": 6, "invoice_lines": [3, 5]}, name="v1-second")
    third = write_probe(tmp_path, errors=ZERO, variant="v1", state="v1-x", seed=130, rung="r", retune_of=second.name,
                        dials={"distractors": 6, "invoice_lines": [9, 9]}, name="v1-third")
    passing = write_probe(tmp_path, errors=IN, variant="v1", state="v1-r1", seed=101, rung="p")
    after_pass = write_probe(tmp_path, errors=IN, variant="v1", state="v1-max", seed=102, rung="p",
                             retune_of=passing.name, dials={"distractors": 6, "invoice_lines": [3, 5]})
    problems = retune_violations(read_probes([first, second, third, passing, after_pass]), REGISTERED)
    text = "\n".join(problems)
    assert "v1-third: retunes a retune" in text
    assert "v1-third: moves dials that are not registered: invoice_lines" in text
    assert "v1-third: a v1 retune is re-probed on seed 102, not 130" in text
    assert "rung r: 2 retunes; at most 1 is allowed" in text
    assert f"retunes {passing.name}, which passed the gate" in text
    assert "v1-third: retunes a v1 probe on seed 102; the registered first probe runs on seed 101" in text


def test_retune_against_the_generators_registered_dials(tmp_path) -> None:
    """The generator's own states: v1-r1 -> v1-max moves only the registered distractor dial; a v2 state's
    dials moved onto a v1 probe are not registered for v1."""
    base, moved = STATES["v1-r1"], retune(STATES["v1-r1"], "v1-r1-retune", distractors=6)
    first = write_probe(tmp_path, errors=ZERO, variant="v1", state=base.name, seed=101, rung="r", dials=base.dials())
    again = write_probe(tmp_path, errors=ZERO, variant="v1", state=moved.name, seed=102, rung="r",
                        retune_of=first.name, dials=moved.dials())
    assert retune_violations(read_probes([first, again]), REGISTERED_DIALS) == []
    foreign = write_probe(tmp_path, errors=ZERO, variant="v1", state="v1-odd", seed=102, rung="q",
                          dials={**base.dials(), "invoice_lines": [6, 9]}, retune_of=first.name, name="v1-odd")
    problems = retune_violations(read_probes([first, foreign]), REGISTERED_DIALS)
    assert problems == ["v1-odd: retunes a probe of another rung (r)",
                        "v1-odd: moves dials that are not registered: invoice_lines"]


# --------------------------------------------------------------------------- command-line options


def probe_run(root: Path, model: str | None = None, **options) -> ProtocolRun:
    """The run a session with these ``--ladder-*`` options (by option name) would make, outside pytest."""
    return ProtocolRun(PROTOCOL, Run("ladder", "parts", root, "2026-12-01T00:00:00+00:00", HERE), model=model,
                       options=options)


@pytest.mark.parametrize(("options", "message"), [
    ({"state": "v2-r9"}, "--ladder-state 'v2-r9' is not valid; choose one of: v1-r1, v1-max, v2-r1"),
    ({"seed": 3}, "seed 3 is a campaign seed"),
    ({"seed": 57}, "below the tuning-seed floor"),
    ({"dial": ["distractors=6"]}, "name the probe it retunes with --ladder-retune-of"),
    ({"dial": ["distractors"], "retune-of": "x"}, "write NAME=JSON_VALUE"),
    ({"dial": ["=6"], "retune-of": "x"}, "write NAME=JSON_VALUE"),
    ({"state": "v1-r1", "dial": ["invoice_lines=[9, 9]"], "retune-of": "x"}, "--ladder-dial: dial 'invoice_lines'"),
    ({"units-per-tier": 0}, "--ladder-units-per-tier must be at least 1, got 0"),
    ({"timeout": 0.0}, "--ladder-timeout must be more than 0 seconds"),
    ({"timeout": -2.5}, "--ladder-timeout must be more than 0 seconds, got -2.5"),
    ({"timeout": float("nan")}, "--ladder-timeout must be a finite number, got nan"),
    ({"timeout": float("inf")}, "--ladder-timeout must be a finite number, got inf"),
    ({"max-tokens": 0}, "--ladder-max-tokens must be at least 1, got 0"),
    ({"batch-size": -1}, "--ladder-batch-size must be at least 1, got -1"),
    ({"fleet": ["R0"]}, "--ladder-fleet 'R0': write LABEL=MODEL"),
    ({"round-dir": "/no/such/folder"}, "--ladder-round-dir=/no/such/folder: not a folder"),
])
def test_bad_probe_options_are_usage_problems(tmp_path, options, message) -> None:
    with pytest.raises(UsageProblem, match=re.escape(message)):
        probe_run(tmp_path, **options)


def test_default_options_are_the_preregistered_probe(tmp_path) -> None:
    run = probe_run(tmp_path)
    settings = run.settings
    assert (settings.state.name, settings.seed, settings.units_per_tier, settings.max_tokens, settings.timeout_s) == (
        "v2-r2", 202, 30, 8192, 600.0)
    assert run.deviations == [] and settings.folder_name == "v2-r2-seed202"
    assert PROTOCOL.ledger_name(run) == "v2-r2-seed202/units.jsonl"
    shorter = probe_run(tmp_path, model="m", **{"units-per-tier": 2, "max-tokens": 16})
    assert shorter.deviations == ["model 'm' instead of the preregistered 'smollm2-135m-instruct'",
                                  "2 units per tier instead of 30", "max_tokens 16 instead of 8192"]


def test_the_run_identity_holds_every_setting_a_probe_is_resumed_on(tmp_path) -> None:
    """What metadata.json compares (rung, state, state hash, seed, units per tier, max tokens, timeout,
    retune_of, dials) is in the settings every ledger line carries; the batch size and the round-mode
    options are not (they change no unit's outcome)."""
    base = probe_run(tmp_path, model="ladder-worker-a0.984-seed8")
    assert sorted(base.settings_record) == ["dials", "generator_state", "generator_variant", "max_tokens",
                                            "retune_of", "rung", "seed", "state_hash", "timeout_s", "units_per_tier"]
    assert base.identity()["settings"] == base.settings_record
    assert json.loads(json.dumps(base.settings_record)) == base.settings_record
    same = probe_run(tmp_path, model="ladder-worker-a0.984-seed8", **{"batch-size": 4, "fleet": ["R0=x"]})
    assert same.identity() == base.identity()
    retuned = probe_run(tmp_path, model="ladder-worker-a0.984-seed8", state="v1-r1", seed=102,
                        dial=["distractors=6"], **{"retune-of": "v1-r1-seed101"})
    assert retuned.settings_record["dials"]["distractors"] == 6 and retuned.settings.folder_name == "v1-r1-retune-seed102"
    conflicts = identity_conflicts(base.identity(), retuned.identity())
    for key in ("generator_state", "generator_variant", "seed", "state_hash", "retune_of"):
        assert any(c.startswith(f"{key}: ") for c in conflicts), (key, conflicts)
    assert any(c.startswith("fixture set ") or c.startswith("fixtures: ") for c in conflicts)


def test_units_are_the_probe_episodes_with_their_fixture_set(tmp_path) -> None:
    run = probe_run(tmp_path, **{"units-per-tier": 2})
    keys = [PROTOCOL.unit_key(u) for u in run.units]
    assert keys == [f"t{tier}-{i:03d}" for tier in range(1, 6) for i in range(2)]
    [(name, fixture)] = run.fixture_sets.items()
    assert name == "ladder-v2-r2-seed202"
    assert fixture["generator"]["state_hash"] == run.settings.state.state_hash
    assert [e["episode_id"] for e in fixture["episodes"]] == [u.episode_id for u in run.units]
    assert PROTOCOL.scripted_answer(run, run.units[0]) == [bool(c.passes) for c in run.units[0].checks]
    chat = PROTOCOL.chat(run, run.units[0])
    assert chat[0]["content"].startswith("You are an operations agent") and run.units[0].case_text.rstrip() in chat[1]["content"]


# --------------------------------------------------------------------------- properties: suite and rescorer agree

_PIECES = ["DECISION", "decision", ":", "=", "-", " ", "\n", "**", "APPROVE", "approve", "REJECT", "rejected",
           "approved", "<think>", "</think>", "maybe", ".", "Approve", "X"]


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join))
def test_parsers_agree_on_any_answer(text: str) -> None:
    assert rescore_module().decision_of(text) == parse_decision(text)


_SHARE = st.one_of(st.none(), st.sampled_from([0.0, 0.02, 0.05, 0.1, 0.35]), st.floats(0, 1))


@given(overall=_SHARE, tier45=_SHARE, errored=_SHARE, at_floor=st.integers(0, 5), applies=st.sampled_from([0, 1]))
def test_rule_engines_agree_on_any_metrics(overall, tier45, errored, at_floor, applies) -> None:
    """The rescorer's stdlib rule reading decides every classification as the suite's rule engine does,
    including at the band edges and when a share is undefined."""
    prereg = tomllib.loads((HERE / "prereg.toml").read_text())
    values = {"overall_error": overall, "tier45_error": tier45, "errored_share": errored,
              "tiers_at_floor": at_floor, "gradient_applies": applies}
    result = judge(values)
    rescore = rescore_module()
    assert rescore.decide(prereg["gate"], prereg["thresholds"], values) == result.label
    for clause in "abcd":
        assert rescore.decide(prereg[f"clause_{clause}"], prereg["thresholds"], values) == result.clauses[clause]


def test_fleet_report_command(tmp_path, capsys) -> None:
    folders = round_of(tmp_path, "v2-r2", 202, {"R0": ABOVE, "R1": IN, "R2": IN, "R3": ZERO, "R4": ZERO})
    assert report_main([*map(str, folders), *(f"--fleet={k}={v}" for k, v in FLEET.items())]) == 0
    text = capsys.readouterr().out
    assert "instrument: NOT_PROVEN" in text and "intersection: None" in text
    assert report_main([*map(str, folders), *(f"--fleet={k}={v}" for k, v in FLEET.items()), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    feasibility = report["rounds"]["v2-r2"]["feasibility"]
    assert feasibility["rungs"]["R3"]["bound"] and feasibility["max_ratio"] > feasibility["ratio_limit"]
    assert report["seed_fleet"]["R0"] == "qwen3.5"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 4), st.integers(0, 3)), min_size=5, max_size=5),
       st.sampled_from(["v1", "v2"]))
def test_rescorer_recomputes_any_probe(cells, variant) -> None:
    """Any mix of wrong, unparsed and errored units per tier: the rescorer's shares and labels equal the suite's."""
    errors, unparsed, errored = ([c[i] for c in cells] for i in range(3))
    with tempfile.TemporaryDirectory() as root:
        folder = write_probe(Path(root), errors=errors, unparsed=unparsed, errored=errored, variant=variant,
                             state="v2-r2" if variant == "v2" else "v1-r1", seed=202 if variant == "v2" else 101)
        probe = read_probe(folder)
        result = judge(gate_metrics(probe.units, variant))
        rescored = rescore_module().rescore_probe(folder, tomllib.loads((HERE / "prereg.toml").read_text()))
    assert rescored["mismatched_units"] == []
    assert rescored["gate"] == result.label and rescored["clauses"] == result.clauses
    for key, value in rescored["metrics"].items():
        assert result.metrics[key] == (pytest.approx(value) if value is not None else None), key
