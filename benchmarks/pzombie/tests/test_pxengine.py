"""PX-Engine pieces without a model (router properties, calibrator rules, selector, configuration), and the
engine on small random-weight models of the other layer layouts."""

from __future__ import annotations

import functools
import json
import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.pzombie.engine import engine_config
from benchmarks.pzombie.px import (
    AutoCalibrator,
    CalibratorState,
    PxConfig,
    PxError,
    PxRecord,
    Welford,
    generation_settings,
    route,
    run_prompts,
    select,
    td_distribution,
    zone_entropy,
)
from benchmarks.pzombie.spec import PREREG
from models import GEMMA3_CHAT_TEMPLATE, bundled_tokenizer_folder, load_tokenizer
from models._hf import TransformersModel

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
CONFIG = engine_config("270M")
ZONES = CONFIG.zones
TIMEOUT_S = PREREG.values.run.prompt_timeout_s


@given(z_k=finite, z_phi=finite, z_td=finite, tier=st.integers(0, 2))
def test_router_weights_are_a_distribution_and_entropy_is_bounded(z_k, z_phi, z_td, tier):
    routing = route(z_k, z_phi, z_td, CONFIG.temperatures[tier], CONFIG.blend_weights[tier], CONFIG)
    for weights in (routing.weights, routing.manifold_weights, routing.td_weights):
        assert len(weights) == len(ZONES)
        assert all(w >= 0 and math.isfinite(w) for w in weights)
        assert math.fsum(weights) == pytest.approx(1.0, abs=1e-12)
    h = zone_entropy(routing.weights)
    assert 0.0 <= h <= math.log2(len(ZONES)) + 1e-12


def _gauss(z, centre, width, temperature):
    return math.exp(-0.5 * ((z - centre) / (width * temperature)) ** 2)


@pytest.mark.parametrize("z_k, z_phi, z_td", [(0.3, -0.4, 0.0), (1.5, 1.0, -1.2), (-1.7, 0.2, 2.5), (9.0, -0.8, 0.4)])
def test_router_follows_the_written_formula(z_k, z_phi, z_td):
    """Recomputed here from the README's formulas, term by term, without the module's helpers."""
    c, T, b = CONFIG, 0.6, 0.6
    k = [_gauss(z_k, ci, wi, T) for ci, wi in zip(c.kurtosis_centres, c.kurtosis_widths)]
    p = [_gauss(z_phi, ci, wi, T) for ci, wi in zip(c.phi_centres, c.phi_widths)]
    fallback = sum(k) < 0.05
    manifold = p if fallback else [a * q for a, q in zip(k, p)]
    manifold = [m / sum(manifold) for m in manifold]
    s = 1 / (1 + math.exp(z_td))
    td = [s * s, 2 * s * (1 - s), s * (1 - s), (1 - s) ** 2, 0.5 * s * (1 - s)]
    td = [t / sum(td) for t in td]
    final = [b * m + (1 - b) * t for m, t in zip(manifold, td)]
    routing = route(z_k, z_phi, z_td, T, b, CONFIG)
    assert routing.fallback is fallback
    assert routing.weights == pytest.approx(final, abs=1e-12)
    assert routing.td_weights == pytest.approx(td, abs=1e-12)
    assert routing.kurtosis_mass == pytest.approx(sum(k), rel=1e-12)


def test_router_far_outlier_falls_back_to_phi_and_stays_finite():
    routing = route(1e6, 0.0, 0.0, 0.3, 0.8, CONFIG)
    assert routing.fallback and routing.kurtosis_mass == 0.0
    # phi-only weights at z_phi = 0 favour logic_b (phi centre 0)
    assert max(range(5), key=lambda i: routing.manifold_weights[i]) == ZONES.index("logic_b")
    near = route(1.5, 1.0, 0.0, 0.3, 0.8, CONFIG)  # on math's centre in both axes
    assert not near.fallback and ZONES[max(range(5), key=lambda i: near.weights[i])] == "math"


