"""Wall time of one-pass scoring+generation against separate passes and plain ``generate``.

Usage: ``python -m models.bench.one_pass [--prompts 64] [--tokens 4] [--batch-size 16] [--repeats 3]``

On the bundled SmolLM2, for chat prompts of about 300 tokens, it times
(a) ``score_and_generate`` (one left-padded prefill gives the choice logits
and the first token; decoding continues from its cache), (b) separate scoring
(a full forward) followed by generation (a second prefill), and (c) a plain
``model.generate`` of the same number of tokens on the same batches.  Each
method runs ``--repeats`` times in an interleaved order; the best time counts.
Targets: (a)/(b) <= 0.6 and (a)/(c) <= 1.15.
"""

from __future__ import annotations

import argparse
import time

import torch

from models import GenerationSettings, load_model

WORDS = ("river stone lantern harbor meadow signal copper window orchard canyon ledger violet engine "
         "thunder pocket glacier compass ribbon saddle marble").split()


def make_chats(model, count: int, target_tokens: int) -> list[list[dict[str, str]]]:
    chats = []
    for i in range(count):
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(target_tokens)]
        body = " ".join(words)
        chat = [{"role": "user", "content": f"Record {i}: {body}\nAnswer with A or B only. Is the record longer than usual?"}]
        while len(model.encode(model.render_chat(chat))) > target_tokens and words:
            words = words[:-5]
            chat = [{"role": "user", "content": f"Record {i}: {' '.join(words)}\nAnswer with A or B only. Is the record longer than usual?"}]
        chats.append(chat)
    return chats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    args = parser.parse_args(argv)

    model = load_model("smollm2-135m-instruct", batch_size=args.batch_size)
    chats = make_chats(model, args.prompts, args.prompt_tokens)
    texts = [model.render_chat(c) for c in chats]
    lengths = [len(model.encode(t)) for t in texts]
    settings = GenerationSettings(max_new_tokens=args.tokens)
    tok = model.tokenizer

    def one_pass():
        return model.score_and_generate(chats, ["A", "B"], settings)

    def separate():
        model.score(chats, ["A", "B"])
        return model.generate(chats, settings)

    def plain_generate():
        with torch.inference_mode():
            for start in range(0, len(texts), args.batch_size):
                enc = tok(texts[start : start + args.batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
                model.model.generate(**enc, do_sample=False, max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                                     pad_token_id=tok.pad_token_id)

    methods = {"(a) one pass": one_pass, "(b) separate passes": separate, "(c) model.generate": plain_generate}
    one_pass()  # warm-up
    best = {name: float("inf") for name in methods}
    for _ in range(args.repeats):
        for name, run in methods.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)

    print(f"model {model.describe().id} @ {model.describe().revision}; torch threads {torch.get_num_threads()}")
    print(f"{args.prompts} prompts, {min(lengths)}-{max(lengths)} tokens (mean {sum(lengths) / len(lengths):.0f}), "
          f"{args.tokens} new tokens, batch {args.batch_size}, best of {args.repeats}")
    for name, seconds in best.items():
        print(f"  {name:<22} {seconds:7.2f} s")
    a, b, c = best.values()
    print(f"  (a)/(b) = {a / b:.3f}  (target <= 0.6)")
    print(f"  (a)/(c) = {a / c:.3f}  (target <= 1.15)")


if __name__ == "__main__":
    main()
