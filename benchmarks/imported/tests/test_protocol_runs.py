"""Imported runs decided by a frozen prereg, checked by the rescorer, verify and compare.

* the built-in prereg decides the committed lm-eval runs of SmolLM2 and Gemma 3 (both at chance:
  NOT_ABOVE_CHANCE), the rule pattern and the rescorer agree; compare pairs the two runs sample by sample
  and refuses an import that lacks a sample, naming it;
* in a git repository of its own, a protocol scaffolded with ``preregbench new --from-import`` decides an
  inspect_ai log made after its prereg was committed (VERIFIED) and an lm-eval log made before
  (EXPLORATORY, saying why).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core.compare import CompareRefused, compare_runs, table
from benchmarks.core.selfcheck import expected_pattern, outcomes_by_name, read_report, run_protocol, run_rescorer
from benchmarks.core.verify import SNAPSHOT_FILE
from benchmarks.imported.importers import import_log
from benchmarks.imported.protocol import PROTOCOL

from .conftest import LMEVAL

DECISION = PROTOCOL.classifications["classification"]
RUN_LIBRARIES_FIRST = ("benchmarks.imported.protocol",)  # imported before pytester's snapshot: runs below are in process
GIT_ENV = {"GIT_AUTHOR_NAME": "preregbench test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "preregbench test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}


def decide(pytester: pytest.Pytester, results: Path, source: Path, run_id: str) -> Path:
    result = run_protocol(pytester, PROTOCOL.folder, results, f"--imported-source={source}", f"--run-id={run_id}",
                          in_process=True)
    report, run_dir = read_report(results, PROTOCOL.name, result)
    entry = report["benchmark"]["protocols"][PROTOCOL.name]
    assert entry["status"] == "complete", result.stdout.str()
    assert entry["classifications"]["decision"]["outcome"]["label"] == "NOT_ABOVE_CHANCE"
    outcomes = outcomes_by_name(report)
    assert [outcomes[f"test_decision[{rule}]"] for rule in DECISION.labels] == expected_pattern(DECISION,
                                                                                                 "NOT_ABOVE_CHANCE")
    assert result.ret == 1
    return run_dir


def test_two_lm_eval_runs_are_decided_and_compared(pytester: pytest.Pytester, tmp_path: Path) -> None:
    results = tmp_path / "results"
    import_log("lm-eval", LMEVAL / "smollm2", tmp_path / "smollm2")
    import_log("lm-eval", LMEVAL / "gemma", tmp_path / "gemma")
    smollm2 = decide(pytester, results / "a", tmp_path / "smollm2", "smollm2")
    gemma = decide(pytester, results / "b", tmp_path / "gemma", "gemma")
    rescored = run_rescorer(PROTOCOL.folder / "rescore.py", smollm2)
    assert rescored["classification"] == "NOT_ABOVE_CHANCE" and rescored["disagreements"] == []
    assert rescored["metrics"]["accuracy"] == 0.25 and rescored["metrics"]["units"] == 24

    compared = compare_runs(smollm2, gemma)
    overall = compared["measures"][0]
    assert (overall["measure"], overall["units"], overall["accuracy_a"], overall["accuracy_b"]) == \
        ("accuracy", 24, 0.25, 0.25)
    assert overall["table"]["a_only"] == overall["table"]["b_only"] and overall["mcnemar_exact_p"] == 1.0
    assert [m["measure"] for m in compared["measures"]] == ["accuracy", "subset.even.accuracy", "subset.odd.accuracy"]
    assert "McNemar p" in table(compared)

    records = (tmp_path / "smollm2" / "samples.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "import.json").write_bytes((tmp_path / "smollm2" / "import.json").read_bytes())
    (tmp_path / "short" / "samples.jsonl").write_text("".join(records[:-1]))
    result = run_protocol(pytester, PROTOCOL.folder, results / "c", f"--imported-source={tmp_path / 'short'}",
                          "--run-id=short", in_process=True)
    report, short = read_report(results / "c", PROTOCOL.name, result)
    assert report["benchmark"]["protocols"]["imported"]["classifications"]["decision"]["outcome"]["label"] == \
        "INCOMPLETE"
    with pytest.raises(CompareRefused, match="sample 23#1 is in run A and not in run B; the runs hold different "
                                             "sample sets"):
        compare_runs(smollm2, short)


def test_a_baseline_run_gives_the_paired_difference(pytester: pytest.Pytester, tmp_path: Path) -> None:
    for name in ("smollm2", "gemma"):
        import_log("lm-eval", LMEVAL / name, tmp_path / name)
    results = tmp_path / "results"
    result = run_protocol(pytester, PROTOCOL.folder, results, f"--imported-source={tmp_path / 'smollm2'}",
                          f"--imported-baseline={tmp_path / 'gemma'}", in_process=True)
    report, run_dir = read_report(results, PROTOCOL.name, result)
    assert report["benchmark"]["protocols"]["imported"]["status"] == "complete", result.stdout.str()
    metrics = json.loads((run_dir / "summary.json").read_text())["metrics"]
    assert (metrics["accuracy"], metrics["baseline_accuracy"], metrics["difference"]) == (0.25, 0.25, 0.0)
    assert metrics["difference_low"] == pytest.approx(-metrics["difference_high"]) and metrics["difference_high"] > 0.2
    rescored = run_rescorer(PROTOCOL.folder / "rescore.py", run_dir)
    assert rescored["disagreements"] == []
    assert rescored["metrics"]["difference_high"] == pytest.approx(metrics["difference_high"], abs=1e-12)

    records = (tmp_path / "gemma" / "samples.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "import.json").write_bytes((tmp_path / "gemma" / "import.json").read_bytes())
    (tmp_path / "short" / "samples.jsonl").write_text("".join(records[:-1]))
    refused = run_protocol(pytester, PROTOCOL.folder, tmp_path / "refused", f"--imported-source={tmp_path / 'smollm2'}",
                           f"--imported-baseline={tmp_path / 'short'}")
    assert refused.ret == 4
    assert "the baseline cannot be paired with the import (A: the import, B: the baseline): sample 23#1 is in run A " \
           "and not in run B" in refused.stdout.str() + refused.stderr.str()
    assert not (tmp_path / "refused").exists() or not list((tmp_path / "refused").rglob("records.jsonl"))


def test_a_run_without_a_fitting_import_stops_before_any_test(pytester: pytest.Pytester, tmp_path: Path,
                                                               inspect_logs: dict[str, Path]) -> None:
    import_log("inspect", inspect_logs["eval"], tmp_path / "inspect")
    for args, line in (((), "imported cannot run: give --imported-source DIR"),
                       ((f"--imported-source={tmp_path / 'inspect'}",),
                        "imported cannot run: the import is of format inspect, the prereg names lm-eval"),
                       ((f"--imported-source={tmp_path / 'nothing'}",),
                        f"--imported-source: {tmp_path / 'nothing'}: not an import directory")):
        result = run_protocol(pytester, PROTOCOL.folder, tmp_path / "results", *args, in_process=True)
        assert result.ret == 4 and line in result.stdout.str() + result.stderr.str()
    assert not (tmp_path / "results").exists()


def test_a_sample_whose_input_differs_is_named() -> None:
    from benchmarks.imported.importers import import_lm_eval
    from benchmarks.imported.metrics import decide as decide_sample

    source = PROTOCOL.spec.source
    samples = import_lm_eval(LMEVAL / "smollm2")[1]
    a = [decide_sample(s, source) for s in samples]
    b = list(a)
    b[5] = decide_sample(samples[5].__class__(**{**samples[5].__dict__, "input_sha256": "0" * 64}), source)
    assert PROTOCOL.pairing_problem(a, b).startswith("sample 5#1: its input differs between the runs")
    assert PROTOCOL.pairing_problem(a, a) is None


# --------------------------------------------------------------------------- verify: prospective or not


def git(folder: Path, *args: str, **env: str) -> None:
    subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True,
                   env={**os.environ, **GIT_ENV, **env})


def project(pytester: pytest.Pytester, name: str, log: Path, committed_at: str | None) -> Path:
    """A git repository holding ``protocols/<name>`` scaffolded from ``log``, frozen and committed."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\n'
                               'addopts = ["-p", "no:cacheprovider", "-m", "not cpu and not gpu"]\n')
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    (pytester.path / ".gitignore").write_text("results/\n__pycache__/\n")
    (pytester.path / "protocols").mkdir()
    (pytester.path / "protocols" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.cli", "new", name, "--into", "protocols",
                           "--from-import", str(log)], cwd=pytester.path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    prereg = pytester.path / "protocols" / name / "prereg.toml"
    digest = hashlib.sha256(prereg.read_bytes()).hexdigest()
    snapshot = pytester.path / SNAPSHOT_FILE
    snapshot.parent.mkdir(parents=True)
    snapshot.write_text("# serializer version: 1\n# name: test_preregistrations_are_frozen\n  dict({\n"
                        f"    'protocols/{name}/prereg.toml': '{digest}',\n  }})\n# ---\n")
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "preregistered", **({"GIT_COMMITTER_DATE": committed_at}
                                                                 if committed_at else {}))
    return pytester.path


