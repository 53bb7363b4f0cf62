"""Every constant of the PX-Engine, in one frozen, typed configuration object.

The values of :func:`default_config` are those of the engine behind the
published SR61_FINAL_V2 numbers where that engine fixed them (zones, centres,
widths, calibrator floors and cut-offs, warmup seeds, ``recur_start``), and
this suite's own documented choices where it did not (the phi axis of the 2D
router, the selector and the recursive loop of ``ACTIVE_MANIFOLD``).  A
protocol passes its preregistered values through :meth:`PxConfig.from_mapping`;
nothing in the engine reads a constant from anywhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from .._base import ModelError

#: The five router zones, in the order every weight vector uses.
ZONES: tuple[str, ...] = ("math", "logic_a", "logic_b", "creative", "synthesis")

#: Presets: the replaced forward pass, and the unpatched model with the engine as a pure observer.
ACTIVE_MANIFOLD = "ACTIVE_MANIFOLD"
BASELINE = "BASELINE"
PRESETS: tuple[str, ...] = (ACTIVE_MANIFOLD, BASELINE)


class PxError(ModelError):
    """Misuse of the PX-Engine (bad configuration, unknown preset, unsupported model)."""


@dataclass(frozen=True)
class ScaleDefaults:
    """Per-scale constants: the prelude boundary and the synthetic kurtosis warmup samples."""

    recur_start: int  # prelude layers are [0, recur_start); kurtosis is read at their output
    warmup_centre: float  # synthetic kurtosis samples are centre + uniform(-jitter, +jitter)
    warmup_jitter: float


#: The original's per-scale values (E2B's recur_start is this suite's choice: the original gave none).
SCALE_DEFAULTS: dict[str, ScaleDefaults] = {
    "270M": ScaleDefaults(recur_start=5, warmup_centre=313.0, warmup_jitter=40.0),
    "1B": ScaleDefaults(recur_start=10, warmup_centre=1115.0, warmup_jitter=5.0),
    "4B": ScaleDefaults(recur_start=8, warmup_centre=2280.0, warmup_jitter=15.0),
    "E2B": ScaleDefaults(recur_start=10, warmup_centre=620.0, warmup_jitter=5.0),
}
#: Warmup for a model outside the four scales (recur_start must then be given explicitly).
OTHER_WARMUP = (1000.0, 5.0)


@dataclass(frozen=True)
class PxConfig:
    """All PX-Engine constants.  Field comments give the meaning; README section "PX-Engine" the rationale."""

    scale: str = "270M"  # label recorded with the state; selects nothing by itself
    recur_start: int = 5  # prelude = decoder layers [0, recur_start); telemetry reads layer recur_start-1's output

    # -- router ------------------------------------------------------------------------------------
    zones: tuple[str, ...] = ZONES
    kurtosis_centres: tuple[float, ...] = (1.5, 0.5, 0.0, -1.0, -2.0)  # zone centres on the kurtosis z axis
    kurtosis_widths: tuple[float, ...] = (0.8, 0.6, 0.7, 1.0, 0.9)  # Gaussian widths, each times T
    phi_centres: tuple[float, ...] = (1.0, 0.5, 0.0, -1.0, -0.5)  # zone centres on the phi z axis (suite's choice)
    phi_widths: tuple[float, ...] = (0.8, 0.6, 0.7, 1.0, 0.9)  # phi-axis widths, each times T (suite's choice)
    low_mass_threshold: float = 0.05  # kurtosis-axis Gaussian mass below this: phi-only weights instead
    #: token-diversity distribution per zone: coefficients of s^2, s(1-s), (1-s)^2 with s = sigmoid(-z_TD)
    td_coefficients: tuple[tuple[float, float, float], ...] = (
        (1.0, 0.0, 0.0), (0.0, 2.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.5, 0.0),
    )

    # -- AutoCalibrator ---------------------------------------------------------------------------
    warmup_threshold: int = 5  # fewer kurtosis samples than this: z = 0 (the router sits at the origin)
    kurtosis_std_floor: float = 5.0  # calibration kurtosis std is at least this
    phi_prior_mean: float = 0.9  # calibration phi mean with fewer than two phi samples
    phi_prior_std: float = 0.05  # calibration phi std with fewer than two phi samples
    td_std_floor: float = 0.10  # token-diversity std is at least this
    cv_cutoffs: tuple[float, float] = (0.05, 0.01)  # kurtosis coefficient of variation cut-offs (high, low)
    temperatures: tuple[float, float, float] = (0.3, 0.6, 1.0)  # T for CV above high, above low, otherwise
    blend_weights: tuple[float, float, float] = (0.8, 0.6, 0.5)  # b (kurtosis share) by the same cut-offs
    z_scale_floor: float = 1.0  # kurtosis z divides by max(this, min(online std, multiple x calibration std))
    z_scale_multiple: float = 2.0
    phi_z_scale_floor: float = 0.01  # the same for phi (suite's choice: the original had no phi axis in use)
    warmup_seed: int = 0xC0DE  # seed of the generator (random.Random) drawing the synthetic samples
    warmup_samples: int = 10
    warmup_centre: float = 313.0
    warmup_jitter: float = 40.0
    online_updates: bool = True  # a measured prompt keeps updating its own copy of the online statistics

    # -- ACTIVE_MANIFOLD (suite's operators; see README) --------------------------------------------
    window_base: int = 4  # window length at z = 0
    window_min: int = 2
    window_max: int = 6
    final_layers: int = 2  # decoder layers after the window that always run unchanged, at least
    max_loops: int = 3  # loop count = clamp(1 + floor(|z|), 1, max_loops)
    repetition_penalty: float = 1.15  # ACTIVE_MANIFOLD generation
    no_repeat_ngram_size: int = 3  # ACTIVE_MANIFOLD generation
    stop_tokens: tuple[str, ...] = ("<end_of_turn>",)  # generation stops on these besides eos

    def __post_init__(self) -> None:
        n = len(self.zones)
        for name in ("kurtosis_centres", "kurtosis_widths", "phi_centres", "phi_widths", "td_coefficients"):
            if len(getattr(self, name)) != n:
                raise PxError(f"PxConfig.{name} has {len(getattr(self, name))} entries; it needs one per zone ({n})")
        if any(w <= 0 for w in self.kurtosis_widths + self.phi_widths):
            raise PxError("PxConfig widths must all be > 0")
        if self.recur_start < 1:
            raise PxError(f"PxConfig.recur_start must be >= 1, got {self.recur_start}")
        if not (self.cv_cutoffs[0] >= self.cv_cutoffs[1] >= 0):
            raise PxError(f"PxConfig.cv_cutoffs must be (high, low) with high >= low >= 0, got {self.cv_cutoffs}")
        if not 1 <= self.window_min <= self.window_base <= self.window_max:
            raise PxError("PxConfig needs 1 <= window_min <= window_base <= window_max")
        if self.max_loops < 1 or self.final_layers < 0 or self.warmup_samples < 0:
            raise PxError("PxConfig needs max_loops >= 1, final_layers >= 0 and warmup_samples >= 0")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: tuples become lists."""
        return json.loads(json.dumps(asdict(self)))

    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, base: PxConfig | None = None) -> PxConfig:
        """A config from (for example) a prereg table; unknown keys are an error naming the valid ones."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise PxError(f"unknown PX-Engine constant(s) {unknown}; valid names: {', '.join(sorted(known))}")
        current = (base or cls()).as_dict()
        current.update(values)
        converted = {}
        for name, value in current.items():
            if isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
            converted[name] = value
        return cls(**converted)


def default_config(scale: str = "270M", **overrides: Any) -> PxConfig:
    """The documented defaults for one of the scales 270M, 1B, 4B, E2B (``overrides`` replace fields)."""
    if scale not in SCALE_DEFAULTS:
        raise PxError(f"unknown scale {scale!r}; known scales: {', '.join(SCALE_DEFAULTS)} (or build PxConfig yourself)")
    d = SCALE_DEFAULTS[scale]
    values: dict[str, Any] = {"scale": scale, "recur_start": d.recur_start, "warmup_centre": d.warmup_centre,
                              "warmup_jitter": d.warmup_jitter}
    values.update(overrides)
    return PxConfig.from_mapping(values)
