"""The 2D zone router: Gaussian zone weights over (kurtosis z, phi z), low-mass fallback, token-diversity blend.

Pure functions of numbers (no torch), so the property tests can drive them directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._config import PxConfig


@dataclass(frozen=True)
class Routing:
    """One step's routing: the final weights and the parts they came from."""

    weights: tuple[float, ...]  # final zone weights (sum to one), in PxConfig.zones order
    manifold_weights: tuple[float, ...]  # the 2D (or fallback phi-only) Gaussian weights
    td_weights: tuple[float, ...]  # the token-diversity distribution
    kurtosis_mass: float  # sum of the unnormalised kurtosis-axis Gaussians (fallback when below threshold)
    fallback: bool  # True when phi-only weights replaced the 2D weights
    temperature: float
    blend: float


def _normalised_from_logs(logs: Sequence[float]) -> tuple[float, ...]:
    top = max(logs)
    exps = [math.exp(v - top) for v in logs]
    total = sum(exps)
    return tuple(e / total for e in exps)


def _gaussian_logs(z: float, centres: Sequence[float], widths: Sequence[float], temperature: float) -> list[float]:
    return [-0.5 * ((z - c) / (w * temperature)) ** 2 for c, w in zip(centres, widths)]


def td_distribution(z_td: float, config: PxConfig) -> tuple[float, ...]:
    """s = sigmoid(-z_TD); each zone gets a s^2 + b s(1-s) + c (1-s)^2 (config.td_coefficients), normalised."""
    s = 1.0 / (1.0 + math.exp(min(700.0, z_td)))
    raw = [a * s * s + b * s * (1 - s) + c * (1 - s) * (1 - s) for a, b, c in config.td_coefficients]
    total = sum(raw)
    if total <= 0:  # coefficients that vanish at this s: no preference
        return tuple(1.0 / len(raw) for _ in raw)
    return tuple(r / total for r in raw)


def route(z_kurtosis: float, z_phi: float, z_td: float, temperature: float, blend: float, config: PxConfig) -> Routing:
    """Zone weights for one step.

    1. Kurtosis axis: g_i = exp(-0.5 ((z_k - c_i) / (w_i T))^2); its unnormalised mass is sum g_i.
    2. If that mass is at least ``low_mass_threshold``: the 2D weights g_i * exp(-0.5 ((z_phi - p_i) / (v_i T))^2),
       normalised.  Otherwise (the kurtosis is far from every centre) the phi-axis Gaussians alone.
       Normalisation is done in log space, so far-off z still yields the nearest zone, never a division by zero.
    3. final = b * manifold + (1 - b) * td_distribution(z_TD), renormalised.
    """
    k_logs = _gaussian_logs(z_kurtosis, config.kurtosis_centres, config.kurtosis_widths, temperature)
    mass = sum(math.exp(v) for v in k_logs)
    p_logs = _gaussian_logs(z_phi, config.phi_centres, config.phi_widths, temperature)
    fallback = mass < config.low_mass_threshold
    manifold = _normalised_from_logs(p_logs if fallback else [a + b for a, b in zip(k_logs, p_logs)])
    td = td_distribution(z_td, config)
    mixed = [blend * m + (1 - blend) * t for m, t in zip(manifold, td)]
    total = sum(mixed)
    return Routing(tuple(m / total for m in mixed), manifold, td, mass, fallback, temperature, blend)


def zone_entropy(weights: Sequence[float]) -> float:
    """H = -sum p log2 p over p = w / sum w (0 log 0 = 0), in bits."""
    total = float(sum(weights))
    if total <= 0:
        return 0.0
    return -sum((w / total) * math.log2(w / total) for w in weights if w > 0) + 0.0