def run_and_verify(pytester: pytest.Pytester, root: Path, name: str, imported: Path) -> tuple[int, list[str]]:
    result = pytester.runpytest_subprocess(f"protocols/{name}", "-m", "cpu", "-p", "no:randomly",
                                           f"--{name}-source={imported}")
    runs = sorted((root / "results" / name).glob("*/report.json"))
    assert len(runs) == 1, result.stdout.str()
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.verify", str(runs[0].parent)], cwd=root,
                          capture_output=True, text=True, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def test_an_inspect_log_made_after_its_prereg_is_verified(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
                                                          inspect_logs: dict[str, Path]) -> None:
    root = project(pytester, "addition", inspect_logs["eval"], "2000-01-01T00:00:00+00:00")
    imported = tmp_path_factory.mktemp("import") / "addition"
    import_log("inspect", inspect_logs["eval"], imported)
    status, lines = run_and_verify(pytester, root, "addition", imported)
    assert (status, lines[-1]) == (0, "VERIFIED"), lines
    assert any(line.startswith("ok           prospective: the imported inspect log") and "after protocols/addition/"
               "prereg.toml was committed at 2000-01-01" in line for line in lines), lines
    assert any("derives decision = TOO_MANY_ERRORS" in line for line in lines), lines  # 2 errored units of 12