def test_td_distribution_and_entropy_extremes():
    assert td_distribution(-1e9, CONFIG)[0] == pytest.approx(1.0)  # s -> 1: all on math
    assert td_distribution(1e9, CONFIG)[3] == pytest.approx(1.0)  # s -> 0: all on creative
    assert zone_entropy([0.2] * 5) == pytest.approx(math.log2(5))
    assert zone_entropy([1, 0, 0, 0, 0]) == 0.0
    assert zone_entropy([2, 2, 0, 0, 0]) == pytest.approx(1.0)


@given(st.lists(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), min_size=2, max_size=60))
def test_welford_matches_statistics(values):
    w = Welford()
    for v in values:
        w.add(v)
    assert w.n == len(values)
    assert w.mean == pytest.approx(statistics.fmean(values), rel=1e-9, abs=1e-9)
    assert w.std == pytest.approx(statistics.stdev(values), rel=1e-6, abs=1e-6)


def test_welford_ignores_non_finite():
    w = Welford()
    for v in (1.0, math.nan, 3.0, math.inf):
        w.add(v)
    assert (w.n, w.mean) == (2, 2.0)


@pytest.mark.parametrize("scale", sorted(PREREG.values.scales))
def test_synthetic_warmup_samples_are_seeded_and_within_jitter(scale):
    config = engine_config(scale)
    a, b = AutoCalibrator.warmed_up(config), AutoCalibrator.warmed_up(config)
    samples = a.state.synthetic_samples
    assert samples == b.state.synthetic_samples and len(samples) == 10
    rng = random.Random(0xC0DE)
    assert samples == [config.warmup_centre + rng.uniform(-config.warmup_jitter, config.warmup_jitter) for _ in range(10)]
    assert all(abs(s - config.warmup_centre) <= config.warmup_jitter for s in samples)
    assert a.state.kurtosis.n == 10


def _calibrated(kurtosis_values, phi_values=(), tds=(), config=CONFIG):
    cal = AutoCalibrator(config)
    for k in kurtosis_values:
        cal.observe_step(k, None)
    for p in phi_values:
        cal.state.phi.add(p)
    for t in tds:
        cal.observe_prompt(t)
    cal.freeze()
    return cal


@pytest.mark.parametrize("centre, spread, temperature, blend",
                         [(300.0, 40.0, 0.3, 0.8), (300.0, 6.0, 0.6, 0.6), (1000.0, 0.5, 1.0, 0.5)])
def test_coefficient_of_variation_sets_temperature_and_blend(centre, spread, temperature, blend):
    values = [centre + spread * ((i % 5) - 2) for i in range(20)]
    cal = _calibrated(values).calibration()
    std = max(statistics.stdev(values), 5.0)
    assert cal.kurtosis_std == pytest.approx(std)
    cv = std / statistics.fmean(values)
    assert cal.kurtosis_cv == pytest.approx(cv)
    assert (cal.temperature, cal.blend) == (temperature, blend)


def test_floors_and_priors():
    cal = _calibrated([100.0] * 8, phi_values=[0.5], tds=[0.7, 0.7, 0.7]).calibration()
    assert cal.kurtosis_std == 5.0  # std floor
    assert (cal.phi_mean, cal.phi_std) == (0.9, 0.05)  # fewer than two phi samples
    assert cal.td_std == 0.10 and cal.td_mean == pytest.approx(0.7)


def test_z_scores_use_online_mean_and_clamped_scale():
    cal = _calibrated([100.0 + i for i in range(10)], phi_values=[0.9, 0.95, 0.92], tds=[0.5, 0.9])
    session = cal.session()
    k = session.state.kurtosis
    scale = max(1.0, min(k.std, 2 * session.calibration().kurtosis_std))
    assert session.z_kurtosis(130.0) == pytest.approx((130.0 - k.mean) / scale)
    td = session.calibration()
    assert session.z_td(0.8) == pytest.approx((0.8 - td.td_mean) / td.td_std)
    warm = AutoCalibrator(CONFIG)
    for v in (1.0, 2.0, 3.0, 4.0):  # below the warmup threshold of 5 samples
        warm.observe_step(v, None)
    assert warm.z_kurtosis(1000.0) == 0.0


