"""Every constant of the PX-Engine, in one frozen, typed configuration object with no defaults of its own.

The engine reads no constant from anywhere else, and this module holds none:
a :class:`PxConfig` is built from the P-Zombie preregistration (its
``[engine]`` table plus the scale's ``[scales.<scale>]`` values, or
``benchmarks.pzombie.spec.OTHER_SCALE_WARMUP`` for a model outside the scales;
``benchmarks.pzombie.engine.engine_config``), so the prereg is the only place
the values are written.  Which of them are the original engine's and which
are this suite's choices is said in ``docs/protocols/pzombie.md`` (section
"The PX-Engine").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from models import ModelError

#: Presets: the replaced forward pass, and the unpatched model with the engine as a pure observer.
ACTIVE_MANIFOLD = "ACTIVE_MANIFOLD"
BASELINE = "BASELINE"
PRESETS: tuple[str, ...] = (ACTIVE_MANIFOLD, BASELINE)


class PxError(ModelError):
    """Misuse of the PX-Engine (bad configuration, unknown preset, unsupported model)."""


@dataclass(frozen=True)
class PxConfig:
    """All PX-Engine constants.  Field comments give the meaning; ``docs/protocols/pzombie.md`` the rationale."""

    scale: str  # label recorded with the state; selects nothing by itself
    recur_start: int  # prelude = decoder layers [0, recur_start); telemetry reads layer recur_start-1's output

    # -- router ------------------------------------------------------------------------------------
    zones: tuple[str, ...]  # router zones, the order of every weight vector
    kurtosis_centres: tuple[float, ...]  # zone centres on the kurtosis z axis
    kurtosis_widths: tuple[float, ...]  # Gaussian widths, each times T
    phi_centres: tuple[float, ...]  # zone centres on the phi z axis (suite's choice)
    phi_widths: tuple[float, ...]  # phi-axis widths, each times T (suite's choice)
    low_mass_threshold: float  # kurtosis-axis Gaussian mass below this: phi-only weights instead
    #: token-diversity distribution per zone: coefficients of s^2, s(1-s), (1-s)^2 with s = sigmoid(-z_TD)
    td_coefficients: tuple[tuple[float, float, float], ...]

    # -- AutoCalibrator ---------------------------------------------------------------------------
    warmup_threshold: int  # fewer kurtosis samples than this: z = 0 (the router sits at the origin)
    kurtosis_std_floor: float  # calibration kurtosis std is at least this
    phi_prior_mean: float  # calibration phi mean with fewer than two phi samples
    phi_prior_std: float  # calibration phi std with fewer than two phi samples
    td_std_floor: float  # token-diversity std is at least this
    cv_cutoffs: tuple[float, float]  # kurtosis coefficient of variation cut-offs (high, low)
    temperatures: tuple[float, float, float]  # T for CV above high, above low, otherwise
    blend_weights: tuple[float, float, float]  # b (kurtosis share) by the same cut-offs
    z_scale_floor: float  # kurtosis z divides by max(this, min(online std, multiple x calibration std))
    z_scale_multiple: float
    phi_z_scale_floor: float  # the same for phi (suite's choice: the original had no phi axis in use)
    warmup_seed: int  # seed of the generator (random.Random) drawing the synthetic samples
    warmup_samples: int  # how many synthetic kurtosis samples seed the calibrator
    warmup_centre: float  # synthetic kurtosis samples are centre + uniform(-jitter, +jitter) (per scale)
    warmup_jitter: float
    online_updates: bool  # a measured prompt keeps updating its own copy of the online statistics

    # -- ACTIVE_MANIFOLD (suite's operators; see README) --------------------------------------------
    window_base: int  # window length at z = 0
    window_min: int
    window_max: int
    final_layers: int  # decoder layers after the window that always run unchanged, at least
    max_loops: int  # loop count = clamp(1 + floor(|z|), 1, max_loops)
    repetition_penalty: float  # ACTIVE_MANIFOLD generation
    no_repeat_ngram_size: int  # ACTIVE_MANIFOLD generation
    stop_tokens: tuple[str, ...]  # generation stops on these besides eos
    #: Decoding reuses the key/value cache (True), or recomputes the whole sequence every step, the loop operator
    #: then applying to every position at each step (False: the 4B and E2B scales, as the original ran them).
    use_cache: bool

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
        """A config from a mapping such as a prereg table (lists become tuples).

        Without ``base`` every field must be given; with it, ``values`` replace
        some of its fields.  An unknown or a missing name is an error naming it.
        """
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise PxError(f"unknown PX-Engine constant(s) {unknown}; valid names: {', '.join(sorted(known))}")
        current = dict(base.as_dict()) if base is not None else {}
        current.update(values)
        missing = [name for name in known if name not in current]
        if missing:
            raise PxError(f"PX-Engine constant(s) {missing} not given; the engine has no defaults: build the "
                          "configuration from the preregistration (benchmarks.pzombie.engine.engine_config)")
        converted = {}
        for name, value in current.items():
            if isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
            converted[name] = value
        return cls(**converted)
