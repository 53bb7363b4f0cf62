"""P-Zombie's intervals beside the point values: stats.json ``intervals``, H2's paired interval, and
``preregbench compare`` on two runs of the protocol (synthetic scenario records, no model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmarks.core.effect_intervals import eta_squared_interval, r_squared_interval
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.stats import wilson_interval
from benchmarks.pzombie.intervals import intervals, paired_bootstrap
from benchmarks.pzombie.metrics import metrics
from benchmarks.pzombie.protocol import PROTOCOL
from benchmarks.pzombie.scenarios import prefill_run, synthetic_records
from benchmarks.pzombie.spec import CLASSIFICATIONS, IMPLEMENTED_INTERVALS, PREREG

SPEC = PREREG.values.intervals


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=SUITE_ROOT, env=env, text=True,
                          capture_output=True, timeout=600)


def test_the_prereg_asks_for_the_methods_this_version_computes() -> None:
    assert {key: getattr(SPEC, key) for key in IMPLEMENTED_INTERVALS} == IMPLEMENTED_INTERVALS
    assert SPEC.confidence == 0.95 and SPEC.bootstrap_resamples >= 1000


@pytest.mark.parametrize("scenario", ["ambiguous", "confirmed"])
def test_each_preset_carries_its_noncentral_f_and_wilson_intervals(scenario: str) -> None:
    records = synthetic_records(scenario, errors=2)
    found, values = intervals(records), metrics(records)
    for prefix in ("active", "baseline"):
        eta = found[f"{prefix}.eta_squared"]
        expected = eta_squared_interval(values[f"{prefix}.f"], values[f"{prefix}.df_between"],
                                        values[f"{prefix}.df_within"])
        assert (eta["low"], eta["high"]) == (expected.low, expected.high)
        assert eta["estimate"] == pytest.approx(values[f"{prefix}.eta_squared"], rel=1e-12)
        r2 = found[f"{prefix}.r_squared_td"]
        expected = r_squared_interval(values[f"{prefix}.r_squared_td"], values[f"{prefix}.n_ok"])
        assert (r2["low"], r2["high"], r2["n"]) == (expected.low, expected.high, values[f"{prefix}.n_ok"])
        assert r2["low"] <= r2["estimate"] <= r2["high"]
        share = found[f"{prefix}.error_share"]
        k, n = values[f"{prefix}.errors"], values[f"{prefix}.n"]
        wilson = wilson_interval(k, n)
        assert (share["k"], share["n"], share["estimate"], share["low"], share["high"]) == (
            k, n, k / n, wilson.low, wilson.high)
    assert found["active.error_share"]["k"] == 2 and found["baseline.error_share"]["k"] == 0
    assert found["settings"]["bootstrap_resamples"] == SPEC.bootstrap_resamples
    assert found["settings"]["bootstrap_seed"] == SPEC.bootstrap_seed


def test_h2_reports_a_paired_interval_beside_the_point_rule_without_changing_it() -> None:
    records = synthetic_records("confirmed")
    gain = intervals(records)["h2.eta_squared_gain"]
    values = metrics(records)
    assert gain["estimate"] == pytest.approx(values["h2.eta_squared_gain"], rel=1e-12)  # no errors: the same prompts
    assert gain["prompts"] == 80 and gain["resamples"] == SPEC.bootstrap_resamples
    assert 0.0 < gain["low"] < gain["estimate"] < gain["high"]
    assert intervals(records)["h2.eta_squared_gain"] == gain  # seeded: the same interval every time
    reseeded = paired_bootstrap([r for r in records if r.preset == "ACTIVE_MANIFOLD"],
                                [r for r in records if r.preset == "BASELINE"],
                                replace(SPEC, bootstrap_seed=SPEC.bootstrap_seed + 1))["eta_squared"]
    assert reseeded["estimate"] == gain["estimate"] and reseeded["low"] != gain["low"]
    # The decision reads the point value only: an interval reaching below 0 leaves H2_SUPPORTED standing.
    assert CLASSIFICATIONS["h2"].evaluate({"h2.eta_squared_gain": 1e-6}).label == "H2_SUPPORTED"


def test_the_paired_bootstrap_resamples_the_same_prompts_in_both_sides() -> None:
    """A side compared with itself differs by exactly 0 in every resample; an independent copy does not."""
    records = [r for r in synthetic_records("ambiguous") if r.preset == "ACTIVE_MANIFOLD"]
    same = paired_bootstrap(records, records)
    for key in ("eta_squared", "r_squared_td"):
        assert same[key]["estimate"] == same[key]["low"] == same[key]["high"] == 0.0
    other = [r for r in synthetic_records("ambiguous", seed=9) if r.preset == "ACTIVE_MANIFOLD"]
    differs = paired_bootstrap(records, other)["eta_squared"]
    assert differs["low"] < differs["high"]


def test_an_error_prompt_leaves_the_pairs_of_both_sides() -> None:
    records = synthetic_records("confirmed", errors=3)
    gain = intervals(records)["h2.eta_squared_gain"]
    assert gain["prompts"] == 77


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    results = tmp_path_factory.mktemp("pz-compare")
    return prefill_run(results, "confirmed", "confirmed"), prefill_run(results, "flat", "flat")


def test_compare_two_runs_by_the_paired_bootstrap_of_eta_squared_and_r_squared(runs: tuple[Path, Path],
                                                                              tmp_path: Path) -> None:
    confirmed, flat = runs
    out = tmp_path / "compare.json"
    done = cli("compare", str(confirmed), str(flat), "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "active.eta_squared" in done.stdout and "baseline.r_squared_td" in done.stdout
    result = json.loads(out.read_text())
    assert result["protocol"] == "pzombie" and result["measures"] == []
    rows = {row["measure"]: row for row in result["statistics"]}
    assert set(rows) == {f"{p}.{k}" for p in ("active", "baseline") for k in ("eta_squared", "r_squared_td")}
    a, b = metrics(synthetic_records("confirmed")), metrics(synthetic_records("flat"))
    for name, row in rows.items():
        assert row["units"] == 80 and row["resamples"] == SPEC.bootstrap_resamples and row["seed"] == SPEC.bootstrap_seed
        assert row["value_a"] == pytest.approx(a[name]) and row["value_b"] == pytest.approx(b[name])
        assert row["difference"] == pytest.approx(a[name] - b[name])
        assert row["interval"]["low"] <= row["difference"] <= row["interval"]["high"]
    # confirmed differentiates under ACTIVE_MANIFOLD and flat does not: the whole interval lies above 0
    assert rows["active.eta_squared"]["interval"]["low"] > 0.5
    # the same comparison again: seeded, the same numbers
    again = tmp_path / "again.json"
    assert cli("compare", str(confirmed), str(flat), "--json", str(again)).returncode == 0
    assert json.loads(again.read_text())["statistics"] == result["statistics"]


def test_the_rows_recomputed_independently_of_the_protocol(runs: tuple[Path, Path]) -> None:
    """The compare rows for ACTIVE_MANIFOLD eta^2, rebuilt here from the ledgers with numpy alone."""
    confirmed, flat = runs
    rows = {r["measure"]: r for r in PROTOCOL.paired_statistics(synthetic_records("confirmed"),
                                                                 synthetic_records("flat"))}

    def side(run_dir: Path) -> dict[str, tuple[str, float]]:
        lines = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
        return {r["prompt_id"]: (r["category"], r["zone_entropy"]) for r in lines if r["preset"] == "ACTIVE_MANIFOLD"}

    a, b = side(confirmed), side(flat)
    categories = list(PREREG.values.run.categories)
    prompts = sorted(a, key=lambda p: (categories.index(a[p][0]), p))
    strata = [a[p][0] for p in prompts]
    rng = np.random.default_rng(SPEC.bootstrap_seed)
    index = np.empty((SPEC.bootstrap_resamples, len(prompts)), dtype=np.int64)
    for c in dict.fromkeys(strata):
        cols = np.array([j for j, s in enumerate(strata) if s == c])
        index[:, cols] = cols[rng.integers(0, len(cols), size=(SPEC.bootstrap_resamples, len(cols)))]

    def eta(values: np.ndarray) -> np.ndarray:
        grand = values.mean(axis=1, keepdims=True)
        between = sum((np.array(strata) == c).sum() * (values[:, np.array(strata) == c].mean(axis=1) - grand[:, 0]) ** 2
                      for c in categories)
        return between / ((values - grand) ** 2).sum(axis=1)

    ha, hb = np.array([a[p][1] for p in prompts]), np.array([b[p][1] for p in prompts])
    low, high = np.quantile(eta(ha[index]) - eta(hb[index]), [0.025, 0.975])
    row = rows["active.eta_squared"]
    assert (row["interval"]["low"], row["interval"]["high"]) == pytest.approx((low, high), rel=1e-12)


def test_runs_on_different_prompt_hashes_are_refused(runs: tuple[Path, Path], tmp_path: Path) -> None:
    confirmed, _ = runs
    other = tmp_path / "other"
    other.mkdir()
    for name in ("records.jsonl",):
        (other / name).write_bytes((confirmed / name).read_bytes())
    provenance = json.loads((confirmed / "provenance.json").read_text())
    (set_name,) = provenance["fixtures_sha256"]
    provenance["fixtures_sha256"][set_name] = "0" * 64
    (other / "provenance.json").write_text(json.dumps(provenance))
    done = cli("compare", str(confirmed), str(other), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert "different fixtures" in done.stderr and not (tmp_path / "c.json").exists()
