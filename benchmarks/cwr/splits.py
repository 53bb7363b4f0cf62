"""Generated pair splits: a public development split and committed splits whose seed stays out of the repository.

A split is preregistered in ``prereg.toml`` under ``[splits.<name>]``: the
families and tiers it draws, the number of base pairs per tier, the F/C
replicas per base pair and either

* ``seed``: a public integer seed (the development split, generated from the
  repository alone), or
* ``seed_sha256``: the sha256 of a secret seed text (a committed split). A run
  of such a split reads the seed from ``--cwr-seed-file PATH`` or, failing
  that, from the file named by ``PREREGBENCH_CWR_SEED_FILE``, refuses before
  any work when the text's sha256 is not the committed one, and records only
  the hash. The material exists in the process and in the run directory
  (``split.json``, ``grading/``), nowhere else.

The seed text is the file's content without surrounding whitespace: at least
32 hexadecimal digits (128 bits; a shorter seed could be found from its
published hash by search). The generator's integer seed is derived from it
with a domain prefix, so that the commitment itself reveals nothing usable.

Base pairs come from ``worlds.generate_pairs(family, seed, n, tier)``; replica
``k > 0`` of a base rebuilds its pinned spec with replica seeds offset by
``k * REPLICA_STRIDE`` (``pairs.further_replicas``, as for the showcase pairs).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import worlds
from benchmarks.core.protocol import UsageProblem

from .pairs import further_replicas
from .spec import PREREG, SplitSpec
from .tier_baselines import baseline_counts

#: Environment variable naming the seed file of a committed split (``--cwr-seed-file`` takes precedence).
SEED_FILE_ENV = "PREREGBENCH_CWR_SEED_FILE"
#: Least number of hexadecimal digits of a committed split's seed.
MIN_SEED_HEX_DIGITS = 32
#: Prefix of the text hashed into the generator's integer seed (never the committed hash itself).
DERIVATION_PREFIX = b"preregbench/cwr/split-seed/1\n"
#: Written into the run directory of every split run: the split, its parameters and every pair's manifest.
SPLIT_FILE = "split.json"

_HEX = re.compile(r"[0-9a-fA-F]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")




def check_split(name: str, spec: SplitSpec, *, generatable: bool) -> None:
    """Every field of one split checked (each one read); ``generatable`` also asks that the generator can
    draw every family now. Raises UsageProblem naming the key that is wrong."""
    where = f"prereg [splits.{name}]"
    if spec.generator != worlds.GENERATOR_VERSION:
        raise UsageProblem(f"{where} was frozen with generator {spec.generator!r}; this checkout's is "
                           f"{worlds.GENERATOR_VERSION!r} (its pairs would differ): use the checkout it was frozen in")
    if not spec.families or len(set(spec.families)) != len(spec.families):
        raise UsageProblem(f"{where} families must name distinct families, got {list(spec.families)}")
    unknown = [t for t in spec.pairs_per_tier if t not in worlds.TIERS]
    if unknown or not spec.pairs_per_tier:
        raise UsageProblem(f"{where} pairs_per_tier must map tiers ({', '.join(worlds.TIERS)}) to counts, "
                           f"got {dict(spec.pairs_per_tier)}")
    if any(n < 1 for n in spec.pairs_per_tier.values()) or spec.replicas < 1:
        raise UsageProblem(f"{where} counts must be positive: pairs_per_tier {dict(spec.pairs_per_tier)}, "
                           f"replicas {spec.replicas}")
    if (spec.seed is None) == (spec.seed_sha256 is None):
        raise UsageProblem(f"{where} needs exactly one of seed (a public split) and seed_sha256 (a committed one)")
    if spec.seed is not None and spec.seed < 0:
        raise UsageProblem(f"{where} seed must be a non-negative integer, got {spec.seed}")
    if spec.seed_sha256 is not None and not _SHA256.fullmatch(spec.seed_sha256):
        raise UsageProblem(f"{where} seed_sha256 must be 64 lowercase hexadecimal digits")
    if generatable:
        missing = [f for f in spec.families if f not in worlds.GENERATED_FAMILIES]
        if missing:
            raise UsageProblem(f"split {name!r} draws {', '.join(missing)}, which the pair generator cannot draw yet "
                               f"(it draws {', '.join(worlds.GENERATED_FAMILIES)}); the split cannot be built here")
        for family in spec.families:
            tiers = [t for t in spec.pairs_per_tier if t not in worlds.GENERATED_TIERS[family]]
            if tiers:
                raise UsageProblem(f"split {name!r} asks {family} for tiers {', '.join(tiers)}, which the pair "
                                   f"generator cannot draw for it (it draws {family} in "
                                   f"{', '.join(worlds.GENERATED_TIERS[family])}); the split cannot be built here")


def seed_text(path: str | os.PathLike[str] | None, split: str) -> tuple[str, str]:
    """The seed text of a committed split and where it was read from, or UsageProblem saying what to do."""
    source = "--cwr-seed-file"
    if path is None:
        path = os.environ.get(SEED_FILE_ENV) or None
        source = SEED_FILE_ENV
    if path is None:
        raise UsageProblem(f"split {split!r} is committed by hash: pass --cwr-seed-file PATH or set {SEED_FILE_ENV} "
                           "to the file holding its seed")
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise UsageProblem(f"{source} {file}: cannot read the seed file ({exc.strerror or exc})") from None
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise UsageProblem(f"{source} {file}: the seed is not ASCII text; a seed is hexadecimal digits") from None
    if not _HEX.fullmatch(text) or len(text) < MIN_SEED_HEX_DIGITS:
        raise UsageProblem(f"{source} {file}: a seed is at least {MIN_SEED_HEX_DIGITS} hexadecimal digits and "
                           "nothing else; make one with: python -c \"import secrets; print(secrets.token_hex(32))\"")
    return text, str(file)


def seed_sha256(text: str) -> str:
    """The commitment of a seed text (sha256 of its ASCII bytes, hexadecimal)."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def derived_seed(text: str) -> int:
    """The generator's integer seed for a committed split's seed text (63 bits of a prefixed sha256)."""
    return int.from_bytes(hashlib.sha256(DERIVATION_PREFIX + text.encode("ascii")).digest()[:8], "big") >> 1


