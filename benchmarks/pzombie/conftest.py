"""P-Zombie run: calibrate and measure every preset once per run under the run lock, then aggregate, stats, figures."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

import models
import models.px
from benchmarks.core import read_ledger
from benchmarks.core.plugin import benchmark_run, mark_model_runs, pin_hub_revision, pinned_revision
from fixtures import fixture_hash
from fixtures.pzombie import PZOMBIE_SET, build_pzombie_prompts

from .protocol import (
    CLASSIFICATIONS,
    HERE,
    PREREG,
    PRESET_PREFIX,
    PUBLISHED,
    PzRecord,
    classify,
    finite,
    metrics,
    record_from_engine,
    unit_id,
)

#: Test modules whose tests read the model run (marked cpu or gpu by --device).
MODEL_RUN_MODULES = ("test_rules.py", "test_completeness.py")
SPEC = PREREG.values

#: Ways this suite's engine and protocol knowingly differ from the original behind SR61_FINAL_V2 (README "Deviations").
DEVIATIONS_FROM_ORIGINAL = (
    "BASELINE runs the calibrator and router as pure observers (the original recorded nothing there, H = 0)",
    "generation stops on <end_of_turn> (the original per-prompt path did not)",
    "decoding uses the KV cache; the prelude-boundary kurtosis of the newest position does not depend on it",
    "phi is measured and calibrated as the router's second axis (the original never updated phi under Gemma 3)",
    "ACTIVE_MANIFOLD's selector, loop and blend operators are this suite's, written down in the prereg and README",
    "the prompts are this suite's own 80 + 10, one set for every path",
    "error records stay in the ledger and are counted; they make the run incomplete",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("preregbench")
    group.addoption(
        "--pzombie-max-new-tokens", dest="pzombie_max_new_tokens", type=int, default=None,
        help=f"P-Zombie: generation bound per prompt, 1 to {SPEC.generation.max_new_tokens} "
             f"(default {SPEC.generation.max_new_tokens}, as preregistered); a lower value is recorded as a deviation",
    )
    group.addoption(
        "--pzombie-isolation", dest="pzombie_isolation", default=None,
        help="P-Zombie: fork (load once, fork a child per prompt; CPU), spawn (fresh process per prompt) or "
             f"inprocess (quick, a recorded deviation); default {SPEC.run.isolation_cpu} on cpu, "
             f"{SPEC.run.isolation_cuda} on cuda",
    )


@dataclass(frozen=True)
class RunSettings:
    """What this run uses, resolved from the options and the preregistration."""

    scale: str
    model: str
    device: str
    dtype: str
    isolation: str
    max_new_tokens: int

    def deviations(self) -> list[str]:
        """Every way this run departs from the preregistration."""
        found = []
        scale = SPEC.scales[self.scale]
        if self.model != scale.model_id:
            found.append(f"model {self.model!r} instead of the preregistered {scale.model_id!r} for scale {self.scale}")
            if self.model in models.BUNDLED:
                found.append(f"{self.model} is the bundled offline checkpoint ({models.BUNDLED[self.model].summary}), "
                             "not the instruct checkpoint; its chat template is the registry's")
        if self.device != SPEC.run.default_device:
            found.append(f"device {self.device!r} ({self.dtype}) instead of {SPEC.run.default_device!r}")
        if self.max_new_tokens != SPEC.generation.max_new_tokens:
            found.append(f"max_new_tokens {self.max_new_tokens} instead of {SPEC.generation.max_new_tokens}")
        expected = SPEC.run.isolation_cuda if self.device.startswith("cuda") else SPEC.run.isolation_cpu
        if self.isolation != expected:
            found.append(f"isolation {self.isolation!r} instead of {expected!r}")
        return found


def run_settings_of(config: pytest.Config) -> RunSettings:
    scale = config.getoption("benchmark_scale") or SPEC.run.default_scale
    if scale not in SPEC.scales:
        raise pytest.UsageError(f"--scale {scale!r} is not a P-Zombie scale; choose one of: {', '.join(SPEC.scales)}")
    device = config.getoption("benchmark_device") or SPEC.run.default_device
    cuda = device.startswith("cuda")
    bound = config.getoption("pzombie_max_new_tokens", default=None)
    if bound is None:
        bound = SPEC.generation.max_new_tokens
    if not 1 <= bound <= SPEC.generation.max_new_tokens:
        raise pytest.UsageError(
            f"--pzombie-max-new-tokens {bound} is not valid; give 1 to {SPEC.generation.max_new_tokens}"
        )
    isolation = config.getoption("pzombie_isolation", default=None) or (
        SPEC.run.isolation_cuda if cuda else SPEC.run.isolation_cpu
    )
    if isolation not in models.px.ISOLATION_MODES:
        raise pytest.UsageError(
            f"--pzombie-isolation {isolation!r} is not valid; choose one of: {', '.join(models.px.ISOLATION_MODES)}"
        )
    if cuda and isolation == "fork":
        raise pytest.UsageError("--pzombie-isolation fork cannot run on cuda (CUDA does not survive fork); use spawn")
    return RunSettings(
        scale=scale,
        model=config.getoption("benchmark_model") or SPEC.scales[scale].model_id,
        device=device,
        dtype=SPEC.generation.dtype_cuda if cuda else SPEC.generation.dtype_cpu,
        isolation=isolation,
        max_new_tokens=bound,
    )


def _is_model_run(item: pytest.Item) -> bool:
    return Path(item.path).parent == HERE and Path(item.path).name in MODEL_RUN_MODULES


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if Path(metafunc.definition.path).parent != HERE:
        return
    for key, block in CLASSIFICATIONS.items():
        if f"{key}_rule" in metafunc.fixturenames:
            metafunc.parametrize(f"{key}_rule", block.labels)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    device = config.getoption("benchmark_device") or SPEC.run.default_device
    mark_model_runs(items, _is_model_run, device)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the options and pin a hub model's revision before any test runs."""
    if not any(_is_model_run(item) for item in session.items):
        return
    config = session.config
    settings = run_settings_of(config)
    preregistered = SPEC.scales[settings.scale]
    pin_hub_revision(config, "P-Zombie", settings.model, preregistered_id=preregistered.model_id,
                     preregistered_revision=preregistered.revision)


