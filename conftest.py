"""Root conftest: loads the suite's pytest plugin and chooses how many processes run the tests.

``pyproject.toml`` passes ``-n auto`` to pytest-xdist; the hook below decides what
``auto`` means for this repository.  The self-checks (the default marker
expression) are spread over up to two worker processes, whole files to a
worker, because that run is many independent tests and most machines the suite
runs on have at least two cores.  A run that selects protocol runs or the
bundled-model self-checks (``-m cpu``, ``-m gpu``, ``-m slow``, or any other
marker expression) runs in one process unless ``-n N`` asks otherwise: such a
run loads a model, and a second worker would load it again.
``PREREGBENCH_TEST_WORKERS`` sets the number of self-check workers (``0`` runs
them in one process).
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["benchmarks.core.plugin"]

DEFAULT_MARKEXPR = "not cpu and not gpu and not slow"


def self_check_workers(markexpr: str, cpus: int | None, setting: str | None) -> int:
    """Worker processes for ``-n auto``: 0 (one process) unless the run is the self-check run."""
    if markexpr.strip() != DEFAULT_MARKEXPR:
        return 0
    if setting is not None and setting.strip() != "":
        try:
            workers = int(setting)
        except ValueError:
            raise pytest.UsageError(f"PREREGBENCH_TEST_WORKERS={setting!r} is not a whole number; "
                             "set it to 0 (one process) or a number of worker processes") from None
        if workers < 0:
            raise pytest.UsageError(f"PREREGBENCH_TEST_WORKERS={setting!r} is negative; set it to 0 or more")
        return workers
    return 0 if (cpus or 1) < 2 else 2


def pytest_xdist_auto_num_workers(config) -> int:
    return self_check_workers(config.getoption("markexpr") or "", os.cpu_count(),
                              os.environ.get("PREREGBENCH_TEST_WORKERS"))


@pytest.fixture(scope="module", autouse=True)
def _run_libraries(request: pytest.FixtureRequest) -> None:
    """Imports a test module's ``RUN_LIBRARIES_FIRST`` (with :data:`benchmarks.core.selfcheck.RUN_LIBRARIES`)
    before its first test, so before any ``pytester`` of that module takes its snapshot of ``sys.modules``.

    A fixture and not an import-time call: a protocol run (``pytest benchmarks/res -m cpu``) collects the
    protocol folder's self-check modules without running them, and must not pay for scipy.stats and
    matplotlib that only the self-checks' in-process sessions need.
    """
    modules = getattr(request.module, "RUN_LIBRARIES_FIRST", None)
    if modules is not None:
        from benchmarks.core.selfcheck import import_run_libraries

        import_run_libraries(*modules)
