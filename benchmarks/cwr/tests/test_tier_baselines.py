"""The per-tier baseline script counts what the baselines do on generated targets."""

import worlds
from benchmarks.cwr.baselines import greedy_baseline
from benchmarks.cwr.tier_baselines import tier_rates


def test_tier_rates_count_both_targets_of_every_pair():
    got = tier_rates(seed=9, n=2, samples=10, tiers=("T1",))
    row = got["tiers"]["T1"]
    assert row["targets"] == 4 and row["random_samples"] == 40
    assert row["copy"] == 0  # generated pairs whose demonstrations a copy solves are refused
    # the greedy count is the number of targets whose greedy run is VALID, recounted here
    pairs = worlds.generate_pairs("token_workshop", 9, 2, "T1").pairs
    recount = sum(greedy_baseline(s.target)[1].ok for p in pairs for s in (p.f, p.c))
    assert row["greedy"] == recount
    assert got["overall"]["targets"] == 4 and got["overall"]["greedy_rate"] == recount / 4


def test_tier_rates_for_schedule_count_both_targets():
    got = tier_rates(seed=3, n=1, samples=10, tiers=("T1",), family="schedule")
    assert got["family"] == "schedule" and got["tiers_not_drawn"] == [] and set(got["tiers"]) == {"T1"}
    row = got["tiers"]["T1"]
    assert row["targets"] == 2 and row["random_samples"] == 20 and row["copy"] == 0
    pairs = worlds.generate_pairs("schedule", 3, 1, "T1").pairs
    assert all(p.pair_id.startswith("GEN-SCH-T1-") for p in pairs)
    recount = sum(greedy_baseline(s.target)[1].ok for p in pairs for s in (p.f, p.c))
    assert row["greedy"] == recount and got["overall"]["greedy_rate"] == recount / 2
