"""Wall time of PX-Engine prompt isolation: fork-after-load against reload-per-prompt and in-process, same run.

Usage: ``python scripts/bench/bench_px_isolation.py [--prompts 12] [--tokens 8] [--calibration 4]
[--preset ACTIVE_MANIFOLD] [--model gemma-3-270m] [--repeats 1] [--skip-reload]``

Each method runs the same calibration prompts and then the same measured
prompts through :func:`benchmarks.pzombie.px.run_prompts` (engine constants from the P-Zombie prereg):

* fork: a spawned loader process loads the weights once and forks a fresh
  child for the calibration and for every prompt (full isolation on CPU);
* reload: ``isolation="spawn"``, a fresh process per phase and per prompt that
  loads the weights itself (what isolation costs without fork);
* in-process: the model is loaded here (load time included) and every prompt
  runs in this process from a copy of the frozen state (no isolation).

It prints total wall times, the time after calibration per prompt, the
ratios against in-process (target: fork within 1.25x), and checks that the
three methods produced the same records.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a file: the suite is imported from the checkout that holds this script
    sys.path.insert(0, str(REPO))

from benchmarks.pzombie.engine import engine_config  # noqa: E402
from benchmarks.pzombie.px import PRESETS, ModelSpec, generation_settings, run_prompts  # noqa: E402
from benchmarks.pzombie.spec import PREREG  # noqa: E402

TOPICS = ("rivers", "prime numbers", "lighthouses", "syllogisms", "glaciers", "haiku", "copper", "orchards",
          "bridges", "migration", "tides", "alphabets", "clocks", "deserts", "violins", "ledgers")
TEMPLATES = ("Explain {} to a child.", "What is the most surprising fact about {}?", "Write one line of a poem about {}.",
             "How are {} like arguments?")


def prompts(count: int, prefix: str) -> list[tuple[str, str]]:
    return [(f"{prefix}-{i:02d}", TEMPLATES[i % len(TEMPLATES)].format(TOPICS[i % len(TOPICS)])) for i in range(count)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--scale", default="270M")
    parser.add_argument("--preset", default="ACTIVE_MANIFOLD", choices=PRESETS)
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--calibration", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-reload", action="store_true", help="leave out reload-per-prompt (the slow method)")
    args = parser.parse_args(argv)

    config = engine_config(args.scale)
    timeout_s = PREREG.values.run.prompt_timeout_s
    settings = generation_settings(args.preset, args.tokens, config)
    measured, calibration = prompts(args.prompts, "m"), prompts(args.calibration, "c")[::-1]
    spec = ModelSpec(args.model)

    def in_process():
        return run_prompts(spec, measured, preset=args.preset, config=config, settings=settings,
                           isolation="inprocess", calibration_prompts=calibration, timeout_s=timeout_s)

    def fork():
        return run_prompts(spec, measured, preset=args.preset, config=config, settings=settings,
                           isolation="fork", calibration_prompts=calibration, timeout_s=timeout_s)

    def reload():
        return run_prompts(spec, measured, preset=args.preset, config=config, settings=settings,
                           isolation="spawn", calibration_prompts=calibration, timeout_s=timeout_s)

    methods = {"fork after load": fork, "in-process": in_process}
    if not args.skip_reload:
        methods["reload per prompt"] = reload
    best = {name: float("inf") for name in methods}
    after_calibration = {name: float("inf") for name in methods}
    runs = {}
    for _ in range(args.repeats):
        for name, method in methods.items():
            start = time.perf_counter()
            run = method()
            total = time.perf_counter() - start
            if total < best[name]:
                best[name] = total
                after_calibration[name] = run.seconds_total - run.seconds_calibration
                runs[name] = run

    def strip(run):
        return [{k: v for k, v in r.as_dict().items() if k not in ("pid", "seconds", "isolation")} for r in run.records]

    reference = strip(runs["in-process"])
    print(f"model {args.model}; preset {args.preset}; {args.calibration} calibration + {args.prompts} measured prompts; "
          f"{args.tokens} new tokens; torch threads {torch.get_num_threads()}; best of {args.repeats}")
    print(f"{'method':<20} {'total s':>9} {'after calibration s':>20} {'per prompt s':>13} {'x in-process':>13}  same records")
    for name in methods:
        per_prompt = after_calibration[name] / max(1, args.prompts)
        print(f"{name:<20} {best[name]:>9.2f} {after_calibration[name]:>20.2f} {per_prompt:>13.3f} "
              f"{best[name] / best['in-process']:>13.3f}  {strip(runs[name]) == reference}")
    ratio = best["fork after load"] / best["in-process"]
    marginal = after_calibration["fork after load"] / after_calibration["in-process"]
    print(f"fork / in-process: total {ratio:.3f}, after calibration {marginal:.3f} (target <= 1.25)")
    if "reload per prompt" in methods:
        print(f"reload / fork: total {best['reload per prompt'] / best['fork after load']:.2f}")


if __name__ == "__main__":
    main()
