"""Metrics of the protocol against scipy and against each other; the stdlib rescorer's arithmetic against scipy."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.core.stats import f_sf_wilson_hilferty, one_way_anova
from benchmarks.pzombie.metrics import eta_squared_forms, metrics, preset_metrics, token_diversity, zone_entropy_bits
from benchmarks.pzombie.scenarios import synthetic_records
from benchmarks.pzombie.spec import CATEGORIES, HERE, PREREG

_spec = importlib.util.spec_from_file_location("pzombie_rescore", HERE / "rescore.py")
rescore = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore)
#: Imported by the root conftest before this module's first test, so that no Hypothesis example pays for the import
#: against its deadline (a protocol run collects this module without running it, and without importing scipy).
RUN_LIBRARIES_FIRST = ("scipy.stats",)


def _sps():
    """scipy.stats, imported by the tests that use it: a protocol run collects this module without running it."""
    from scipy import stats

    return stats


finite_h = st.floats(min_value=0.0, max_value=math.log2(5), allow_nan=False)


def _groups(draw_values: list[list[float]]) -> dict[str, list[float]]:
    return dict(zip(CATEGORIES, draw_values))


@given(st.lists(st.lists(finite_h, min_size=2, max_size=25), min_size=4, max_size=4))
def test_both_eta_squared_forms_agree(values):
    forms = eta_squared_forms(_groups(values))
    if forms.ss_total < 1e-12:
        return  # no variance at all: both forms undefined
    assert forms.over_total == pytest.approx(forms.over_sum, rel=1e-9, abs=1e-12)
    assert 0.0 <= forms.over_sum <= 1.0 + 1e-12


def test_eta_squared_forms_undefined_without_variance():
    forms = eta_squared_forms({c: [1.0, 1.0] for c in CATEGORIES})
    assert math.isnan(forms.over_total) and math.isnan(forms.over_sum)


@settings(max_examples=60)
@given(st.integers(0, 2**32 - 1))
def test_anova_and_regression_match_scipy(seed):
    rng = np.random.default_rng(seed)
    records = synthetic_records("ambiguous", seed=int(rng.integers(0, 10_000)))
    active = [r for r in records if r.preset == PREREG.values.run.rule_preset]
    values = preset_metrics(active)
    groups = [[r.zone_entropy for r in active if r.category == c] for c in CATEGORIES]
    f, p = _sps().f_oneway(*groups)
    assert values["f"] == pytest.approx(f, rel=1e-9)
    assert values["p_exact"] == pytest.approx(p, rel=1e-6, abs=1e-300)
    assert values["eta_squared"] == pytest.approx(values["eta_squared_over_total"], rel=1e-9)
    fit = _sps().linregress([r.token_diversity for r in active], [r.zone_entropy for r in active])
    assert values["r_squared_td"] == pytest.approx(fit.rvalue**2, rel=1e-9)
    assert values["slope_td"] == pytest.approx(fit.slope, rel=1e-9)
    for c, g in zip(CATEGORIES, groups):
        assert values[f"mean_h.{c}"] == pytest.approx(float(np.mean(g)))


def test_published_p_approx_is_reproduced_from_f():
    """The seed's p_approx column follows from F with df (3, 76) by the Wilson-Hilferty form."""
    published = {10.342: 1.32e-5, 5.337: 0.0023, 0.659: 0.584, 16.814: 4.85e-8}
    for f, p in published.items():
        assert f_sf_wilson_hilferty(f, 3, 76) == pytest.approx(p, rel=0.03)


def test_errors_are_counted_and_left_out():
    clean = metrics(synthetic_records("confirmed"))
    broken = metrics(synthetic_records("confirmed", errors=3))
    assert broken["active.errors"] == 3 and broken["active.n"] == 80 and broken["active.n_ok"] == 77
    assert clean["active.errors"] == 0 and broken["baseline.errors"] == 0
    assert broken["active.df_within"] == 73 and broken["active.eta_squared"] != clean["active.eta_squared"]


def test_h2_gain_is_the_difference_of_eta_squared():
    values = metrics(synthetic_records("flat"))
    assert values["h2.eta_squared_gain"] == values["active.eta_squared"] - values["baseline.eta_squared"] < 0


@given(st.lists(st.floats(min_value=0.0, max_value=10.0, allow_nan=False), min_size=5, max_size=5).filter(lambda w: sum(w) > 1e-6))
def test_zone_entropy_lies_within_zero_and_log2_zones(weights):
    h = zone_entropy_bits(weights)
    assert 0.0 <= h <= math.log2(5) + 1e-12
    assert h == pytest.approx(rescore.entropy_bits(weights), abs=1e-12)
    p = np.asarray(weights) / np.sum(weights)
    assert h == pytest.approx(float(_sps().entropy(p, base=2)), abs=1e-9)


def test_zone_entropy_extremes_and_bad_weights():
    assert zone_entropy_bits([0, 0, 3, 0, 0]) == 0.0
    assert zone_entropy_bits([1] * 5) == pytest.approx(math.log2(5))
    with pytest.raises(ValueError, match="positive sum"):
        zone_entropy_bits([0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="non-negative"):
        zone_entropy_bits([1, -0.5, 1, 1, 1])


def test_token_diversity_counts_distinct_over_total():
    assert token_diversity([2, 5, 5, 7]) == 0.75
    assert token_diversity([1]) == 1.0
    with pytest.raises(ValueError, match="empty"):
        token_diversity([])


@settings(max_examples=80)
@given(st.floats(0.0, 60.0), st.integers(1, 12), st.integers(2, 300))
def test_rescorer_exact_f_tail_matches_scipy(f, d1, d2):
    assert rescore.f_sf(f, d1, d2) == pytest.approx(float(_sps().f.sf(f, d1, d2)), rel=1e-7, abs=1e-13)


@given(st.lists(st.lists(finite_h, min_size=2, max_size=20), min_size=4, max_size=4))
def test_rescorer_anova_matches_core(values):
    groups = _groups(values)
    if eta_squared_forms(groups).ss_total < 1e-12:
        return
    mine = rescore.anova(groups)
    core = one_way_anova(groups)
    assert mine["eta_squared"] == pytest.approx(core.eta_squared, rel=1e-9, abs=1e-12)
    if math.isfinite(core.f):
        assert mine["f"] == pytest.approx(core.f, rel=1e-9, abs=1e-12)
        assert mine["p_exact"] == pytest.approx(core.p_exact, rel=1e-6, abs=1e-12)
        assert mine["p_approx"] == pytest.approx(core.p_wilson_hilferty, rel=1e-9, abs=1e-12)
