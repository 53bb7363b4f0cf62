"""``preregbench compare``: paired tables, the exact McNemar test, and runs that cannot be compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from benchmarks.core.compare import paired_table
from benchmarks.core.paired import mcnemar_exact
from benchmarks.core.rundir import SUITE_ROOT


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=SUITE_ROOT, env=env, text=True,
                          capture_output=True, timeout=600)


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_exact_is_scipys_two_sided_binomial_test_of_the_discordant_counts(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert mcnemar_exact(b, c) == mcnemar_exact(c, b)


def test_mcnemar_exact_refuses_counts_that_are_not_counts() -> None:
    for bad in ((-1, 2), (1.5, 2), (True, 1)):
        with pytest.raises(ValueError):
            mcnemar_exact(*bad)


def test_a_paired_table_counts_only_units_both_runs_recorded() -> None:
    a = {"u1": True, "u2": True, "u3": False, "u4": False, "only-a": True}
    b = {"u1": True, "u2": False, "u3": True, "u4": False, "only-b": False}
    m = paired_table("x", a, b)
    assert (m.units, m.both, m.first_only, m.second_only, m.neither) == (4, 1, 1, 1, 1)
    d = m.as_dict()
    assert d["accuracy_a"] == d["accuracy_b"] == 0.5 and d["difference"] == 0.0 and d["mcnemar_exact_p"] == 1.0
    assert d["interval"]["low"] < 0.0 < d["interval"]["high"]


@pytest.fixture(scope="module")
def res_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """An oracle run and a seeded random run of RES on the preregistered fixtures, and an oracle run on another set."""
    results = tmp_path_factory.mktemp("compare")
    made = []
    for name, extra in (("oracle", ()), ("random", ()), ("balanced", ("--res-fixture-set", "balanced"))):
        model = "scripted-random" if name == "random" else "scripted-oracle"
        done = cli("run", "res", "--model", model, "--results-dir", str(results / name), "-p", "no:cacheprovider",
                   "-p", "no:randomly", "-q", *extra)
        assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
        (run_dir,) = sorted((results / name / "res").iterdir())
        made.append(run_dir)
    return made[0], made[1], made[2]


def test_compare_prints_the_table_and_writes_compare_json_the_records_bear_out(
        res_runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    oracle, noisy, _ = res_runs
    out = tmp_path / "compare.json"
    done = cli("compare", str(oracle), str(noisy), "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "McNemar p" in done.stdout and "five_factor.logit_accuracy" in done.stdout
    result = json.loads(out.read_text())
    rows = {}
    for run_dir in (oracle, noisy):  # the records, read here without the suite's code
        for line in (run_dir / "records.jsonl").read_text().splitlines():
            record = json.loads(line)
            rows.setdefault(run_dir, {})[record["item_id"]] = record
    measures = {m["measure"]: m for m in result["measures"]}
    assert set(measures) == {f"{c}.{k}" for c in ("five_factor", "minimal_owner_indexed")
                             for k in ("logit_accuracy", "generated_accuracy")}
    for condition in ("five_factor", "minimal_owner_indexed"):
        m = measures[f"{condition}.logit_accuracy"]
        ids = [i for i in rows[oracle] if i.startswith(condition + ":")]
        right_a = {i for i in ids if rows[oracle][i]["logit_choice"] == rows[oracle][i]["ideal"]}
        right_b = {i for i in ids if rows[noisy][i]["logit_choice"] == rows[noisy][i]["ideal"]}
        assert m["units"] == len(ids) == 32
        assert m["table"] == {"both": len(right_a & right_b), "a_only": len(right_a - right_b),
                              "b_only": len(right_b - right_a), "neither": len(set(ids) - right_a - right_b)}
        assert m["accuracy_a"] == 1.0 and m["accuracy_b"] == len(right_b) / 32 < 1.0
        assert m["interval"]["low"] <= m["difference"] <= m["interval"]["high"]
        b, c = m["table"]["a_only"], m["table"]["b_only"]
        assert m["mcnemar_exact_p"] == pytest.approx(scipy_stats.binomtest(b, b + c, 0.5).pvalue)


def test_runs_on_different_fixture_hashes_are_refused_with_the_reason(res_runs: tuple[Path, Path, Path],
                                                                     tmp_path: Path) -> None:
    oracle, _, balanced = res_runs
    done = cli("compare", str(oracle), str(balanced), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 4 and done.stderr.count("\n") == 1
    assert "different fixtures" in done.stderr and not (tmp_path / "c.json").exists()


def test_what_is_not_a_pair_of_runs_is_refused_in_one_line(res_runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    oracle, noisy, _ = res_runs
    for args in ((str(oracle), str(tmp_path / "missing")), (str(oracle), str(tmp_path)),
                 (str(oracle), str(noisy), "--json", str(oracle / "compare.json")), (str(oracle),)):
        done = cli("compare", *args)
        assert done.returncode == 4, (args, done.stdout, done.stderr)
    assert not (oracle / "compare.json").exists()


def test_a_linked_run_or_a_unit_recorded_twice_is_refused_in_one_line(res_runs: tuple[Path, Path, Path],
                                                                      tmp_path: Path) -> None:
    oracle, noisy, _ = res_runs
    linked = tmp_path / "linked"
    linked.symlink_to(noisy, target_is_directory=True)
    done = cli("compare", str(oracle), str(linked))
    assert done.returncode == 4 and done.stderr.count("\n") == 1 and "symbolic link" in done.stderr, done.stderr
    twice = tmp_path / "twice"
    twice.mkdir()
    for path in noisy.iterdir():
        if path.is_file():
            (twice / path.name).write_bytes(path.read_bytes())
    ledger = twice / "records.jsonl"
    ledger.write_bytes(ledger.read_bytes() + ledger.read_bytes().splitlines(keepends=True)[0])
    done = cli("compare", str(oracle), str(twice))
    assert done.returncode == 4 and done.stderr.count("\n") == 1 and "already recorded" in done.stderr, done.stderr


def test_a_protocol_folder_only_unpacked_into_the_checkout_is_never_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A results bundle unpacked inside a checkout may carry a protocol folder of its own beside its runs; compare
    loads an unregistered protocol only from a folder whose prereg and protocol.py git tracks there."""
    from benchmarks.core.compare import CompareRefused, _protocol

    root = tmp_path / "checkout"
    folder = root / "results" / "bundled"
    folder.mkdir(parents=True)
    marker = tmp_path / "ran"
    (folder / "prereg.toml").write_text("[protocol]\nname = 'bundled'\n")
    (folder / "protocol.py").write_text(f"open({str(marker)!r}, 'w').write('payload')\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "README.md").write_text("a checkout\n")
    subprocess.run(["git", "add", "README.md"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "start"], cwd=root, check=True, env={**os.environ, **env})
    monkeypatch.chdir(root)
    with pytest.raises(CompareRefused, match="whose prereg.toml and protocol.py git tracks"):
        _protocol("bundled", "results/bundled/prereg.toml")
    assert not marker.exists()
    # a link to a tracked file does not stand in for protocol.py either
    (folder / "protocol.py").unlink()
    (root / "elsewhere.py").write_text("x = 1\n")
    (folder / "protocol.py").symlink_to(root / "elsewhere.py")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    with pytest.raises(CompareRefused, match="git tracks"):
        _protocol("bundled", "results/bundled/prereg.toml")
    assert not marker.exists()
