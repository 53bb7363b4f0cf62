"""The launch recipes of ``scripts/launch`` and ``.github/workflows/sharded-run.yml``, run here as their scheduler
would run them: each recipe's own commands, with its shard index variable set per task, on RES with a scripted
model in two shards, then its merge step.  Only what needs the scheduler is stood in for (the shared results
folder, the checkout, the install and artifact steps of the workflow)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.core.rundir import SUITE_ROOT

pytestmark = pytest.mark.slow

LAUNCH = SUITE_ROOT / "scripts" / "launch"
WORKFLOW = SUITE_ROOT / ".github" / "workflows" / "sharded-run.yml"
SHARDS = 2
MODEL = "scripted-oracle"


def environment(results: Path, **more: str) -> dict[str, str]:
    """This process's environment, with the suite's commands on PATH (as where it is installed: the recipes call
    ``preregbench``) and the recipe's variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update({"PROTOCOL": "res", "RUN": "recipe", "RESULTS": str(results), **more})
    return env


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=SUITE_ROOT, env=env, capture_output=True, text=True, check=False, timeout=900)


def check_merged(results: Path, done: subprocess.CompletedProcess[str], run_id: str = "recipe") -> None:
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    merged = results / "res" / run_id
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["records"]["count"] == 64
    assert all(label for label in summary["classifications"].values())
    provenance = json.loads((merged / "provenance.json").read_text())
    assert [s["shard"] for s in provenance["extra"]["merged_from"]] == [f"{k}/{SHARDS}" for k in range(1, SHARDS + 1)]
    # verify's final line (a scripted model is a deviation, so EXPLORATORY at best)
    assert re.search(r"^(VERIFIED|EXPLORATORY)\b", done.stdout, re.M), done.stdout[-2000:]


def test_slurm_job_array(tmp_path: Path) -> None:
    script = (LAUNCH / "slurm-shards.sh").read_text()
    array = re.search(r"^#SBATCH --array=1-(\d+)$", script, re.M)
    submit = re.search(r"--array=1-(\d+) scripts/launch/slurm-shards\.sh.*\n.*merge\.sh (\d+)", script)
    assert array and submit and array.group(1) == submit.group(1) == submit.group(2), "header and usage disagree"
    results = tmp_path / "results"
    elsewhere = tmp_path / "spool"  # Slurm runs a copy of the script from its spool folder
    elsewhere.mkdir()
    copy = elsewhere / "slurm_script"
    copy.write_text(script)
    for task in range(1, SHARDS + 1):
        env = environment(results, SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_COUNT=str(SHARDS),
                          SLURM_SUBMIT_DIR=str(SUITE_ROOT))
        done = subprocess.run(["bash", str(copy), "--model", MODEL], cwd=elsewhere, env=env, capture_output=True,
                              text=True, check=False, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"shard {task}/{SHARDS}, decided after merge" in done.stdout
    check_merged(results, run(["bash", "scripts/launch/merge.sh", str(SHARDS)], environment(results)))


def _container(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    job = yaml.safe_load(path.read_text())
    return job["spec"], job["spec"]["template"]["spec"]["containers"][0]


def _pod_env(container: dict[str, Any], results: Path, **more: str) -> dict[str, str]:
    values = {e["name"]: str(e["value"]) for e in container.get("env", [])}
    values.update(RESULTS=str(results), PROTOCOL="res", MODEL=MODEL, **more)  # the shared volume, a run made here
    return environment(results, **values)


def test_kubernetes_indexed_job(tmp_path: Path) -> None:
    spec, container = _container(LAUNCH / "k8s-shards-job.yaml")
    assert spec["completionMode"] == "Indexed"
    count = int(spec["completions"])
    assert spec["parallelism"] == count and {e["name"]: e["value"] for e in container["env"]}["SHARDS"] == str(count)
    results = tmp_path / "results"
    for index in range(SHARDS):  # the manifest's command, with this test's shard count
        env = _pod_env(container, results, JOB_COMPLETION_INDEX=str(index), SHARDS=str(SHARDS))
        done = run([*container["command"], *container["args"]], env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    merge_spec, merger = _container(LAUNCH / "k8s-merge-job.yaml")
    shared = {e["name"]: e["value"] for e in merger["env"]}
    assert {k: v for k, v in shared.items()} == {e["name"]: e["value"] for e in container["env"] if e["name"] in shared}
    check_merged(results, run([*merger["command"], *merger["args"]], _pod_env(merger, results, SHARDS=str(SHARDS))),
                 run_id=shared["RUN"])


_EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _render(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match.group(1) in values, f"the test does not stand in for ${{{{ {match.group(1)} }}}}"
        return values[match.group(1)]

    return _EXPRESSION.sub(value, text)


def _steps(job: dict[str, Any], values: dict[str, str], results: Path, **more: str) -> None:
    """Run the job's shell steps (not the install and the actions) as the runner would, in bash -e."""
    job_env = {k: _render(str(v), values) for k, v in (job.get("env") or {}).items()}
    for step in job["steps"]:
        if "run" not in step or step.get("name") == "Install":
            continue
        env = environment(results, **job_env, **{k: _render(str(v), values) for k, v in (step.get("env") or {}).items()},
                          **more)
        env["RESULTS"] = str(results)  # the artifacts' folder, shared here
        done = run(["bash", "-e", "-c", _render(step["run"], values)], env)
        assert done.returncode in (0, 1) if step.get("id") == "merge" else done.returncode == 0, (
            f"{step.get('name')}: " + done.stdout[-3000:] + done.stderr[-3000:])
        if step.get("id") == "merge":
            check_merged(results, done, run_id=job_env["RUN"])


def test_github_actions_matrix(tmp_path: Path) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    assert jobs["shard"]["needs"] == "plan" and jobs["merge"]["needs"] == "shard"
    inputs = {"inputs.protocol": "res", "inputs.model": MODEL, "inputs.shards": str(SHARDS), "inputs.options": "",
              "github.run_id": "7"}
    output = tmp_path / "github_output"
    output.write_text("")
    plan = jobs["plan"]["steps"][0]
    done = run(["bash", "-e", "-c", plan["run"]], environment(tmp_path, SHARDS=str(SHARDS), GITHUB_OUTPUT=str(output)))
    assert done.returncode == 0, done.stderr
    indices = json.loads(output.read_text().strip().split("=", 1)[1])
    assert indices == list(range(1, SHARDS + 1))
    assert jobs["shard"]["strategy"]["matrix"]["index"] == "${{ fromJSON(needs.plan.outputs.indices) }}"
    results = tmp_path / "results"
    for index in indices:
        _steps(jobs["shard"], {**inputs, "matrix.index": str(index)}, results)
    _steps(jobs["merge"], inputs, results)
    refused = run(["bash", "-e", "-c", plan["run"]], environment(tmp_path, SHARDS="four", GITHUB_OUTPUT=str(output)))
    assert refused.returncode == 4 and "shards must be a number" in refused.stderr
