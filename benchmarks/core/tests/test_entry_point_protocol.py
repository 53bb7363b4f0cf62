"""A protocol in a researcher's own package, found by name through the entry-point group ``preregbench.protocols``.

``preregbench new NAME --package DIR`` writes the distribution; the test makes it visible to
``importlib.metadata`` as an editable install does (the package folder on the path, a ``.dist-info`` whose
``entry_points.txt`` is written from the scaffolded ``pyproject.toml``), then runs it by name with
``preregbench run`` and checks what the registry says about names it does not know or knows twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from benchmarks.core.rundir import SUITE_ROOT


def install_by_entry_point(package: Path, site: Path) -> str:
    """Register the scaffolded distribution in ``package`` for Python processes that have ``site`` and
    ``package`` on their path; returns its entry-point declaration."""
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["preregbench.protocols"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    (info / "entry_points.txt").write_text(f"[preregbench.protocols]\n{lines}")
    return lines


def preregbench(cwd: Path, path: list[Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*path, SUITE_ROOT])), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=600)


def test_a_protocol_of_an_installed_package_runs_by_name(tmp_path: Path) -> None:
    package, site = tmp_path / "extpkg", tmp_path / "site"
    done = preregbench(tmp_path, [], "new", "tally", "--package", str(package))
    assert done.returncode == 0, done.stderr
    assert (package / "tally" / "prereg.toml").is_file() and (package / "tally" / "tests" / "__init__.py").is_file()
    declared = install_by_entry_point(package, site)
    assert declared == "tally = tally.protocol:PROTOCOL\n"

    listed = preregbench(tmp_path, [site, package], "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert set(rows) == {"campaign", "cwr", "imported", "ladder", "pzombie", "res", "tally"}
    assert str(package / "tally") in rows["tally"]

    results = tmp_path / "results"
    ran = preregbench(tmp_path, [site, package], "run", "tally", "--model", "scripted-oracle",
                      f"--results-dir={results}", "-p", "no:cacheprovider")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "tally" in ran.stdout.splitlines()[-2] and "gate: PASSED" in ran.stdout.splitlines()[-2]
    (run_dir,) = (results / "tally").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["classifications"] == {"gate": "PASSED"}
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["protocol"] == "tally" and provenance["prereg_path"].endswith("tally/prereg.toml")

    # without the distribution on the path the name is unknown, with the close names offered
    unknown = preregbench(tmp_path, [], "run", "tally", "--model", "scripted-oracle")
    assert unknown.returncode == 4 and unknown.stdout == ""
    assert unknown.stderr.strip() == ("preregbench run: no protocol 'tally'; available: campaign, cwr, imported, "
                                      "ladder, pzombie, res (or give a folder holding prereg.toml and conftest.py)")


def test_a_name_registered_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "other_res-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-res\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[preregbench.protocols]\nres = other_res.protocol:PROTOCOL\n")
    done = preregbench(tmp_path, [site], "list")
    assert done.returncode == 4 and done.stdout == ""
    assert done.stderr.strip() == ("preregbench: protocol 'res' is registered twice (benchmarks.res.protocol:PROTOCOL "
                                   "and other_res.protocol:PROTOCOL); a protocol name is unique: rename the installed "
                                   "one")


@pytest.mark.parametrize("name, problem", [
    ("toy\n", "must be a lowercase identifier"),
    ("x" * 41, "is longer than 40 characters"),
    ("x" * 300, "is longer than 40 characters"),
    ("json", "is taken"),
    ("core", "is taken"),
])
def test_new_refuses_names_in_one_line_with_exit_4(tmp_path: Path, name: str, problem: str) -> None:
    done = preregbench(tmp_path, [], "new", name, "--into", str(tmp_path))
    assert done.returncode == 4 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("preregbench new: protocol name ") and problem in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target", ["folder", "file", "dangling link"])
def test_new_refuses_an_existing_or_dangling_target_in_one_line(tmp_path: Path, target: str) -> None:
    where = tmp_path / "toy"
    if target == "folder":
        where.mkdir()
    elif target == "file":
        where.write_text("")
    else:
        where.symlink_to(tmp_path / "nowhere")
    done = preregbench(tmp_path, [], "new", "toy", "--into", str(tmp_path))
    assert done.returncode == 4 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "already exists" in done.stderr and not (tmp_path / "nowhere").exists()
