"""RES on the bundled SmolLM2 against lm-evaluation-harness on the same prompts: whole processes, interleaved.

Usage::

    python scripts/bench/bench_vs_lmeval.py --lm-eval /path/to/other-venv/bin/lm_eval [--pairs 3] [--keep DIR]

lm-eval lives in a virtual environment of its own (never a dependency of the
suite); ``--lm-eval`` names its ``lm_eval`` executable.  The script

1. renders the 64 RES prompts with the protocol's own code (``ResProtocol.measure``
   on a stand-in model that keeps the prompts it is handed and renders chats
   with the bundled SmolLM2's tokenizer), and writes an lm-eval task folder in a
   temporary directory: one JSONL dataset row per prompt, a loglikelihood task
   whose contexts are those strings and whose choices are the prereg's labels
   (``A``, ``B``, no delimiter), and a ``generate_until`` task with the same
   contexts and the run's bound of new tokens, so lm-eval does the work a RES run
   does (first-token scores and a short greedy answer);
2. checks the claim that both sides score the same token sequences: the suite's
   prompt ids (``model.encode``) against the input lm-eval's own ``_encode_pair``
   builds for every context and choice (run in lm-eval's interpreter), and the
   last continuation token against the label's token id;
3. measures, in a worker process of the suite, the import time of torch and
   transformers, the model phase (the protocol's ``measure`` over all batches at
   the preregistered batch size) and a float32 matmul rate at the thread count the
   model phase ran with, and reports the model phase's arithmetic rate as a
   fraction of that matmul rate;
4. times ``preregbench run res --model smollm2-135m-instruct`` (as
   ``python -m benchmarks.core.cli``, this checkout) and ``lm_eval run`` on the
   task, interleaved A B A B ..., printing each run's wall time, peak RSS
   (``os.wait4`` of that child) and the ratio preregbench/lm-eval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a file: the suite is imported from the checkout that holds this script
    sys.path.insert(0, str(REPO))
MODEL = "smollm2-135m-instruct"
DATASET_FILE = "res_prompts.jsonl"
LOGIT_TASK = "preregbench_res_logits"
GENERATE_TASK = "preregbench_res_generate"


class UsageError(Exception):
    """A bad argument or a missing tool: one line for the user."""


# --------------------------------------------------------------------------- the suite's prompts


@dataclass(frozen=True)
class PromptRow:
    item_id: str  # the RES unit id, "<condition>:<index>"
    condition: str
    context: str  # the exact prompt text the RES run hands the model
    gold: int  # index of the gold label among the prereg's labels


class _Captured(Exception):
    pass


class _PromptCapture:
    """Stands in for the model inside ``ResProtocol.measure``: renders chats with ``render`` and keeps the
    prompts and labels that ``measure`` hands to ``score_and_generate`` (then stops that batch)."""

    def __init__(self, render: Callable[[Sequence[dict[str, str]]], str]):
        self.render_chat = render
        self.prompts: list[str] = []
        self.labels: list[str] | None = None
        self.max_new_tokens: int | None = None

    def score_and_generate(self, prompts: Sequence[str], choices: Sequence[str], settings: Any) -> list[Any]:
        self.prompts.extend(prompts)
        self.labels = list(choices)
        self.max_new_tokens = settings.max_new_tokens
        raise _Captured


def suite_prompts(render: Callable[[Sequence[dict[str, str]]], str],
                  fixture_set: str | None = None) -> tuple[list[PromptRow], list[str], int]:
    """The RES run's prompts in unit order (rendered by ``render``), its labels and its bound of new tokens.

    The units, batches and prompts come from the protocol object itself: its
    ``units``, ``batches`` and ``measure`` run on a minimal run (settings and
    fixture sets only), so a change to the protocol's prompt code shows here.
    """
    from benchmarks.res.protocol import PROTOCOL
    from fixtures.res import gold_label

    run = SimpleNamespace(settings={"fixture_set": fixture_set or PROTOCOL.spec.measurement.fixture_set})
    run.fixture_sets = PROTOCOL.fixture_sets(run)
    capture = _PromptCapture(render)
    units = PROTOCOL.units(run)
    for batch in PROTOCOL.batches(run, units):
        before = len(capture.prompts)
        try:
            PROTOCOL.measure(run, capture, batch)
        except _Captured:
            pass
        if len(capture.prompts) - before != len(batch):
            raise RuntimeError(f"ResProtocol.measure handed {len(capture.prompts) - before} prompts for a batch "
                               f"of {len(batch)} units")
    labels = capture.labels or list(PROTOCOL.spec.measurement.labels)
    rows = [PromptRow(u.item_id, u.condition, prompt, labels.index(gold_label(u.row)))
            for u, prompt in zip(units, capture.prompts)]
    return rows, labels, int(capture.max_new_tokens or PROTOCOL.spec.measurement.max_new_tokens)


# --------------------------------------------------------------------------- the lm-eval task


def _q(value: Any) -> str:
    """A YAML scalar or flow collection (JSON is valid YAML)."""
    return json.dumps(value, ensure_ascii=False)


def write_task(folder: Path, rows: Sequence[PromptRow], labels: Sequence[str], max_new_tokens: int,
               stop: Sequence[str]) -> dict[str, Path]:
    """Write the dataset and the two task files into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / DATASET_FILE
    with open(data, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"item_id": row.item_id, "condition": row.condition, "context": row.context,
                                     "gold": row.gold}, ensure_ascii=False, sort_keys=True) + "\n")
    common = [
        "dataset_path: json",
        "dataset_kwargs:",
        f"  data_files: {{test: {_q(str(data))}}}",
        "test_split: test",
        "doc_to_text: context",
        "description: ''",
        "target_delimiter: ''",
        "num_fewshot: 0",
    ]
    logits = folder / f"{LOGIT_TASK}.yaml"
    logits.write_text("\n".join([
        f"task: {LOGIT_TASK}", "output_type: multiple_choice", *common,
        f"doc_to_choice: {_q(list(labels))}", "doc_to_target: gold",
        "metric_list:", "  - metric: acc", "    aggregation: mean", "    higher_is_better: true",
    ]) + "\n", encoding="utf-8")
    generate = folder / f"{GENERATE_TASK}.yaml"
    generate.write_text("\n".join([
        f"task: {GENERATE_TASK}", "output_type: generate_until", *common,
        "doc_to_target: gold",
        "generation_kwargs:", f"  until: {_q(list(stop))}", f"  max_gen_toks: {int(max_new_tokens)}",
        "  do_sample: false",
        "metric_list:", "  - metric: bypass", "    aggregation: bypass", "    higher_is_better: true",
    ]) + "\n", encoding="utf-8")
    return {"dataset": data, "logits": logits, "generate": generate}


