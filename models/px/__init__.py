"""The PX-Engine: telemetry, AutoCalibrator, 2D zone router and the ACTIVE_MANIFOLD / BASELINE presets.

Runs a prompt set through a local transformers model with the engine tapped in
(``models.LanguageModel.taps``), calibrating first and handing one frozen
calibrator state to every measured prompt, in fork, spawn or in-process
isolation.  torch is imported only when a model runs.

    from models.px import ModelSpec, default_config, generation_settings, run_prompts

    run = run_prompts(ModelSpec("gemma-3-270m"), [("math-01", "What is 19 * 27?")],
                      preset="ACTIVE_MANIFOLD", config=default_config("270M"),
                      settings=generation_settings("ACTIVE_MANIFOLD", max_new_tokens=8),
                      isolation="fork", calibration_prompts=[("cal-01", "Name a colour.")])
    run.records[0].zone_entropy
"""

from __future__ import annotations

from ._calibrator import AutoCalibrator, Calibration, CalibratorState, Welford
from ._config import (
    ACTIVE_MANIFOLD,
    BASELINE,
    OTHER_WARMUP,
    PRESETS,
    SCALE_DEFAULTS,
    ZONES,
    PxConfig,
    PxError,
    ScaleDefaults,
    default_config,
)
from ._engine import (
    PX_ERROR_CODES,
    PxRecord,
    Selection,
    cosine,
    generation_settings,
    kurtosis,
    run_one,
    select,
    token_diversity,
)
from ._router import Routing, route, td_distribution, zone_entropy
from ._runner import (
    ISOLATION_MODES,
    ModelSpec,
    PxPrompt,
    PxRun,
    calibration_summary,
    run_prompts,
)

__all__ = [
    "ACTIVE_MANIFOLD",
    "BASELINE",
    "ISOLATION_MODES",
    "OTHER_WARMUP",
    "PRESETS",
    "PX_ERROR_CODES",
    "SCALE_DEFAULTS",
    "ZONES",
    "AutoCalibrator",
    "Calibration",
    "CalibratorState",
    "ModelSpec",
    "PxConfig",
    "PxError",
    "PxPrompt",
    "PxRecord",
    "PxRun",
    "Routing",
    "ScaleDefaults",
    "Selection",
    "Welford",
    "calibration_summary",
    "cosine",
    "default_config",
    "generation_settings",
    "kurtosis",
    "route",
    "run_one",
    "run_prompts",
    "select",
    "td_distribution",
    "token_diversity",
    "zone_entropy",
]
