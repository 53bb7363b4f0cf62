"""``preregbench compare`` on two CWR runs: F and C are compared over base pairs, not over replicas.

Run A is the scripted oracle.  Run B holds A's records with every replica of four base pairs failed under F
(the replicas of a base agree, as replicas sharing world, motif and demonstrations may); so B's F table has
as much evidence as four discordant bases of eight, not twelve independent pairs of 24.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core.paired import tango_interval
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.stats import paired_difference_interval
from benchmarks.cwr.protocol import base_pair


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=SUITE_ROOT, env=env, text=True,
                          capture_output=True, timeout=900)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    results = tmp_path_factory.mktemp("cwr-compare")
    done = cli("run", "cwr", "--model", "scripted-oracle", "--results-dir", str(results / "oracle"),
               "-p", "no:cacheprovider", "-p", "no:randomly", "-q")
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    (oracle,) = sorted((results / "oracle" / "cwr").iterdir())
    failed = results / "failed"
    failed.mkdir()
    shutil.copy(oracle / "provenance.json", failed / "provenance.json")
    lines = [json.loads(line) for line in (oracle / "records.jsonl").read_text().splitlines()]
    bases = sorted({base_pair(r["pair_id"]) for r in lines if r["condition"] == "F"})
    chosen = bases[:4]
    for r in lines:
        if r["condition"] == "F" and base_pair(r["pair_id"]) in chosen:
            r.update(correct=False, check_status="INVALID", generation="")
    (failed / "records.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    return oracle, failed, bases


def test_f_and_c_are_compared_by_the_clustered_interval(runs: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    oracle, failed, bases = runs
    out = tmp_path / "compare.json"
    done = cli("compare", str(oracle), str(failed), "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "F.accuracy" in done.stdout and "C.accuracy" in done.stdout
    f_line = next(line for line in done.stdout.splitlines() if line.startswith("F.accuracy"))
    assert f_line.split()[7] == "8", f_line  # the clusters column: 8 base pairs
    measures = {m["measure"]: m for m in json.loads(out.read_text())["measures"]}
    f, c = measures["F.accuracy"], measures["C.accuracy"]
    assert len(bases) == 8 and f["units"] == c["units"] == 24
    assert f["table"] == {"both": 12, "a_only": 12, "b_only": 0, "neither": 0}
    expected = tango_interval(4, 0, 8)  # the base-level data: 4 of 8 bases discordant
    assert f["interval"]["method"] == c["interval"]["method"] == "tango-score-rao-scott"
    assert f["interval"]["clusters"] == 8 and f["interval"]["design_effect"] == pytest.approx(3.0)
    assert (f["interval"]["low"], f["interval"]["high"]) == pytest.approx((expected.low, expected.high), abs=1e-9)
    replica = paired_difference_interval(12, 12, 0, 0)
    assert f["interval"]["low"] < replica.low  # treating the 24 replicas as independent would overclaim
    assert c["interval"]["low"] < 0.0 < c["interval"]["high"]  # a concordant table keeps a positive width
    for name, m in measures.items():  # controls are independent units: Newcombe, as before
        if name not in ("F.accuracy", "C.accuracy"):
            assert "clusters" not in m["interval"] and m["interval"]["method"] == replica.method, name
