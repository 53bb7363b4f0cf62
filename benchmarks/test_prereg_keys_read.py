"""Every leaf key of every prereg.toml is read by the code it governs.

Each protocol's scripted self-check run (the fixture generation, the
collection, the measurement and the rule and completeness tests, in fresh
pytest processes) runs with ``PREREGBENCH_PREREG_READS`` set, together with
the protocol's ``model_options`` for its preregistered model (the loader's
dtype and torch seed, which a scripted model never asks for), for CWR the
check of its confirmatory sample design (``python -m benchmarks.core.design
cwr --check``, which reads ``[design.confirmatory]``) and, for the ladder,
the round-directory mode, a v1 retune and the generator's balance check.  The core loader logs every leaf key it declares and every one that is
read (benchmarks/core/prereg.py), and the test fails on any key of the real
file that nothing read.  Toy preregs show that the check fails when a key is
added that no code reads, and that echoing a value into a run file is no read.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.core.prereg import (
    READS_ENV,
    ClassificationSpec,
    ProtocolHeader,
    load_prereg,
    toml_leaf_keys,
    unread_keys,
    unrecorded,
)
from benchmarks.core.selfcheck import run_protocol

ROOT = Path(__file__).resolve().parent


def reads_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "prereg-reads.jsonl"
    monkeypatch.setenv(READS_ENV, str(log))
    return log


def declared_keys(log: Path, prereg: Path) -> set[str]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return {e["key"] for e in lines if e["kind"] == "declared" and e["prereg"] == str(prereg.resolve())}


def assert_every_key_read(log: Path, prereg: Path) -> None:
    # The log covers the whole file (a recording that missed a table would make the check vacuous).
    assert declared_keys(log, prereg) == set(toml_leaf_keys(prereg))
    unread = unread_keys(log, prereg)
    assert unread == [], f"{prereg}: keys no code read during the run: {', '.join(unread)}"


def run_ok(pytester: pytest.Pytester, target: Path, results: Path, *args: str) -> None:
    """One scripted self-check run: fixture generation, collection, measurement, rule and completeness tests."""
    result = run_protocol(pytester, target, results, *args)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str() + result.stderr.str()
    assert list(results.rglob("report.json")), result.stdout.str()


LOAD_OPTIONS = """
import sys, tempfile
from pathlib import Path
from benchmarks.core import ProtocolRun, Run, registry
from benchmarks.core.provenance import utc_now
name, devices = sys.argv[1], sys.argv[2:]
protocol = registry.get(name)
for device in devices:
    run = ProtocolRun(protocol, Run(name, "options", Path(tempfile.mkdtemp()), utc_now(), protocol.folder), device=device)
    print(device, protocol.model_options(run))
"""


def load_options(pytester: pytest.Pytester, name: str, *devices: str) -> None:
    """What a scripted model never asks for: the options the preregistered model would be loaded with (dtype,
    torch seed, the settings of each device), computed by the protocol's own code without loading weights."""
    result = pytester.run(sys.executable, "-c", LOAD_OPTIONS, name, *devices)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()


@pytest.fixture
def subprocess_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT.parent))


# --------------------------------------------------------------------------- the four protocols


def test_res_keys_are_read(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           subprocess_env: None) -> None:
    log = reads_log(tmp_path, monkeypatch)
    run_ok(pytester, ROOT / "res", tmp_path / "results", "--model", "scripted-oracle")
    load_options(pytester, "res", "cpu")
    assert_every_key_read(log, ROOT / "res" / "prereg.toml")


def test_cwr_keys_are_read(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           subprocess_env: None) -> None:
    log = reads_log(tmp_path, monkeypatch)
    run_ok(pytester, ROOT / "cwr", tmp_path / "results", "--model", "scripted-oracle")
    load_options(pytester, "cwr", "cpu")
    # The [design.confirmatory] table governs the confirmatory sample design: its check recomputes it.
    check = pytester.run(sys.executable, "-m", "benchmarks.core.design", "cwr", "--check")
    assert check.ret == 0, check.stdout.str() + check.stderr.str()
    assert_every_key_read(log, ROOT / "cwr" / "prereg.toml")


def test_pzombie_keys_are_read(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               subprocess_env: None) -> None:
    from benchmarks.pzombie.scenarios import prefill_run

    results = tmp_path / "results"
    prefill_run(results, "keys", "confirmed")  # written by this process, before recording starts
    log = reads_log(tmp_path, monkeypatch)
    run_ok(pytester, ROOT / "pzombie", results, "--device", "cpu", "--run-id=keys", "--model", "gemma-3-270m")
    load_options(pytester, "pzombie", "cpu", "cuda")
    assert_every_key_read(log, ROOT / "pzombie" / "prereg.toml")