def engine_config(scale: str) -> models.px.PxConfig:
    """The PX-Engine constants: the prereg's [engine] table plus the scale's own values."""
    s = SPEC.scales[scale]
    return models.px.PxConfig.from_mapping({
        **SPEC.engine, "scale": scale, "recur_start": s.recur_start,
        "warmup_centre": s.warmup_centre, "warmup_jitter": s.warmup_jitter,
    })


def model_spec(config: pytest.Config, settings: RunSettings) -> models.px.ModelSpec:
    options: dict[str, Any] = {"device": settings.device, "dtype": settings.dtype, "seed": SPEC.seeds["torch"]}
    revision = pinned_revision(config, "P-Zombie")
    if revision:
        options["revision"] = revision
    return models.px.ModelSpec(settings.model, options)


# --------------------------------------------------------------------------- the run


@pytest.fixture(scope="session")
def pz_run(request: pytest.FixtureRequest):
    return benchmark_run(request.config, HERE)


@pytest.fixture(scope="session")
def run_settings(request: pytest.FixtureRequest) -> RunSettings:
    return run_settings_of(request.config)


@pytest.fixture(scope="session")
def prompts(pz_run) -> list[dict[str, Any]]:
    rows = build_pzombie_prompts()
    pz_run.once("prompts.json", lambda: {"fixture_set": PZOMBIE_SET, "sha256": fixture_hash(PZOMBIE_SET), "prompts": rows})
    return rows


