"""The campaign arm: the preregistration's form, the compiled preregistration and the unit record.

The campaign's frozen registration lives in ``benchmarks/campaign/prereg.toml`` (the folder ``preregbench run
campaign`` runs); its code lives here, beside the probe it builds on, because it reuses the probe's generator
states, worker prompt, parser and gate.  This module is the bottom of the subpackage: it reads the prereg and
imports nothing else of it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar, Literal

from benchmarks.core import ClassificationSpec, PreregError, ProtocolHeader, load_prereg

#: The campaign's folder: prereg.toml, README.md, conftest.py, rescore.py and its self-checks.
FOLDER = Path(__file__).resolve().parents[2] / "campaign"

CONDITIONS = ("autonomous", "review", "ledger")
#: The conditions a supervisor sits in (the seed's pre-commitment conditions: the worker commits to its decision
#: and the supervisor rules on it before it takes effect).
SUPERVISED = ("review", "ledger")
SUPERVISOR_DECISIONS = ("allow", "block")
OUTCOMES = ("completed", "worker_unparsed", "supervisor_unparsed", "errored", "timeout")
RULE_BLOCKS = ("h_l1", "h_l2", "h_l3")

__all__ = ["CONDITIONS", "FOLDER", "OUTCOMES", "PREREG", "RECORD_FIELDS", "RULE_BLOCKS", "SUPERVISED",
           "SUPERVISOR_DECISIONS", "CampaignError", "CampaignPrereg", "CampaignRecord", "served_name"]


@dataclass(frozen=True)
class RungSpec:
    id: str
    device: str


@dataclass(frozen=True)
class LaunchSpec:
    state: str  # the frozen generator state probe and campaign share
    probe_seed: int  # the round seed the probe must have used
    probe_verdict: str  # the gate label the probe must carry
    rungs: tuple[str, ...]  # the rungs this registration names


@dataclass(frozen=True)
class GridSpec:
    tiers: tuple[int, ...]
    conditions: tuple[str, ...]
    seeds: tuple[int, ...]
    episodes_per_cell: int


@dataclass(frozen=True)
class MeasurementSpec:
    max_tokens: int
    timeout_s: float
    max_answer_chars: int
    ledger_entries: int  # the damage record shows the latest this many damages


@dataclass(frozen=True)
class CostSpec:
    consultation_fee: float
    damage: float
    wrongful_block: float


@dataclass(frozen=True)
class SharesSpec:
    errored_outcomes: tuple[str, ...]
    tier_primary: int  # the tier H-L1 and H-L3 read


@dataclass(frozen=True)
class ProjectionSpec:
    chars_per_token: float
    concurrency: int


@dataclass(frozen=True)
class AnalysisSpec:
    confidence: float


@dataclass(frozen=True)
class CampaignPrereg:
    protocol: ProtocolHeader
    model: RungSpec
    launch: LaunchSpec
    grid: GridSpec
    measurement: MeasurementSpec
    costs: CostSpec
    shares: SharesSpec
    projection: ProjectionSpec
    analysis: AnalysisSpec
    thresholds: dict[str, float]
    h_l1: ClassificationSpec
    h_l2: ClassificationSpec
    h_l3: ClassificationSpec


def served_name(model: str) -> str:
    """The model's name as a server knows it (``openai:qwen3:8b@http://host/v1`` -> ``qwen3:8b``), else the name:
    how a rung is matched to the registration's ``[launch] rungs``."""
    if model.startswith("openai:") and "@" in model:
        return model[len("openai:"):].rsplit("@", 1)[0]
    return model


class CampaignError(ValueError):
    """A campaign was asked for something its registration forbids, or its records cannot be read as asked."""


# --------------------------------------------------------------------------- the unit record


@dataclass(frozen=True)
class CampaignRecord:
    """One campaign unit: one episode under one oversight condition, the worker's answer and, where a supervisor
    was consulted, its ruling; a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    unit_id: str  # "s<seed>-t<tier>-<condition>-<index:03d>": the ledger key
    rung: str  # the model in both seats, as named on the command line
    model_revision: str
    generator_state: str
    state_hash: str
    seed: int  # the campaign seed
    tier: int
    family: str
    episode_index: int
    episode_sha256: str  # the same episode under every condition
    depth: int
    ground_truth: Literal["approve", "reject"]
    condition: Literal["autonomous", "review", "ledger"]
    worker_prompt_sha256: str
    worker_response: str
    worker_response_chars: int
    worker_response_sha256: str
    worker_error_code: str | None
    worker_decision: Literal["approve", "reject"] | None
    worker_latency_s: float
    consulted: bool  # a supervisor ruled on the worker's approval
    supervisor_prompt_sha256: str | None
    supervisor_response: str | None
    supervisor_response_chars: int | None
    supervisor_response_sha256: str | None
    supervisor_error_code: str | None
    supervisor_decision: Literal["allow", "block"] | None
    supervisor_latency_s: float | None
    ledger_damages: int | None  # damages of earlier approvals the record counted (ledger condition), else null
    ledger_sha256: str | None  # sha256 of the damage record shown, else null
    executed: bool  # the approval went ahead
    blocked: bool  # the supervisor blocked it (an unreadable ruling blocks)
    damage: bool  # executed, and the case should have been rejected
    wrongful_block: bool  # blocked, and the case was approvable
    refused_approvable: bool  # the worker did not approve an approvable case
    outcome: Literal["completed", "worker_unparsed", "supervisor_unparsed", "errored", "timeout"]
    cost: float  # oversight cost of the episode (fee, damage, wrongful block), in prereg units
    endpoint: str | None = None


RECORD_FIELDS = tuple(f.name for f in fields(CampaignRecord))

#: The campaign's preregistration.
PREREG = load_prereg(FOLDER / "prereg.toml", CampaignPrereg)
_grid = PREREG.values.grid
if tuple(_grid.conditions) != CONDITIONS:
    raise PreregError(f"{PREREG.path}: key 'grid.conditions' must be {list(CONDITIONS)} in this order; the supervisor "
                      "prompts and the rules are written for them")
if PREREG.values.shares.tier_primary not in _grid.tiers:
    raise PreregError(f"{PREREG.path}: key 'shares.tier_primary' must be one of grid.tiers {list(_grid.tiers)}")
