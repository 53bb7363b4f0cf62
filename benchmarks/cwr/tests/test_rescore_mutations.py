"""The rescorer re-grades a finished run from its primitive fields: one changed field, one disagreement naming its unit.

One scripted run (``scripted-cwr-most-c``: C wrong on a quarter of the pairs)
is measured in a fresh pytest process, once for the module; every check works on a copy of its run
directory with one primitive field changed: an answer's text in
``records.jsonl``, a byte of a world file under ``grading/``, a recorded
expected answer, a unit's input in ``grading.json``, the recorded copy
baseline, a demonstration.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.selfcheck import read_report, run_protocol_once
from benchmarks.cwr.protocol import HERE, PREREG
from canonical_hash import sha256_text

MODEL = "scripted-cwr-most-c"
LABEL = "WITNESS_ONLY_PAIRS_IN_CLAIM"  # the showcase pair set holds witness-only pairs


def _rescore(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", "-I", str(HERE / "rescore.py"), str(run_dir)],
                          capture_output=True, text=True, cwd="/", check=False)


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def _write_records(run_dir: Path, records: list[dict[str, Any]]) -> None:
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def _set_generation(record: dict, text: str) -> None:
    """Change a record's answer as a careful tamperer would: with the answer's length and hash."""
    record.update(generation=text, generation_chars=len(text), generation_sha256=sha256_text(text))


def _copy(run_dir: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / name))


def _disagreeing(done: subprocess.CompletedProcess) -> tuple[set[str], set[str]]:
    """(units, fields) the rescorer names; asserts it exited 1 with the contract's shape."""
    assert done.returncode == 1, done.stdout + done.stderr
    found = json.loads(done.stdout)["disagreements"]
    assert found and all(set(d) == {"unit", "field", "recorded", "recomputed"} for d in found)
    assert all(d["recorded"] != d["recomputed"] for d in found)
    return {d["unit"] for d in found}, {d["field"] for d in found}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one run both tests read; each changes only its own copies."""
    results = tmp_path_factory.mktemp("cwr-mutations") / "results"
    done = run_protocol_once(HERE, results, "--model", MODEL)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    report, found = read_report(results, "cwr")
    assert report["benchmark"]["protocols"]["cwr"]["classifications"]["cwr"]["outcome"]["label"] == LABEL
    return found


def test_rescorer_regrades_a_run_and_names_every_changed_unit(run_dir: Path, tmp_path: Path) -> None:
    index = json.loads((run_dir / "grading.json").read_text())
    records = _records(run_dir)
    by_id = {r["item_id"]: r for r in records}
    assert set(index["units"]) == set(by_id)  # every unit has its grading entry

    # unchanged: exit 0, no disagreement, the recorded classification
    done = _rescore(run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["disagreements"] == [] and report["classification"] == LABEL
    summary = json.loads((run_dir / "summary.json").read_text())
    assert report["classification"] == summary["classifications"]["cwr"]
    assert report["metrics"]["baselines.copy_flagged_pairs"] == 0

    # a P answer's text: right -> wrong
    copy = _copy(run_dir, tmp_path, "p-answer")
    changed = _records(copy)
    p = next(r for r in changed if r["condition"] == "P" and r["kind"] == "verdict" and r["correct"])
    other = "ILLEGAL" if p["expected"]["verdict"] == "LEGAL" else "LEGAL"
    _set_generation(p, f"ANSWER: {other}")
    _write_records(copy, changed)
    units, fields = _disagreeing(_rescore(copy))
    assert units == {p["item_id"]} and fields == {"parsed", "correct"}

    # the same edit without the hash and length of the answer: those are named too
    copy = _copy(run_dir, tmp_path, "p-answer-unhashed")
    changed = _records(copy)
    p = next(r for r in changed if r["item_id"] == p["item_id"])
    p["generation"] = f"ANSWER: {other}"
    _write_records(copy, changed)
    units, fields = _disagreeing(_rescore(copy))
    assert units == {p["item_id"]} and fields >= {"parsed", "correct", "generation_sha256"}

    # an answer kept whole but longer than the preregistered limit should have been cut and coded
    copy = _copy(run_dir, tmp_path, "p-answer-long")
    changed = _records(copy)
    p = next(r for r in changed if r["item_id"] == p["item_id"])
    _set_generation(p, p["generation"] + "\n" + "x" * PREREG.values.measurement.max_answer_chars)
    _write_records(copy, changed)
    units, fields = _disagreeing(_rescore(copy))
    assert units == {p["item_id"]} and {"generation_error", "parse_status", "parsed", "correct"} <= fields

    # an F answer's text: a valid artifact loses its last step
    copy = _copy(run_dir, tmp_path, "f-answer")
    changed = _records(copy)
    f = next(r for r in changed if r["condition"] == "F" and r["check_status"] == "VALID")
    _set_generation(f, "".join(line + "\n" for line in f["generation"].splitlines()[:-1]) or "nothing\n")
    _write_records(copy, changed)
    units, fields = _disagreeing(_rescore(copy))
    assert units == {f["item_id"]} and {"parsed", "check_status", "correct"} <= fields

    # one byte of a world file: a replica's F target (graded by that unit alone) gets a step cap of 1
    replica = next(r for r in records if r["condition"] == "F" and "~r" in r["item_id"] and r["check_status"] == "VALID")
    world_file = index["units"][replica["item_id"]]["world"]
    copy = _copy(run_dir, tmp_path, "world-byte")
    data = bytearray((copy / world_file).read_bytes())
    at = data.index(b'"max_steps": ') + len(b'"max_steps": ')
    assert data[at:at + 1].isdigit() and not data[at + 1:at + 2].isdigit() and data[at] > ord("1")
    data[at] = ord("1")
    (copy / world_file).write_bytes(bytes(data))
    done = _rescore(copy)
    units, fields = _disagreeing(done)
    assert units == {replica["item_id"]}
    assert {"world_sha256", "check_status", "check_reason", "correct"} <= fields
    regraded = [d for d in json.loads(done.stdout)["disagreements"] if d["field"] == "check_reason"]
    assert regraded[0]["recomputed"] == "over_budget"

    # a recorded expected answer: re-derived from the world and the unit's inputs, not read
    copy = _copy(run_dir, tmp_path, "expected")
    changed = _records(copy)
    e = next(r for r in changed if r["condition"] == "E" and r["expected"]["verdict"] == "ILLEGAL")
    e["expected"] = {**e["expected"], "step": e["expected"]["step"] + 1}
    _write_records(copy, changed)
    units, fields = _disagreeing(_rescore(copy))
    assert units == {e["item_id"]} and "expected" in fields

    # a unit's input in grading.json: the probe no longer the one the prompt showed, and the expected answer follows it
    copy = _copy(run_dir, tmp_path, "probe")
    grading = json.loads((copy / "grading.json").read_text())
    probe = next(u for u, entry in sorted(grading["units"].items())
                 if u.startswith("P:") and by_id[u]["kind"] == "verdict" and by_id[u]["expected"]["verdict"] == "LEGAL")
    grading["units"][probe]["probe"] = "no_such_primitive()"
    (copy / "grading.json").write_text(json.dumps(grading))
    units, fields = _disagreeing(_rescore(copy))
    assert units == {probe} and {"inputs_in_prompt", "expected"} <= fields

    # the copy baseline is recomputed: a recorded flag is a disagreement, and the verdict stays the rescorer's
    copy = _copy(run_dir, tmp_path, "copy-flag")
    baselines = json.loads((copy / "baselines.json").read_text())
    pair_id = sorted(baselines["pairs"])[0]
    baselines["pairs"][pair_id]["sides"][1]["copy_solves"] = ["claimed"]
    (copy / "baselines.json").write_text(json.dumps(baselines))
    done = _rescore(copy)
    units, fields = _disagreeing(done)
    assert units == {f"C:{pair_id}"} and fields == {"copy_baseline_solves_target"}
    assert json.loads(done.stdout)["classification"] == LABEL

    # a demonstration that is a valid target solution: the rescorer's copy baseline flags the pair
    copy = _copy(run_dir, tmp_path, "copy-demo")
    grading = json.loads((copy / "grading.json").read_text())
    pair_id = sorted(grading["pairs"])[0]
    side = grading["pairs"][pair_id]["F"]
    solution = by_id[side["unit"]]
    assert solution["check_status"] == "VALID"
    side["demonstrations"] = [{"world": side["target"], "steps": solution["parsed"].splitlines()}]
    (copy / "grading.json").write_text(json.dumps(grading))
    done = _rescore(copy)
    units, fields = _disagreeing(done)
    assert units == {side["unit"]} and fields == {"copy_baseline_solves_target"}
    assert json.loads(done.stdout)["metrics"]["baselines.copy_flagged_pairs"] == 1

    # a recorded greedy verdict: each greedy sequence is replayed on its target, and the share follows the replay
    copy = _copy(run_dir, tmp_path, "greedy")
    baselines = json.loads((copy / "baselines.json").read_text())
    pair_id, row = next((k, v) for k, v in sorted(baselines["pairs"].items())
                        if v["sides"][0]["greedy_status"] == "VALID")
    row["sides"][0]["greedy_status"] = "INVALID"
    (copy / "baselines.json").write_text(json.dumps(baselines))
    done = _rescore(copy)
    units, fields = _disagreeing(done)
    assert units == {f"F:{pair_id}"} and fields == {"greedy_status"}
    assert json.loads(done.stdout)["metrics"]["baselines.greedy_solved_share"] == report["metrics"][
        "baselines.greedy_solved_share"] > 0


def test_rescorer_refuses_an_unreadable_run_directory(run_dir: Path, tmp_path: Path) -> None:
    index = json.loads((run_dir / "grading.json").read_text())
    world_file = next(iter(index["units"].values()))["world"]
    cases = {
        "no-grading": lambda d: (d / "grading.json").unlink(),
        "world-not-json": lambda d: (d / world_file).write_text("{not json"),
        "world-missing": lambda d: (d / world_file).unlink(),
        "interpreter-changed": lambda d: (d / index["interpreter"]).write_text("raise SystemExit(0)\n"),
        "ledger-not-json": lambda d: (d / "records.jsonl").write_text("{\n"),
        "outside-path": lambda d: (d / "grading.json").write_text(
            json.dumps({**index, "interpreter": "../elsewhere.py"})),
    }
    for name, damage in cases.items():
        copy = _copy(run_dir, tmp_path, name)
        damage(copy)
        done = _rescore(copy)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, (name, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.startswith("rescore: "), (name, done.stderr)
