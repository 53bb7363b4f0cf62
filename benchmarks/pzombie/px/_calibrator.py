"""The AutoCalibrator: Welford online statistics, calibration, and the frozen state handed to every prompt.

Life of a state: synthetic kurtosis warmup samples (seeded), then the
calibration prompts' observations (kurtosis and phi at every step, token
diversity once per prompt), then :meth:`AutoCalibrator.freeze`, which fixes
the calibration values (means, floored standard deviations, temperature T,
blend weight b).  Each measured prompt starts from a copy of that frozen
state; with ``online_updates`` its own steps keep updating the copy's online
statistics (so z is measured against the running mean, as in the original),
but nothing flows back: no prompt changes what another one sees.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ._config import PxConfig, PxError


@dataclass
class Welford:
    """Running count, mean and sum of squared deviations (Welford's algorithm)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        if not math.isfinite(x):
            return  # a non-finite observation (a degenerate hidden vector) carries no information
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    @property
    def std(self) -> float:
        """Sample standard deviation (n - 1); 0 with fewer than two samples."""
        return math.sqrt(self.m2 / (self.n - 1)) if self.n >= 2 else 0.0


@dataclass
class Calibration:
    """Values fixed by :meth:`AutoCalibrator.freeze` (recomputed live until then)."""

    kurtosis_mean: float
    kurtosis_std: float  # floored at kurtosis_std_floor
    kurtosis_cv: float  # kurtosis_std / |kurtosis_mean|
    phi_mean: float
    phi_std: float
    td_mean: float
    td_std: float  # floored at td_std_floor
    temperature: float  # T
    blend: float  # b, the kurtosis-router share of the final weights


@dataclass
class CalibratorState:
    """Everything a prompt needs to route exactly as any other prompt would: JSON-ready via :meth:`as_dict`."""

    SCHEMA_VERSION = 1

    kurtosis: Welford = field(default_factory=Welford)
    phi: Welford = field(default_factory=Welford)
    td: Welford = field(default_factory=Welford)
    calibration: Calibration | None = None  # None until frozen
    frozen: bool = False
    synthetic_samples: list[float] = field(default_factory=list)  # the warmup kurtosis values, for the record
    calibration_prompts: int = 0  # how many calibration prompts were observed
    config_sha256: str = ""  # the PxConfig this state belongs to

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_version"] = self.SCHEMA_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibratorState:
        data = dict(data)
        version = data.pop("schema_version", None)
        if version != cls.SCHEMA_VERSION:
            raise PxError(f"calibrator state has schema_version {version!r}; this engine reads {cls.SCHEMA_VERSION}")
        cal = data.pop("calibration")
        return cls(
            kurtosis=Welford(**data.pop("kurtosis")),
            phi=Welford(**data.pop("phi")),
            td=Welford(**data.pop("td")),
            calibration=Calibration(**cal) if cal is not None else None,
            **data,
        )

    def sha256(self) -> str:
        """Canonical hash: equal for equal states on any machine and in any process."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()


class AutoCalibrator:
    """Online statistics plus the calibration rules of the PX-Engine."""

    def __init__(self, config: PxConfig, state: CalibratorState | None = None):
        self.config = config
        if state is None:
            state = CalibratorState(config_sha256=config.sha256())
        elif state.config_sha256 != config.sha256():
            raise PxError("the calibrator state was made with a different PxConfig (config_sha256 differs); "
                          "calibrate again with this configuration")
        self.state = state

    # -- building the state -----------------------------------------------------------------------

    @classmethod
    def warmed_up(cls, config: PxConfig) -> AutoCalibrator:
        """A fresh calibrator seeded with the per-scale synthetic kurtosis samples."""
        calibrator = cls(config)
        rng = random.Random(config.warmup_seed)
        for _ in range(config.warmup_samples):
            value = config.warmup_centre + rng.uniform(-config.warmup_jitter, config.warmup_jitter)
            calibrator.state.synthetic_samples.append(value)
            calibrator.state.kurtosis.add(value)
        return calibrator

    def observe_step(self, kurtosis: float, phi: float | None) -> None:
        """One decode step's telemetry (calibration prompts; measured prompts only with online_updates)."""
        self.state.kurtosis.add(kurtosis)
        if phi is not None:
            self.state.phi.add(phi)

    def observe_prompt(self, token_diversity: float) -> None:
        if self.state.frozen:
            raise PxError("the calibrator is frozen: token diversity of a measured prompt is not observed")
        self.state.td.add(token_diversity)
        self.state.calibration_prompts += 1

    def freeze(self) -> CalibratorState:
        """Fix the calibration values; returns a deep copy that is handed unchanged to every measured prompt."""
        self.state.calibration = self.calibration()
        self.state.frozen = True
        return copy.deepcopy(self.state)

    def session(self) -> AutoCalibrator:
        """A calibrator for one measured prompt: its own deep copy of the frozen state."""
        if not self.state.frozen:
            raise PxError("measured prompts need a frozen calibrator; run the calibration prompts and freeze() first")
        return AutoCalibrator(self.config, copy.deepcopy(self.state))

    # -- the rules ----------------------------------------------------------------------------------

    def calibration(self) -> Calibration:
        """The frozen values, or (before freezing) the values the current statistics give."""
        if self.state.calibration is not None and self.state.frozen:
            return self.state.calibration
        c, s = self.config, self.state
        k_mean = s.kurtosis.mean if s.kurtosis.n else c.warmup_centre
        k_std = max(s.kurtosis.std, c.kurtosis_std_floor)
        cv = k_std / abs(k_mean) if k_mean else math.inf
        if s.phi.n >= 2:
            phi_mean, phi_std = s.phi.mean, s.phi.std
        else:
            phi_mean, phi_std = c.phi_prior_mean, c.phi_prior_std
        td_mean = s.td.mean if s.td.n else math.nan
        td_std = max(s.td.std, c.td_std_floor)
        high, low = c.cv_cutoffs
        tier = 0 if cv > high else 1 if cv > low else 2
        return Calibration(k_mean, k_std, cv, phi_mean, phi_std, td_mean, td_std,
                           c.temperatures[tier], c.blend_weights[tier])

    def z_kurtosis(self, kurtosis: float) -> float:
        """(k - online mean) / max(floor, min(online std, multiple x calibration std)); 0 during warmup."""
        s, c = self.state.kurtosis, self.config
        if s.n < c.warmup_threshold or not math.isfinite(kurtosis):
            return 0.0
        cal = self.calibration()
        online_std = s.std if s.n >= 2 else cal.kurtosis_std
        scale = max(c.z_scale_floor, min(online_std, c.z_scale_multiple * cal.kurtosis_std))
        return (kurtosis - s.mean) / scale

    def z_phi(self, phi: float | None) -> float:
        """The same standardisation for phi, against its online mean (the prior mean before two samples)."""
        if phi is None or not math.isfinite(phi):
            return 0.0
        s, c = self.state.phi, self.config
        cal = self.calibration()
        mean = s.mean if s.n >= 2 else cal.phi_mean
        online_std = s.std if s.n >= 2 else cal.phi_std
        scale = max(c.phi_z_scale_floor, min(online_std, c.z_scale_multiple * cal.phi_std))
        return (phi - mean) / scale

    def z_td(self, token_diversity: float) -> float:
        """(TD - calibration mean) / floored calibration std; 0 before any calibration prompt."""
        cal = self.calibration()
        if not math.isfinite(cal.td_mean):
            return 0.0
        return (token_diversity - cal.td_mean) / cal.td_std