def test_sessions_start_from_the_frozen_state_and_never_change_it():
    cal = _calibrated([300.0 + i for i in range(12)], phi_values=[0.9, 0.97], tds=[0.6, 0.8])
    frozen_sha = cal.state.sha256()
    one = cal.session()
    for k in (900.0, 950.0, 1000.0):
        one.observe_step(k, 0.5)
    assert one.state.sha256() != frozen_sha
    assert cal.state.sha256() == frozen_sha
    assert cal.session().state.sha256() == frozen_sha
    with pytest.raises(PxError, match="frozen"):
        one.observe_prompt(0.5)
    with pytest.raises(PxError, match="freeze"):
        AutoCalibrator(CONFIG).session()


def test_state_round_trips_and_belongs_to_its_config():
    cal = _calibrated([300.0 + i for i in range(12)], phi_values=[0.9, 0.97], tds=[0.6, 0.8])
    data = cal.state.as_dict()
    again = CalibratorState.from_dict(data)
    assert again.sha256() == cal.state.sha256() and again.as_dict() == data
    with pytest.raises(PxError, match="different PxConfig"):
        AutoCalibrator(engine_config("1B"), again)
    with pytest.raises(PxError, match="schema_version"):
        CalibratorState.from_dict({**data, "schema_version": 99})


@given(z=finite, layers=st.integers(8, 40))
def test_selector_stays_inside_the_model(z, layers):
    sel = select(z, layers, CONFIG)
    assert sel.start == CONFIG.recur_start
    assert sel.start < sel.end <= layers - CONFIG.final_layers
    assert sel.end - sel.start <= CONFIG.window_max
    assert sel.start <= sel.hub < sel.end
    assert 1 <= sel.loops <= CONFIG.max_loops


def test_selector_grows_with_kurtosis():
    low, mid, high = (select(z, 18, CONFIG) for z in (-3.0, 0.0, 3.0))
    assert (low.end - low.start, mid.end - mid.start, high.end - high.start) == (2, 4, 6)
    assert low.hub <= mid.hub <= high.hub
    assert (low.loops, mid.loops, high.loops) == (3, 1, 3)
    with pytest.raises(PxError, match="leave no window"):
        select(0.0, 7, CONFIG)


def test_config_from_mapping_validates():
    c = PxConfig.from_mapping(CONFIG.as_dict())
    assert c == CONFIG and c.sha256() == CONFIG.sha256()
    assert PxConfig.from_mapping({"recur_start": 7}, base=CONFIG).recur_start == 7
    with pytest.raises(PxError, match="unknown PX-Engine constant.*recur_begin.*valid names"):
        PxConfig.from_mapping({"recur_begin": 3})
    with pytest.raises(PxError, match="one per zone"):
        PxConfig.from_mapping({"kurtosis_centres": [1.0, 2.0]}, base=CONFIG)
    with pytest.raises(PxError, match="not given; the engine has no defaults"):
        PxConfig.from_mapping({"recur_start": 7})


def test_generation_settings_per_preset():
    active, baseline = generation_settings("ACTIVE_MANIFOLD", 60, CONFIG), generation_settings("BASELINE", 12, CONFIG)
    assert (active.repetition_penalty, active.no_repeat_ngram_size, active.max_new_tokens) == (1.15, 3, 60)
    assert (baseline.repetition_penalty, baseline.no_repeat_ngram_size, baseline.max_new_tokens) == (1.0, 0, 12)
    assert active.stop == baseline.stop == ("<end_of_turn>",)
    with pytest.raises(PxError, match="unknown preset"):
        generation_settings("SUBJECTIVE", 60, CONFIG)


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return LlamaForCausalLM(config), "smollm2-135m-instruct", None, lambda net: net.model


def _tiny_gemma3_multimodal():
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )

    text = Gemma3TextConfig(vocab_size=262208, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                            num_attention_heads=4, num_key_value_heads=1, head_dim=16, sliding_window=32)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    config = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4)
    return Gemma3ForConditionalGeneration(config), "gemma-3-270m", "gemma", lambda net: net.model.language_model


