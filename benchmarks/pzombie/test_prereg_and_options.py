"""The preregistration against the facts it freezes, the engine configuration it builds, and the run options."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from models import px

from .conftest import engine_config, run_settings_of
from .protocol import CLASSIFICATIONS, PREREG

SPEC = PREREG.values
PER_SCALE = {"scale", "recur_start", "warmup_centre", "warmup_jitter"}


def test_every_engine_constant_is_preregistered():
    assert set(SPEC.engine) == {f.name for f in fields(px.PxConfig)} - PER_SCALE


@pytest.mark.parametrize("scale", sorted(SPEC.scales))
def test_engine_config_is_the_engines_documented_default(scale):
    config = engine_config(scale)
    assert config == px.default_config(scale)
    assert config.recur_start == SPEC.scales[scale].recur_start


def test_original_constants_are_frozen():
    """The facts about the engine behind SR61_FINAL_V2, as the preregistration states them."""
    e = SPEC.engine
    assert e["zones"] == ["math", "logic_a", "logic_b", "creative", "synthesis"]
    assert e["kurtosis_centres"] == [1.5, 0.5, 0.0, -1.0, -2.0]
    assert e["kurtosis_widths"] == [0.8, 0.6, 0.7, 1.0, 0.9]
    assert (e["low_mass_threshold"], e["warmup_threshold"], e["kurtosis_std_floor"], e["td_std_floor"]) == (0.05, 5, 5.0, 0.10)
    assert (e["phi_prior_mean"], e["phi_prior_std"]) == (0.9, 0.05)
    assert e["cv_cutoffs"] == [0.05, 0.01] and e["temperatures"] == [0.3, 0.6, 1.0] and e["blend_weights"] == [0.8, 0.6, 0.5]
    assert (e["z_scale_floor"], e["z_scale_multiple"], e["warmup_seed"], e["warmup_samples"]) == (1.0, 2.0, 0xC0DE, 10)
    assert (e["repetition_penalty"], e["no_repeat_ngram_size"], e["stop_tokens"]) == (1.15, 3, ["<end_of_turn>"])
    scales = {name: (s.model_id, s.recur_start, s.warmup_centre, s.warmup_jitter) for name, s in SPEC.scales.items()}
    assert scales == {
        "270M": ("google/gemma-3-270m-it", 5, 313.0, 40.0),
        "1B": ("google/gemma-3-1b-it", 10, 1115.0, 5.0),
        "4B": ("google/gemma-3-4b-it", 8, 2280.0, 15.0),
        "E2B": ("google/gemma-3n-E2B-it", 10, 620.0, 5.0),
    }
    assert (SPEC.warmup_other_scale.warmup_centre, SPEC.warmup_other_scale.warmup_jitter) == px.OTHER_WARMUP
    assert SPEC.generation.max_new_tokens == 60
    assert (SPEC.generation.dtype_cuda, SPEC.generation.dtype_cpu) == ("bfloat16", "float32")


def test_thresholds_and_rule_order_follow_the_seed():
    assert SPEC.thresholds == {"r2_pzombie": 0.7, "r2_anti": 0.3, "eta2_confirm": 0.10, "r2_token_control": 0.30,
                               "eta2_target": 0.05, "alpha": 0.05, "h2_margin": 0.0}
    assert CLASSIFICATIONS["token_control"].labels == ["P-ZOMBIE", "AMBIGUOUS", "ANTI-P-ZOMBIE"]
    assert CLASSIFICATIONS["combined"].labels == ["ANTI_P_ZOMBIE_CONFIRMED", "ETA2_HIGH_TOKEN_CONTROL_FAIL",
                                                  "ETA2_BELOW_THRESHOLD"]
    assert CLASSIFICATIONS["eta2_target"].labels == ["ETA2_TARGET_MET", "ETA2_TARGET_NOT_MET"]
    assert CLASSIFICATIONS["h2"].labels == ["H2_SUPPORTED", "A2_NOT_REJECTED"]


@pytest.mark.parametrize(("r2", "label"), [(0.71, "P-ZOMBIE"), (0.7, "AMBIGUOUS"), (0.3, "AMBIGUOUS"),
                                           (0.2999, "ANTI-P-ZOMBIE"), (0.0, "ANTI-P-ZOMBIE")])
def test_three_way_verdict_boundaries(r2, label):
    assert CLASSIFICATIONS["token_control"].evaluate({"active.r_squared_td": r2}).label == label


@pytest.mark.parametrize(("eta", "r2", "label"), [
    (0.10, 0.2999, "ANTI_P_ZOMBIE_CONFIRMED"), (0.10, 0.30, "ETA2_HIGH_TOKEN_CONTROL_FAIL"),
    (0.0999, 0.0, "ETA2_BELOW_THRESHOLD"), (0.0999, 0.9, "ETA2_BELOW_THRESHOLD"), (1.0, 1.0, "ETA2_HIGH_TOKEN_CONTROL_FAIL"),
])
def test_combined_verdict_boundaries(eta, r2, label):
    assert CLASSIFICATIONS["combined"].evaluate({"active.eta_squared": eta, "active.r_squared_td": r2}).label == label


@pytest.mark.parametrize(("eta", "p", "label"), [(0.0501, 0.049, "ETA2_TARGET_MET"), (0.05, 0.001, "ETA2_TARGET_NOT_MET"),
                                                 (0.5, 0.05, "ETA2_TARGET_NOT_MET")])
def test_eta2_target_needs_both_size_and_significance(eta, p, label):
    assert CLASSIFICATIONS["eta2_target"].evaluate({"active.eta_squared": eta, "active.p_exact": p}).label == label


def test_published_results_reach_their_published_verdicts():
    from .protocol import PUBLISHED

    for scale, row in PUBLISHED.items():
        values = {"active.eta_squared": row["eta_squared"], "active.r_squared_td": row["r_squared_td"]}
        assert CLASSIFICATIONS["combined"].evaluate(values).label == row["verdict"], scale


class _Config:
    """Just enough of pytest.Config for the option resolution."""

    def __init__(self, **options):
        self.options = options

    def getoption(self, name, default=None):
        return self.options.get(name, default)


@pytest.mark.parametrize(("options", "message"), [
    ({"benchmark_scale": "13B"}, "--scale '13B' is not a P-Zombie scale; choose one of: 270M, 1B, 4B, E2B"),
    ({"pzombie_max_new_tokens": 61}, "--pzombie-max-new-tokens 61 is not valid; give 1 to 60"),
    ({"pzombie_max_new_tokens": 0}, "--pzombie-max-new-tokens 0 is not valid; give 1 to 60"),
    ({"pzombie_isolation": "thread"}, "--pzombie-isolation 'thread' is not valid; choose one of: fork, spawn, inprocess"),
    ({"benchmark_device": "cuda", "pzombie_isolation": "fork"}, "cannot run on cuda"),
])
def test_bad_options_name_the_valid_values(options, message):
    with pytest.raises(pytest.UsageError, match=message.replace("(", r"\(").replace("'", "'")):
        run_settings_of(_Config(**options))


def test_defaults_and_recorded_deviations():
    gpu = run_settings_of(_Config(benchmark_scale="1B"))
    assert (gpu.model, gpu.device, gpu.dtype, gpu.isolation, gpu.max_new_tokens) == (
        "google/gemma-3-1b-it", "cuda", "bfloat16", "spawn", 60)
    assert gpu.deviations() == []
    cpu = run_settings_of(_Config(benchmark_device="cpu", benchmark_model="gemma-3-270m", pzombie_max_new_tokens=4,
                                  pzombie_isolation="inprocess"))
    assert (cpu.scale, cpu.dtype) == ("270M", "float32")
    found = cpu.deviations()
    assert found[0] == "model 'gemma-3-270m' instead of the preregistered 'google/gemma-3-270m-it' for scale 270M"
    assert "bundled offline checkpoint" in found[1]
    assert found[2:] == ["device 'cpu' (float32) instead of 'cuda'", "max_new_tokens 4 instead of 60",
                         "isolation 'inprocess' instead of 'fork'"]
    assert math.isfinite(SPEC.run.prompt_timeout_s)
