"""Shards and their merge: the split, the shard sessions, and a merge refused for every kind of conflict.

The shard directories are made once per module by real RES sessions on scripted models (two shards of one run, a
second shard 2/2 of another model, an unsharded run); each test works on copies, tampered where the case needs it
the way a hostile or mistaken user would (the ledger's identities, records moved between shards, a file changed
after its session), and checks that the merge names the first conflict in one line, exits 4 and writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.core.cli import main as cli_main
from benchmarks.core.manifest import write_manifest
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.selfcheck import run_protocol_once
from benchmarks.core.shard import MAX_SHARDS, ShardError, parse_shard, split
from benchmarks.res.spec import HERE as RES

#: A scripted model that a plugin registers (the merge decides without loading or looking up the model).
SCRIPTED = ("-p", "benchmarks.res.scenarios", "--model", "scripted-res-mixed", "-n", "0")


# --------------------------------------------------------------------------- the split


@given(st.text(max_size=30))
def test_a_shard_spec_parses_or_is_refused_in_one_line(text: str) -> None:
    try:
        shard = parse_shard(text)
    except ShardError as exc:
        assert "\n" not in str(exc) and "--shard" in str(exc)
        return
    assert 1 <= shard.index <= shard.count <= MAX_SHARDS
    assert parse_shard(str(shard)) == shard


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "1/4097", "a/b", "1/2/3", "", " /2"])
def test_bad_shard_specs_are_refused(text: str) -> None:
    with pytest.raises(ShardError):
        parse_shard(text)


@dataclass(frozen=True)
class _Unit:
    key: str


class _Batched:
    """A protocol's split-relevant part: a name, unit keys and batches of ``step`` units in order."""

    name = "toy"
    label = "toy"

    def __init__(self, step: int):
        self.step = step

    def unit_key(self, unit: _Unit) -> str:
        return unit.key

    def batches(self, run: Any, todo: list[_Unit]) -> Any:
        for start in range(0, len(todo), self.step):
            yield todo[start:start + self.step]


@given(st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=60), st.integers(1, 5), st.integers(1, 9))
def test_the_split_is_a_partition_of_whole_batches_in_run_order(keys: list[str], step: int, count: int) -> None:
    protocol = _Batched(step)
    units = [_Unit(k) for k in keys]
    parts = split(protocol, None, units, count)
    assert sorted(parts) == list(range(1, count + 1))
    assert sorted(u.key for part in parts.values() for u in part) == sorted(keys)
    batches = [tuple(b) for b in protocol.batches(None, units)]
    for part in parts.values():
        mine = [tuple(b) for b in protocol.batches(None, part)]
        assert set(mine) <= set(batches)  # whole batches of the unsharded run
        assert [keys.index(u.key) for u in part] == sorted(keys.index(u.key) for u in part)


def test_the_split_does_not_depend_on_the_process() -> None:
    """Two interpreters with different hash seeds give the same split of RES's units."""
    code = ("import json; from benchmarks.core.registry import find; from benchmarks.core import ProtocolRun, Run;"
            "from benchmarks.core.shard import split; from pathlib import Path; p = find('res');"
            "r = ProtocolRun(p, Run('res', 'x', Path('/nonexistent'), '2026-01-01T00:00:00+00:00', p.folder),"
            " model='scripted-oracle');"
            "print(json.dumps({k: [p.unit_key(u) for u in v] for k, v in split(p, r, r.units, 3).items()}))")
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SUITE_ROOT)}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        outs.append(json.loads(done.stdout))
    assert outs[0] == outs[1]
    assert all(outs[0][str(k)] for k in (1, 2, 3)) and sum(map(len, outs[0].values())) == 64