def test_an_lm_eval_log_older_than_its_prereg_is_exploratory(pytester: pytest.Pytester,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    root = project(pytester, "addition", LMEVAL / "smollm2", None)  # committed now, after the log of 2026-12-06
    imported = tmp_path_factory.mktemp("import") / "addition"
    import_log("lm-eval", LMEVAL / "smollm2", imported)
    status, lines = run_and_verify(pytester, root, "addition", imported)
    assert status == 1, lines
    assert lines[-1].startswith("EXPLORATORY: fixtures.json: the imported lm-eval log samples_tiny_addition_"), lines
    assert "(created) at 2026-12-06T15:41:51.882929+00:00, before protocols/addition/prereg.toml was committed at" \
        in lines[-1] and lines[-1].endswith("the decision is exploratory, not confirmatory"), lines
    assert [line.split()[0] for line in lines[:-1]].count("EXPLORATORY") == 1, lines

    # compare finds the protocol folder of the checkout it runs in (the protocol is registered nowhere)
    import_log("lm-eval", LMEVAL / "gemma", imported.parent / "gemma")
    pytester.runpytest_subprocess("protocols/addition", "-m", "cpu", f"--addition-source={imported.parent / 'gemma'}",
                                  "--run-id=gemma")
    runs = sorted(p.parent for p in (root / "results" / "addition").glob("*/report.json"))
    first = next(r for r in runs if r.name != "gemma")
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.cli", "compare", str(first), str(runs[0].parent /
                           "gemma"), "--json", str(imported.parent / "compare.json")], cwd=root, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split() == ["measure", "n", "acc", "A", "acc", "B", "A", "-", "B", "95%",
                                                   "interval", "clusters", "A", "only", "B", "only", "McNemar", "p"]
    assert done.stdout.splitlines()[2].split()[:4] == ["accuracy", "24", "0.250", "0.250"]


