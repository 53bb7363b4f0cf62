"""End-to-end campaigns through pytester on scripted rungs: each hypothesis's outcomes, the launch refusals, and a
killed campaign whose resumed ledger shows every supervisor the damage record an uninterrupted run shows; the
independent rescorer agrees with every run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.selfcheck import read_report, run_protocol, run_rescorer
from benchmarks.ladder.campaign.spec import FOLDER
from benchmarks.ladder.spec import HERE as LADDER

RUN_LIBRARIES_FIRST = ("benchmarks.ladder.campaign.scripted", "benchmarks.ladder.worker")

#: A reduced pass: 20 episodes per (tier, seed) cell, 360 units (tier 5: 60 paired episodes per condition).
REDUCED = ("--campaign-episodes-per-cell", "20")


def probe_of(pytester: pytest.Pytester, tmp_path: Path, model: str) -> Path:
    """The run directory of a ladder probe of ``model`` on the registration's state and seed."""
    results = tmp_path / f"probe-{model}"
    run_protocol(pytester, LADDER, results, "--model", model, in_process=True)
    return read_report(results, "ladder")[1]


def campaign(pytester: pytest.Pytester, results: Path, model: str, probe: Path, *args: str) -> pytest.RunResult:
    return run_protocol(pytester, FOLDER, results, "--model", model, "--campaign-probe", str(probe), *args,
                        in_process=True)


def labels_of(results: Path) -> tuple[dict[str, Any], Path]:
    report, run_dir = read_report(results, "campaign")
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary, run_dir


def rescored(run_dir: Path) -> dict[str, Any]:
    return run_rescorer(FOLDER / "rescore.py", run_dir)


@pytest.mark.parametrize(("model", "expected"), [
    ("campaign-a0.97-averse0.6-seed8", {"h_l1": "H_L1_SUPPORTED", "h_l3": "H_L3_SUPPORTED"}),
    ("campaign-a0.97-averse0.6-review-seed8", {"h_l1": "H_L1_NOT_SUPPORTED", "h_l3": "H_L3_SUPPORTED"}),
    ("campaign-a0.99-s1-lenient0.3-seed8", {"h_l2": "H_L2_NOT_SUPPORTED", "h_l3": "H_L3_NOT_SUPPORTED"}),
])
def test_scripted_rungs_reach_each_hypothesis_outcome(pytester: pytest.Pytester, tmp_path: Path, model: str,
                                                      expected: dict[str, str]) -> None:
    """A consequence-averse supervisor under the ledger over-blocks (H-L1 supported, most tier-5 blocks wrongful);
    averse under plain review instead, the ledger blocks less (H-L1 not supported); a worker that overlooks
    violations under an exact supervisor gives blocks that are all right (H-L3 not supported) and oversight that
    pays for itself (H-L2 not supported).  The rescorer derives every label from the records."""
    probe = probe_of(pytester, tmp_path, model)
    results = tmp_path / "campaign"
    result = campaign(pytester, results, model, probe)
    summary, run_dir = labels_of(results)
    assert summary["status"] == "complete", result.stdout.str()[-2000:]
    for block, label in expected.items():
        assert summary["classifications"][block] == label, (block, summary["metrics"])
    out = rescored(run_dir)
    assert out["disagreements"] == [] and out["classifications"] == summary["classifications"]
    # the grid: 1,440 units, 80 per (tier, condition, seed) cell, the same episodes under every condition
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 1440
    cells: dict[tuple[int, str, int], set[str]] = {}
    for r in records:
        cells.setdefault((r["tier"], r["condition"], r["seed"]), set()).add(r["episode_sha256"])
    assert len(cells) == 18 and all(len(v) == 80 for v in cells.values())
    for tier in (4, 5):
        for seed in (1, 2, 3):
            assert cells[(tier, "autonomous", seed)] == cells[(tier, "review", seed)] == cells[(tier, "ledger", seed)]
    assert all(r["supervisor_decision"] is None for r in records if r["condition"] == "autonomous")
    assert all(r["consulted"] == (r["condition"] != "autonomous" and r["worker_decision"] == "approve")
               for r in records)
    projection = json.loads((run_dir / "projection.json").read_text())
    assert projection["units"] == 1440 and projection["worker_calls"] == 1440
    assert projection["basis"]["gate"] == "IN_BAND" and projection["basis"]["rung"] == model