# --------------------------------------------------------------------------- shard sessions and merges


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/res/{s1,s2} (shards 1/2 and 2/2 of one run), s2-constant (shard 2/2 of another model), whole."""
    results = tmp_path_factory.mktemp("shards") / "results"
    for run_id, args in (("s1", (*SCRIPTED, "--shard", "1/2")), ("s2", (*SCRIPTED, "--shard", "2/2")),
                         ("s2-constant", ("--model", "scripted-constant", "-n", "0", "--shard", "2/2")),
                         ("whole", SCRIPTED)):
        done = run_protocol_once(RES, results, *args, "--run-id", run_id)
        assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return results


@pytest.fixture
def results(made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(made, copy)
    return copy


def merge(capsys: pytest.CaptureFixture[str], out: Path, *shards: Path) -> tuple[int, str]:
    capsys.readouterr()
    status = cli_main(["merge", "--no-decide", str(out), *map(str, shards)])
    return status, capsys.readouterr().err.strip()


def assert_refused(capsys: pytest.CaptureFixture[str], results: Path, shards: list[Path], *words: str) -> str:
    out = results / "res" / "merged"
    status, err = merge(capsys, out, *shards)
    assert status == 4, err
    assert err.count("\n") == 0 and err.startswith("preregbench merge: "), err
    for word in words:
        assert word in err, err
    assert not out.exists(), "a refused merge wrote the run directory"
    assert not [p for p in (results.iterdir()) if p.name.startswith(".merge-")], "a refused merge left a staging folder"
    return err


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in rows),
                    encoding="utf-8")


def test_a_shard_session_decides_nothing_and_says_so(made: Path) -> None:
    report = json.loads((made / "res" / "s1" / "report.json").read_text())
    entry = report["benchmark"]["protocols"]["res"]
    assert entry["status"] == "complete" and entry["shard"] == "1/2" and entry["classifications"] == {}
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert skipped and all("shard 1/2: " in json.dumps(t) for t in skipped)
    summary = json.loads((made / "res" / "s1" / "summary.json").read_text())
    assert summary["status"] == "shard" and set(summary["classifications"].values()) == {None}
    identity = lines(made / "res" / "s1" / "records.jsonl")[0]["identity"]
    assert identity["shard"] == "1/2" and identity["batch_size"] >= 1
    counts = [len(lines(made / "res" / name / "records.jsonl")) for name in ("s1", "s2")]
    assert sum(counts) == len(lines(made / "res" / "whole" / "records.jsonl")) and min(counts) > 0


def test_the_merge_command_writes_and_decides_the_run(made: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(made, results)
    out = results / "res" / "merged"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.cli", "merge", str(out), str(results / "res" / "s2"),
                           str(results / "res" / "s1")], capture_output=True, text=True, cwd=SUITE_ROOT, env=env,
                          check=False)
    whole = json.loads((results / "res" / "whole" / "summary.json").read_text())
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert summary["classifications"] == whole["classifications"]
    assert (out / "records.jsonl").read_bytes() == (results / "res" / "whole" / "records.jsonl").read_bytes()
    assert "preregbench run: res merged: " in done.stdout


def test_shards_of_different_models_are_refused(capsys, results: Path) -> None:
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "s2-constant"],
                   "s2-constant is not a shard of the run", "model: 'scripted-res-mixed' -> 'scripted-constant'")


def test_a_missing_unit_is_refused(capsys, results: Path) -> None:
    assert_refused(capsys, results, [results / "res" / "s1"], "is recorded by no shard",
                   "shard 2/2 is not among the inputs")


def test_an_overlapping_unit_is_refused(capsys, results: Path) -> None:
    twin = results / "res" / "s1-again"
    shutil.copytree(results / "res" / "s1", twin)
    assert_refused(capsys, results, [results / "res" / "s1", twin, results / "res" / "s2"], "is recorded by both",
                   "(shard 1/2)")


def _retouch(run_dir: Path, edit_line, edit_provenance=None) -> None:
    """Edit a shard's ledger lines (and provenance) and write its manifest again, as one who forges a shard would."""
    ledger = run_dir / "records.jsonl"
    write_lines(ledger, [row for row in (edit_line(r) for r in lines(ledger)) if row is not None])
    if edit_provenance is not None:
        path = run_dir / "provenance.json"
        path.write_text(json.dumps(edit_provenance(json.loads(path.read_text())), indent=2))
    write_manifest(run_dir)


def test_a_foreign_preregistration_is_refused(capsys, results: Path) -> None:
    forged = "f" * 64

    def line(row):
        row["identity"]["prereg_sha256"] = forged
        return row

    def provenance(record):
        record["identity"]["prereg_sha256"] = record["prereg_sha256"] = forged
        return record

    for name in ("s1", "s2"):
        _retouch(results / "res" / name, line, provenance)
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "s2"],
                   "preregistration with sha256 ffffffffffff", "(prereg_sha256)")