def _tiny_gemma3n():
    from transformers import Gemma3nForCausalLM, Gemma3nTextConfig

    config = Gemma3nTextConfig(vocab_size=262144, vocab_size_per_layer_input=262144, hidden_size=64,
                               hidden_size_per_layer_input=8, intermediate_size=128, num_hidden_layers=6,
                               num_attention_heads=4, num_key_value_heads=1, head_dim=16, laurel_rank=4,
                               num_kv_shared_layers=2, activation_sparsity_pattern=[0.0] * 6,
                               layer_types=["sliding_attention", "full_attention"] * 3, sliding_window=32)
    return Gemma3nForCausalLM(config), "gemma-3-270m", "gemma", lambda net: net.model


@functools.cache
def _bundled_tokenizer(name: str):
    """A bundled model's tokenizer, loaded once for the layouts that share it (Gemma's takes seconds to load); the
    model wrapper sets only left padding and the pad token on it, the same for every layout."""
    folder, _ = bundled_tokenizer_folder(name)  # only the tokenizer is used: no weights converted
    return load_tokenizer(folder)


@pytest.mark.parametrize("build", [_tiny_llama, _tiny_gemma3_multimodal, _tiny_gemma3n],
                         ids=["llama", "gemma3-multimodal-wrapper", "gemma3n-altup"])
def test_engine_runs_other_layer_layouts_and_removes_its_hooks(build):
    """Random-weight models of the other layouts the scales need, through both presets, in-process:
    Llama-style feed-forward (post_attention_layernorm), Gemma 3 4B's multimodal wrapper (text stack at
    .model.language_model), Gemma 3n's AltUp streams ([streams, batch, positions, hidden] layer outputs)."""
    import torch  # reason: torch loads only for the tests that build a model

    torch.manual_seed(0)
    net, tokenizer_of, template, text_stack = build()
    model = TransformersModel(net, _bundled_tokenizer(tokenizer_of), model_id="tiny", revision="sha256:" + "0" * 64,
                              source="from_config", chat_template=GEMMA3_CHAT_TEMPLATE if template else None)
    config = engine_config("270M", recur_start=2, final_layers=1, window_base=2, window_min=1, window_max=3,
                           stop_tokens=("<end_of_turn>",) if template else ())
    runs = {}
    for preset in ("ACTIVE_MANIFOLD", "BASELINE"):
        runs[preset] = run_prompts(model, [("a", "What is 2 + 2?"), ("b", "Write a line about rain.")], preset=preset,
                                   config=config, settings=generation_settings(preset, 3, config),
                                   isolation="inprocess", calibration_prompts=[("c", "Name a colour.")],
                                   timeout_s=TIMEOUT_S)
        for record in runs[preset].records:
            assert record.ok and record.steps == record.new_tokens >= 1
            assert all(k is not None and math.isfinite(k) for k in record.kurtosis)
        stack = text_stack(net)
        assert not stack._forward_pre_hooks and all(not layer._forward_hooks for layer in stack.layers)
    assert runs["ACTIVE_MANIFOLD"].records[0].loops_run > 0 and runs["BASELINE"].records[0].loops_run == 0
    for run in runs.values():  # the run record is strict JSON (no NaN) and round-trips
        data = json.loads(json.dumps(run.as_dict(), allow_nan=False))
        assert [PxRecord.from_dict(r) for r in data["records"]] == run.records
        assert CalibratorState.from_dict(data["frozen_state"]).sha256() == run.frozen_state_sha256


def test_the_scales_without_the_kv_cache_are_4b_and_e2b():
    assert {scale: engine_config(scale).use_cache for scale in PREREG.values.scales} == {
        "270M": True, "1B": True, "4B": False, "E2B": False}
    for scale in PREREG.values.scales:
        for preset in ("ACTIVE_MANIFOLD", "BASELINE"):
            assert generation_settings(preset, 4, engine_config(scale)).use_cache is engine_config(scale).use_cache


