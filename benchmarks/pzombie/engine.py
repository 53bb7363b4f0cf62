"""P-Zombie: the PX-Engine's configuration from the preregistration, and its records as ledger records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import px
from .metrics import token_diversity
from .spec import OTHER_SCALE_WARMUP, PREREG, PzRecord, unit_id

__all__ = ["engine_config", "record_from_engine"]


def engine_config(scale: str | None, **overrides: Any) -> px.PxConfig:
    """The PX-Engine constants: the prereg's ``[engine]`` table plus the scale's ``[scales.<scale>]`` values.

    ``scale=None`` is a model outside the preregistered scales: the warmup is
    :data:`OTHER_SCALE_WARMUP` and ``recur_start`` must be given in ``overrides``
    (the prereg has none for it).  ``overrides`` replace fields (engine tests
    on small models use them); a protocol run never passes any.
    """
    spec = PREREG.values
    if scale is None:
        if "recur_start" not in overrides:
            raise px.PxError("a model outside the preregistered scales needs recur_start= (the prereg gives none for it)")
        other = OTHER_SCALE_WARMUP
        values: dict[str, Any] = {"scale": "other", "warmup_centre": other.warmup_centre,
                                  "warmup_jitter": other.warmup_jitter, "use_cache": True}
    elif scale in spec.scales:
        chosen = spec.scales[scale]
        values = {"scale": scale, "recur_start": chosen.recur_start, "warmup_centre": chosen.warmup_centre,
                  "warmup_jitter": chosen.warmup_jitter, "use_cache": chosen.use_cache}
    else:
        raise px.PxError(f"unknown scale {scale!r}; preregistered scales: {', '.join(spec.scales)} "
                         "(or scale=None with recur_start= for another model)")
    return px.PxConfig.from_mapping({**spec.engine, **values, **overrides})


def record_from_engine(record: Any, row: Mapping[str, Any]) -> PzRecord:
    """The ledger record of one engine record (``px.PxRecord``) for the fixture row it measured."""
    zones = tuple(record.zones)
    weights = record.zone_weights_last
    mean = record.zone_weights_mean
    ids = tuple(getattr(record, "input_token_ids", ()) or ())
    kept = ("isolation", "pid", "steps", "z_kurtosis", "z_phi", "z_td", "fallback", "selections", "loops_run",
            "temperature", "blend", "start_state_sha256", "input_tokens", "distinct_input_tokens", "zone_entropy_of_mean")
    return PzRecord(
        unit_id=unit_id(record.preset, record.prompt_id),
        preset=record.preset,
        prompt_id=record.prompt_id,
        category=row["category"],
        prompt=row["text"],
        input_token_ids=ids,
        # A prompt whose process timed out or died before tokenising has no input ids, hence no TD (null).
        token_diversity=float(record.token_diversity) if record.token_diversity is not None else (
            token_diversity(ids) if ids else None),
        zones=zones,
        zone_weights=None if weights is None else tuple(float(weights[z]) for z in zones),
        zone_weights_mean=None if mean is None else tuple(float(mean[z]) for z in zones),
        zone_entropy=record.zone_entropy,
        zone=record.dominant_zone,
        kurtosis=tuple(record.kurtosis),
        phi=tuple(record.phi),
        completion=record.text,
        completion_token_ids=tuple(record.token_ids),
        new_tokens=record.new_tokens,
        finish_reason=record.finish_reason,
        error=record.error,
        error_detail=record.error_detail,
        seconds=float(record.seconds),
        engine={key: getattr(record, key) for key in kept if hasattr(record, key)},
    )