def _measure_preset(config: pytest.Config, pz_run, settings: RunSettings, preset: str, rows: list[dict[str, Any]],
                    ledger) -> None:
    calibration = [row for row in rows if row["phase"] == "calibration"]
    measured = [row for row in rows if row["phase"] == "measured"]
    by_id = {row["prompt_id"]: row for row in measured}
    todo = [row for row in measured if unit_id(preset, row["prompt_id"]) not in ledger]
    if not todo:
        return
    px = models.px
    cfg = engine_config(settings.scale)
    if settings.model in models.BUNDLED and settings.isolation == "fork":
        # Convert the bundled GGUF here, once, if its cache is missing: the loader process must only load
        # (a loader that computed before forking would hang its children, see DESIGN.md).
        models.bundled_folder(settings.model)
    stored_path = pz_run.path(f"calibration-{preset}.json")
    frozen = pz_run.read_json(stored_path.name)["frozen_state"] if stored_path.exists() else None

    def calibrated(summary: dict[str, Any]) -> None:
        """Before the first measured prompt: keep the frozen state (a resume hands it back) and the provenance."""
        if frozen is None:
            pz_run.write_json(stored_path.name, {
                "preset": preset,
                "calibration_prompt_ids": [row["prompt_id"] for row in calibration],
                **summary,
            })
        elif summary["frozen_state_sha256"] != pz_run.read_json(stored_path.name)["frozen_state_sha256"]:
            raise models.ModelError(f"the resumed {preset} run was handed a different frozen state")
        previous = pz_run.load_provenance()
        if previous is not None and previous.model.get("revision") != summary["model"].get("revision"):
            raise models.ModelError(
                f"run {pz_run.run_id} was started with {previous.model.get('id')} @ {previous.model.get('revision')}; "
                "resume it with the same model"
            )
        if previous is None:
            pz_run.record_provenance(
                model=summary["model"],
                seeds=SPEC.seeds,
                prereg=PREREG,
                fixtures={PZOMBIE_SET: fixture_hash(PZOMBIE_SET)},
                extra={
                    **asdict(settings),
                    "deviations": settings.deviations(),
                    "deviations_from_original": list(DEVIATIONS_FROM_ORIGINAL),
                    "engine_config_sha256": summary["config_sha256"],
                },
            )

    px.run_prompts(
        model_spec(config, settings),
        [{"id": row["prompt_id"], "text": row["text"]} for row in todo],
        preset=preset,
        config=cfg,
        settings=px.generation_settings(preset, settings.max_new_tokens, cfg),
        isolation=settings.isolation,
        calibration_prompts=[{"id": row["prompt_id"], "text": row["text"]} for row in calibration],
        on_calibrated=calibrated,
        on_record=lambda record: ledger.append(record_from_engine(record, by_id[record.prompt_id])),
        frozen_state=frozen,
        timeout_s=SPEC.run.prompt_timeout_s,
    )


@pytest.fixture(scope="session")
def records(request: pytest.FixtureRequest, pz_run, prompts, run_settings) -> list[PzRecord]:
    """Measure every preset once per run (one xdist worker measures; the others wait and read)."""
    with pz_run.lock("measure"), pz_run.ledger("records.jsonl", PzRecord, key="unit_id") as ledger:
        for preset in SPEC.run.presets:
            _measure_preset(request.config, pz_run, run_settings, preset, prompts, ledger)
    return read_ledger(pz_run.path("records.jsonl"), PzRecord)


@pytest.fixture(scope="session")
def measured(records) -> dict[str, Any]:
    """Every metric, NaN where undefined."""
    return metrics(records)


@pytest.fixture(scope="session")
def rule_metrics(measured, stats, figures) -> dict[str, float]:
    """The metrics the rules read (the result files are written before any rule is applied)."""
    return finite(measured)


def _json_number(value: Any) -> Any:
    return value if not isinstance(value, float) or math.isfinite(value) else None


@pytest.fixture(scope="session")
def aggregate(pz_run, records) -> dict[str, Any]:
    def build() -> dict[str, Any]:
        presets = {}
        for preset in PRESET_PREFIX:
            rows = [r for r in records if r.preset == preset]
            presets[preset] = {
                "n": len(rows),
                "errors": sum(r.error is not None for r in rows),
                "prompts": [
                    {"unit_id": r.unit_id, "category": r.category, "zone_entropy": r.zone_entropy,
                     "token_diversity": r.token_diversity, "zone": r.zone, "zone_weights": r.zone_weights,
                     "new_tokens": r.new_tokens, "finish_reason": r.finish_reason, "error": r.error}
                    for r in rows
                ],
            }
        return {"schema_version": 1, "presets": presets}

    return pz_run.once("aggregate.json", build)


@pytest.fixture(scope="session")
def stats(pz_run, measured, run_settings, aggregate) -> dict[str, Any]:
    def build() -> dict[str, Any]:
        provenance = pz_run.load_provenance()
        return {
            "schema_version": 1,
            "scale": run_settings.scale,
            "model": run_settings.model,
            "device": run_settings.device,
            "dtype": run_settings.dtype,
            "isolation": run_settings.isolation,
            "max_new_tokens": run_settings.max_new_tokens,
            "metrics": {k: _json_number(v) for k, v in sorted(measured.items())},
            "classifications": classify(measured),
            "published_sr61_final_v2": PUBLISHED.get(run_settings.scale),
            "deviations": run_settings.deviations(),
            "deviations_from_original": list(DEVIATIONS_FROM_ORIGINAL),
            "provenance_model": provenance.model if provenance else None,
        }

    return pz_run.once("stats.json", build)


@pytest.fixture(scope="session")
def figures(pz_run, records, measured, run_settings, stats) -> list[Path]:
    from .figures import FIGURES, write_figures

    with pz_run.lock("figures"):
        if not all(pz_run.path(name).exists() for name in FIGURES):
            write_figures(pz_run.dir, records, measured, run_settings.scale)
    return [pz_run.path(name) for name in FIGURES]
