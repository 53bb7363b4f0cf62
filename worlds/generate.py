"""Command line of the seeded pair generator.

    python -m worlds.generate --family token_workshop --seed 1 --n 4 --tier T3 [--out DIR]
    python -m worlds.generate --family schedule --seed 1 --n 4 --tier T2
    python -m worlds.generate --family dataflow --seed 1 --n 4 --tier T1

Prints one JSON object: the call's parameters, the pair ids, the draws, the
rejection counts by reason, the refused demonstration candidates by reason and
the seconds taken. With ``--out`` it also writes each pair's manifest to
``DIR/<pair_id>.json`` (sorted keys, two-space indent, ASCII, trailing newline),
so two runs with the same arguments write byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ._errors import WorldsError
from ._generate import generate_pairs, generated_families
from ._tiers import TIERS


def manifest_text(manifest: dict) -> str:
    """The file text of a manifest as ``--out`` writes it."""
    return json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m worlds.generate", description="seeded certified F/C pairs")
    ap.add_argument("--family", default="token_workshop", choices=generated_families())
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--tier", default="T3", choices=TIERS)
    ap.add_argument("--max-draws", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="folder for the pair manifests (created)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        res = generate_pairs(a.family, a.seed, a.n, a.tier, max_draws=a.max_draws)
    except WorldsError as exc:
        print(f"worlds.generate: {exc}", file=sys.stderr)
        return 2
    out = res.summary()
    out["seconds"] = round(time.perf_counter() - t0, 2)
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        for p in res.pairs:
            (a.out / f"{p.pair_id}.json").write_text(manifest_text(p.manifest), encoding="ascii")
        out["written"] = str(a.out)
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
