"""``preregbench verify`` on run directories made by someone else: it runs none of their code, reads nothing
through their links, and trusts no repository they ship.

Each crafted run is a consistent forgery (the manifest rewritten to match), so that only the protections under
test stand between the payload and the verifier.  A payload that runs writes a marker file outside the run
directory; every test asserts that the marker is absent and that verify ends in one word, without a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.core.manifest import MANIFEST_FILE, build_manifest

from .test_verify import git, project, run_toy, verify  # noqa: F401  (project is a fixture)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed; verify reads a repository")


def payload(marker: Path) -> str:
    """Python source that, when imported or executed, writes ``marker``."""
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('payload ran')\n"


def reseal(run_dir: Path) -> None:
    """Rewrite manifest.json to list every regular file of the run as it is now (links left out, not followed)."""
    entries = []
    for root, _, files in os.walk(run_dir):
        for name in files:
            path = Path(root) / name
            relative = path.relative_to(run_dir).as_posix()
            if relative == MANIFEST_FILE or name.endswith(".lock") or path.is_symlink():
                continue
            data = path.read_bytes()
            entries.append({"path": relative, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    manifest["files"] = sorted(entries, key=lambda e: e["path"])
    (run_dir / MANIFEST_FILE).write_text(json.dumps(manifest))


def edit_json(path: Path, change) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def add_fixture_set(run_dir: Path, name: str) -> None:
    """One more fixture set in fixtures.json and provenance.json, consistently hashed: a set no generator of the
    suite knows, which makes verify look for the protocol to rebuild it."""
    rows = [{"id": "x"}]
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    edit_json(run_dir / "fixtures.json", lambda v: v["sets"].__setitem__(name, {"records": rows, "sha256": digest}))
    edit_json(run_dir / "provenance.json", lambda v: v["fixtures_sha256"].__setitem__(name, digest))
    edit_json(run_dir / "summary.json", lambda v: v["fixtures_sha256"].__setitem__(name, digest))


@pytest.mark.parametrize("route", ["out_and_back", "inside_the_repository", "absolute"])
def test_a_protocol_shipped_in_the_run_directory_is_never_imported(pytester: pytest.Pytester, project: Path,
                                                                   route: str) -> None:
    """provenance.json's prereg_path names a package inside the run directory, by a path that walks out of the
    repository and back, by a path inside the repository, or by an absolute path; an extra fixture set asks
    for the protocol.  A verify that followed the path would put the package on sys.path and import it."""
    run_dir = run_toy(pytester)
    marker = pytester.path.parent / f"marker-{route}"
    package = run_dir / "toolkit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "protocol.py").write_text(payload(marker))
    (package / "rescore.py").write_text(payload(marker))
    (package / "prereg.toml").write_text((project / "protocols" / "toy" / "prereg.toml").read_text())
    inside = (package / "prereg.toml").relative_to(project).as_posix()
    recorded = {"out_and_back": f"../{project.name}/{inside}", "inside_the_repository": inside,
                "absolute": str(package / "prereg.toml")}[route]
    edit_json(run_dir / "provenance.json", lambda v: v.__setitem__("prereg_path", recorded))
    add_fixture_set(run_dir, "shipped_set")
    reseal(run_dir)
    status, lines, stderr = verify(project, run_dir)
    assert not marker.exists(), "verify ran code shipped in the run directory"
    assert status == 2, lines
    assert any("field prereg_path" in line for line in lines), lines
    assert lines[-1].startswith("INCONSISTENT"), lines


def test_a_repository_shipped_with_the_results_is_not_trusted(pytester: pytest.Pytester, project: Path) -> None:
    """The results folder is a git repository of its own whose commit holds a rescorer that is a payload, and
    provenance.json records that commit.  A verify that looked the repository up from the run directory would
    execute that rescorer; the repository is the one holding the current directory."""
    run_dir = run_toy(pytester)
    results = run_dir.parent.parent
    marker = pytester.path.parent / "marker-shipped-repository"
    shipped = results / "protocols" / "toy"
    shipped.mkdir(parents=True)
    for name in ("prereg.toml", "protocol.py", "__init__.py", "conftest.py"):
        shutil.copy(project / "protocols" / "toy" / name, shipped / name)
    (shipped / "rescore.py").write_text(payload(marker))
    (results / "protocols" / "__init__.py").write_text("")
    (results / ".gitignore").write_text("/toy/\n")
    shutil.copytree(project / "snapshots", results / "snapshots")
    git(results, "init", "-q")
    git(results, "add", "-A")
    git(results, "commit", "-q", "-m", "shipped", GIT_COMMITTER_DATE="2000-01-01T00:00:00+00:00")
    commit = git(results, "rev-parse", "HEAD").strip()
    edit_json(run_dir / "provenance.json", lambda v: v["git"].__setitem__("commit", commit))
    reseal(run_dir)

    status, lines, _ = verify(project, run_dir)
    assert not marker.exists(), "verify executed a rescorer from a repository shipped with the results"
    assert status == 2 and lines[-1].startswith("INCONSISTENT: provenance.json: field git.commit:"), lines

    status, lines, _ = verify(run_dir, run_dir)  # started from inside the run: the suite's own checkout
    assert not marker.exists()
    assert status == 2 and lines[-1].startswith("INCONSISTENT: provenance.json: field git.commit:"), lines

    inner = run_dir / "vendored"  # a repository inside the run directory is refused even when named
    inner.mkdir()
    git(inner, "init", "-q")
    status, lines, stderr = verify(project, run_dir, "--repo", inner)
    assert status == 4 and lines == [] and "lies inside the run directory" in stderr, stderr
    assert not marker.exists()


def test_a_linked_folder_in_the_run_is_tampered_and_not_read(pytester: pytest.Pytester, project: Path,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    """A folder of the run is a link to a folder elsewhere, and the manifest lists the file inside it with its
    true hash: verify stops at the link, before hashing or reading anything."""
    run_dir = run_toy(pytester)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "data.json").write_text('{"secret": 1}\n')
    (run_dir / "extra").symlink_to(outside, target_is_directory=True)
    manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    data = (outside / "data.json").read_bytes()
    manifest["files"].append({"path": "extra/data.json", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    (run_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    status, lines, _ = verify(project, run_dir)
    assert status == 2
    assert lines == ["TAMPERED     entries: extra: is a symbolic link; a run directory holds only real files and "
                     "folders, and verify reads nothing through a link",
                     "TAMPERED: extra: is a symbolic link; a run directory holds only real files and folders, and "
                     "verify reads nothing through a link"], lines


def test_a_linked_ledger_is_tampered_before_the_rescorer_runs(pytester: pytest.Pytester, project: Path,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    """records.jsonl replaced by a link to an identical copy elsewhere: no check runs, the rescorer included."""
    run_dir = run_toy(pytester)
    copy = tmp_path_factory.mktemp("copy") / "records.jsonl"
    shutil.move(run_dir / "records.jsonl", copy)
    (run_dir / "records.jsonl").symlink_to(copy)
    status, lines, _ = verify(project, run_dir)
    assert status == 2 and len(lines) == 2, lines
    assert lines[-1].startswith("TAMPERED: records.jsonl: is a symbolic link"), lines
    assert not any("rescorer" in line or "manifest" in line for line in lines), lines


def test_a_fifo_in_the_run_is_tampered_without_blocking(pytester: pytest.Pytester, project: Path) -> None:
    run_dir = run_toy(pytester)
    os.mkfifo(run_dir / "pipe")
    status, lines, _ = verify(project, run_dir)
    assert (status, lines[-1]) == (2, "TAMPERED: pipe: is not a regular file or folder (a FIFO, socket or device)")


def test_the_manifest_builder_agrees_with_the_forgery_helper(pytester: pytest.Pytester, project: Path) -> None:
    """reseal writes what build_manifest would (so a forgery above is complete, and a failure means protection)."""
    run_dir = run_toy(pytester)
    expected = build_manifest(run_dir)["files"]
    reseal(run_dir)
    assert json.loads((run_dir / MANIFEST_FILE).read_text())["files"] == expected


# --------------------------------------------------------------------------- what a report shows, recomputed


def test_a_summary_figure_rewritten_with_its_manifest_is_tampered(pytester: pytest.Pytester, project: Path) -> None:
    """A metric of summary.json changed (the manifest made to agree): the report would show it, the ledger does not
    bear it out; verify recomputes the summary from the ledger and names the field."""
    run_dir = run_toy(pytester)
    summary = json.loads((run_dir / "summary.json").read_text())
    key = sorted(k for k, v in summary["metrics"].items() if isinstance(v, float))[0]
    summary["metrics"][key] = summary["metrics"][key] * 0.8 + 0.01
    (run_dir / "summary.json").write_text(json.dumps(summary))
    reseal(run_dir)
    status, lines, _ = verify(project, run_dir)
    assert status == 2 and lines[-1].startswith("TAMPERED: summary.json: field metrics."), lines
    assert any(line.startswith("TAMPERED") and "figures:" in line and f"metrics.{key}" in line for line in lines)


@pytest.mark.parametrize("damage", ["blank lines", "crlf", "duplicate"])
def test_a_ledger_no_writer_of_the_suite_makes_is_tampered(pytester: pytest.Pytester, project: Path,
                                                           damage: str) -> None:
    """Blank lines appended, CR LF endings, a record repeated (the manifest made to agree): refused as the Ledger
    class refuses them on resume, never taken for a run that is merely exploratory."""
    run_dir = run_toy(pytester)
    ledger = run_dir / "records.jsonl"
    data = ledger.read_bytes()
    if damage == "blank lines":
        data += b"\n" * 1000
    elif damage == "crlf":
        data = data.replace(b"\n", b"\r\n")
    else:
        data += data.splitlines(keepends=True)[0]
    ledger.write_bytes(data)
    reseal(run_dir)
    status, lines, _ = verify(project, run_dir)
    expected = {"blank lines": "is blank", "crlf": "ends in CR LF", "duplicate": "already recorded on line 1"}[damage]
    assert status == 2, lines
    assert any(line.startswith("TAMPERED") and expected in line for line in lines), lines
