"""How many worker processes ``-n auto`` starts (the root conftest's hook)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from benchmarks.core.selfcheck import SUITE_ROOT


def _root_conftest():
    spec = importlib.util.spec_from_file_location("preregbench_root_conftest", SUITE_ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROOT = _root_conftest()


def test_the_self_check_run_gets_two_workers_on_two_or_more_cores_and_none_on_one() -> None:
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 2, None) == 2
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 64, None) == 2
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 1, None) == 0
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, None, None) == 0


@pytest.mark.parametrize("markexpr", ["cpu", "gpu", "slow", "not slow", ""])
def test_any_other_selection_runs_in_one_process(markexpr: str) -> None:
    assert ROOT.self_check_workers(markexpr, 16, None) == 0
    assert ROOT.self_check_workers(markexpr, 16, "4") == 0


def test_the_environment_sets_the_number_and_bad_values_are_one_line_usage_errors() -> None:
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 2, "0") == 0
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 2, " 3 ") == 3
    assert ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 2, "") == 2
    for bad in ("two", "-1", "1.5"):
        with pytest.raises(pytest.UsageError, match="PREREGBENCH_TEST_WORKERS"):
            ROOT.self_check_workers(ROOT.DEFAULT_MARKEXPR, 2, bad)


def _run_one(*args: str) -> subprocess.CompletedProcess[str]:
    """pytest on the first test of this file alone, under the repository's configuration."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-k", "two_workers_on_two", *args,
                           str(SUITE_ROOT / "benchmarks" / "core" / "tests" / "test_workers.py")],
                          cwd=SUITE_ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={k: v for k, v in os.environ.items() if k != "PREREGBENCH_TEST_WORKERS"})


def test_the_repository_configuration_starts_two_workers_for_the_default_run_only() -> None:
    """pyproject.toml passes -n auto: the default selection runs in two xdist workers, -m slow in this process."""
    default = _run_one()
    assert default.returncode == 0, default.stdout[-2000:] + default.stderr[-2000:]
    assert "created: 2/2 workers" in default.stdout, default.stdout[-2000:]
    slow = _run_one("-m", "slow")
    assert slow.returncode == 5, slow.stdout[-2000:] + slow.stderr[-2000:]  # nothing here is marked slow
    assert "workers" not in slow.stdout and "bringing up nodes" not in slow.stdout + slow.stderr
