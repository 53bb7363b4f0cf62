"""``preregbench verify`` on a finished run of each of the four protocols.

For each protocol a scripted run (a non-preregistered model, so at best
EXPLORATORY) is verified three times: as written (every check but the
deviation and the tree passes: no TAMPERED or INCONSISTENT line), after one
primitive field of its ledger is changed (TAMPERED, naming the ledger file),
and after the same change with the manifest entry rewritten to match (the
rescorer disagrees: INCONSISTENT, naming the unit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.tests.test_verify import rewrite_manifest_entry

RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)  # imported before any pytester snapshot (root conftest): the CWR run below is in process


def verify(run_dir: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.verify", str(run_dir)], cwd=SUITE_ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def edit_ledger(path: Path, key: str, change: Callable[[dict[str, Any]], bool]) -> str:
    """Apply ``change`` to the first record it accepts (returns True); the unit's key."""
    lines, unit = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if unit is None and change(record):
            unit = record[key]
        lines.append(json.dumps(record, sort_keys=True))
    assert unit is not None, f"no record of {path} could be changed"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return unit


def res_run(pytester: pytest.Pytester, tmp_path: Path) -> Path:
    from benchmarks.res.tests.test_protocol_runs import run_res

    return run_res(pytester, tmp_path, "--model", "scripted-oracle")[2]


def cwr_run(pytester: pytest.Pytester, tmp_path: Path) -> Path:
    from benchmarks.cwr.tests.test_protocol_runs import run_cwr

    return run_cwr(pytester, tmp_path, "--model", "scripted-oracle", "--cwr-units-per-condition=2", in_process=True)[2]


def ladder_run(pytester: pytest.Pytester, tmp_path: Path) -> Path:
    from benchmarks.core.selfcheck import read_report
    from benchmarks.ladder.tests.test_protocol_runs import run_ladder

    results = tmp_path / "results"
    result = run_ladder(pytester, results, "--model", "scripted-ladder-flaky", "--ladder-units-per-tier=4")
    return read_report(results, "ladder", result)[1]


def pzombie_run(pytester: pytest.Pytester, tmp_path: Path) -> Path:
    from benchmarks.pzombie.scenarios import prefill_run
    from benchmarks.pzombie.tests.test_protocol_runs import run_pzombie

    results = tmp_path / "results"
    prefill_run(results, "scenario", "confirmed")
    return run_pzombie(pytester, results, "--run-id=scenario", "--model", "gemma-3-270m")[2]


def flip_margin(record: dict[str, Any]) -> bool:
    record["margin"] = -record["margin"]
    return True


def new_cwr_answer(record: dict[str, Any]) -> bool:
    if record["condition"] != "P":
        return False
    record["generation"] = "ANSWER: something else entirely"
    return True


def new_ladder_reply(record: dict[str, Any]) -> bool:
    if record["decision"] is None:
        return False
    record["response_text"] = "reject" if record["decision"] == "approve" else "approve"
    return True


def new_zone_weight(record: dict[str, Any]) -> bool:
    if not record.get("zone_weights"):
        return False
    weights = record["zone_weights"]
    top = max(range(len(weights)), key=weights.__getitem__)
    weights[top] = weights[top] * 0.5
    return True


CASES = {
    "res": (res_run, "records.jsonl", "item_id", flip_margin),
    "cwr": (cwr_run, "records.jsonl", "item_id", new_cwr_answer),
    "ladder": (ladder_run, "*/units.jsonl", "unit_id", new_ladder_reply),
    "pzombie": (pzombie_run, "records.jsonl", "unit_id", new_zone_weight),
}


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_verify_names_a_changed_ledger_and_the_rescorer_names_the_unit(pytester: pytest.Pytester, tmp_path: Path,
                                                                       protocol: str) -> None:
    make, ledger_glob, key, change = CASES[protocol]
    run_dir = make(pytester, tmp_path)

    status, lines = verify(run_dir)
    assert status == 1, lines  # a scripted model is a deviation: complete and consistent, not confirmatory
    assert lines[-1].startswith("EXPLORATORY") and not any(l.startswith(("TAMPERED", "INCONSISTENT")) for l in lines)
    assert any(l.startswith("ok") and "rescorer: no disagreement" in l for l in lines), lines

    (ledger,) = sorted(run_dir.glob(ledger_glob))
    name = ledger.relative_to(run_dir).as_posix()
    unit = edit_ledger(ledger, key, change)
    status, lines = verify(run_dir)
    assert status == 2 and lines[-1].startswith("TAMPERED") and name in lines[-1], lines

    rewrite_manifest_entry(run_dir, name)
    status, lines = verify(run_dir)
    assert status == 2 and lines[-1].startswith("INCONSISTENT") and unit in lines[-1], lines
