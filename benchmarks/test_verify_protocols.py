"""``preregbench verify`` on a finished run of each built-in protocol.

For each protocol a scripted run (a non-preregistered model, so at best
EXPLORATORY; for the imported protocol, the committed lm-eval log, older than
its prereg's commit) is verified three times: as written (every check but the
deviation and the tree passes: no TAMPERED or INCONSISTENT line), after one
primitive field of its ledger is changed (TAMPERED, naming the ledger file),
and after the same change with the manifest entry rewritten to match (the
rescorer disagrees: INCONSISTENT, naming the unit).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from benchmarks.core import registry
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


def imported_run(pytester: pytest.Pytester, tmp_path: Path) -> Path:
    from benchmarks.core.selfcheck import read_report, run_protocol
    from benchmarks.imported.importers import import_log

    import_log("lm-eval", SUITE_ROOT / "benchmarks" / "imported" / "tests" / "data" / "lmeval" / "smollm2",
               tmp_path / "import")
    results = tmp_path / "results"
    result = run_protocol(pytester, SUITE_ROOT / "benchmarks" / "imported", results,
                          f"--imported-source={tmp_path / 'import'}")
    return read_report(results, "imported", result)[1]


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


def new_score(record: dict[str, Any]) -> bool:
    record["scores"]["acc"] = 1.0 - record["scores"]["acc"]
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
    "imported": (imported_run, "records.jsonl", "unit", new_score),
}


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_verify_names_a_changed_ledger_and_the_rescorer_names_the_unit(pytester: pytest.Pytester, tmp_path: Path,
                                                                       protocol: str) -> None:
    make, ledger_glob, key, change = CASES[protocol]
    run_dir = make(pytester, tmp_path)

    declared = registry.find(protocol)
    shown = json.loads((run_dir / declared.summary_file).read_text(encoding="utf-8"))["metrics"]
    assert set(shown) == set(declared.metric_names()), "metric_names() is not what the run computed"

    status, lines = verify(run_dir)
    assert status == 1, lines  # a scripted model is a deviation (an imported log predates this checkout's commit)
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


def forge_file(run_dir: Path, name: str, text: str) -> None:
    """Write ``name`` and make ``grading.json`` and ``manifest.json`` agree with it (a consistent forgery)."""
    (run_dir / name).write_text(text, encoding="utf-8")
    index = json.loads((run_dir / "grading.json").read_text(encoding="utf-8"))
    index["files"][name] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    (run_dir / "grading.json").write_text(json.dumps(index), encoding="utf-8")
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    if not any(entry["path"] == name for entry in manifest["files"]):
        manifest["files"].append({"path": name, "size": 0, "sha256": ""})
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    rewrite_manifest_entry(run_dir, name)
    rewrite_manifest_entry(run_dir, "grading.json")


def test_verify_runs_no_reference_interpreter_the_run_directory_changed(pytester: pytest.Pytester,
                                                                         tmp_path: Path) -> None:
    """CWR's rescorer grades through the interpreters a run copies from worlds/: verify compares each copy with
    the repository at the run's commit first, and a changed copy is TAMPERED without being executed."""
    run_dir = cwr_run(pytester, tmp_path)
    marker = tmp_path / "payload-ran"
    original = (run_dir / "grading" / "reference.py").read_text(encoding="utf-8")
    payload = f"\nimport pathlib as _p\n_p.Path({str(marker)!r}).write_text('ran')\n"
    forge_file(run_dir, "grading/reference.py", original + payload)

    status, lines = verify(run_dir)
    assert status == 2 and lines[-1].startswith("TAMPERED"), lines
    assert "grading/reference.py" in lines[-1] and "differs from worlds/_reference.py" in lines[-1], lines
    assert not marker.exists(), "verify executed the run directory's changed reference interpreter"

    # The payload is live: the rescorer run by hand on the run directory (its documented use) executes it.
    subprocess.run([sys.executable, "-S", "-I", str(SUITE_ROOT / "benchmarks" / "cwr" / "rescore.py"), str(run_dir),
                    "--prereg", str(SUITE_ROOT / "benchmarks" / "cwr" / "prereg.toml")], capture_output=True,
                   timeout=600, check=False)
    assert marker.exists()


def test_the_cwr_rescorer_executes_no_interpreter_but_the_two_a_run_copies(pytester: pytest.Pytester,
                                                                            tmp_path: Path) -> None:
    run_dir = cwr_run(pytester, tmp_path)
    marker = tmp_path / "payload-ran"
    forge_file(run_dir, "grading/other.py", f"import pathlib as _p\n_p.Path({str(marker)!r}).write_text('ran')\n")
    index = json.loads((run_dir / "grading.json").read_text(encoding="utf-8"))
    index["interpreter"] = "grading/other.py"
    (run_dir / "grading.json").write_text(json.dumps(index), encoding="utf-8")
    rewrite_manifest_entry(run_dir, "grading.json")

    done = subprocess.run([sys.executable, "-S", "-I", str(SUITE_ROOT / "benchmarks" / "cwr" / "rescore.py"),
                           str(run_dir), "--prereg", str(SUITE_ROOT / "benchmarks" / "cwr" / "prereg.toml")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode not in (0, 1) and "'grading/other.py'" in done.stderr, done.stderr
    assert not marker.exists()
    status, lines = verify(run_dir)
    assert status == 2 and lines[-1].startswith("TAMPERED") and "would execute 'grading/other.py'" in lines[-1], lines
    assert not marker.exists()
