"""The PX-Engine, the system the P-Zombie protocol evaluates: telemetry, AutoCalibrator, 2D zone router and
the ACTIVE_MANIFOLD / BASELINE presets.

Runs a prompt set through a local transformers model with the engine tapped in
(``models.LanguageModel.taps``), calibrating first and handing one frozen
calibrator state to every measured prompt, in fork, spawn or in-process
isolation.  It uses the ``models`` package only through its public names and
imports nothing else of the suite; torch is imported only when a model runs.
Every constant comes from a :class:`PxConfig`, which has no defaults: the
protocol builds it from its preregistration.

    from benchmarks.pzombie.engine import engine_config
    from benchmarks.pzombie.px import ModelSpec, generation_settings, run_prompts
    from benchmarks.pzombie.spec import PREREG

    config = engine_config("270M")
    run = run_prompts(ModelSpec("gemma-3-270m"), [("math-01", "What is 19 * 27?")],
                      preset="ACTIVE_MANIFOLD", config=config,
                      settings=generation_settings("ACTIVE_MANIFOLD", 8, config),
                      isolation="fork", calibration_prompts=[("cal-01", "Name a colour.")],
                      timeout_s=PREREG.values.run.prompt_timeout_s)
    run.records[0].zone_entropy
"""

from __future__ import annotations

from ._calibrator import AutoCalibrator, Calibration, CalibratorState, Welford
from ._config import ACTIVE_MANIFOLD, BASELINE, PRESETS, PxConfig, PxError
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
    "PRESETS",
    "PX_ERROR_CODES",
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
    "Selection",
    "Welford",
    "calibration_summary",
    "cosine",
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