# --------------------------------------------------------------------------- the suite's worker


def _matmul_gflops(torch: Any, shape: tuple[int, int, int], seconds: float = 1.0) -> float:
    m, k, n = shape
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.mm(a, b)
    best, spent = float("inf"), 0.0
    while spent < seconds:
        start = time.perf_counter()
        torch.mm(a, b)
        elapsed = time.perf_counter() - start
        best, spent = min(best, elapsed), spent + elapsed
    return 2 * m * k * n / best / 1e9


def _forward_flops(config: Any, rows: int, positions: int, context: int, logit_rows: int) -> float:
    """Multiply-add FLOPs of one llama-style forward: ``rows`` x ``positions`` new positions attending over
    ``context`` keys, the output head on ``logit_rows`` positions."""
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    kv = getattr(config, "num_key_value_heads", heads) * head_dim
    linear = h * heads * head_dim + 2 * h * kv + heads * head_dim * h + 3 * h * inter
    attention = 2 * heads * head_dim * context  # scores and weighted values per position
    per_position = 2 * layers * (linear + attention)
    return rows * positions * per_position + 2 * logit_rows * h * config.vocab_size


class FlopCounter:
    """Multiply-add FLOPs of the forwards a side really runs: a pre-hook on the decoder stack sees every forward
    (plain prefill, the row subsets and prefix of the shared-prefix path, each decoding step): its rows and new
    positions, and its context (the attention mask's width, else the new positions plus the cached ones); a hook
    on the output head counts the positions it ran on."""

    def __init__(self, model: Any):
        self.model = model
        self.flop = 0.0

    def __enter__(self) -> "FlopCounter":
        lm = self.model.model
        self._handles = [lm.get_decoder().register_forward_pre_hook(self._forward, with_kwargs=True),
                         lm.get_output_embeddings().register_forward_hook(self._head)]
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()

    def _forward(self, module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows, positions = ids.shape
        mask = kwargs.get("attention_mask")
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        if mask is not None:
            context = mask.shape[-1]
        else:
            context = positions + (cache.get_seq_length() if cache is not None else 0)
        self.flop += _forward_flops(self.model.model.config, rows, positions, context, 0)

    def _head(self, module: Any, args: Any, output: Any) -> None:
        config = self.model.model.config
        self.flop += 2 * output.shape[0] * output.shape[1] * config.hidden_size * config.vocab_size


def worker(out: Path) -> None:
    """Runs in a fresh process of the suite: times imports, the model phase and a float32 matmul."""
    from benchmarks.core.tuning import ProcessTuning, keep_freed_heap

    keep_freed_heap()  # as ``preregbench run`` does, so the model phase is measured as a run has it
    start = time.perf_counter()
    import torch
    import transformers  # noqa: F401

    import_s = time.perf_counter() - start
    from benchmarks.res.protocol import PROTOCOL, check_label_tokens
    from models._bundled import bundled_folder

    folder, _ = bundled_folder(MODEL)
    run = SimpleNamespace(settings={"fixture_set": PROTOCOL.spec.measurement.fixture_set}, model=MODEL,
                          device="cpu", revision=None, tuning=ProcessTuning())
    run.fixture_sets = PROTOCOL.fixture_sets(run)
    start = time.perf_counter()
    with run.tuning.loading_model(run):  # the model load and thread choice of a run (benchmarks.core.tuning)
        model = PROTOCOL.load_model(run)
    run.tuning.model_loaded(run, model)
    load_s = time.perf_counter() - start
    labels = check_label_tokens(model, PROTOCOL.spec.measurement.labels)
    rows, label_names, max_new = suite_prompts(model.render_chat)
    prompt_ids = [model.encode(r.context) for r in rows]

    units = PROTOCOL.units(run)
    batches = list(PROTOCOL.batches(run, units))
    records: list[Any] = []
    with FlopCounter(model) as counter:
        start = time.perf_counter()
        for batch in batches:
            records.extend(PROTOCOL.measure(run, model, batch))
        model_s = time.perf_counter() - start

    config = model.model.config
    padded = useful = 0.0
    offset = 0
    for batch in batches:
        lengths = [len(prompt_ids[offset + i]) for i in range(len(batch))]
        generated = [len(records[offset + i].generation_token_ids) for i in range(len(batch))]
        offset += len(batch)
        width = max(lengths)
        padded += _forward_flops(config, len(batch), width, width, len(batch))
        useful += sum(_forward_flops(config, 1, n, n, 1) for n in lengths)
        for step in range(1, max(generated)):  # decoding forwards after the prefill
            padded += _forward_flops(config, len(batch), 1, width + step, len(batch))
            useful += sum(_forward_flops(config, 1, 1, n + step, 1) for n, g in zip(lengths, generated) if g > step)
    h = config.hidden_size
    shapes = {"square 1024": (1024, 1024, 1024), f"model-shaped {8 * 230}x{h}x{config.intermediate_size}":
              (8 * 230, h, config.intermediate_size)}
    default_threads = torch.get_num_threads()
    torch.set_num_threads(model.threads or default_threads)  # the count the model phase ran with
    try:
        rates = {name: _matmul_gflops(torch, shape) for name, shape in shapes.items()}
    finally:
        torch.set_num_threads(default_threads)
    out.write_text(json.dumps({
        "torch_threads": model.threads or torch.get_num_threads(),
        "import_s": import_s, "load_s": load_s, "model_s": model_s,
        "computed_gflop": counter.flop / 1e9, "padded_gflop": padded / 1e9, "useful_gflop": useful / 1e9,
        "matmul_gflops": rates,
        "model_folder": str(folder),
        "labels": label_names, "label_ids": labels, "max_new_tokens": max_new,
        "stop": [model.tokenizer.convert_ids_to_tokens(i) for i in model.stop_token_ids],
        "rows": [{"item_id": r.item_id, "condition": r.condition, "context": r.context, "gold": r.gold,
                  "ids": ids} for r, ids in zip(rows, prompt_ids)],
        "logit_choices": {r.item_id: r.logit_choice for r in records},
        "ideal": {r.item_id: r.ideal for r in records},
        "batch_size": PROTOCOL.batch_size(run),
        "padding_side": model.tokenizer.padding_side,
    }), encoding="utf-8")


# --------------------------------------------------------------------------- lm-eval's tokenisation

_LMEVAL_ENCODE = r"""
import json, sys
from lm_eval.models.huggingface import HFLM
folder, dataset, labels, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
lm = HFLM(pretrained=folder, dtype="float32", device="cpu", batch_size=8)
rows = [json.loads(line) for line in open(dataset, encoding="utf-8")]
result = []
for row in rows:
    pairs = [lm._encode_pair(row["context"], label) for label in labels]
    result.append({"item_id": row["item_id"],
                   "inputs": [(ctx + cont)[:-1] for ctx, cont in pairs],
                   "last": [cont[-1] for ctx, cont in pairs],
                   "continuation_tokens": [len(cont) for ctx, cont in pairs]})
json.dump(result, open(out, "w"))
"""


def interpreter_of(executable: Path) -> Path:
    """The Python interpreter an installed console script runs under (its shebang)."""
    with open(executable, "rb") as handle:
        first = handle.readline().decode("utf-8", "replace").strip()
    if not first.startswith("#!"):
        raise UsageError(f"--lm-eval {executable}: not a console script with a #! line; pass the lm_eval "
                         "executable of lm-eval's virtual environment (<venv>/bin/lm_eval)")
    return Path(first[2:].split()[0])


def token_check(suite: dict[str, Any], lm_rows: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    """Compare lm-eval's model inputs and label tokens with the suite's, row by row."""
    label_ids = [suite["label_ids"][label] for label in suite["labels"]]
    by_id = {r["item_id"]: r for r in lm_rows}
    bad: list[str] = []
    for row in suite["rows"]:
        other = by_id.get(row["item_id"])
        if other is None:
            bad.append(f"{row['item_id']}: no lm-eval row")
            continue
        for label, inp, last, lid in zip(suite["labels"], other["inputs"], other["last"], label_ids):
            if inp != row["ids"]:
                bad.append(f"{row['item_id']} {label}: lm-eval input ({len(inp)} ids) differs from the suite's "
                           f"prompt ids ({len(row['ids'])})")
            if last != lid:
                bad.append(f"{row['item_id']} {label}: lm-eval scores token {last}, the suite token {lid}")
    lengths = sorted({n for r in lm_rows for n in r["continuation_tokens"]})
    lines = [f"token check: {len(suite['rows']) - len({b.split()[0].rstrip(':') for b in bad})}/{len(suite['rows'])} "
             f"rows identical: lm-eval's model input for every choice equals the suite's prompt ids, and the "
             f"scored token is the label's id ({', '.join(f'{k}={v}' for k, v in suite['label_ids'].items())})",
             f"  lm-eval continuation lengths {lengths} (the context's trailing newline moves into the "
             f"continuation; its log-probability is the same for both choices, so the ranking is the logit margin's)"]
    return not bad, lines + [f"  MISMATCH {b}" for b in bad[:10]]


# --------------------------------------------------------------------------- timing whole processes


def timed(cmd: Sequence[str], *, cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit status) of one child process."""
    with open(log, "wb") as handle:
        start = time.perf_counter()
        child = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, child.returncode


def _tail(path: Path, lines: int = 5) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return " | ".join(text[-lines:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm-eval", type=Path, help="the lm_eval executable of lm-eval's own virtual environment")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved (preregbench, lm-eval) pairs (default 3)")
    parser.add_argument("--keep", type=Path, help="keep the task, logs and run directories in this folder")
    parser.add_argument("--suite-json", type=Path, help="reuse the worker output (suite.json) of an earlier --keep run "
                        "instead of measuring the prompts, ids and model phase again")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    try:
        return _bench(args)
    except UsageError as exc:
        print(f"bench_vs_lmeval: {exc}", file=sys.stderr)
        return 4


def _bench(args: argparse.Namespace) -> int:
    if args.lm_eval is None:
        raise UsageError("--lm-eval PATH is required: the lm_eval executable of a virtual environment with "
                         "lm-eval installed (e.g. /work/lmeval-venv/bin/lm_eval)")
    lm_eval = args.lm_eval.expanduser()
    if not (lm_eval.is_file() and os.access(lm_eval, os.X_OK)):
        raise UsageError(f"--lm-eval {lm_eval}: no such executable; create a virtual environment with "
                         "`pip install torch==2.13.0 'lm-eval[hf]==0.4.13'` and pass its bin/lm_eval")
    if args.pairs < 1:
        raise UsageError(f"--pairs must be at least 1, got {args.pairs}")
    lm_python = interpreter_of(lm_eval)
    work = Path(tempfile.mkdtemp(prefix="res-vs-lmeval-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    try:
        print(f"date {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load {_uptime()}")
        print(f"suite: {sys.executable}; lm-eval: {lm_eval} ({_lmeval_version(lm_python)})")
        if args.suite_json is None:
            wall, rss, rc = timed([sys.executable, str(Path(__file__).resolve()), "--worker",
                                   str(work / "suite.json")], cwd=REPO, env=env, log=work / "worker.log")
            if rc != 0:
                raise UsageError(f"the suite's worker failed (exit {rc}): {_tail(work / 'worker.log')}")
            suite = json.loads((work / "suite.json").read_text(encoding="utf-8"))
        else:
            try:
                suite = json.loads(args.suite_json.read_text(encoding="utf-8"))
                suite["rows"], suite["model_s"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise UsageError(f"--suite-json {args.suite_json}: not a worker output of this script ({exc})") from exc
            print(f"worker output reused from {args.suite_json} (file dated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(args.suite_json.stat().st_mtime))})")
        rows = [PromptRow(r["item_id"], r["condition"], r["context"], r["gold"]) for r in suite["rows"]]
        paths = write_task(work / "task", rows, suite["labels"], suite["max_new_tokens"], suite["stop"])
        lengths = [len(r["ids"]) for r in suite["rows"]]
        print(f"{len(rows)} RES prompts, {min(lengths)}-{max(lengths)} tokens (mean {sum(lengths) / len(lengths):.1f}); "
              f"labels {suite['labels']}; {suite['max_new_tokens']} new tokens; batch {suite['batch_size']}, "
              f"padding {suite['padding_side']}; task folder {paths['logits'].parent}")

        encoded = work / "lmeval_tokens.json"
        _, _, rc = timed([str(lm_python), "-c", _LMEVAL_ENCODE, suite["model_folder"], str(paths["dataset"]),
                          json.dumps(suite["labels"]), str(encoded)], cwd=work, env=env, log=work / "encode.log")
        if rc != 0:
            raise UsageError(f"lm-eval's tokenisation failed (exit {rc}): {_tail(work / 'encode.log')}")
        same, lines = token_check(suite, json.loads(encoded.read_text(encoding="utf-8")))
        print("\n".join(lines))

        rates = suite["matmul_gflops"]
        best = max(rates.values())
        achieved = suite["computed_gflop"] / suite["model_s"]
        print(f"suite worker ({suite['torch_threads']} torch threads): import torch+transformers "
              f"{suite['import_s']:.1f} s, model load {suite['load_s']:.1f} s, model phase {suite['model_s']:.1f} s "
              f"(64 prompts, {suite['computed_gflop']:.0f} GFLOP computed by its forwards; one plain prefill a "
              f"padded batch would be {suite.get('padded_gflop', suite['computed_gflop']):.0f}, the prompts one at a "
              f"time without padding {suite['useful_gflop']:.0f})")
        print(f"  float32 matmul in the same process, {suite['torch_threads']} thread(s): " + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in rates.items()))
        print(f"  model phase {achieved:.1f} GFLOP/s = {achieved / best:.2f} of the best matmul rate "
              f"({suite['useful_gflop'] / suite['model_s'] / best:.2f} counting the prompts one at a time "
              f"without padding)")

        suite_cmd = [sys.executable, "-m", "benchmarks.core.cli", "run", "res", "--model", MODEL]
        lm_cmd = [str(lm_eval), "run", "--model", "hf", "--model_args",
                  f"pretrained={suite['model_folder']},dtype=float32", "--device", "cpu", "--tasks",
                  f"{LOGIT_TASK},{GENERATE_TASK}", "--include_path", str(paths["logits"].parent),
                  "--batch_size", str(suite["batch_size"]), "--log_samples"]  # a bypass-metric task needs the samples
        print(f"A: {' '.join(suite_cmd[1:])} --results-dir <tmp>")
        print(f"B: lm_eval {' '.join(lm_cmd[1:])} --output_path <tmp>")
        times: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for pair in range(1, args.pairs + 1):
            results = work / f"results-{pair}"
            wall, rss, rc = timed([*suite_cmd, "--results-dir", str(results)], cwd=REPO, env=env,
                                  log=work / f"preregbench-{pair}.log")
            if rc not in (0, 1):  # 1: complete, the gate failed (SmolLM2's expected outcome)
                raise UsageError(f"preregbench run {pair} broke (exit {rc}): {_tail(work / f'preregbench-{pair}.log')}")
            times["A"].append((wall, rss))
            print(f"A{pair} preregbench  {wall:7.1f} s  peak RSS {rss:6.0f} MiB  exit {rc}", flush=True)
            out = work / f"lmeval-{pair}"
            wall, rss, rc = timed([*lm_cmd, "--output_path", str(out)], cwd=work, env=env,
                                  log=work / f"lmeval-{pair}.log")
            if rc != 0:
                raise UsageError(f"lm-eval run {pair} failed (exit {rc}): {_tail(work / f'lmeval-{pair}.log')}")
            times["B"].append((wall, rss))
            print(f"B{pair} lm-eval      {wall:7.1f} s  peak RSS {rss:6.0f} MiB  exit {rc}   "
                  f"ratio A{pair}/B{pair} {times['A'][-1][0] / wall:.3f}", flush=True)
            print(f"   cross-check: 64-item logit accuracy preregbench {_suite_accuracy(results)}, "
                  f"lm-eval {LOGIT_TASK} acc {_lmeval_accuracy(out)}", flush=True)
            _summary(times, suite["model_s"], pair == args.pairs)
        return 0 if same else 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _median(values: Sequence[float]) -> float:
    xs, half = sorted(values), len(values) // 2
    return xs[half] if len(xs) % 2 else (xs[half - 1] + xs[half]) / 2


def _summary(times: dict[str, list[tuple[float, float]]], model_s: float, last: bool) -> None:
    """The ratio over the pairs so far (printed after every pair, so an interrupted run still has one)."""
    a, b = [w for w, _ in times["A"]], [w for w, _ in times["B"]]
    head = "result" if last else f"after {len(a)} pair(s)"
    print(f"{head}: median preregbench {_median(a):.1f} s, median lm-eval {_median(b):.1f} s, ratio "
          f"preregbench/lm-eval {_median(a) / _median(b):.3f} (best against best {min(a) / min(b):.3f}); "
          f"peak RSS preregbench {max(r for _, r in times['A']):.0f} MiB, lm-eval {max(r for _, r in times['B']):.0f} MiB; "
          f"the worker's model phase is {model_s / _median(a):.2f} of the median preregbench run", flush=True)


def _suite_accuracy(results: Path) -> float | None:
    ledgers = list(results.glob("res/*/records.jsonl"))
    if len(ledgers) != 1:
        return None
    records = [json.loads(line) for line in ledgers[0].read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [r for r in records if "logit_choice" in r]
    return round(sum(r["logit_choice"] == r["ideal"] for r in records) / len(records), 6) if records else None


def _lmeval_accuracy(out: Path) -> float | None:
    for path in sorted(out.rglob("results*.json")):
        value = json.loads(path.read_text(encoding="utf-8")).get("results", {}).get(LOGIT_TASK, {}).get("acc,none")
        if value is not None:
            return round(float(value), 6)
    return None


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unknown"


def _lmeval_version(python: Path) -> str:
    done = subprocess.run([str(python), "-c", "import importlib.metadata as m; print('lm-eval', m.version('lm-eval'),"
                           " 'torch', m.version('torch'), 'transformers', m.version('transformers'))"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"version unknown: {done.stderr.strip()[-200:]}"


if __name__ == "__main__":
    raise SystemExit(main())
