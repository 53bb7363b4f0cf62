"""The Hypothesis profile chosen by HYPOTHESIS_PROFILE, checked in a fresh pytest process."""

from __future__ import annotations


import pytest
from hypothesis import _settings as hypothesis_settings

# The variables by which Hypothesis decides it runs on CI (and then loads its CI profile under the suite's).
CI_VARIABLES = tuple(getattr(hypothesis_settings, "_CI_VARS", {"CI": None, "GITHUB_ACTIONS": "true"}))


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    pytester.makepyfile(test_settings="""
from hypothesis import settings

def test_profile():
    current = settings()
    print("PROFILE", current.derandomize, current.database, current.print_blob, "DEADLINE", current.deadline)
""")
    return pytester


def test_ci_profile_is_derandomized_without_database(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    result = project.runpytest_subprocess("-s", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["*PROFILE True None True*"])


def test_unknown_profile_is_a_usage_error(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "fast")
    result = project.runpytest_subprocess("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HYPOTHESIS_PROFILE='fast' is not a registered Hypothesis profile*"])


def test_a_plain_run_has_no_deadline(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without HYPOTHESIS_PROFILE the suite's own profile applies: Hypothesis's defaults but no 200 ms deadline,
    which a loaded machine misses on a test's first, cold call."""
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    result = project.runpytest_subprocess("-s", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["*PROFILE False * DEADLINE None*"])


def test_a_plain_run_on_a_ci_machine_is_derandomized_and_has_no_deadline(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Hypothesis sees a CI machine (``CI`` set) its CI defaults apply under the suite's profile: the
    examples are derandomized, there is no example database, and there is still no deadline."""
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    monkeypatch.setenv("CI", "true")
    result = project.runpytest_subprocess("-s", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["*PROFILE True None True DEADLINE None*"])
