"""The preregistration against the facts it freezes, the engine configuration it builds, and the run options."""

from __future__ import annotations

import math
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from benchmarks.core import ProtocolRun, Run, UsageProblem
from benchmarks.pzombie import px
from benchmarks.pzombie.engine import engine_config
from benchmarks.pzombie.protocol import PROTOCOL
from benchmarks.pzombie.spec import CLASSIFICATIONS, HERE, OTHER_SCALE_WARMUP, PREREG, PUBLISHED

SPEC = PREREG.values
PER_SCALE = {"scale", "recur_start", "warmup_centre", "warmup_jitter", "use_cache"}


def test_every_engine_constant_is_preregistered():
    assert set(SPEC.engine) == {f.name for f in fields(px.PxConfig)} - PER_SCALE


def test_the_engine_has_no_constants_of_its_own():
    """Every PxConfig field is required: the prereg is the only place a value is written."""
    assert [f.name for f in fields(px.PxConfig) if f.default is not MISSING or f.default_factory is not MISSING] == []
    with pytest.raises(px.PxError, match=r"\['recur_start'\] not given; the engine has no defaults"):
        px.PxConfig.from_mapping({k: v for k, v in engine_config("270M").as_dict().items() if k != "recur_start"})


@pytest.mark.parametrize("scale", sorted(SPEC.scales))
def test_engine_config_takes_every_value_from_the_prereg(scale):
    config = engine_config(scale).as_dict()
    chosen = SPEC.scales[scale]
    assert config == {**SPEC.engine, "scale": scale, "recur_start": chosen.recur_start,
                      "warmup_centre": chosen.warmup_centre, "warmup_jitter": chosen.warmup_jitter,
                      "use_cache": chosen.use_cache}


def test_a_model_outside_the_scales_takes_the_other_warmup():
    config = engine_config(None, recur_start=4)
    other = OTHER_SCALE_WARMUP
    assert (config.scale, config.recur_start, config.warmup_centre, config.warmup_jitter) == (
        "other", 4, other.warmup_centre, other.warmup_jitter)
    with pytest.raises(px.PxError, match="needs recur_start="):
        engine_config(None)
    with pytest.raises(px.PxError, match="unknown scale '2B'; preregistered scales: 270M, 1B, 4B, E2B"):
        engine_config("2B")


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
    assert (OTHER_SCALE_WARMUP.warmup_centre, OTHER_SCALE_WARMUP.warmup_jitter) == (1000.0, 5.0)
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
    for scale, row in PUBLISHED.items():
        values = {"active.eta_squared": row["eta_squared"], "active.r_squared_td": row["r_squared_td"]}
        assert CLASSIFICATIONS["combined"].evaluate(values).label == row["verdict"], scale


def protocol_run(tmp_path: Path, *, model: str | None = None, device: str | None = None, scale: str | None = None,
                 **options) -> ProtocolRun:
    """The run a session with these command-line values would make (nothing is written)."""
    return ProtocolRun(PROTOCOL, Run("pzombie", "options", tmp_path, "2026-11-30T00:00:00Z", HERE),
                       model=model, device=device, scale=scale, options=options)


@pytest.mark.parametrize(("values", "message"), [
    ({"scale": "13B"}, "--scale '13B' is not a P-Zombie scale; choose one of: 270M, 1B, 4B, E2B"),
    ({"max-new-tokens": 61}, "--pzombie-max-new-tokens 61 is not valid; give 1 to 60"),
    ({"max-new-tokens": 0}, "--pzombie-max-new-tokens 0 is not valid; give 1 to 60"),
    ({"isolation": "thread"}, "--pzombie-isolation 'thread' is not valid; choose one of: fork, spawn, inprocess"),
    ({"device": "cuda", "isolation": "fork"}, "--pzombie-isolation fork cannot run on cuda"),
])
def test_bad_options_name_the_valid_values(tmp_path, values, message):
    values = dict(values)
    named = {key: values.pop(key) for key in ("scale", "device") if key in values}
    with pytest.raises(UsageProblem, match=message.replace("(", r"\(").replace(")", r"\)")):
        protocol_run(tmp_path, **named, **values)
    assert not (tmp_path / "pzombie").exists()