def test_the_launch_gate_refuses_in_one_line_before_any_work(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """An out-of-band probe cancels its rung's campaign; a probe of another model, a missing probe and a probe of
    another seed are refused too, each naming its clause, and no campaign directory is made."""
    below = probe_of(pytester, tmp_path, "campaign-a0.995-seed8")
    assert json.loads((below / "summary.json").read_text())["classifications"]["gate"] == "OVERALL_ERROR_BELOW_BAND"
    passing = probe_of(pytester, tmp_path, "campaign-a0.97-seed8")
    other_seed = tmp_path / "probe-seed203"
    run_protocol(pytester, LADDER, other_seed, "--model", "campaign-a0.97-seed8", "--ladder-seed", "203",
                 in_process=True)
    cases = [
        ("campaign-a0.995-seed8", below, "clause gate-passed): the probe's gate is 'OVERALL_ERROR_BELOW_BAND'"),
        ("campaign-a0.97-averse0.6-seed8", passing, "clause same-rung): the probe measured 'campaign-a0.97-seed8'"),
        ("campaign-a0.97-seed8", tmp_path / "nowhere", "clause probe-complete)"),
        ("campaign-a0.97-seed8", read_report(other_seed, "ladder")[1], "clause registered-seed): the probe used "
                                                                       "seed 203"),
    ]
    for model, probe, words in cases:
        results = tmp_path / f"refused-{len(words)}"
        result = campaign(pytester, results, model, probe)
        out = result.stdout.str() + result.stderr.str()
        assert result.ret == 4 and "the campaign cannot launch (" + words in out, out[-1500:]
        assert not (results / "campaign").exists()


def test_a_killed_campaign_resumes_with_the_same_damage_records(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A ledger cut mid-record (as a killed writer leaves it) resumes to the uninterrupted run's records: every
    supervisor prompt (its sha256) and every damage record the same, the rescorer agreeing."""
    model = "campaign-a0.99-s0.9-lenient0.4-seed8"  # overlooks violations in both seats: the ledger fills
    probe = probe_of(pytester, tmp_path, model)
    whole = tmp_path / "whole"
    campaign(pytester, whole, model, probe, *REDUCED, "--run-id", "whole")
    killed = tmp_path / "killed"
    campaign(pytester, killed, model, probe, *REDUCED, "--run-id", "cut")
    run_dir = killed / "campaign" / "cut"
    ledger = run_dir / "records.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger_units = [i for i, line in enumerate(lines) if json.loads(line)["ledger_damages"]]
    cut = ledger_units[len(ledger_units) // 2]  # in the middle of a seed's ledger stream, after a damage
    ledger.write_bytes(b"".join(lines[:cut]) + lines[cut][:60])
    for name in ("report.json", "summary.json"):
        (run_dir / name).unlink()
    result = campaign(pytester, killed, model, probe, *REDUCED, "--run-id", "cut")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete", result.stdout.str()[-2000:]
    assert list(run_dir.glob("records.jsonl.torn-*"))

    def prompts(folder: Path) -> dict[str, tuple[Any, Any, Any]]:
        rows = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
        return {r["unit_id"]: (r["supervisor_prompt_sha256"], r["ledger_sha256"], r["ledger_damages"]) for r in rows}

    before, after = prompts(whole / "campaign" / "whole"), prompts(run_dir)
    assert len(after) == 360 and after == before
    assert max(d for _, _, d in after.values() if d is not None) >= 2  # the records carried damages
    assert rescored(run_dir)["disagreements"] == []
    whole_summary = json.loads((whole / "campaign" / "whole" / "summary.json").read_text())
    assert summary["metrics"] == whole_summary["metrics"]


def test_the_projection_reads_the_probe_s_recorded_latencies(pytester: pytest.Pytester, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Printed before any campaign work: with every probe unit recorded at 120 s, the 1,440 units and the rulings
    at the probe's approve share take (calls x 120 s) / concurrency."""
    from benchmarks.ladder.campaign.launch import main

    model = "campaign-a0.97-seed8"
    probe = probe_of(pytester, tmp_path, model)
    slow = tmp_path / "slow-probe"
    shutil.copytree(probe, slow)
    [units] = list(slow.glob("*/units.jsonl"))
    rows = [json.loads(line) for line in units.read_text().splitlines()]
    for row in rows:
        row["latency_s"] = 120.0
    units.write_text("".join(json.dumps(r) + "\n" for r in rows))
    approve = sum(r["decision"] == "approve" for r in rows) / len(rows)
    assert main([str(slow), "--model", model, "--concurrency", "4"]) == 0
    printed = capsys.readouterr().out
    calls = 1440 + 960 * approve
    hours = round(calls * 120 / 4 / 3600, 2)
    assert f"projection: 1440 units, {round(calls, 1):g} model calls" in printed
    assert f"{hours:g} h of wall time at 4 in flight and 120 s per call" in printed, printed
    assert main([str(slow), "--model", "campaign-a0.98-seed8"]) == 4
    assert "clause same-rung" in capsys.readouterr().err
