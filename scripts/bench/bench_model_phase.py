"""RES model phase: a previous commit's transformers backend against the current one, on all 64 rows.

Usage::

    python scripts/bench/bench_model_phase.py [--previous d06516b] [--repeats 1] [--threads N]
                                              [--attn sdpa|eager] [--shared-prefix layout|once|off]
                                              [--batches N] [--json PATH]

The script loads ``models/_hf.py`` as it was at ``--previous`` (``git show``,
imported as ``models._hf_previous`` next to the current package, so both share
``models._base``) and the current backend, each with its own copy of the
bundled SmolLM2, and runs ``ResProtocol.measure`` over the 8 batches of 8 with
each of them, alternating previous and current ``--repeats`` times (each pass of
a backend with a prefix cache starts with it empty, as a fresh run does).  It
prints, per row, the largest absolute difference between the two sides'
last-position logits over the whole vocabulary, whether the generated text and
every field of the record are identical, then each side's model-phase time and
its arithmetic rate as a fraction of a float32 matmul rate measured in the same
process.  The logits are the ones the backend scores with: what its ``_prefill``
returns (in batch order, however many forwards the shared-prefix path ran), or,
for a backend without it, the output head's last position in the first forward
of each batch.  Each side's FLOPs are counted from the forwards it really ran
(``FlopCounter``), so the shared-prefix path's rate is over the work it did.

The current side loads as a RES run does (``ResProtocol.load_model``, so with
``threads="auto"``, see ``benchmarks.core.tuning.cpu_threads``, and ``shared_prefix="layout"``);
the previous side runs at the thread count the current side chose when its
backend takes a ``threads`` option, and at torch's otherwise (as such a backend
did).  ``--threads``, ``--attn`` and ``--shared-prefix`` change the current side
only (its thread count, the attention implementation of its copy, its
shared-prefix mode), so the same comparison tells whether such a setting keeps
the records and what it buys.  Exit status 1 when a row's logits differ by more
than 1e-5 or any record differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Sequence

from bench_vs_lmeval import (  # beside this script
    MODEL,
    REPO,
    FlopCounter,
    _forward_flops,
    _matmul_gflops,
)

TOLERANCE = 1e-5


def previous_backend(commit: str) -> ModuleType:
    """``models/_hf.py`` at ``commit``, imported as ``models._hf_previous``."""
    done = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:models/_hf.py"], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_model_phase: cannot read models/_hf.py at {commit}: {done.stderr.strip()}")
    folder = Path(tempfile.mkdtemp(prefix="res-previous-backend-"))
    source = folder / "_hf_previous.py"
    source.write_text(done.stdout, encoding="utf-8")
    import models  # noqa: F401 - the parent package of the relative imports

    spec = importlib.util.spec_from_file_location("models._hf_previous", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class HeadCapture:
    """Keeps the last-position logits of every prompt, in batch order, as the backend scores them.

    A backend with ``_prefill`` (the shared-prefix one: a batch may take two forwards, rows split between
    them, and a prefix may run alone) hands back the batch's logits from that method, which is wrapped.  An
    older backend runs one prefill a batch: its output head's last position, from the first forward of each
    batch with more than one input column, is kept.
    """

    def __init__(self, model: Any):
        self.model = model
        self.rows: list[Any] = []
        self._expect_prefill = True

    def __enter__(self) -> "HeadCapture":
        self._handles = []
        if hasattr(self.model, "_prefill"):
            original = self.model._prefill

            def prefill(*args: Any, **kwargs: Any) -> Any:
                logits, cache = original(*args, **kwargs)
                self.rows.extend(logits.float().clone())
                return logits, cache

            self.model._prefill = prefill
            return self
        head = self.model.model.get_output_embeddings()
        self._handles = [
            self.model.model.register_forward_pre_hook(self._before, with_kwargs=True),
            head.register_forward_hook(self._after),
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        if "_prefill" in vars(self.model):
            del self.model._prefill
        for handle in self._handles:
            handle.remove()

    def _before(self, module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._expect_prefill = ids is not None and ids.shape[-1] > 1

    def _after(self, module: Any, args: Any, output: Any) -> None:
        if self._expect_prefill:
            self.rows.extend(output[:, -1, :].float().clone())


def model_phase(model: Any, run: Any, batches: Sequence[Sequence[Any]]) -> tuple[float, list, list, float]:
    """(seconds, records, last-position logits, GFLOP computed) of ``measure`` over every batch."""
    from benchmarks.res.protocol import PROTOCOL

    records: list[Any] = []
    if hasattr(model, "forget_prefixes"):
        model.forget_prefixes()  # every pass starts as a fresh RES run does: nothing cached, counters at zero
    with HeadCapture(model) as capture, FlopCounter(model) as flops:
        start = time.perf_counter()
        for batch in batches:
            records.extend(PROTOCOL.measure(run, model, batch))
        seconds = time.perf_counter() - start
    return seconds, records, capture.rows, flops.flop / 1e9


def padded_gflop(config: Any, model: Any, records: Sequence[Any], batches: Sequence[Sequence[Any]]) -> float:
    """Multiply-add GFLOP of the plain path over the padded batches (one prefill a batch, each decoding step)."""
    total, offset = 0.0, 0
    for batch in batches:
        rows = records[offset:offset + len(batch)]
        offset += len(batch)
        width = max(len(model.encode(r.prompt)) for r in rows)
        total += _forward_flops(config, len(batch), width, width, len(batch))
        for step in range(1, max(len(r.generation_token_ids) for r in rows)):
            total += _forward_flops(config, len(batch), 1, width + step, len(batch))
    return total / 1e9


def compare(previous: Sequence[Any], current: Sequence[Any], prev_logits: Sequence[Any],
            cur_logits: Sequence[Any]) -> tuple[bool, list[str]]:
    lines, ok = [], len(previous) == len(current) == len(prev_logits) == len(cur_logits)
    for old, new, a, b in zip(previous, current, prev_logits, cur_logits):
        diff = float((a - b).abs().max())
        fields = [f.name for f in dataclasses.fields(old) if getattr(old, f.name) != getattr(new, f.name)]
        same = not fields
        ok = ok and same and diff <= TOLERANCE and old.item_id == new.item_id
        lines.append(f"{old.item_id:28s} max|dlogit| {diff:.3e}  text {'same' if old.generation == new.generation else 'DIFFERS'}"
                     f"  records {'identical' if same else 'differ in ' + ', '.join(fields)}  "
                     f"generation {old.generation!r}")
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default="d06516b", help="the commit whose models/_hf.py is the previous path")
    parser.add_argument("--repeats", type=int, default=1, help="alternating (previous, current) passes (default 1)")
    parser.add_argument("--threads", type=int, help="torch threads for the current side (default: unchanged)")
    parser.add_argument("--attn", choices=["sdpa", "eager"], help="attention implementation of the current side")
    parser.add_argument("--shared-prefix", choices=["layout", "once", "off"],
                        help="shared-prefix mode of the current side (default: as RES loads it)")
    parser.add_argument("--batches", type=int, help="only the first N batches (a quick check; default all 8)")
    parser.add_argument("--json", type=Path, help="write the figures to this file as well")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    import torch

    from benchmarks.core.tuning import ProcessTuning
    from benchmarks.res.protocol import PROTOCOL
    from models._bundled import BUNDLED

    print(f"load average {_load()} before loading")
    old_backend = previous_backend(args.previous)
    run = SimpleNamespace(settings={"fixture_set": PROTOCOL.spec.measurement.fixture_set}, model=MODEL,
                          device="cpu", revision=None, tuning=ProcessTuning())
    run.fixture_sets = PROTOCOL.fixture_sets(run)
    with run.tuning.loading_model(run):  # the model load and thread choice of a run (benchmarks.core.tuning)
        current = PROTOCOL.load_model(run)
    run.tuning.model_loaded(run, current)
    options = {}
    if "threads" in inspect.signature(old_backend.TransformersModel.__init__).parameters:
        options["threads"] = current.threads  # the count RES's threads="auto" chose for the current side
    previous = old_backend.TransformersModel.from_local(
        Path(current.source), revision=current.revision, model_id=current.model_id,
        chat_template=BUNDLED[MODEL].chat_template, stop_tokens=BUNDLED[MODEL].stop_tokens,
        batch_size=current.batch_size, seed=current.seed, **options)
    if args.threads:
        current.threads = args.threads
    if args.attn:
        current.model.config._attn_implementation = args.attn
    if args.shared_prefix:
        current.shared_prefix = None if args.shared_prefix == "off" else args.shared_prefix
    batches = list(PROTOCOL.batches(run, PROTOCOL.units(run)))[:args.batches]

    times: dict[str, list[float]] = {"previous": [], "current": []}
    gflops: dict[str, float] = {}
    for _ in range(args.repeats):
        t_old, old_records, old_logits, gflops["previous"] = model_phase(previous, run, batches)
        t_new, new_records, new_logits, gflops["current"] = model_phase(current, run, batches)
        times["previous"].append(t_old)
        times["current"].append(t_new)
    ok, lines = compare(old_records, new_records, old_logits, new_logits)
    counts = {"previous": getattr(previous, "threads", None) or torch.get_num_threads(),
              "current": current.threads or torch.get_num_threads()}
    stats = getattr(current, "prefix_stats", None)
    print(f"previous: models/_hf.py at {args.previous}, {counts['previous']} torch threads; current: this checkout, "
          f"{counts['current']} torch threads"
          f"{' (--threads)' if args.threads else ''}, attention {current.model.config._attn_implementation}, "
          f"shared prefix {getattr(current, 'shared_prefix', None) or 'off'}"
          f"{' (--shared-prefix)' if args.shared_prefix else ''}; "
          f"{len(batches)} batches of {current.batch_size}, padding {current.tokenizer.padding_side}")
    if stats:
        print("current shared-prefix counters (last pass): " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    print("\n".join(lines))
    worst = max(float((a - b).abs().max()) for a, b in zip(old_logits, new_logits))
    print(f"{sum('identical' in line for line in lines)}/{len(lines)} records identical in every field; "
          f"{sum(line.count('text same') for line in lines)}/{len(lines)} generated texts identical; "
          f"largest logit difference {worst:.3e} (tolerance {TOLERANCE:g})")

    config = current.model.config
    padded = padded_gflop(config, current, new_records, batches)
    h = config.hidden_size
    shapes = {"square 1024": (1024, 1024, 1024),
              f"model-shaped 1840x{h}x{config.intermediate_size}": (1840, h, config.intermediate_size)}
    print(f"load average {_load()} after the passes")
    torch_threads = torch.get_num_threads()
    best: dict[int, float] = {}
    rates: dict[str, float] = {}
    for threads in sorted(set(counts.values())):
        torch.set_num_threads(threads)
        try:
            for name, shape in shapes.items():
                rates[f"{name}, {threads} thread(s)"] = _matmul_gflops(torch, shape)
        finally:
            torch.set_num_threads(torch_threads)
        best[threads] = max(v for k, v in rates.items() if k.endswith(f", {threads} thread(s)"))
    print("float32 matmul in this process: " + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in rates.items()))
    print(f"the plain path over the padded batches computes {padded:.0f} GFLOP (prefills and decoding steps); "
          f"each side's count below is what its forwards ran")
    for side, values in times.items():
        fastest, threads, gflop = min(values), counts[side], gflops[side]
        print(f"{side:8s} model phase " + ", ".join(f"{v:.1f}" for v in values) + f" s; best {fastest:.1f} s = "
              f"{gflop / fastest:.1f} GFLOP/s ({gflop:.0f} GFLOP) = {gflop / fastest / best[threads]:.2f} of the "
              f"matmul rate at its {threads} thread(s), {gflop / fastest / max(best.values()):.2f} of the best")
    print(f"current/previous (best against best) {min(times['current']) / min(times['previous']):.3f}")
    if args.json:
        args.json.write_text(json.dumps({"times": times, "gflop": gflops,
                                         "padded_gflop": padded, "matmul_gflops": rates, "ok": ok,
                                         "largest_logit_difference": worst, "prefix_stats": stats},
                                        sort_keys=True, indent=2) + "\n")
    return 0 if ok else 1


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