def test_defaults_and_recorded_deviations(tmp_path):
    gpu = protocol_run(tmp_path, scale="1B")
    assert (gpu.model, gpu.device) == ("google/gemma-3-1b-it", "cuda")
    assert (gpu.settings.dtype, gpu.settings.isolation, gpu.settings.max_new_tokens) == ("bfloat16", "spawn", 60)
    assert gpu.deviations == []
    cpu = protocol_run(tmp_path, model="gemma-3-270m", device="cpu", **{"max-new-tokens": 4, "isolation": "inprocess"})
    assert (cpu.settings.scale, cpu.settings.dtype) == ("270M", "float32")
    assert cpu.settings_record == {"scale": "270M", "dtype": "float32", "isolation": "inprocess", "max_new_tokens": 4,
                                   "presets": ["ACTIVE_MANIFOLD", "BASELINE"]}
    found = cpu.deviations
    assert found[:2] == ["model 'gemma-3-270m' instead of the preregistered 'google/gemma-3-270m-it'",
                         "device 'cpu' instead of 'cuda'"]
    assert "bundled offline checkpoint" in found[2]
    assert found[3:] == ["max_new_tokens 4 instead of 60", "isolation 'inprocess' instead of 'fork'"]
    one = protocol_run(tmp_path, model="gemma-3-270m", device="cpu", preset="BASELINE")
    assert one.settings.presets == ("BASELINE",) and {u.preset for u in one.units} == {"BASELINE"}
    assert one.deviations[-1] == "preset BASELINE only, instead of ACTIVE_MANIFOLD and BASELINE"
    assert set(PROTOCOL.undecided(one)) == {"token_control", "combined", "eta2_target", "h2"}
    assert set(PROTOCOL.undecided(protocol_run(tmp_path, model="gemma-3-270m", device="cpu",
                                               preset="ACTIVE_MANIFOLD"))) == {"h2"}
    assert PROTOCOL.undecided(cpu) == {}
    assert PROTOCOL.options_from_settings(one.settings_record)["preset"] == "BASELINE"
    assert math.isfinite(SPEC.run.prompt_timeout_s)


def test_a_local_model_folder_is_hashed_once_for_every_engine_process(tmp_path: Path) -> None:
    """The engine's processes get the folder's revision with the model's options, so none of them (one per prompt
    under spawn) reads the whole checkpoint again to hash it; a pinned revision is passed as it is."""
    import models

    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 64)
    results = tmp_path / "results"
    run = ProtocolRun(PROTOCOL, Run("pzombie", "local", results, "2026-11-30T00:00:00Z", HERE), model=str(folder),
                      device="cpu")
    spec = PROTOCOL.model_spec(run)
    assert spec.options["revision"] == models.folder_hash(folder) and spec.options["revision"].startswith("sha256:")
    (folder / "sub" / "weights.bin").write_bytes(b"other weights")
    assert PROTOCOL.model_spec(run).options["revision"] != spec.options["revision"]  # the files' hash, not a name's
    pinned = ProtocolRun(PROTOCOL, Run("pzombie", "pinned", results, "2026-11-30T00:00:00Z", HERE), model=str(folder),
                         device="cpu", revision="sha256:" + "ab" * 32)
    assert PROTOCOL.model_spec(pinned).options["revision"] == "sha256:" + "ab" * 32
    bundled = ProtocolRun(PROTOCOL, Run("pzombie", "bundled", results, "2026-11-30T00:00:00Z", HERE),
                          model="gemma-3-270m", device="cpu")
    assert "revision" not in PROTOCOL.model_spec(bundled).options