def resolve_seed(name: str, spec: SplitSpec, seed_file: str | None) -> tuple[int, str | None]:
    """The generator seed of a split and, for a committed one, the seed's checked hash (refusal on mismatch)."""
    if not spec.committed:
        return int(spec.seed), None
    text, where = seed_text(seed_file, name)
    found = seed_sha256(text)
    if found != spec.seed_sha256:
        raise UsageProblem(f"the seed in {where} hashes to {found[:16]}..., not the {spec.seed_sha256[:16]}... "
                           f"committed in prereg [splits.{name}]: it is not the split's seed")
    return derived_seed(text), found


@dataclass(frozen=True)
class BuiltSplit:
    """The pairs of one split and how they were made (``split.json``)."""

    pairs: tuple[Any, ...]  # base pair then its replicas, families then tiers then draw order
    record: dict[str, Any]


@functools.lru_cache(maxsize=4)
def _build(family_tiers: tuple[tuple[str, tuple[tuple[str, int], ...]], ...], seed: int,
           replicas: int) -> tuple[tuple[Any, ...], tuple[dict[str, Any], ...]]:
    pairs: list[Any] = []
    calls: list[dict[str, Any]] = []
    for family, tiers in family_tiers:
        for tier, n in tiers:
            result = worlds.generate_pairs(family, seed, n, tier)
            calls.append(result.summary())
            for pair, spec in zip(result.pairs, result.specs, strict=True):
                pairs += [pair, *further_replicas(spec, replicas)]
    return tuple(pairs), tuple(calls)


def build_split(name: str, spec: SplitSpec, seed: int, committed_sha256: str | None) -> BuiltSplit:
    """Generate every pair of the split (deterministic in ``seed``; cached per process)."""
    check_split(name, spec, generatable=True)
    layout = tuple((f, tuple(spec.pairs_per_tier.items())) for f in spec.families)
    try:
        pairs, calls = _build(layout, seed, spec.replicas)
    except worlds.WorldsError as exc:
        raise UsageProblem(f"split {name!r} could not be generated: {str(exc).splitlines()[0]}") from None
    record = {
        "split": name,
        "generator": spec.generator,
        "families": list(spec.families),
        "pairs_per_tier": dict(spec.pairs_per_tier),
        "replicas": spec.replicas,
        "committed": spec.committed,
        # A public split's seed is in the prereg; a committed split's seed is never written, only its hash.
        "seed": None if spec.committed else spec.seed,
        "seed_sha256": committed_sha256,
        "generation": list(calls),
        "manifests": {p.pair_id: p.manifest for p in pairs if p.manifest.get("generator") is not None},
    }
    return BuiltSplit(pairs, record)


