"""Drift guard for generated CWR material: the development and self-check splits and each family's generator
output at a test seed are frozen by hash in snapshots/.

A split is hashed over what a run of it measures and records: ``split.json``'s record (families, tiers, the
generator's draws and rejections, every pair's manifest) and each pair's targets and the sha256 of both prompt
bodies (``pair_rows``); its P/R/E items (built on the targets of its base pairs) are frozen beside it with the
sha256 of every control prompt.  A change of generator code or constants turns this red, naming the split or the family;
re-freezing is a deliberate ``pytest --snapshot-update`` with a dated entry in the CWR README's changelog.  The
confirmatory split stays frozen by its seed's hash alone (its seed is not in the repository).
"""

from __future__ import annotations

import worlds
from benchmarks.core import sha256_json
from benchmarks.cwr.protocol import CONTROL_CONDITIONS, HERE, PREREG
from canonical_hash import sha256_text
from benchmarks.cwr.splits import generated_split
from benchmarks.cwr.units import build_units, pair_rows, split_controls

#: (family, seed, pairs, tier) of each family's frozen generator output: quick draws of the worlds tests' seeds.
FAMILY_DRAWS = (("token_workshop", 11, 2, "T1"), ("schedule", 5, 1, "T1"), ("dataflow", 2026, 2, "T2"))
#: The splits whose material the repository alone determines (the self-check split's seed is committed).
SPLITS = {"development": None, "selfcheck": str(HERE / "selfcheck.seed")}


def split_hash(name: str, seed_file: str | None) -> str:
    built = generated_split(name, seed_file)
    return sha256_json({"record": built.record, "pairs": pair_rows(built.pairs)})


def test_generated_splits_are_frozen(snapshot) -> None:
    assert {name: split_hash(name, seed) for name, seed in SPLITS.items()} == snapshot


def controls_hash(name: str, seed_file: str | None) -> str:
    """The split run's P/R/E items and the sha256 of every control prompt built from them."""
    pairs = generated_split(name, seed_file).pairs
    items = split_controls(pairs, PREREG.values.seeds["fixtures"])
    prompts = {u.item_id: sha256_text(u.prompt_text) for u in build_units(items, pairs, None)
               if u.condition in CONTROL_CONDITIONS}
    return sha256_json({"items": items, "prompts": prompts})


def test_split_controls_are_frozen(snapshot) -> None:
    assert {name: controls_hash(name, seed) for name, seed in SPLITS.items()} == snapshot


def test_each_family_generator_is_frozen(snapshot) -> None:
    found = {}
    for family, seed, n, tier in FAMILY_DRAWS:
        result = worlds.generate_pairs(family, seed, n, tier)
        found[f"{family} seed {seed} {tier} x{n}"] = sha256_json({"generation": result.summary(),
                                                                  "pairs": pair_rows(result.pairs)})
    assert found == snapshot
