"""First-token logit agreement of one model folder: a CPU float32 reference against a run on another device or dtype.

Both sides load the same folder with ``models.load_model`` and compute the logits of the first generated token
(the last position of one forward pass over the chat-templated prompt) for a few prompts.  Per prompt:

- ``correlation``: Pearson correlation of the two logit vectors over the whole vocabulary;
- ``max_abs_over_std``: the largest absolute difference divided by the reference logits' standard deviation.

The check passes when every prompt has ``correlation >= MIN_CORRELATION`` and
``max_abs_over_std <= MAX_ABS_OVER_STD``.  Two negative controls are scored the same way and must fail the
tolerance, so a pass cannot come from a metric that anything would meet:

- ``other_prompt``: the reference of one prompt against the test side's logits of the next prompt (a misaligned
  input);
- ``perturbed_weights``: the test side after one decoder layer's feed-forward output weights are redrawn (a wrong
  weight).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

# bfloat16 keeps 8 bits of mantissa: each weight and activation carries a relative rounding error up to 2^-8.
# Through a Gemma 3 stack of random weights, the first-token logits of a correct bfloat16 run stay within a few
# tenths of a standard deviation of the float32 ones and correlate above 0.99 (measured: see docs/scale-out.md);
# a misaligned input or one redrawn layer moves them by several standard deviations and the correlation far below.
MIN_CORRELATION = 0.99
MAX_ABS_OVER_STD = 0.5
PROMPTS = ("What is 19 * 27?", "Write a haiku about a forgotten robot.", "If all roses are flowers, are some flowers roses?")


def first_token_logits(model: Any, text: str) -> Any:
    import torch

    ids = model.encode(model.render_chat([{"role": "user", "content": text}]))
    device = next(model.model.parameters()).device
    with torch.inference_mode():
        out = model.model(input_ids=torch.tensor([ids], device=device))
    return out.logits[0, -1].float().cpu()


def agreement(reference: Any, other: Any) -> dict[str, float]:
    import torch

    a, b = reference.double(), other.double()
    correlation = float(torch.corrcoef(torch.stack([a, b]))[0, 1])
    return {"correlation": round(correlation, 6), "max_abs_over_std": round(float((a - b).abs().max() / a.std()), 6)}


def within(metrics: dict[str, float]) -> bool:
    return metrics["correlation"] >= MIN_CORRELATION and metrics["max_abs_over_std"] <= MAX_ABS_OVER_STD


def check(folder: str, device: str, dtype: str) -> dict[str, Any]:
    import torch

    import models

    started = time.perf_counter()
    reference = models.load_model(folder, device="cpu", dtype="float32")
    expected = [first_token_logits(reference, text) for text in PROMPTS]
    del reference
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    tested = models.load_model(folder, device=device, dtype=dtype)
    got = [first_token_logits(tested, text) for text in PROMPTS]
    prompts = [{"prompt": text, **agreement(a, b)} for text, a, b in zip(PROMPTS, expected, got)]
    for row in prompts:
        row["within"] = within(row)
    controls = {"other_prompt": [agreement(expected[i], got[(i + 1) % len(PROMPTS)]) for i in range(len(PROMPTS))]}
    inner = tested.model.model
    layers = getattr(inner, "layers", None) or inner.language_model.layers  # the text stack of a multimodal wrapper
    with torch.no_grad():
        torch.manual_seed(1)
        target = layers[len(layers) // 2].mlp.down_proj.weight
        target.copy_(torch.randn_like(target, dtype=torch.float32).to(target.dtype) * float(target.float().std()))
    controls["perturbed_weights"] = [agreement(a, first_token_logits(tested, text)) for text, a in zip(PROMPTS, expected)]
    controls_fail = all(not within(m) for rows in controls.values() for m in rows)
    return {
        "folder": folder, "reference": {"device": "cpu", "dtype": "float32"}, "tested": {"device": device, "dtype": dtype},
        "tolerance": {"min_correlation": MIN_CORRELATION, "max_abs_over_std": MAX_ABS_OVER_STD},
        "prompts": prompts, "controls": controls, "controls_fail_tolerance": controls_fail,
        "ok": all(row["within"] for row in prompts) and controls_fail,
        "seconds": round(time.perf_counter() - started, 2),
        "peak_device_bytes": int(torch.cuda.max_memory_allocated()) if device.startswith("cuda") else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="model folder")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
    parser.add_argument("--record", help="write the JSON record here")
    args = parser.parse_args(argv)
    record = check(args.folder, args.device, args.dtype)
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    if args.record:
        Path(args.record).write_text(text)
    worst = min(row["correlation"] for row in record["prompts"])
    print(f"logit agreement cpu float32 vs {args.device} {args.dtype}: worst correlation {worst:.5f}, "
          f"worst max|diff|/std {max(row['max_abs_over_std'] for row in record['prompts']):.4f} "
          f"({'within' if record['ok'] else 'OUTSIDE'} the tolerance; controls fail it: {record['controls_fail_tolerance']})")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