def test_ladder_keys_are_read(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              subprocess_env: None) -> None:
    from benchmarks.ladder.worker import SIMULATED_FLEET

    log = reads_log(tmp_path, monkeypatch)
    fleet, v1 = tmp_path / "v2-round", tmp_path / "v1-round"  # the variants are never pooled
    label, model = next(iter(SIMULATED_FLEET.items()))
    run_ok(pytester, ROOT / "ladder", fleet / label, "--model", model, "--ladder-units-per-tier", "4")
    # A v1 first probe and its one retune (registered dial, re-probe seed): the [retune] table governs the rule.
    retuner = SIMULATED_FLEET["R1"]
    run_ok(pytester, ROOT / "ladder", v1 / "first", "--model", retuner, "--ladder-state", "v1-r1", "--ladder-seed", "101",
           "--ladder-units-per-tier", "4")
    run_ok(pytester, ROOT / "ladder", v1 / "retune", "--model", retuner, "--ladder-state", "v1-r1",
           "--ladder-seed", "102", "--ladder-retune-of", "v1-r1-seed101", "--ladder-dial", "distractors=6",
           "--ladder-units-per-tier", "4")
    for folder in (fleet, v1):
        run_ok(pytester, ROOT / "ladder" / "test_instrument.py", tmp_path / f"judged-{folder.name}",
               f"--ladder-round-dir={folder}")
    # The generator's balance check is the ladder's fixture check; the [balance] table governs it.
    balance = pytester.runpytest_subprocess(str(ROOT.parent / "fixtures" / "tests" / "test_ladder_balance.py"),
                                            f"--rootdir={ROOT.parent}", "-p", "no:cacheprovider", "-q")
    assert balance.ret == 0, balance.stdout.str()
    load_options(pytester, "ladder", "cpu")
    assert_every_key_read(log, ROOT / "ladder" / "prereg.toml")


def test_campaign_keys_are_read(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                subprocess_env: None) -> None:
    model = "campaign-a0.99-s0.9-lenient0.4-seed8"  # consultations, blocks and damages in every condition
    run_ok(pytester, ROOT / "ladder", tmp_path / "probe", "--model", model, "--run-id", "probe")
    log = reads_log(tmp_path, monkeypatch)
    run_ok(pytester, ROOT / "campaign", tmp_path / "results", "--model", model,
           f"--campaign-probe={tmp_path / 'probe' / 'ladder' / 'probe'}", "--campaign-episodes-per-cell", "20")
    assert_every_key_read(log, ROOT / "campaign" / "prereg.toml")


def test_imported_keys_are_read(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                subprocess_env: None) -> None:
    from benchmarks.imported.importers import import_log

    import_log("lm-eval", ROOT / "imported" / "tests" / "data" / "lmeval" / "smollm2", tmp_path / "import")
    log = reads_log(tmp_path, monkeypatch)
    run_ok(pytester, ROOT / "imported", tmp_path / "results", f"--imported-source={tmp_path / 'import'}")
    assert_every_key_read(log, ROOT / "imported" / "prereg.toml")


# --------------------------------------------------------------------------- the check itself, on a toy prereg

TOY_PREREG = """
[protocol]
name = "toyread"
title = "toy"
registered = 2026-12-01
seed_document = "none"

[seeds]
python = 7

[thresholds]
floor = 0.5

[classification]
name = "gate"

[[classification.rules]]
label = "LOW"
all = ["score < floor"]

[[classification.rules]]
label = "OK"
passes = true
otherwise = true
"""

TOY_RUN = """
import random
from dataclasses import dataclass
from pathlib import Path

from benchmarks.core import ClassificationSpec, ProtocolHeader, classification, load_prereg


@dataclass(frozen=True)
class Seeds:
    python: int
    {extra_field}


@dataclass(frozen=True)
class Toy:
    protocol: ProtocolHeader
    seeds: Seeds
    thresholds: dict[str, float]
    classification: ClassificationSpec


PREREG = load_prereg(Path(__file__).parent / "prereg.toml", Toy)
values = PREREG.values
print(values.protocol.name, values.protocol.title, values.protocol.registered, values.protocol.seed_document)
random.seed(values.seeds.python)
print(classification(PREREG).labels)
"""


