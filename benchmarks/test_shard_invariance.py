"""Sharding cannot change a verdict: for every protocol that runs scripted models, 1, 2 and 4 shards merged give
the unsharded run's records (volatile fields aside) and classification, and ``verify`` says the same of both.

Each case runs the protocol's real sessions (in this process, through ``pytester``): the unsharded run, every
shard (``--shard K/N``), the merge (:func:`benchmarks.core.merge.prepare` and ``write``), and the session that
decides the merged run.  In the two-shard case the second shard is killed after its first record (its ledger
cut mid-line, the files a finished session writes removed, as a SIGKILL leaves them) and resumed under its run
id before the merge.  RES runs in the default session; CWR and ladder, which take longer, with ``-m slow``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.merge import prepare, write
from benchmarks.core.registry import find
from benchmarks.core.selfcheck import run_protocol
from benchmarks.core.verify import verify

RUN_LIBRARIES_FIRST = ("benchmarks.res.scenarios", "benchmarks.cwr.scripted", "benchmarks.ladder.scenarios",
                       "benchmarks.ladder.worker")

#: Protocol -> the arguments of its scripted runs (a scripted model that errs, a small run).
CASES = {
    "res": ("-p", "benchmarks.res.scenarios", "--model", "scripted-res-mixed"),
    "cwr": ("-p", "benchmarks.cwr.scripted", "--model", "scripted-cwr-most-c", "--cwr-units-per-condition", "5"),
    "ladder": ("-p", "benchmarks.ladder.scenarios", "--model", "ladder-worker-a0.984-seed8",
               "--ladder-units-per-tier", "3"),
}
#: Files a session writes when it ends: a killed session leaves none of them.
SESSION_END_FILES = ("summary.json", "report.json", "report.html", "report.md", "manifest.json")


def session(pytester: pytest.Pytester, protocol: Any, results: Path, run_id: str, *args: str) -> Path:
    result = run_protocol(pytester, protocol.folder, results, *CASES[protocol.name], "--run-id", run_id, *args,
                          in_process=True)
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    return results / protocol.name / run_id


def stable_records(protocol: Any, run_dir: Path) -> list[dict[str, Any]]:
    """The ledger's lines without the protocol's volatile fields."""
    ledger = protocol.find_ledger(run_dir)
    assert ledger is not None, run_dir
    lines = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in line.items() if k not in protocol.volatile_fields} for line in lines]


def classifications(results: Path, protocol: str, run_id: str) -> dict[str, Any]:
    summary = json.loads((results / protocol / run_id / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "complete", summary.get("classification_problems")
    return summary["classifications"]


def verify_words(run_dir: Path) -> list[tuple[str, str]]:
    return [(f.word, f.check) for f in verify(run_dir).findings]


def kill_after_first_record(protocol: Any, run_dir: Path) -> None:
    """What a SIGKILL after the first record leaves: one whole line and a torn one, no session-end files."""
    ledger = protocol.find_ledger(run_dir)
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 2, "the shard needs two units for this case"
    ledger.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])
    for name in SESSION_END_FILES:
        (run_dir / name).unlink(missing_ok=True)


@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.slow] if name != "res" else [])
                                  for name in sorted(CASES)])
def test_shards_merged_equal_the_unsharded_run(pytester: pytest.Pytester, tmp_path: Path, name: str) -> None:
    protocol = find(name)
    results = tmp_path / "results"
    whole = session(pytester, protocol, results, "whole")
    expected = stable_records(protocol, whole)
    expected_classes = classifications(results, name, "whole")
    expected_verify = verify_words(whole)
    for count in (1, 2, 4):
        shard_dirs = []
        for index in range(1, count + 1):
            run_id = f"n{count}-shard{index}"
            shard_dir = session(pytester, protocol, results, run_id, "--shard", f"{index}/{count}")
            if count == 2 and index == 2:
                kill_after_first_record(protocol, shard_dir)
                assert read_report_status(shard_dir) is None
                session(pytester, protocol, results, run_id, "--shard", f"{index}/{count}")
            shard_dirs.append(shard_dir)
        merged_id = f"merged-{count}"
        found, run, shards, records = prepare(results / name / merged_id, shard_dirs[::-1])
        write(found, run, shards, records)
        session(pytester, protocol, results, merged_id)
        merged = results / name / merged_id
        got = stable_records(protocol, merged)
        assert got == expected, f"{count} shard(s): merged records differ from the unsharded run's"
        assert classifications(results, name, merged_id) == expected_classes, f"{count} shard(s)"
        assert verify_words(merged) == expected_verify, f"{count} shard(s): verify says otherwise of the merged run"
        provenance = json.loads((merged / "provenance.json").read_text(encoding="utf-8"))
        assert [s["shard"] for s in provenance["extra"]["merged_from"]] == [f"{k}/{count}" for k in range(1, count + 1)]
        assert "shard" not in provenance["identity"]


def read_report_status(run_dir: Path) -> str | None:
    path = run_dir / "report.json"
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))["benchmark"]["protocols"][run_dir.parent.name]["status"]
