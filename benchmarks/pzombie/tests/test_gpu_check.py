"""The CPU rehearsal of scripts/gpu-check.sh: every step of the GPU machine check, on tiny configs, on the CPU.

Marked ``slow`` (``.ci/run`` runs ``pytest -m slow``): a few minutes on two cores.  The wheel folder is filled
offline from this environment's installed copies (``--fill-wheels --from-installed``), so the rehearsal installs
from a folder exactly as the lent machine does; the P-Zombie run with the CPU's preregistered isolation is
stopped at a cap, as the spawn run is on the GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
STEPS = ["install", "build", "layouts", "marked-tests", "pzombie-default", "pzombie-inprocess", "res", "cwr", "logits"]
CAP_S = 30
PZOMBIE_LABELS = {"token_control", "combined", "eta2_target", "h2"}


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHON"] = sys.executable
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    base = tmp_path_factory.mktemp("gpu-check")
    wheels, out = base / "wheels", base / "out"
    filled = _script("--fill-wheels", "--from-installed", str(wheels), timeout=300)
    assert filled.returncode == 0, filled.stderr
    result = _script("--device", "cpu", "--tiny", "--wheels", str(wheels), "--pzombie-cap", str(CAP_S), "--budget", "900", str(out),
                     timeout=900)
    return result, out, wheels


def test_bad_arguments_give_the_usage_line(tmp_path: Path) -> None:
    for args in (["--device", "tpu", str(tmp_path / "x")], [], ["--pzombie-cap", "soon", str(tmp_path / "x")],
                 ["--budget", "-1", str(tmp_path / "x")],
                 [str(tmp_path / "a"), str(tmp_path / "b")]):
        result = _script(*args, timeout=60)
        assert result.returncode == 4 and result.stderr.startswith("usage: scripts/gpu-check.sh"), args
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    result = _script("--device", "cpu", str(tmp_path / "used"), timeout=60)
    assert result.returncode == 4 and "is not empty" in result.stderr
    result = _script("--device", "cpu", "--wheels", str(tmp_path / "empty"), str(tmp_path / "fresh"), timeout=60)
    assert result.returncode == 4 and "--fill-wheels" in result.stderr


def test_the_wheel_folder_holds_the_pinned_wheels_and_the_tokenizer(rehearsal) -> None:
    _, out, wheels = rehearsal
    names = sorted(p.name for p in wheels.iterdir())
    assert names == ["bundled-tokenizers.tar.gz", "pytest_json_report-1.5.0-py3-none-any.whl",
                     "pytest_metadata-3.1.1-py3-none-any.whl", "syrupy-7.0.3-py3-none-any.whl"]
    installed = sorted(p.name for p in (out / "site").iterdir() if p.name.endswith(".dist-info"))
    assert installed == ["pytest_json_report-1.5.0.dist-info", "pytest_metadata-3.1.1.dist-info", "syrupy-7.0.3.dist-info"]


def test_every_step_runs_and_passes(rehearsal) -> None:
    result, out, _ = rehearsal
    summary = json.loads((out / "summary.json").read_text())
    assert [s["step"] for s in summary["steps"]] == STEPS, result.stdout + result.stderr
    failed = {s["step"]: s["exit_status"] for s in summary["steps"] if not s["passed"]}
    assert failed == {}, result.stdout + result.stderr
    assert result.returncode == 0 and summary["passed"] is True and summary["schema_version"] == 1
    assert summary["settings"]["device"] == "cpu" and summary["settings"]["tiny"] is True
    for step in summary["steps"]:
        log = (out / step["log"]).read_text()
        assert f"{step['step']}: exit {step['exit_status']}" in log
        assert step["seconds"] > 0 and step["peak_memory_bytes"] > 0
    statuses = {s["step"]: s["exit_status"] for s in summary["steps"]}
    assert all(statuses[name] == 0 for name in ("install", "build", "layouts", "marked-tests", "logits"))
    assert statuses["pzombie-inprocess"] in (0, 1) and statuses["res"] in (0, 1) and statuses["cwr"] in (0, 1)
    assert "gpu-check: all steps passed" in result.stdout


def test_checkpoints_of_the_four_layouts_are_built_and_run(rehearsal) -> None:
    _, out, _ = rehearsal
    built = json.loads((out / "build.json").read_text())["models"]
    assert sorted(built) == ["gemma3-1b", "gemma3-270m", "gemma3-4b", "gemma3n-e2b"]
    assert {m["scale"] for m in built.values()} == {"270M", "1B", "4B", "E2B"}
    for name, model in built.items():
        folder = Path(model["folder"])
        assert model["finite"] and model["tiny"] and (folder / "model.safetensors").is_file(), name
        assert (folder / "tokenizer.json").is_file() and (folder / "chat_template.jinja").is_file(), name
    layers = {name: json.loads((Path(m["folder"]) / "config.json").read_text()) for name, m in built.items()}
    depth = {name: (c.get("text_config") or c)["num_hidden_layers"] for name, c in layers.items()}
    assert depth == {"gemma3-270m": 18, "gemma3-1b": 26, "gemma3-4b": 34, "gemma3n-e2b": 30}
    runs = json.loads((out / "layouts.json").read_text())["layouts"]
    assert sorted(runs) == sorted(built) and all(r["ok"] for r in runs.values())
    assert all(r["presets"]["ACTIVE_MANIFOLD"]["loops_run"] and not any(r["presets"]["BASELINE"]["loops_run"])
               for r in runs.values())


def test_gpu_marked_tests_are_selected_and_skip_on_the_cpu(rehearsal) -> None:
    _, out, _ = rehearsal
    step = next(s for s in json.loads((out / "summary.json").read_text())["steps"] if s["step"] == "marked-tests")
    tests = step["tests"]
    assert tests["tests"] >= 5 and tests["skipped"] == tests["tests"] and tests["failures"] == tests["errors"] == 0
    assert all("needs a CUDA device" in reason for reason in tests["skip_reasons"])


def test_pzombie_runs_reach_their_verdicts(rehearsal) -> None:
    _, out, _ = rehearsal
    steps = {s["step"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    whole = steps["pzombie-inprocess"]["run"]
    assert whole["status"] == "complete" and whole["records"] == 160 and whole["error_records"] == 0
    assert set(whole["labels"]) == PZOMBIE_LABELS and all(whole["labels"].values())
    assert whole["isolation"] == ["inprocess"] and whole["calibrated_presets"] == ["ACTIVE_MANIFOLD", "BASELINE"]
    tokens = json.loads((out / "summary.json").read_text())["settings"]["pzombie_max_new_tokens"]
    assert f"max_new_tokens {tokens} instead of 60" in whole["deviations"]
    assert "isolation 'inprocess' instead of 'fork'" in whole["deviations"]
    run_dir = Path(whole["run_dir"])
    for name in ("report.json", "provenance.json", "records.jsonl", "stats.json", "aggregate.json"):
        assert (run_dir / name).is_file(), name
    default = steps["pzombie-default"]["run"]
    assert default["isolation"] == ["fork"] and default["distinct_pids"] and default["error_records"] == 0
    if default["stopped_at_cap"]:  # the GPU path: the prompts measured in order before the cap, kept on disk
        # (all 160 when the cap falls after the last record but before the run has written its results)
        assert steps["pzombie-default"]["exit_status"] == 124 and 0 < default["records"] <= 160
        assert "ACTIVE_MANIFOLD" in default["calibrated_presets"] and default["status"] != "complete"
        assert default["estimated_full_run_s"] >= CAP_S  # it ran the whole cap, and more prompts were left or not
    else:  # a machine fast enough to finish inside the cap
        assert default["status"] == "complete" and default["records"] == 160
    plan = json.loads((out / "summary.json").read_text())["settings"]["pzombie_plan"]
    assert plan["default_measured_units"] == default["records"]


def test_res_and_cwr_runs_are_complete(rehearsal) -> None:
    _, out, _ = rehearsal
    steps = {s["step"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    res, cwr = steps["res"]["run"], steps["cwr"]["run"]
    assert res["status"] == cwr["status"] == "complete"
    assert set(res["labels"]) == {"gate"} and res["labels"]["gate"] and res["records"] == 64
    assert set(cwr["labels"]) == {"cwr"} and cwr["labels"]["cwr"] and cwr["records"] > 0
    assert any("reduced pass: 1 units per condition" in d for d in cwr["deviations"])
    for run in (res, cwr):
        assert (Path(run["run_dir"]) / "report.json").is_file() and run["error_records"] == 0


def test_logits_agree_within_the_tolerance_and_the_controls_do_not(rehearsal) -> None:
    _, out, _ = rehearsal
    record = json.loads((out / "logits.json").read_text())
    assert record["tested"] == {"device": "cpu", "dtype": "bfloat16"}
    assert record["tolerance"] == {"min_correlation": 0.99, "max_abs_over_std": 0.5}
    assert len(record["prompts"]) == 3 and all(row["within"] for row in record["prompts"])
    assert all(row["correlation"] >= 0.99 and row["max_abs_over_std"] <= 0.5 for row in record["prompts"])
    controls = [m for rows in record["controls"].values() for m in rows]
    assert len(controls) == 6 and all(m["correlation"] < 0.99 or m["max_abs_over_std"] > 0.5 for m in controls)
    assert record["ok"] is True and record["controls_fail_tolerance"] is True