def toy(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, extra_key: str = "",
        extra_threshold: str = "") -> tuple[Path, Path]:
    """A toy protocol folder in pytester's directory, run once with recording on; its log and prereg."""
    toml = TOY_PREREG.replace("python = 7\n", "python = 7\n" + (f"{extra_key} = 3\n" if extra_key else ""))
    toml = toml.replace("floor = 0.5\n", "floor = 0.5\n" + (f"{extra_threshold} = 0.9\n" if extra_threshold else ""))
    folder = pytester.mkdir("toyread")
    prereg = folder / "prereg.toml"
    prereg.write_text(toml)
    script = folder / "run_toy.py"
    script.write_text(TOY_RUN.format(extra_field=f"{extra_key}: int" if extra_key else ""))
    log = pytester.path / "reads.jsonl"
    monkeypatch.setenv(READS_ENV, str(log))
    monkeypatch.setenv("PYTHONPATH", str(ROOT.parent))
    result = pytester.run(sys.executable, str(script))
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    return log, prereg


def test_a_toy_prereg_whose_keys_are_all_read_passes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log, prereg = toy(pytester, monkeypatch)
    assert_every_key_read(log, prereg)


def test_a_key_that_nothing_reads_fails_the_check(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log, prereg = toy(pytester, monkeypatch, extra_key="numpy")
    assert unread_keys(log, prereg) == ["seeds.numpy"]
    with pytest.raises(AssertionError, match="keys no code read during the run: seeds.numpy"):
        assert_every_key_read(log, prereg)


def test_a_threshold_no_rule_names_is_unread(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log, prereg = toy(pytester, monkeypatch, extra_threshold="ceiling")
    assert unread_keys(log, prereg) == ["thresholds.ceiling"]


def test_an_echo_into_a_run_file_is_not_a_read(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copying the seeds or thresholds into a run file (as the provenance and the summary do) reads nothing."""
    folder = pytester.mkdir("echo")
    (folder / "prereg.toml").write_text(TOY_PREREG.replace('name = "toyread"', 'name = "echo"'))
    (folder / "run_echo.py").write_text(TOY_RUN.format(extra_field="").replace(
        "random.seed(values.seeds.python)", "from benchmarks.core.prereg import unrecorded\nprint(unrecorded(values.seeds))"))
    log = pytester.path / "reads.jsonl"
    monkeypatch.setenv(READS_ENV, str(log))
    monkeypatch.setenv("PYTHONPATH", str(ROOT.parent))
    result = pytester.run(sys.executable, str(folder / "run_echo.py"))
    assert result.ret == 0, result.stderr.str()
    assert unread_keys(log, folder / "prereg.toml") == ["seeds.python"]


def test_a_prereg_loaded_without_recording_is_an_error(tmp_path: Path) -> None:
    from benchmarks.core.prereg import PreregError

    log = tmp_path / "reads.jsonl"
    log.write_text("")
    with pytest.raises(PreregError, match="nothing was recorded"):
        unread_keys(log, ROOT / "res" / "prereg.toml")


@dataclass(frozen=True)
class _Seeds:
    python: int


@dataclass(frozen=True)
class _Toy:
    protocol: ProtocolHeader
    seeds: _Seeds
    thresholds: dict[str, float]
    classification: ClassificationSpec


def test_a_recording_copy_behaves_like_the_plain_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "toyread"
    folder.mkdir()
    prereg = folder / "prereg.toml"
    prereg.write_text(TOY_PREREG)
    plain = load_prereg(prereg, _Toy).values
    log = reads_log(tmp_path, monkeypatch)
    recorded = load_prereg(prereg, _Toy).values
    assert isinstance(recorded, _Toy) and isinstance(recorded.protocol, ProtocolHeader)
    assert [f.name for f in dataclasses.fields(recorded)] == [f.name for f in dataclasses.fields(plain)]
    assert unrecorded(recorded) == plain and type(unrecorded(recorded)) is _Toy
    assert pickle.loads(pickle.dumps(recorded)) == plain  # a spawned child gets the plain values
    assert copy.deepcopy(recorded) == plain
    assert unread_keys(log, prereg) == sorted(set(toml_leaf_keys(prereg)) - {"protocol.name"})
    assert recorded.seeds.python == 7 and dict(recorded.thresholds) == {"floor": 0.5}
    assert "seeds.python" not in unread_keys(log, prereg) and "thresholds.floor" not in unread_keys(log, prereg)