def splits_table(values: Mapping[str, SplitSpec]) -> dict[str, SplitSpec]:
    """The prereg's splits, every one checked (none need be generatable to be preregistered)."""
    for name, spec in values.items():
        check_split(name, spec, generatable=False)
    return dict(values)


def split_spec(name: str) -> SplitSpec:
    table = splits_table(PREREG.values.splits)
    if name not in table:
        raise UsageProblem(f"--cwr-split {name!r} is not a split of {PREREG.path}; splits: {', '.join(sorted(table))}")
    return table[name]


def generated_split(name: str, seed_file: str | None = None):
    """The built split ``name`` (its seed checked against the commitment first when it is committed)."""
    spec = split_spec(name)
    seed, committed = resolve_seed(name, spec, seed_file)
    return build_split(name, spec, seed, committed)



# --------------------------------------------------------------------------- the split report


def split_report(name: str, seed_file: str | None = None, samples: int = 200) -> dict[str, Any]:
    """What a split holds and how hard its targets are for the baselines: per family and tier the base pairs,
    the generator's draws and rejection reasons, the refused demonstration candidates, the seconds to generate
    and certify, and the greedy, copy and random baselines on every target of every pair (replicas included)."""
    spec = split_spec(name)
    seed, committed = resolve_seed(name, spec, seed_file)
    check_split(name, spec, generatable=True)
    rows: list[dict[str, Any]] = []
    total = {"bases": 0, "targets": 0, "greedy": 0, "copy": 0, "random_valid": 0, "random_samples": 0}
    for family in spec.families:
        for tier, n in spec.pairs_per_tier.items():
            started = time.process_time()
            result = worlds.generate_pairs(family, seed, n, tier)
            replicas = [r for pair_spec in result.specs for r in further_replicas(pair_spec, spec.replicas)]
            seconds = time.process_time() - started
            row = {"family": family, "tier": tier, "bases": len(result.pairs), "draws": result.draws,
                   "rejections": dict(sorted(result.rejections.items())),
                   "candidate_rejections": dict(sorted(result.candidate_rejections.items())),
                   "generate_and_certify_cpu_s": round(seconds, 3),
                   **baseline_counts((*result.pairs, *replicas), samples, seed)}
            rows.append(row)
            for key in total:
                total[key] += row[key]
    return {"split": name, "committed": spec.committed, "seed_sha256": committed,
            "seed": None if spec.committed else spec.seed, "replicas": spec.replicas,
            "random_samples_per_target": samples, "rows": rows, "overall": total}


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.0%})" if n else "-"


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"split {report['split']}: "
             + (f"committed seed sha256 {report['seed_sha256'][:16]}..." if report["committed"]
                else f"public seed {report['seed']}")
             + f", {report['replicas']} replicas per base; baselines on every target (F and C, replicas included)",
             "",
             f"{'family':<16}{'tier':<6}{'bases':>6}{'draws':>7}{'cpu s':>8}  {'greedy':<14}{'copy':<12}"
             f"{'random':<10}rejected draws (reason: count)"]
    for row in report["rows"]:
        random_share = row["random_valid"] / row["random_samples"] if row["random_samples"] else 0.0
        rejected = ", ".join(f"{k}: {v}" for k, v in row["rejections"].items()) or "none"
        lines.append(f"{row['family']:<16}{row['tier']:<6}{row['bases']:>6}{row['draws']:>7}"
                     f"{row['generate_and_certify_cpu_s']:>8.2f}  {_share(row['greedy'], row['targets']):<14}"
                     f"{_share(row['copy'], row['targets']):<12}{random_share:<10.4f}{rejected}")
    total = report["overall"]
    lines += ["", f"overall: {total['bases']} bases, {total['targets']} targets; greedy solves "
              f"{_share(total['greedy'], total['targets'])}, copy {_share(total['copy'], total['targets'])}"]
    for row in report["rows"]:
        if row["candidate_rejections"]:
            refused = ", ".join(f"{k}: {v}" for k, v in row["candidate_rejections"].items())
            lines.append(f"demonstration candidates audited, {row['family']} {row['tier']}: {refused}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m benchmarks.cwr.splits",
                                     description="Generate a preregistered split and report its generation and "
                                                 "the baselines per family and tier.")
    parser.add_argument("split", help="a split of prereg.toml [splits.NAME]")
    parser.add_argument("--seed-file", default=None, help=f"a committed split's seed (default: ${SEED_FILE_ENV})")
    parser.add_argument("--samples", type=int, default=200, help="random baseline samples per target")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = split_report(args.split, args.seed_file, args.samples)
    except UsageProblem as exc:
        print(f"python -m benchmarks.cwr.splits: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