def test_scores_that_are_not_0_or_1_are_compared_by_a_paired_bootstrap() -> None:
    from benchmarks.imported.importers import import_lm_eval
    from benchmarks.imported.metrics import decide as decide_sample

    source = PROTOCOL.spec.source
    samples = import_lm_eval(LMEVAL / "smollm2")[1]

    def scored(value: float, index: int) -> object:
        sample = samples[index]
        return decide_sample(sample.__class__(**{**sample.__dict__, "scores": {"acc": value}}), source)

    a = [scored(0.5 if i % 2 else 1.0, i) for i in range(len(samples))]  # partial credit: no per-unit success
    b = [scored(0.25, i) for i in range(len(samples))]
    assert PROTOCOL.paired_outcomes(a) == {}
    (row,) = PROTOCOL.paired_statistics(a, b)
    assert (row["measure"], row["units"], row["value_a"], row["value_b"]) == ("acc mean", 24, 0.75, 0.25)
    assert row["difference"] == 0.5 and row["interval"]["method"] == "paired-cluster-bootstrap"
    assert 0.25 < row["interval"]["low"] < 0.5 < row["interval"]["high"] < 0.75
    assert PROTOCOL.paired_statistics(a, b) == [row]  # seeded


@pytest.fixture(scope="module")
def smollm_folder() -> Path:
    """The bundled SmolLM2's weights folder, made before any ``pytester`` snapshot: converting the GGUF imports
    transformers and torch.distributed, which register native operators once per process and cannot be imported
    again after pytester drops the modules a test imported."""
    from models import bundled_folder

    return bundled_folder("smollm2-135m-instruct")[0]


@pytest.mark.slow
def test_an_inspect_log_of_the_served_bundled_model_is_decided_and_verified(
        smollm_folder: Path, pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect_ai against the bundled SmolLM2 served by ``transformers serve`` on loopback (its OpenAI-compatible
    API), imported, decided by a prereg committed before the log, and verified."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import GenerateConfig, ModelAPI, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    from models import serve_locally

    async def count_text_tokens(self: object, text: str) -> int:
        return max(1, len(text.split()))

    monkeypatch.setattr(ModelAPI, "count_text_tokens", count_text_tokens)
    logs = tmp_path_factory.mktemp("served-logs")
    monkeypatch.setenv("XDG_DATA_HOME", str(logs / "data"))  # inspect_ai's traces, not in the project (pytester's HOME)
    dataset = [Sample(id=f"sum-{i}", input=f"What is {i} plus {i}? Answer with a number.", target=str(2 * i))
               for i in range(6)]
    task = Task(dataset=dataset, solver=[generate()], scorer=includes(), name="served_addition")
    with serve_locally(smollm_folder, logs / "server") as (url, name):
        model = get_model(f"openai-api/local/{name}", base_url=url, api_key="none",
                          config=GenerateConfig(max_tokens=16, temperature=0.0))
        pilot = Path(inspect_eval(task, model=model, log_dir=str(logs / "pilot"), display="none")[0].location)
        root = project(pytester, "served", pilot, "2000-01-01T00:00:00+00:00")
        log = Path(inspect_eval(task, model=model, log_dir=str(logs / "confirmatory"), display="none")[0].location)
    imported = tmp_path_factory.mktemp("import") / "served"
    header = import_log("inspect", log, imported)
    assert (header["units"], header["errored"], header["model"]) == (6, 0, f"openai-api/local/{name}")
    status, lines = run_and_verify(pytester, root, "served", imported)
    assert (status, lines[-1]) == (0, "VERIFIED"), lines
