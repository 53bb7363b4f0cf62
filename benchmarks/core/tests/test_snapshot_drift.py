"""Editing a preregistered threshold or a fixture generator turns the default run red, naming what drifted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


TOY = Path(__file__).parent / "data" / "toy"

FROZEN_TEST = '''
from pathlib import Path
from benchmarks.core import fixture_hashes, prereg_hashes
import toyfixtures

ROOT = Path(__file__).parent

def test_preregistrations_are_frozen(snapshot):
    assert prereg_hashes(ROOT) == snapshot

def test_fixture_sets_are_frozen(snapshot):
    assert fixture_hashes({"toy-items": toyfixtures.build}) == snapshot
'''

FIXTURES = '''
import random
SEED = 7

def build():
    rng = random.Random(SEED)
    return [{"item": i, "value": rng.randint(0, 9)} for i in range(4)]
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copytree(TOY, pytester.path / "benchmarks" / "toy")
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\naddopts = ["-p", "no:cacheprovider", "-p", "no:xdist"]\n')
    pytester.makepyfile(test_frozen=FROZEN_TEST, toyfixtures=FIXTURES)
    frozen = pytester.runpytest_subprocess("--snapshot-update", "test_frozen.py")
    assert frozen.ret == 0, frozen.stdout.str()
    assert (pytester.path / "snapshots" / "test_frozen.ambr").is_file()
    assert not list(pytester.path.rglob("__snapshots__")), "snapshots must live under the top-level snapshots/ folder"
    assert pytester.runpytest_subprocess("test_frozen.py").ret == 0
    return pytester


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_threshold_edit_fails_naming_the_file_until_refrozen(project: pytest.Pytester) -> None:
    edit(project.path / "benchmarks" / "toy" / "prereg.toml", "min_accuracy = 0.75", "min_accuracy = 0.70")
    drifted = project.runpytest_subprocess("test_frozen.py")
    assert drifted.ret == pytest.ExitCode.TESTS_FAILED
    drifted.assert_outcomes(passed=1, failed=1)
    drifted.stdout.fnmatch_lines(["*FAILED test_frozen.py::test_preregistrations_are_frozen*"])
    assert "'benchmarks/toy/prereg.toml'" in drifted.stdout.str()
    assert project.runpytest_subprocess("--snapshot-update", "test_frozen.py").ret == 0
    assert project.runpytest_subprocess("test_frozen.py").ret == 0


def test_generator_edit_fails_naming_the_fixture_set(project: pytest.Pytester) -> None:
    edit(project.path / "toyfixtures.py", "SEED = 7", "SEED = 8")
    drifted = project.runpytest_subprocess("test_frozen.py")
    drifted.assert_outcomes(passed=1, failed=1)
    drifted.stdout.fnmatch_lines(["*FAILED test_frozen.py::test_fixture_sets_are_frozen*"])
    assert "'toy-items'" in drifted.stdout.str()