def test_a_foreign_unit_is_refused(capsys, results: Path) -> None:
    rows = lines(results / "res" / "s1" / "records.jsonl")
    extra = json.loads(json.dumps(rows[0]))
    extra["item_id"] = "no-such-item"
    _retouch(results / "res" / "s1", lambda row: row)
    write_lines(results / "res" / "s1" / "records.jsonl", rows + [extra])
    write_manifest(results / "res" / "s1")
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "s2"],
                   "unit 'no-such-item'", "is not a unit of the run")


def test_a_unit_in_the_wrong_shard_is_refused(capsys, results: Path) -> None:
    moved = lines(results / "res" / "s2" / "records.jsonl")[0]
    key = moved["item_id"]
    _retouch(results / "res" / "s2", lambda row: None if row["item_id"] == key else row)
    moved["identity"]["shard"] = "1/2"
    write_lines(results / "res" / "s1" / "records.jsonl", lines(results / "res" / "s1" / "records.jsonl") + [moved])
    write_manifest(results / "res" / "s1")
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "s2"],
                   f"unit {key!r}", "belongs to shard 2/2, not to 1/2")


def test_a_shard_changed_after_its_session_is_refused(capsys, results: Path) -> None:
    ledger = results / "res" / "s2" / "records.jsonl"
    text = ledger.read_text()
    assert '"generation":"' in text
    ledger.write_text(text.replace('"generation":"', '"generation":"edited ', 1))
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "s2"],
                   "records.jsonl differs from its manifest")


def test_an_unfinished_shard_is_refused(capsys, results: Path) -> None:
    (results / "res" / "s2" / "report.json").unlink()
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "s2"], "s2 is no finished shard",
                   "resume it")


def test_a_run_that_is_no_shard_is_refused(capsys, results: Path) -> None:
    assert_refused(capsys, results, [results / "res" / "s1", results / "res" / "whole"], "whole is not a shard")


@pytest.mark.parametrize("where", ["exists", "elsewhere"])
def test_a_bad_output_directory_is_refused(capsys, results: Path, where: str) -> None:
    out = results / "res" / "whole" if where == "exists" else results / "other" / "merged"
    status, err = merge(capsys, out, results / "res" / "s1", results / "res" / "s2")
    assert status == 4 and err.count("\n") == 0
    assert ("exists" in err) if where == "exists" else ("is not RESULTS/res/RUN_ID" in err)
    assert not (results / "other").exists()


def test_the_merged_run_lists_its_shards(capsys, results: Path) -> None:
    status, err = merge(capsys, results / "res" / "merged", results / "res" / "s1", results / "res" / "s2")
    assert status == 0, err
    provenance = json.loads((results / "res" / "merged" / "provenance.json").read_text())
    shards = provenance["extra"]["merged_from"]
    assert [s["shard"] for s in shards] == ["1/2", "2/2"]
    assert all(s["host"] and s["packages"] and s["started_at"] and s["ledger_sha256"] for s in shards)
    assert provenance["started_at"] == min(s["started_at"] for s in shards)
    assert "shard" not in provenance["identity"] and "batch_size" not in provenance["identity"]
    assert {tuple(sorted(row["identity"])) for row in lines(results / "res" / "merged" / "records.jsonl")} == {
        tuple(sorted(provenance["identity"]))}


def test_a_shard_resumes_only_as_the_same_shard(results: Path) -> None:
    done = run_protocol_once(RES, results, *SCRIPTED, "--shard", "2/2", "--run-id", "s1")
    assert done.returncode == 4
    assert "shard: '1/2' -> '2/2'" in done.stdout + done.stderr


@pytest.mark.parametrize("args, words", [
    (("--shard", "0/2"), "the shard index must be 1 to 2, got 0"),
    (("--shard", "9999/9999"), "the number of shards must be 1 to 4096"),
    (("--shard", "64/64"), "this shard holds no unit of the run"),
])
def test_bad_shards_stop_before_any_test(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    done = run_protocol_once(RES, tmp_path / "results", *SCRIPTED, *args)
    assert done.returncode == 4, done.stdout[-1500:]
    assert words in done.stdout + done.stderr
    assert not (tmp_path / "results" / "res").exists() or not any((tmp_path / "results" / "res").iterdir())


def test_verify_names_a_shard_instead_of_judging_it(made: Path) -> None:
    from benchmarks.core.verify import INCONSISTENT, verify

    outcome = verify(made / "res" / "s1")
    assert outcome.word == INCONSISTENT
    assert outcome.first.check == "shard" and "shard 1/2 of a run" in outcome.first.detail
    assert not [f for f in outcome.findings if f.check in ("rescorer", "figures")]
