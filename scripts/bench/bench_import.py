"""Wall time and peak memory of ``preregbench import lm-eval`` on a large synthetic lm-evaluation-harness run.

    python scripts/bench/bench_import.py [--samples 100000] [--keep DIR]

Builds, in a temporary folder, the output of an lm-evaluation-harness run in its real format: a model folder
holding ``results_<time>.json`` and ``samples_<task>_<time>.jsonl`` with ``--samples`` four-choice samples made
from the committed tiny_addition run (``benchmarks/imported/tests/data/lmeval/smollm2``): each sample's doc,
prompt, arguments, responses, metric, and the doc, prompt and target hashes lm-eval computes; the results file's
task hash over all samples, its aggregate accuracy and sample count.  Then it runs ``preregbench import lm-eval``
on it in a fresh process and prints the exit status, the wall time and the child's peak resident memory
(``ru_maxrss``).  Targets: at most 20 s and 500 MiB for 100,000 samples.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "benchmarks" / "imported" / "tests" / "data" / "lmeval" / "smollm2"
STAMP = "2026-12-06T12-00-00.000000"
TASK = "tiny_addition"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build(folder: Path, samples: int, seed: int = 0) -> Path:
    """Write the synthetic run into ``folder``; the model folder."""
    template_results = json.loads(next(TEMPLATE.glob("*/results_*.json")).read_text(encoding="utf-8"))
    template = json.loads(next(TEMPLATE.glob("*/samples_*.jsonl")).read_text(encoding="utf-8").splitlines()[0])
    model = folder / "synthetic-model"
    model.mkdir(parents=True)
    rng = random.Random(seed)
    chained, correct = hashlib.sha256(), 0
    with (model / f"samples_{TASK}_{STAMP}.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id in range(samples):
            a, b = rng.randint(2, 999), rng.randint(2, 999)
            gold = a + b
            choices = [str(gold + d) for d in (0, -1, 1, 10)]
            rng.shuffle(choices)
            label = choices.index(str(gold))
            doc = {"id": f"add-{doc_id}", "question": f"What is {a} plus {b}?", "choices": choices, "label": label,
                   "parity": "even" if gold % 2 == 0 else "odd"}
            prompt = f"Question: {doc['question']}\nAnswer:"
            scores = [f"{-rng.uniform(2, 9):.6f}" for _ in choices]
            chosen = max(range(4), key=lambda i: float(scores[i]))
            acc = 1.0 if chosen == label else 0.0
            correct += int(acc)
            target = str(label)
            record = dict(template)
            record.update(
                doc_id=doc_id, doc=doc, target=target,
                arguments={f"gen_args_{i}": {"arg_0": prompt, "arg_1": f" {c}"} for i, c in enumerate(choices)},
                resps=[[[s, "False"]] for s in scores], filtered_resps=[[s, "False"] for s in scores],
                doc_hash=sha(json.dumps(doc, indent=2, ensure_ascii=False)), prompt_hash=sha(prompt),
                target_hash=sha(target), acc=acc,
            )
            chained.update((record["doc_hash"] + record["prompt_hash"] + record["target_hash"]).encode("utf-8"))
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    results = dict(template_results)
    results["results"] = {TASK: {"name": TASK, "alias": TASK, "sample_len": samples, "acc,none": correct / samples,
                                 "acc_stderr,none": 0.0}}
    results["n-samples"] = {TASK: {"original": samples, "effective": samples}}
    results["task_hashes"] = {TASK: chained.hexdigest()}
    (model / f"results_{STAMP}.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, default=None, help="build the run here and keep it")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        folder = args.keep or scratch / "run"
        started = time.perf_counter()
        model = build(folder, args.samples)
        size = sum(p.stat().st_size for p in model.iterdir())
        print(f"built {args.samples} samples ({size / 2**20:.1f} MiB) in {time.perf_counter() - started:.1f} s")
        out = scratch / "import"
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "benchmarks.core.cli", "import", "lm-eval", str(folder),
                               "--out", str(out)], cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(done.stdout.strip() or done.stderr.strip())
        print(f"import lm-eval: exit {done.returncode}, {wall:.2f} s, peak RSS {peak / 1024:.0f} MiB"
              f"{'' if peak > before else ' (at most; an earlier child was larger)'}")
        return done.returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
