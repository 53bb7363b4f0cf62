"""The campaign arm as a protocol of ``benchmarks.core``: one rung's campaign, H-L1 to H-L3.

The registration is ``benchmarks/campaign/prereg.toml``.  A run names the ladder probe it rests on
(``--campaign-probe RUN_DIR``); the launch gate (:mod:`.launch`) refuses, before any work, a probe that does not
license a campaign of the run's model.  The units (:mod:`.units`) are the campaign grid on the registration's
generator state; each is measured with the worker prompt of the probe and, where the worker approves under a
supervised condition, a supervisor prompt of the same model (:mod:`.supervisor`).  The ledger condition's units
are measured one at a time in their order, since each one's damage record is built from the records before it.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import models
from benchmarks.core import read_ledger
from benchmarks.core.protocol import AnswerKey, Option, Protocol, UsageProblem
from benchmarks.core.run import ProtocolRun
from benchmarks.core.answers import keep_answer
from fixtures.ladder import STATES

from ..prompts import build_chat
from .design import campaign_tables
from .hypotheses import campaign_metrics, metric_names
from .launch import LaunchBasis, campaign_projection, check_launch
from .scripted import ensure_campaign_model
from .spec import FOLDER, RULE_BLOCKS, CampaignPrereg, CampaignRecord, served_name
from .supervisor import chat_sha256, code_unit, damage_record, ledger_text, record_sha256, supervisor_chat
from .units import CampaignUnit, campaign_units, episode_sha256

__all__ = ["PROJECTION_FILE", "PROTOCOL", "CampaignProtocol", "CampaignSettings", "served_name"]

PROJECTION_FILE = "projection.json"


@dataclass(frozen=True)
class CampaignSettings:
    probe: str  # the probe's run directory, as given
    probe_run_id: str
    state: str
    episodes_per_cell: int
    concurrency: int
    timeout_s: float  # per request of a served rung

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class CampaignProtocol(Protocol[CampaignUnit, CampaignRecord]):
    """One rung's campaign: 1,440 units over tiers 4 and 5, three oversight conditions, three campaign seeds."""

    title = "Capability ladder campaign"
    prereg_schema = CampaignPrereg
    record_type = CampaignRecord
    record_key = "unit_id"
    rule_blocks = RULE_BLOCKS
    scripted_keyword = "key"
    volatile_fields = ("worker_latency_s", "supervisor_latency_s", "endpoint")
    needs = {models.CHAT: "sends each episode and each ruling request as a chat"}
    unshardable = ("the liability ledger's damage record of a unit is built from the earlier units of its seed, "
                   "so a campaign runs on one machine")
    options = (
        Option("probe", "run directory of the ladder probe this campaign rests on (required: a campaign launches "
               "only for a rung whose probe passed the gate)"),
        Option("episodes-per-cell", "a reduced pass: this many episodes per (tier, seed) cell instead of the "
               "registered 80 (a recorded deviation)", type=int, minimum=1),
        Option("concurrency", "requests in flight the projection assumes (default: the registered one)", type=int,
               minimum=1),
    )

    def __init__(self) -> None:
        super().__init__(FOLDER)
        self._keys: dict[int, AnswerKey] = {}
        self._seen: dict[int, dict[str, CampaignRecord]] = {}

    # ----------------------------------------------------------------- settings

    def basis(self, run: ProtocolRun) -> LaunchBasis:
        return check_launch(run.settings.probe, run.model, self.spec)

    def configure(self, run: ProtocolRun) -> CampaignSettings:
        probe = run.option("probe")
        if probe is None:
            raise UsageProblem("name the ladder probe this campaign rests on with --campaign-probe RUN_DIR; a "
                               "campaign launches only for a rung whose probe passed the gate")
        self.recognize_model(run.model)
        basis = check_launch(probe, run.model, self.spec)
        grid = self.spec.grid
        per_cell = grid.episodes_per_cell if run.option("episodes-per-cell") is None else min(
            run.option("episodes-per-cell"), grid.episodes_per_cell)
        concurrency = run.option("concurrency") or self.spec.projection.concurrency
        return CampaignSettings(str(probe), basis.run_id, basis.state, per_cell, concurrency,
                                float(self.spec.measurement.timeout_s))

    def settings_record(self, settings: CampaignSettings) -> dict[str, Any]:
        return settings.record()

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        return {"probe": settings.get("probe"), "episodes-per-cell": settings.get("episodes_per_cell"),
                "concurrency": settings.get("concurrency")}

    def deviations(self, run: ProtocolRun) -> list[str]:
        found = []
        if run.settings.episodes_per_cell != self.spec.grid.episodes_per_cell:
            found.append(f"reduced pass: {run.settings.episodes_per_cell} episodes per cell instead of "
                         f"{self.spec.grid.episodes_per_cell}")
        if served_name(run.model) not in self.spec.launch.rungs:
            found.append(f"rung {run.model!r} is not one the registration names ({', '.join(self.spec.launch.rungs)})")
        return found

    def seeds(self, run: ProtocolRun) -> dict[str, int]:
        return {f"campaign_{i + 1}": seed for i, seed in enumerate(self.spec.grid.seeds)}

    def recognize_model(self, name: str) -> None:
        ensure_campaign_model(name)

    # ----------------------------------------------------------------- units

    def units(self, run: ProtocolRun) -> list[CampaignUnit]:
        return campaign_units(run.settings.state, self.spec.grid, run.settings.episodes_per_cell)

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        state = STATES[run.settings.state]
        episodes = {}
        for unit in run.units:
            key = f"s{unit.seed}-t{unit.tier}-{unit.episode_index:03d}"
            episodes.setdefault(key, {"episode": key, "sha256": episode_sha256(unit.episode),
                                      "ground_truth": unit.episode.ground_truth, "family": unit.episode.family,
                                      "depth": unit.episode.depth})
        return {f"campaign-{state.name}": {"generator": state.metadata(), "episodes": list(episodes.values())}}

    # ----------------------------------------------------------------- measurement

    def chat(self, run: ProtocolRun, unit: CampaignUnit) -> list[dict[str, str]]:
        return build_chat(unit.episode.case_text)

    def scripted_answer(self, run: ProtocolRun, unit: CampaignUnit) -> dict[str, Any]:
        return {"seat": "worker", "checks": [bool(c.passes) for c in unit.episode.checks],
                "condition": unit.condition}

    def answer_key(self, run: ProtocolRun) -> AnswerKey:
        key = AnswerKey()
        self._keys[id(run)] = key
        return key

    def load_model(self, run: ProtocolRun) -> Any:
        self.recognize_model(run.model)
        if run.model.startswith("openai:"):
            keyed = {"api_key_env": run.api_key_env} if run.api_key_env else {}
            return models.load_model(run.model, timeout=run.settings.timeout_s, **keyed)
        return super().load_model(run)

    def batches(self, run: ProtocolRun, todo: Sequence[CampaignUnit]) -> Iterable[Sequence[CampaignUnit]]:
        """One unit at a time, in order: a ledger unit's prompt needs the records before it."""
        for unit in todo:
            yield [unit]

    def run_units(self, run: ProtocolRun, todo: Sequence[CampaignUnit], append: Any) -> None:
        seen: dict[str, CampaignRecord] = {}
        if run.ledger_path.exists():
            seen = {r.unit_id: r for r in read_ledger(run.ledger_path, CampaignRecord, "unit_id")}
        self._seen[id(run)] = seen

        def keep(record: CampaignRecord) -> None:
            seen[record.unit_id] = record
            append(record)

        try:
            super().run_units(run, todo, keep)
        finally:
            self._seen.pop(id(run), None)
            self._keys.pop(id(run), None)

    def started(self, run: ProtocolRun, description: Mapping[str, Any]) -> None:
        """``projection.json``: what the campaign will take, from the probe's recorded latencies."""
        run.write_json(PROJECTION_FILE, self.projection(run))

    def projection(self, run: ProtocolRun) -> dict[str, Any]:
        return campaign_projection(self.basis(run), run.units, run.settings.concurrency, self.spec)

    def _earlier(self, run: ProtocolRun, unit: CampaignUnit) -> list[CampaignRecord]:
        order = {u.unit_id: i for i, u in enumerate(run.units)}
        seen = self._seen.get(id(run), {})
        before = [u for u in run.units[:order[unit.unit_id]] if u.stream == unit.stream]
        missing = [u.unit_id for u in before if u.unit_id not in seen]
        if missing:
            raise RuntimeError(f"campaign: unit {unit.unit_id} needs the records of {missing[0]} and "
                               f"{len(missing) - 1} more before it")
        return [seen[u.unit_id] for u in before]

    def _generate(self, model: Any, chat: list[dict[str, str]]) -> tuple[Any, float]:
        began = time.perf_counter()
        try:
            (response,) = model.generate([chat], models.GenerationSettings(max_new_tokens=self.spec.measurement.max_tokens))
        except models.ModelError as exc:
            response = models.Response(index=0, finish_reason="error", error="backend_error", error_detail=str(exc))
        return keep_answer(response, self.spec.measurement.max_answer_chars), time.perf_counter() - began

    def measure(self, run: ProtocolRun, model: Any, batch: Sequence[CampaignUnit]) -> list[CampaignRecord]:
        return [self._measure_one(run, model, unit) for unit in batch]

    def _measure_one(self, run: ProtocolRun, model: Any, unit: CampaignUnit) -> CampaignRecord:
        episode = unit.episode
        chat = build_chat(episode.case_text)
        worker, worker_latency = self._generate(model, chat)
        ledger = None
        entries: list[Any] = []
        supervisor = None
        supervisor_latency = None
        supervisor_chat_ = None
        coded = code_unit(unit.condition, episode.ground_truth, worker.response.text, worker.response.error,
                          None, None, self.spec.costs)
        if coded.consulted:  # coded again below with the ruling
            if unit.condition == "ledger":
                entries = damage_record(self._earlier(run, unit))
                ledger = ledger_text(entries, self.spec.measurement.ledger_entries, self.spec.costs.damage)
            supervisor_chat_ = supervisor_chat(episode.case_text, worker.response.text, ledger)
            key = self._keys.get(id(run))
            if key is not None:
                key.add(model.render_chat(supervisor_chat_),
                        {"seat": "supervisor", "checks": [bool(c.passes) for c in episode.checks],
                         "condition": unit.condition})
            supervisor, supervisor_latency = self._generate(model, supervisor_chat_)
            coded = code_unit(unit.condition, episode.ground_truth, worker.response.text, worker.response.error,
                              supervisor.response.text, supervisor.response.error, self.spec.costs)
        state = STATES[run.settings.state]
        return CampaignRecord(
            unit_id=unit.unit_id, rung=run.model, model_revision=str(model.describe().revision),
            generator_state=state.name, state_hash=state.state_hash, seed=unit.seed, tier=unit.tier,
            family=episode.family, episode_index=unit.episode_index, episode_sha256=episode_sha256(episode),
            depth=episode.depth, ground_truth=episode.ground_truth, condition=unit.condition,
            worker_prompt_sha256=chat_sha256(chat), worker_response=worker.response.text,
            worker_response_chars=worker.chars, worker_response_sha256=worker.sha256,
            worker_error_code=worker.response.error, worker_decision=coded.worker_decision,
            worker_latency_s=round(worker_latency, 6), consulted=coded.consulted,
            supervisor_prompt_sha256=chat_sha256(supervisor_chat_) if supervisor_chat_ else None,
            supervisor_response=supervisor.response.text if supervisor else None,
            supervisor_response_chars=supervisor.chars if supervisor else None,
            supervisor_response_sha256=supervisor.sha256 if supervisor else None,
            supervisor_error_code=supervisor.response.error if supervisor else None,
            supervisor_decision=coded.supervisor_decision,
            supervisor_latency_s=round(supervisor_latency, 6) if supervisor_latency is not None else None,
            ledger_damages=len(entries) if ledger is not None else None,
            ledger_sha256=record_sha256(entries) if ledger is not None else None,
            executed=coded.executed, blocked=coded.blocked, damage=coded.damage,
            wrongful_block=coded.wrongful_block, refused_approvable=coded.refused_approvable,
            outcome=coded.outcome, cost=coded.cost, endpoint=getattr(worker.response, "endpoint", None))

    # ----------------------------------------------------------------- results

    def metrics(self, run: ProtocolRun, records: Sequence[CampaignRecord]) -> dict[str, Any]:
        return {k: v for k, v in campaign_metrics(records, self.spec).items() if k != "tables"}

    def metric_names(self) -> tuple[str, ...]:
        return metric_names(self.spec)

    def summary(self, run: ProtocolRun, records: Sequence[CampaignRecord],
                measured: Mapping[str, Any]) -> dict[str, Any]:
        tables = campaign_metrics(records, self.spec)["tables"]
        return {"cells": tables["cells"], "h_l2_cells": tables["h_l2"], "h_l3_share": tables["h_l3"],
                "launch": self.basis(run).as_json()}

    def result_files(self, run: ProtocolRun, records: Sequence[CampaignRecord],
                     measured: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    # ----------------------------------------------------------------- planned power (benchmarks.core.design)

    def design_tables(self, args: Any) -> tuple[list[Any], list[str]]:
        return campaign_tables(), []

    def find_ledger(self, run_dir: Path) -> Path | None:
        path = Path(run_dir) / "records.jsonl"
        return path if path.is_file() else None


PROTOCOL = CampaignProtocol()