@pytest.mark.slow
@pytest.mark.parametrize("build", [_tiny_gemma3_multimodal, _tiny_gemma3n], ids=["4B-layout", "E2B-layout"])
def test_decoding_without_the_cache_on_the_4b_and_e2b_layouts(build, capsys):
    """The 4B and E2B scales decode without the KV cache (the seed's use_cache=False during recursion).  On their
    layouts, BASELINE (the engine observing only) gives the cached path's tokens and telemetry; ACTIVE_MANIFOLD
    may differ, since its loop operator then acts on every position at every step; both run to the end."""
    import torch

    torch.manual_seed(0)
    net, tokenizer_of, _, _ = build()
    model = TransformersModel(net, _bundled_tokenizer(tokenizer_of), model_id="tiny", revision="sha256:" + "0" * 64,
                              source="from_config", chat_template=GEMMA3_CHAT_TEMPLATE)
    prompts = [("a", "What is 2 + 2?"), ("b", "Write a line about rain."), ("d", "Is every square a rectangle?")]
    runs = {}
    for use_cache in (True, False):
        config = engine_config("270M", recur_start=2, final_layers=1, window_base=2, window_min=1, window_max=3,
                               stop_tokens=("<end_of_turn>",), use_cache=use_cache)
        for preset in ("ACTIVE_MANIFOLD", "BASELINE"):
            runs[preset, use_cache] = run_prompts(
                model, prompts, preset=preset, config=config, settings=generation_settings(preset, 5, config),
                isolation="inprocess", calibration_prompts=[("c", "Name a colour.")], timeout_s=TIMEOUT_S)
            assert runs[preset, use_cache].settings["use_cache"] is use_cache
            for record in runs[preset, use_cache].records:
                assert record.ok and record.steps == record.new_tokens >= 1
    for cached, uncached in zip(runs["BASELINE", True].records, runs["BASELINE", False].records):
        assert uncached.token_ids == cached.token_ids
        worst = max(abs(a - b) / max(abs(b), 1e-9) for a, b in zip(uncached.kurtosis, cached.kurtosis))
        assert worst <= 1e-4
        assert abs(uncached.zone_entropy - cached.zone_entropy) <= 1e-6
    same = sum(a.token_ids == b.token_ids for a, b in zip(runs["ACTIVE_MANIFOLD", True].records,
                                                          runs["ACTIVE_MANIFOLD", False].records))
    entropy = max(abs(a.zone_entropy - b.zone_entropy) for a, b in zip(runs["ACTIVE_MANIFOLD", True].records,
                                                                       runs["ACTIVE_MANIFOLD", False].records))
    with capsys.disabled():
        print(f"\n{build.__name__}: ACTIVE_MANIFOLD without the cache: {same}/{len(prompts)} prompts give the cached "
              f"tokens; largest zone-entropy difference {entropy:.3g} bits")


@pytest.mark.parametrize("isolation", ["inprocess", pytest.param("spawn", marks=pytest.mark.slow)])
def test_the_cuda_allocator_setting_reaches_every_process_that_loads_the_model(isolation, monkeypatch):
    """``cuda_alloc_conf`` is PYTORCH_CUDA_ALLOC_CONF in each process that loads the model, set before it loads
    (the stand-in model answers with the value it finds); ``empty_cache`` runs before every generation."""
    from benchmarks.pzombie.px import ModelSpec

    from ._models import env_echo_gemma

    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    conf = "expandable_segments:True,max_split_size_mb:256"
    config = engine_config("270M", recur_start=2, final_layers=1, window_base=2, window_min=1, window_max=3,
                           stop_tokens=("<end_of_turn>",))
    run = run_prompts(ModelSpec("env-echo", factory=env_echo_gemma), [("a", "What is 2 + 2?")], preset="BASELINE",
                      config=config, settings=generation_settings("BASELINE", 2, config), isolation=isolation,
                      calibration_prompts=[("c", "Name a colour.")], timeout_s=TIMEOUT_S, cuda_alloc_conf=conf,
                      empty_cache=True)
    assert [r.text for r in run.calibration_records + run.records] == [conf, conf]
