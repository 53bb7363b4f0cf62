"""``preregbench verify``, ``manifest.json`` and the generated rescorer test, end to end through pytester.

Each test builds a git repository of its own holding a protocol scaffolded by ``preregbench new``
(``protocols/toy``, its preregistered model the scripted oracle, its prereg hash frozen in
``snapshots/``), commits it, runs it, and then changes one thing: a byte of the ledger, a primitive
field with its manifest entry, the tree, the model, the prereg's commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core.manifest import MANIFEST_FILE, ManifestError, build_manifest
from benchmarks.core.verify import SNAPSHOT_FILE, snapshot_hashes

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed; verify reads a repository")

GIT_ENV = {"GIT_AUTHOR_NAME": "preregbench test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "preregbench test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}


def git(folder: Path, *args: str, **env: str) -> str:
    done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV, **env})
    return done.stdout


def freeze(project: Path) -> None:
    """Write the project's frozen-material snapshot: the toy prereg's sha256, as the suite's drift test stores it."""
    digest = hashlib.sha256((project / "protocols" / "toy" / "prereg.toml").read_bytes()).hexdigest()
    snapshot = project / SNAPSHOT_FILE
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write_text("# serializer version: 1\n# name: test_preregistrations_are_frozen\n  dict({\n"
                        f"    'protocols/toy/prereg.toml': '{digest}',\n  }})\n# ---\n")


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """A git repository holding the scaffolded protocol ``protocols/toy``, committed, its prereg frozen."""
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\n'
        'addopts = ["-p", "no:cacheprovider", "-p", "pytester", "-m", "not cpu and not gpu"]\n')
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    (pytester.path / ".gitignore").write_text("results/\n__pycache__/\n")
    (pytester.path / "protocols").mkdir()
    (pytester.path / "protocols" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.new", "toy", "--into", "protocols"],
                          cwd=pytester.path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    prereg = pytester.path / "protocols" / "toy" / "prereg.toml"
    text = prereg.read_text()
    assert 'id = "smollm2-135m-instruct"' in text
    prereg.write_text(text.replace('id = "smollm2-135m-instruct"', 'id = "scripted-oracle"'))
    freeze(pytester.path)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "the toy protocol, preregistered")
    return pytester.path


def run_toy(pytester: pytest.Pytester, *args: str) -> Path:
    """Run the toy protocol; its one run directory."""
    result = pytester.runpytest_subprocess("protocols/toy", "-m", "cpu", "-p", "no:randomly", *args)
    runs = sorted((pytester.path / "results" / "toy").glob("*/report.json"))
    assert len(runs) == 1, result.stdout.str() + result.stderr.str()
    return runs[0].parent


