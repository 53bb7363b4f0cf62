"""The round-directory mode: ``test_instrument.py`` judges the probes under ``--ladder-round-dir`` together.

The conftest imports these fixtures and the collection hook.  The module is
collected only when a round directory is given; its tests use the run's
directory (for ``instrument.json``), so, like a probe's tests, they are
selected with ``-m cpu`` (``-m gpu`` with ``--device cuda``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.run import ProtocolRun
from fixtures.ladder import REGISTERED_DIALS

from .instrument import retune_violations
from .records import Probe, find_probes, read_probes
from .report import default_fleet, fleet_report
from .spec import HERE, LadderError

INSTRUMENT_FILE = "instrument.json"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The cross-probe rules run only when a round directory is given."""
    if collection_path.name == "test_instrument.py" and collection_path.parent == HERE:
        return True if not config.getoption("ladder_round_dir", default=None) else None
    return None


@pytest.fixture(scope="session")
def round_probes(run: ProtocolRun) -> list[Probe]:
    """Every probe directory under ``--ladder-round-dir`` (v1 and v2 never together)."""
    root = Path(run.settings.round_dir)
    folders = find_probes(root)
    if not folders:
        raise pytest.UsageError(f"--ladder-round-dir={root}: no probe directory (with metadata.json) under it")
    try:
        return read_probes(folders)
    except LadderError as exc:
        raise pytest.UsageError(f"--ladder-round-dir={root}: {exc}") from exc


def round_fleet(run: ProtocolRun, probes: list[Probe]) -> dict[str, str]:
    """The fleet named with ``--ladder-fleet``, else the simulated fleet when every probe is one of its workers."""
    if run.settings.fleet:
        return dict(run.settings.fleet)
    try:
        return default_fleet(probes)
    except LadderError as exc:
        raise pytest.UsageError(f"--ladder-fleet: {exc}") from exc


@pytest.fixture(scope="session")
def round_report(run: ProtocolRun, round_probes: list[Probe]) -> dict[str, Any]:
    """Gate table, instrument verdict (v2), feasibility and retune check, written once to ``instrument.json``."""
    fleet = round_fleet(run, round_probes)

    def build() -> dict[str, Any]:
        report = fleet_report(round_probes, fleet)
        report["fleet"] = fleet
        report["probes"] = [str(p.folder) for p in round_probes]
        report["retune_violations"] = retune_violations(round_probes, REGISTERED_DIALS)
        return report

    return run.once(INSTRUMENT_FILE, build)


@pytest.fixture(scope="session")
def instrument_metrics(round_report: dict[str, Any]) -> dict[str, float]:
    if "instrument" not in round_report:
        pytest.skip("the instrument verdict is a v2 verdict; the probes under --ladder-round-dir are v1")
    return {k: float(v) for k, v in round_report["instrument"]["metrics"].items()}


@pytest.fixture(scope="session")
def retune_metrics(round_report: dict[str, Any]) -> dict[str, float]:
    return {"retune_violations": float(len(round_report["retune_violations"]))}
