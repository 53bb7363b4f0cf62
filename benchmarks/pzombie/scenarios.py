"""Synthetic per-prompt records with a chosen shape, for checking the metrics and rules.

A scenario fixes, per preset, how the zone entropy depends on the category
and on the token diversity.  Records are built with the same fields a model
run writes (zone weights whose entropy is the recorded H, input token ids
whose diversity is the recorded TD), so they pass through the same metrics,
rules, rescorer and figures.  They never stand in for a model run: they check
that each classification is reached when the data have that shape.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from benchmarks.core import ProtocolRun, Run, sha256_json
from benchmarks.core.provenance import utc_now
from benchmarks.core.scales import start_group
from fixtures.pzombie import measured_prompts

from .metrics import token_diversity, zone_entropy_bits
from .protocol import PROTOCOL
from .spec import HERE, PRESET_PREFIX, ZONES, PzRecord, calibration_file, unit_id

#: Length of the synthetic inputs; TD takes values k / INPUT_TOKENS.
INPUT_TOKENS = 40


@dataclass(frozen=True)
class Shape:
    """How the sharpness of one preset's routing is drawn.

    The router's logits are ``sharpness * g`` for a fixed random direction g;
    sharpness = category_level[category] + td_coupling * (TD - 0.7) + noise.
    Larger sharpness means lower entropy.
    """

    category_level: Mapping[str, float]
    td_coupling: float = 0.0
    noise: float = 0.3
    category_td: Mapping[str, float] = field(default_factory=dict)  # mean TD per category (default 0.7)
    td_spread: float = 0.08


FLAT = {"math": 1.5, "logic": 1.5, "creative": 1.5, "synthesis": 1.5}

#: Named shapes: (ACTIVE_MANIFOLD, BASELINE) and the classification each should reach.
SCENARIOS: dict[str, tuple[Shape, Shape]] = {
    # categories differ, token diversity plays no part; the baseline is flat
    "confirmed": (Shape({"math": 3.0, "logic": 2.0, "creative": 0.6, "synthesis": 1.0}), Shape(FLAT)),
    # H is a function of TD, and TD differs by category: differentiation explained by tokens
    "token_driven": (
        Shape(FLAT, td_coupling=-12.0, noise=0.05,
              category_td={"math": 0.55, "logic": 0.65, "creative": 0.8, "synthesis": 0.9}, td_spread=0.05),
        Shape(FLAT),
    ),
    # categories differ and TD explains part of it
    "ambiguous": (
        Shape({"math": 2.4, "logic": 1.8, "creative": 1.2, "synthesis": 1.2}, td_coupling=-5.0, noise=0.3,
              td_spread=0.1),
        Shape(FLAT),
    ),
    # no categorical differentiation under either preset; the baseline happens to vary more
    "flat": (Shape(FLAT, noise=0.4), Shape({"math": 2.5, "logic": 1.5, "creative": 0.8, "synthesis": 1.5}, noise=0.4)),
}

EXPECTED: dict[str, dict[str, str]] = {
    "confirmed": {"token_control": "ANTI-P-ZOMBIE", "combined": "ANTI_P_ZOMBIE_CONFIRMED",
                  "eta2_target": "ETA2_TARGET_MET", "h2": "H2_SUPPORTED"},
    "token_driven": {"token_control": "P-ZOMBIE", "combined": "ETA2_HIGH_TOKEN_CONTROL_FAIL",
                     "eta2_target": "ETA2_TARGET_MET", "h2": "H2_SUPPORTED"},
    "ambiguous": {"token_control": "AMBIGUOUS", "combined": "ETA2_HIGH_TOKEN_CONTROL_FAIL",
                  "eta2_target": "ETA2_TARGET_MET", "h2": "H2_SUPPORTED"},
    "flat": {"token_control": "ANTI-P-ZOMBIE", "combined": "ETA2_BELOW_THRESHOLD",
             "eta2_target": "ETA2_TARGET_NOT_MET", "h2": "A2_NOT_REJECTED"},
}


def _input_ids(rng: random.Random, td: float) -> list[int]:
    distinct = min(INPUT_TOKENS, max(2, round(td * INPUT_TOKENS)))
    ids = list(range(2, 2 + distinct))
    ids += [rng.choice(ids) for _ in range(INPUT_TOKENS - distinct)]
    rng.shuffle(ids)
    return ids


def _weights(sharpness: float, direction: list[float]) -> list[float]:
    logits = [sharpness * g for g in direction]
    top = max(logits)
    raw = [math.exp(v - top) for v in logits]
    total = math.fsum(raw)
    return [v / total for v in raw]


def synthetic_records(name: str, seed: int = 8, *, errors: int = 0) -> list[PzRecord]:
    """Records for every preset and measured prompt under the scenario ``name``.

    ``errors`` turns the first that many ACTIVE_MANIFOLD prompts into coded
    error records (``timeout``), as a killed prompt process leaves them.
    """
    shapes = dict(zip(PRESET_PREFIX, SCENARIOS[name]))
    rng = random.Random(seed)
    direction = [rng.gauss(0.0, 1.0) for _ in ZONES]
    # The input is a property of the prompt: both presets see the same token ids (drawn by the first shape).
    first = SCENARIOS[name][0]
    inputs = {}
    for row in measured_prompts():
        td_mean = first.category_td.get(row["category"], 0.7)
        inputs[row["prompt_id"]] = _input_ids(rng, min(1.0, max(0.1, rng.gauss(td_mean, first.td_spread))))
    records = []
    for preset, shape in shapes.items():
        for index, row in enumerate(measured_prompts()):
            category = row["category"]
            ids = inputs[row["prompt_id"]]
            td = token_diversity(ids)
            sharp = shape.category_level[category] + shape.td_coupling * (td - 0.7) + rng.gauss(0.0, shape.noise)
            weights = _weights(max(0.0, sharp), direction)
            failed = preset == next(iter(shapes)) and index < errors
            records.append(PzRecord(
                unit_id=unit_id(preset, row["prompt_id"]),
                preset=preset,
                prompt_id=row["prompt_id"],
                category=category,
                prompt=row["text"],
                input_token_ids=tuple(ids),
                token_diversity=td,
                zones=ZONES,
                zone_weights=None if failed else tuple(weights),
                zone_weights_mean=None if failed else tuple(weights),
                zone_entropy=None if failed else zone_entropy_bits(weights),
                zone=None if failed else ZONES[max(range(len(ZONES)), key=weights.__getitem__)],
                kurtosis=() if failed else (300.0 + 10 * sharp,),
                phi=() if failed else (0.9,),
                completion="",
                completion_token_ids=(),
                new_tokens=0,
                finish_reason="error" if failed else "length",
                error="timeout" if failed else None,
                error_detail="synthetic timeout" if failed else None,
                seconds=0.0,
                engine={"synthetic_scenario": name},
            ))
    return records


def prefill_run(results_dir: Path, run_id: str, name: str, *, errors: int = 0, seed: int = 8,
                model: str = "gemma-3-270m", device: str = "cpu", preset: str | None = None,
                scale: str | None = None, options: Mapping[str, Any] | None = None) -> Path:
    """Record a complete set of measurements for scenario ``name`` as run ``results_dir/pzombie/run_id/``.

    The records go through ``ProtocolRun.record`` for a run of ``model`` on
    ``device`` with the default settings, so they carry that run's identity.
    A session started with the same ``--model``, ``--device``,
    ``--results-dir=results_dir`` and ``--run-id=run_id`` then finds every unit
    recorded (as when resuming a finished run), measures nothing and goes
    straight to the result files and the rules.  The provenance names the
    synthetic source, not a model.  ``preset``: a run of that preset only (``--pzombie-preset``); ``scale``: a
    run of that scale (``--scale``; default the prereg's); ``options``: further protocol options (option name ->
    value, as ``max-new-tokens``), which a session resuming the run must give too.
    """
    run = ProtocolRun(PROTOCOL, Run("pzombie", run_id, Path(results_dir), utc_now(), HERE), model=model, device=device,
                      scale=scale, options={**(options or {}), "preset": preset})
    description = {"id": f"synthetic-records-{name}",
                   "revision": "sha256:" + sha256_json({"scenario": name, "seed": seed, "errors": errors}),
                   "note": f"synthetic records of scenario {name!r} (benchmarks/pzombie/scenarios.py), not a model run"}
    run.record(description, [r for r in synthetic_records(name, seed, errors=errors)
                             if r.preset in run.settings.presets])
    state = {"scenario": name, "seed": seed, "frozen": True}
    for measured in run.settings.presets:
        run.write_json(calibration_file(measured), {
            "preset": measured,
            "calibration_prompt_ids": [row["prompt_id"] for row in PROTOCOL.prompts(run, "calibration")],
            "identity": run.identity(description["revision"]),
            "frozen_state": state,
            "frozen_state_sha256": sha256_json(state),
        })
    return run.dir


def prefill_group(results_dir: Path, group_id: str, scenarios: Mapping[str, str], **options: Any) -> Path:
    """A ``--scale all`` group ``results_dir/pzombie-scales/group_id/`` whose scale runs hold the records of
    ``scenarios`` (scale -> scenario name; a scale left out has no run yet); ``options`` go to :func:`prefill_run`.
    A session of ``--scale all --run-id group_id`` with the same ``--model`` and ``--device`` then measures
    only the scales left out.  Returns the group directory."""
    parent = start_group(Path(results_dir), PROTOCOL, group_id, [])
    for scale, name in scenarios.items():
        prefill_run(parent, scale, name, scale=scale, **options)
    return parent
