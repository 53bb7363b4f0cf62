import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.core import ClassificationSpec, ProtocolHeader, classification, load_prereg, sha256_json
from benchmarks.core.plugin import benchmark_run

HERE = Path(__file__).parent


@dataclass(frozen=True)
class ToyPrereg:
    protocol: ProtocolHeader
    thresholds: dict[str, float]
    seeds: dict[str, int]
    classification: ClassificationSpec


PREREG = load_prereg(HERE / "prereg.toml", ToyPrereg)
GATE = classification(PREREG)


def pytest_generate_tests(metafunc):
    if "rule" in metafunc.fixturenames:
        metafunc.parametrize("rule", GATE.labels)


@pytest.fixture(scope="session")
def run(request):
    return benchmark_run(request.config, HERE)


@pytest.fixture(scope="session")
def records(run):
    def compute():
        scenario = json.loads((HERE.parent.parent / "scenario.json").read_text())
        run.record_provenance(
            model={"id": "toy-scripted", "revision": sha256_json(scenario)},
            seeds=PREREG.values.seeds,
            prereg=PREREG,
            fixtures={"toy-items": sha256_json(scenario["metrics"])},
        )
        return scenario

    return run.once("records.json", compute)


@pytest.fixture
def metrics(records):
    return records["metrics"]


@pytest.fixture
def gate():
    return GATE
