"""Scripted per-check-accuracy workers: simulated rungs registered as models.

A worker of per-check accuracy ``a`` reads each check of an episode
correctly with probability ``a`` (independently, seeded by the rendered
prompt and the worker's seed) and approves exactly when every check as read
passes.  On an approvable episode with k checks it is right with probability
a^k, which is the composition model the seed's feasibility arithmetic
assumes; ``a = 1`` is a saturated rung that never errs.

Names follow ``ladder-worker-a<accuracy>-seed<seed>`` (the model registry
reserves ':' for URLs and hub ids); :func:`ensure_worker` registers any such
name on demand, and the simulated fleet of prereg.toml is registered on import.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import models
from models import NoisyChecks, ScriptedModel

from .spec import PREREG

WORKER_NAME = re.compile(r"^ladder-worker-a(?P<a>[01](?:\.\d+)?)-seed(?P<seed>\d+)$")
FLEET_SEED = 7


def worker_name(accuracy: float, seed: int = FLEET_SEED) -> str:
    return f"ladder-worker-a{accuracy:.3f}-seed{seed}"


def _decide(read: Sequence[bool]) -> str:
    return "DECISION: APPROVE" if all(read) else "DECISION: REJECT"


def ensure_worker(name: str) -> bool:
    """Register ``name`` if it is a worker name not yet registered; True when it names a worker."""
    match = WORKER_NAME.match(name)
    if not match:
        return False
    if models.model_kind(name) is None:
        accuracy, seed = float(match["a"]), int(match["seed"])

        def factory(checks: Callable[[str], Sequence[bool]], **_: Any) -> ScriptedModel:
            policy = NoisyChecks(checks=checks, decide=_decide, accuracy=accuracy, seed=seed)
            return ScriptedModel(name, policy)

        models.register_model(name, "scripted", f"ladder worker, per-check accuracy {accuracy:g}, seed {seed}", factory)
    return True


#: Per-check accuracy each scripted rung simulates, in the prereg's rung order (a self-check setting that decides
#: nothing, so it lives here rather than in the prereg): Table 4's anchor, the two mid rungs and the saturated rungs.
SIMULATED_ACCURACY: tuple[float, ...] = (0.906, 0.984, 0.982, 0.996, 1.0)
if len(SIMULATED_ACCURACY) != len(PREREG.values.fleet.rungs):
    raise ValueError(f"SIMULATED_ACCURACY has {len(SIMULATED_ACCURACY)} entries for {len(PREREG.values.fleet.rungs)} rungs")

#: The simulated fleet: rung label -> worker name, in prereg order.
SIMULATED_FLEET = {
    label: worker_name(a, FLEET_SEED + i)
    for i, (label, a) in enumerate(zip(PREREG.values.fleet.rungs, SIMULATED_ACCURACY))
}
for _name in SIMULATED_FLEET.values():
    ensure_worker(_name)
