import os

import pytest

from benchmarks.core.rundir import SUITE_ROOT

# data/ holds a synthetic protocol that the plugin tests copy into pytester projects.
collect_ignore_glob = ["data/*"]


@pytest.fixture(autouse=True)
def _suite_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester subprocesses import the suite from this checkout, whatever their working directory."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(SUITE_ROOT), os.environ.get("PYTHONPATH")])))