def verify(cwd: Path, *args: str | Path) -> tuple[int, list[str], str]:
    """``python -m benchmarks.core.verify ARGS`` in ``cwd`` (the project): exit status, stdout lines, stderr."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.verify", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines(), done.stderr


def rewrite_manifest_entry(run_dir: Path, name: str) -> None:
    """Make ``manifest.json`` agree with the file ``name`` as it is now (a consistent forgery)."""
    manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    data = (run_dir / name).read_bytes()
    for entry in manifest["files"]:
        if entry["path"] == name:
            entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    (run_dir / MANIFEST_FILE).write_text(json.dumps(manifest))


# --------------------------------------------------------------------------- VERIFIED


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_unchanged_run_is_verified(pytester: pytest.Pytester, project: Path, workers: str) -> None:
    run_dir = run_toy(pytester, "-n", workers)
    manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    listed = [entry["path"] for entry in manifest["files"]]
    on_disk = sorted(path.relative_to(run_dir).as_posix() for path in run_dir.rglob("*")
                     if path.is_file() and path.name != MANIFEST_FILE and not path.name.endswith(".lock"))
    assert listed == on_disk
    assert {"fixtures.json", "provenance.json", "records.jsonl", "report.json", "summary.json", "progress.json",
            "report.html", "report.md"} <= set(listed)
    for entry in manifest["files"]:
        data = (run_dir / entry["path"]).read_bytes()
        assert entry["size"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    status, lines, stderr = verify(project, run_dir)
    assert status == 0, "\n".join(lines) + stderr
    assert lines[-1] == "VERIFIED"
    checks = [line.split()[1].rstrip(":") for line in lines[:-1]]
    assert {"manifest", "git", "prereg", "fixtures", "rescorer", "model", "deviations"} <= set(checks)
    assert all(line.startswith("ok ") for line in lines[:-1]), lines
    assert any("derives gate = PASSED" in line for line in lines)

    completed = subprocess.run([sys.executable, "-m", "benchmarks.core.completed", "results/toy"], cwd=project,
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0 and completed.stdout.splitlines()[-1] == "VERIFIED", completed.stdout


# --------------------------------------------------------------------------- TAMPERED and INCONSISTENT


def test_one_byte_of_the_ledger_changed_is_tampered(pytester: pytest.Pytester, project: Path) -> None:
    run_dir = run_toy(pytester)
    ledger = run_dir / "records.jsonl"
    data = bytearray(ledger.read_bytes())
    data[data.index(b'"generation":"') + len(b'"generation":"')] ^= 0x01  # 'A' <-> '@', 'B' <-> 'C'
    ledger.write_bytes(bytes(data))
    status, lines, _ = verify(project, run_dir)
    assert status == 2
    assert lines[-1].startswith("TAMPERED: records.jsonl: field sha256: "), lines


@pytest.mark.parametrize("change", ["added", "removed"])
def test_a_file_added_to_or_removed_from_the_run_is_tampered(pytester: pytest.Pytester, project: Path,
                                                             change: str) -> None:
    run_dir = run_toy(pytester)
    if change == "added":
        (run_dir / "notes.txt").write_text("a later addition\n")
        expected = "TAMPERED: notes.txt: in the run directory but not in manifest.json"
    else:
        (run_dir / "summary.json").unlink()
        expected = "TAMPERED: summary.json: listed in manifest.json but missing"
    status, lines, _ = verify(project, run_dir)
    assert (status, lines[-1]) == (2, expected), lines


def test_a_primitive_field_changed_with_its_manifest_entry_is_inconsistent(pytester: pytest.Pytester,
                                                                           project: Path) -> None:
    """The raw generation of one unit rewritten and the manifest made to agree: the rescorer finds it."""
    run_dir = run_toy(pytester)
    ledger = run_dir / "records.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    target = rows[5]["item_id"]
    rows[5]["generation"] = "no letter here"
    ledger.write_text("".join(json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n" for row in rows))
    rewrite_manifest_entry(run_dir, "records.jsonl")
    status, lines, _ = verify(project, run_dir)
    assert status == 2
    assert any(line.startswith("ok ") and "manifest:" in line for line in lines), lines
    assert lines[-1].startswith(f"INCONSISTENT: records.jsonl: field parsed: unit {target!r}: recorded "), lines


def test_a_classification_rewritten_everywhere_is_inconsistent(pytester: pytest.Pytester, project: Path) -> None:
    """summary.json and report.json both say LOW_ACCURACY (manifest rewritten too); the records say PASSED."""
    run_dir = run_toy(pytester)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["classifications"]["gate"] = "LOW_ACCURACY"
    (run_dir / "summary.json").write_text(json.dumps(summary))
    report = json.loads((run_dir / "report.json").read_text())
    report["benchmark"]["protocols"]["toy"]["classifications"]["gate"]["outcome"]["label"] = "LOW_ACCURACY"
    (run_dir / "report.json").write_text(json.dumps(report))
    for name in ("summary.json", "report.json"):
        rewrite_manifest_entry(run_dir, name)
    status, lines, _ = verify(project, run_dir)
    assert status == 2
    assert lines[-1] == ("INCONSISTENT: summary.json: field classifications.gate: derives 'PASSED', the run "
                         "recorded gate = 'LOW_ACCURACY'"), lines


# --------------------------------------------------------------------------- EXPLORATORY


def test_a_dirty_tree_at_run_time_is_exploratory(pytester: pytest.Pytester, project: Path) -> None:
    readme = project / "protocols" / "toy" / "README.md"
    readme.write_text(readme.read_text() + "\nAn uncommitted note.\n")
    run_dir = run_toy(pytester)
    status, lines, _ = verify(project, run_dir)
    assert status == 1
    assert lines[-1].startswith("EXPLORATORY: provenance.json: field git.dirty: "), lines


def test_a_recorded_deviation_is_exploratory(pytester: pytest.Pytester, project: Path) -> None:
    """Another model than the preregistered one: complete, consistent (the rescorer agrees), not confirmatory."""
    run_dir = run_toy(pytester, "--model", "scripted-constant")
    status, lines, _ = verify(project, run_dir)
    assert status == 1
    assert any(line.startswith("ok ") and "derives gate = LOW_ACCURACY" in line for line in lines), lines
    assert lines[-1].startswith("EXPLORATORY: provenance.json: field deviations: the run recorded deviations: model "
                                "'scripted-constant' instead of the preregistered 'scripted-oracle'"), lines
    completed = subprocess.run([sys.executable, "-m", "benchmarks.core.completed", "results/toy"], cwd=project,
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 1 and completed.stdout.splitlines()[-1] == lines[-1]


def test_a_prereg_committed_after_the_run_started_is_not_verified(pytester: pytest.Pytester, project: Path) -> None:
    prereg = project / "protocols" / "toy" / "prereg.toml"
    prereg.write_text(prereg.read_text().replace("min_accuracy = 0.75", "min_accuracy = 0.7"))
    freeze(project)
    git(project, "commit", "-q", "-a", "-m", "a threshold changed", GIT_COMMITTER_DATE="2099-01-01T00:00:00+00:00")
    run_dir = run_toy(pytester)
    status, lines, _ = verify(project, run_dir)
    assert status == 1
    assert lines[-1].startswith("EXPLORATORY: provenance.json: field started_at: protocols/toy/prereg.toml was last "
                                "committed at 2099-01-01T00:00:00+00:00, after the run started"), lines


def test_a_prereg_changed_but_not_committed_is_not_verified(pytester: pytest.Pytester, project: Path) -> None:
    prereg = project / "protocols" / "toy" / "prereg.toml"
    prereg.write_text(prereg.read_text().replace("min_accuracy = 0.75", "min_accuracy = 0.7"))
    run_dir = run_toy(pytester)
    status, lines, _ = verify(project, run_dir)
    assert status == 1, lines
    assert any("field prereg_sha256: the run read a prereg with sha256" in line for line in lines), lines
    assert any("differs from the run's" in line and SNAPSHOT_FILE in line for line in lines), lines


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize("target", ["missing", "not_a_run", "none"])
def test_bad_usage_is_one_line_and_exit_4(project: Path, target: str) -> None:
    args = {"missing": ["results/toy/no-such-run"], "not_a_run": ["protocols/toy"], "none": []}[target]
    status, lines, stderr = verify(project, *args)
    assert status == 4 and lines == []
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("preregbench verify: "), stderr


def test_the_preregbench_command_dispatches_verify(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.core import cli

    assert cli.main(["verify", str(project / "protocols" / "toy")]) == 4
    assert "not a run directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- the generated rescorer test


@pytest.mark.parametrize("breakage", ["records_wrong", "disagrees", "other_label", "missing"])
def test_the_generated_rescorer_test_fails_when_the_rescorer_does_not_agree(pytester: pytest.Pytester,
                                                                            project: Path, breakage: str) -> None:
    """A protocol that records a wrong field for one unit, a rescorer that disagrees everywhere or derives another
    label, and no rescorer: the generated test fails in one line naming the unit and field, or the reason."""
    script = project / "protocols" / "toy" / "rescore.py"
    text = script.read_text()
    if breakage == "records_wrong":
        script = project / "protocols" / "toy" / "protocol.py"
        text = script.read_text()
        old = "correct=parsed == gold(item),"
        expected = "rescore.py disagrees: unit 'item-07' field 'correct': recorded False, recomputed True"
        script.write_text(text.replace(old, 'correct=parsed == gold(item) and item["item_id"] != "item-07",'))
    elif breakage == "disagrees":
        old = '("correct", parsed == expected)'
        expected = "rescore.py disagrees: unit 'item-00' field 'correct': recorded True, recomputed False"
        script.write_text(text.replace(old, '("correct", parsed != expected)'))
    elif breakage == "other_label":
        old = "label = classify(prereg, values) if n else None"
        expected = "rescore.py derives gate = 'SOMETHING_ELSE', the run recorded 'PASSED'"
        script.write_text(text.replace(old, 'label = "SOMETHING_ELSE"'))
    else:
        old = ""
        expected = "rescore.py is missing; every protocol ships a stdlib rescorer beside its prereg.toml"
        script.unlink()
    assert old in text
    run_dir = run_toy(pytester)
    report = json.loads((run_dir / "report.json").read_text())
    test = next(t for t in report["tests"] if t["nodeid"].endswith("::test_rescorer_agrees"))
    assert test["outcome"] == "failed"
    assert expected in test["call"]["longrepr"], test["call"]["longrepr"]
    assert report["benchmark"]["protocols"]["toy"]["status"] == "broken"


# --------------------------------------------------------------------------- the manifest itself


def test_the_manifest_refuses_links_and_leaves_out_locks(tmp_path: Path) -> None:
    run_dir = tmp_path / "toy" / "r1"
    (run_dir / "figures").mkdir(parents=True)
    (run_dir / "summary.json").write_text("{}\n")
    (run_dir / "figures" / "plot.svg").write_text("<svg/>\n")
    (run_dir / ".measure.lock").write_text("")
    manifest = build_manifest(run_dir)
    assert [e["path"] for e in manifest["files"]] == ["figures/plot.svg", "summary.json"]
    assert manifest["files"][1] == {"path": "summary.json", "size": 3, "sha256": hashlib.sha256(b"{}\n").hexdigest()}
    (run_dir / "elsewhere.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(ManifestError, match="elsewhere.json: is a symbolic link"):
        build_manifest(run_dir)


def test_snapshot_sections_are_read_by_name() -> None:
    text = ("# serializer version: 1\n# name: test_fixture_sets_are_frozen\n  dict({\n    'set-a': '" + "a" * 64
            + "',\n  })\n# ---\n# name: test_preregistrations_are_frozen\n  dict({\n    'b/prereg.toml': '"
            + "b" * 64 + "',\n  })\n# ---\n")
    assert snapshot_hashes(text) == {"test_fixture_sets_are_frozen": {"set-a": "a" * 64},
                                     "test_preregistrations_are_frozen": {"b/prereg.toml": "b" * 64}}


def test_a_run_stored_outside_its_checkout_is_verified_with_repo(pytester: pytest.Pytester, project: Path,
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Results kept outside the checkout: verify reads the checkout holding the current directory; started
    outside any checkout it reads the suite's own, which lacks the commit, until ``--repo`` names the checkout
    the run was made from."""
    results = tmp_path_factory.mktemp("elsewhere") / "results"
    pytester.runpytest_subprocess("protocols/toy", "-m", "cpu", "-p", "no:randomly", f"--results-dir={results}")
    (run_dir,) = [p.parent for p in (results / "toy").glob("*/report.json")]
    status, lines, _ = verify(results.parent, run_dir)
    assert status == 2 and lines[-1].startswith("INCONSISTENT: provenance.json: field git.commit: commit "), lines
    status, lines, _ = verify(results.parent, run_dir, "--repo", project)
    assert (status, lines[-1]) == (0, "VERIFIED"), lines
    status, lines, _ = verify(project, run_dir)
    assert (status, lines[-1]) == (0, "VERIFIED"), lines
    status, _, stderr = verify(project, run_dir, "--repo", results)
    assert status == 4 and "not a git checkout" in stderr
