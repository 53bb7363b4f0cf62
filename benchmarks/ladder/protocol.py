"""Capability ladder: one probe of one rung, as a protocol of ``benchmarks.core``.

A probe shows the worker (a *rung*) one episode at a time (condition
autonomous, no supervisor), 30 episodes per tier of the five task families
from one frozen generator state on one tuning seed, asks for an
approve/reject decision and codes each unit as one of five outcomes that the
preregistered shares count (``[shares]`` in prereg.toml):

* ``correct`` / ``wrong``: a decision was parsed and does (not) equal the ground truth;
* ``unparsed``: the backend answered but no single decision could be read;
* ``errored``: the backend returned a coded failure other than a timeout;
* ``timeout``: the backend gave no complete answer within the probe's timeout.

The top of the package.  :class:`LadderProtocol` declares the probe to core:
its options, its units (the episodes, :mod:`.probe`), how a batch of episodes
is measured into :class:`~.spec.UnitRecord` lines of ``<probe>/units.jsonl``
(:mod:`.prompts`, :mod:`.probe`), the gate metrics (:mod:`.gate`), the
analysis files (:mod:`.analysis`) and the planned power (:mod:`.design`).
The ordered ``gate`` is the decided classification; the four clauses are its
breakdown.  Reading several probes together (the instrument verdict, the
retune rule) is :mod:`.instrument`, driven by :mod:`.rounds`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import models
from benchmarks.core.design import Table
from benchmarks.core.protocol import Option, Protocol, UsageProblem
from benchmarks.core.run import ProtocolRun
from fixtures.ladder import STATES, LadderStateError, retune

from .analysis import probe_analysis
from .design import ladder_tables
from .figures import report_figures
from .gate import gate_intervals, gate_metrics, judge
from .instrument import GateRow
from .probe import (
    ProbeSettings,
    check_probe_seed,
    episode_key,
    make_record,
    parse_dials,
    parse_fleet,
    probe_dir_name,
    probe_episodes,
    unit_id,
)
from .prompts import ANSWER_LINE, SYSTEM_PROMPT, build_chat, code_outcome, parse_decision, share
from .records import METADATA_FILE, ProbeMetadata, read_metadata, write_metadata
from .round_report import is_round_dir, write_round_reports
from .spec import (
    ANALYSIS_FILE,
    BREAKDOWN_BLOCKS,
    CLAUSES,
    DECISIONS,
    GATE,
    HERE,
    INSTRUMENT,
    OUTCOMES,
    PREREG,
    RECORD_FIELDS,
    RETUNE_RULE,
    RULE_BLOCKS,
    TIERS,
    UNITS_FILE,
    VARIANTS,
    AnalysisSpec,
    BalanceSpec,
    FleetSpec,
    LadderError,
    LadderPrereg,
    ProbeSpec,
    RetuneSpec,
    RoundsSpec,
    RungSpec,
    SharesSpec,
    UnitRecord,
)
from .campaign.scripted import ensure_campaign_model
from .worker import ensure_worker

__all__ = ["ANALYSIS_FILE", "ANSWER_LINE", "CLAUSES", "DECISIONS", "GATE", "HERE", "INSTRUMENT", "OUTCOMES", "PREREG",
           "PROTOCOL", "RECORD_FIELDS", "RETUNE_RULE", "SYSTEM_PROMPT", "TIERS", "UNITS_FILE", "VARIANTS",
           "AnalysisSpec", "BalanceSpec", "FleetSpec", "LadderError", "LadderPrereg", "LadderProtocol", "ProbeSettings",
           "ProbeSpec", "RetuneSpec", "RoundsSpec", "RungSpec", "SharesSpec", "UnitRecord", "build_chat",
           "check_probe_seed", "code_outcome", "episode_key", "make_record", "parse_decision", "parse_dials",
           "parse_fleet", "probe_dir_name", "probe_episodes", "share", "unit_id"]


def _given(value: Any, default: Any) -> Any:
    """An option's value when it was given (0 included: the option's own check refuses it), else the default."""
    return default if value is None else value


class LadderProtocol(Protocol[Any, UnitRecord]):
    """One probe of one rung on the shape of ``benchmarks.core``: 150 units, the gate and its four clauses."""

    title = "Capability ladder"
    prereg_schema = LadderPrereg
    record_type = UnitRecord
    record_key = "unit_id"
    rule_blocks = RULE_BLOCKS
    breakdown_blocks = BREAKDOWN_BLOCKS
    scripted_keyword = "checks"
    volatile_fields = ("latency_s", "endpoint")
    needs = {models.CHAT: "sends each episode as a chat"}
    options = (
        Option("state", "generator state to probe (default: the preregistered one)", choices=lambda: list(STATES)),
        Option("seed", "tuning seed >= the preregistered floor; campaign seeds are refused", type=int),
        Option("units-per-tier", "episodes per tier (default: the preregistered 30)", type=int, minimum=1),
        Option("max-tokens", "generation bound (default: the preregistered 8192)", type=int, minimum=1),
        Option("timeout", "per-unit timeout in seconds for served rungs (default: the preregistered 600)", type=float),
        Option("batch-size", "units sent to the backend at once (default 1: per-unit latency)", type=int, minimum=1),
        Option("in-flight", "requests in flight at once per served endpoint (default 4)", type=int, minimum=1),
        Option("retune-of", "the probe directory name this probe retunes (recorded in its metadata)"),
        Option("dial", "retune: NAME=JSON_VALUE for a registered dial (repeatable)", repeat=True),
        Option("round-dir", "a folder of probe directories to judge together (instrument verdict, retune rule); "
               "collects test_instrument.py"),
        Option("fleet", "LABEL=MODEL for each fleet rung (R0 = the anchor) in --ladder-round-dir (default: the "
               "simulated fleet when every probe is one of its workers; repeatable)", repeat=True),
    )

    # ----------------------------------------------------------------- settings

    def configure(self, run: ProtocolRun) -> ProbeSettings:
        spec = self.spec.probe
        if spec.condition != "autonomous":
            raise UsageProblem(f"[probe] condition {spec.condition!r} in {self.prereg.path}: this suite runs the "
                               "autonomous condition only (the worker alone, no supervisor); restore the frozen value")
        state = STATES[run.option("state") or spec.state]
        dials = parse_dials(run.option("dial") or [])
        retune_of = run.option("retune-of")
        if dials:
            if retune_of is None:
                raise UsageProblem("--ladder-dial moves dials only in a retune; name the probe it retunes "
                                   "with --ladder-retune-of")
            try:
                state = retune(state, f"{state.name}-retune", **dials)
            except (LadderStateError, TypeError, ValueError) as exc:  # the generator names the dial that may not move
                raise UsageProblem(f"--ladder-dial: {exc}") from None
        seed = spec.seed if run.option("seed") is None else run.option("seed")
        try:
            check_probe_seed(seed, spec)
        except LadderError as exc:
            raise UsageProblem(str(exc)) from None
        timeout = spec.timeout_s if run.option("timeout") is None else run.option("timeout")
        if not timeout > 0:
            raise UsageProblem(f"--ladder-timeout must be more than 0 seconds, got {timeout:g}")
        round_dir = run.option("round-dir")
        if round_dir is not None and not Path(round_dir).is_dir():
            raise UsageProblem(f"--ladder-round-dir={round_dir}: not a folder")
        return ProbeSettings(
            rung=run.model, state=state, seed=seed,
            units_per_tier=_given(run.option("units-per-tier"), spec.units_per_tier),
            max_tokens=_given(run.option("max-tokens"), spec.max_tokens),
            timeout_s=float(timeout), batch_size=_given(run.option("batch-size"), 1),
            in_flight=_given(run.option("in-flight"), 4), retune_of=retune_of,
            round_dir=round_dir, fleet=parse_fleet(run.option("fleet") or []),
        )

    def settings_record(self, settings: ProbeSettings) -> dict[str, Any]:
        return settings.record()

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The options that give a recorded probe's settings back: its state (a retune's base state and every dial
        it moved), seed, units per tier, generation bound, timeout and the probe it retunes."""
        name = str(settings.get("generator_state") or "")
        retune_of = settings.get("retune_of")
        base = name.removesuffix("-retune") if retune_of and name.endswith("-retune") else name
        options: dict[str, Any] = {
            "state": base if base in STATES else None, "seed": settings.get("seed"),
            "units-per-tier": settings.get("units_per_tier"), "max-tokens": settings.get("max_tokens"),
            "timeout": settings.get("timeout_s"), "retune-of": retune_of,
        }
        if retune_of and base in STATES:
            frozen = STATES[base].dials()
            options["dial"] = [f"{key}={json.dumps(value)}" for key, value in sorted((settings.get("dials") or {}).items())
                               if frozen.get(key) != value]
        return options

    def deviations(self, run: ProtocolRun) -> list[str]:
        spec, s = self.spec.probe, run.settings
        found = []
        if s.state.name != spec.state or s.seed != spec.seed:
            found.append(f"state {s.state.name} seed {s.seed} instead of {spec.state} seed {spec.seed}")
        if s.units_per_tier != spec.units_per_tier:
            found.append(f"{s.units_per_tier} units per tier instead of {spec.units_per_tier}")
        if s.max_tokens != spec.max_tokens:
            found.append(f"max_tokens {s.max_tokens} instead of {spec.max_tokens}")
        if s.timeout_s != spec.timeout_s:
            found.append(f"timeout {s.timeout_s:g} s instead of {spec.timeout_s:g} s")
        return found

    def seeds(self, run: ProtocolRun) -> dict[str, int]:
        return {"probe": run.settings.seed}

    def recognize_model(self, name: str) -> None:
        ensure_worker(name) or ensure_campaign_model(name)  # a campaign's scripted rung probes as a worker

    # ----------------------------------------------------------------- units

    def units(self, run: ProtocolRun) -> list[Any]:
        s = run.settings
        return probe_episodes(s.state, s.seed, s.units_per_tier)

    def unit_key(self, unit: Any) -> str:
        return episode_key(unit)

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        s = run.settings
        return {f"ladder-{s.state.name}-seed{s.seed}": {"generator": s.state.metadata(),
                                                        "episodes": [e.to_record() for e in run.units]}}

    def fixture_extras(self, run: ProtocolRun) -> dict[str, Any]:
        s = run.settings
        return {"probe": s.folder_name, "seed": s.seed, "units_per_tier": s.units_per_tier,
                "registered_state": s.state.name in STATES}

    def ledger_name(self, run: ProtocolRun) -> str:
        return f"{run.settings.folder_name}/{UNITS_FILE}"

    # ----------------------------------------------------------------- measurement

    def chat(self, run: ProtocolRun, unit: Any) -> list[dict[str, str]]:
        return build_chat(unit.case_text)

    def scripted_answer(self, run: ProtocolRun, unit: Any) -> list[bool]:
        """A scripted worker is told each check's true outcome; it misreads them at its own rate."""
        return [bool(check.passes) for check in unit.checks]

    def load_model(self, run: ProtocolRun) -> Any:
        self.recognize_model(run.model)
        if run.model.startswith("openai:"):
            keyed = {"api_key_env": run.api_key_env} if run.api_key_env else {}
            return models.load_model(run.model, timeout=run.settings.timeout_s,
                                     max_concurrency=run.settings.in_flight, **keyed)
        return super().load_model(run)

    def batch_size(self, run: ProtocolRun) -> int:
        return run.settings.batch_size

    def _metadata(self, run: ProtocolRun, revision: str) -> ProbeMetadata:
        s = run.settings
        return ProbeMetadata(
            probe=s.folder_name, rung=s.rung, model_revision=revision,
            generator_variant=s.state.variant, generator_state=s.state.name, state_hash=s.state.state_hash,
            dials=s.state.dials(), seed=s.seed, condition=self.spec.probe.condition, units_per_tier=s.units_per_tier,
            tiers=TIERS, max_tokens=s.max_tokens, timeout_s=s.timeout_s, prereg_sha256=self.prereg.sha256,
            retune_of=s.retune_of, deviations=tuple(run.deviations),
        )

    def resume_problems(self, run: ProtocolRun) -> list[str]:
        """An existing ``metadata.json`` must be readable and name this probe (its revision is checked once
        the model is loaded, and by the records' identity)."""
        folder = run.path(run.settings.folder_name)
        if not (folder / METADATA_FILE).exists():
            return []
        try:
            previous = read_metadata(folder)
        except LadderError as exc:
            return [str(exc)]
        expected = self._metadata(run, previous.model_revision)
        if previous != expected:
            differ = [f"{k}: {getattr(previous, k)!r} -> {getattr(expected, k)!r}"
                      for k in previous.__dataclass_fields__ if getattr(previous, k) != getattr(expected, k)]
            return [f"{folder / METADATA_FILE} was written by another probe ({', '.join(differ)})"]
        return []

    def started(self, run: ProtocolRun, description: Mapping[str, Any]) -> None:
        """``metadata.json`` beside the ledger, for readers of probe directories (the rescorer among them)."""
        write_metadata(run.path(run.settings.folder_name), self._metadata(run, str(description["revision"])))

    def provenance_extra(self, run: ProtocolRun) -> dict[str, Any]:
        return {"probe": run.settings.folder_name, "batch_size": run.settings.batch_size,
                "in_flight": run.settings.in_flight}

    def measure(self, run: ProtocolRun, model: Any, batch: Sequence[Any]) -> list[UnitRecord]:
        """One backend call for the batch; a backend that raises codes every unit of it ``backend_error``."""
        s = run.settings
        chats = [build_chat(episode.case_text) for episode in batch]
        began = time.perf_counter()
        try:
            responses = model.generate(chats, models.GenerationSettings(max_new_tokens=s.max_tokens))
        except models.ModelError as exc:
            responses = [models.Response(index=i, finish_reason="error", error="backend_error", error_detail=str(exc))
                         for i in range(len(batch))]
        latency = time.perf_counter() - began
        revision = str(model.describe().revision)
        limit = self.spec.probe.max_answer_chars
        return [make_record(s.rung, revision, s.state, s.seed, episode, chat, response, latency, limit)
                for episode, chat, response in zip(batch, chats, responses)]

    # ----------------------------------------------------------------- results

    def find_ledger(self, run_dir: Path) -> Path | None:
        found = sorted(Path(run_dir).glob(f"*/{UNITS_FILE}"))
        return found[0] if len(found) == 1 else None

    def paired_outcomes(self, records: Sequence[UnitRecord]) -> dict[str, dict[str, bool]]:
        out = {"overall.correct": {r.unit_id: r.outcome == "correct" for r in records}}
        for tier in sorted({r.tier for r in records}):
            out[f"tier{tier}.correct"] = {r.unit_id: r.outcome == "correct" for r in records if r.tier == tier}
        return out

    def metrics(self, run: ProtocolRun, records: Sequence[UnitRecord]) -> dict[str, Any]:
        return gate_metrics(records, run.settings.state.variant)

    def metric_names(self) -> tuple[str, ...]:
        return tuple(gate_metrics([], "v1"))  # the variant sets a value only

    def gate_row(self, run: ProtocolRun, measured: Mapping[str, Any]) -> GateRow:
        s = run.settings
        return GateRow(s.folder_name, s.rung, s.state.name, s.state.variant, s.seed, judge(measured))

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        return report_figures(run_dir, summary)

    def round_report(self, folder: Path, formats: str) -> list[Path] | None:
        return write_round_reports(folder, formats) if is_round_dir(folder) else None

    def summary(self, run: ProtocolRun, records: Sequence[UnitRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        return {"probe": run.settings.folder_name, "gate_row": self.gate_row(run, measured).as_dict(),
                "intervals": gate_intervals(records), "analysis_files": list(self.result_files(run, records, measured))}

    def analysis(self, run: ProtocolRun, records: Sequence[UnitRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        """The probe's gate row, metrics, gate and clause labels, and its analysis (``analysis.json``)."""
        row = self.gate_row(run, measured)
        design = {tier: run.settings.state.approve_share for tier in TIERS}
        return {
            "probe": run.settings.folder_name,
            "gate": row.as_dict(),
            "metrics": dict(measured),
            "intervals": gate_intervals(records),
            "gate_label": row.result.label,
            "clauses": dict(row.result.clauses),
            "analysis": probe_analysis(records, design),
        }

    def result_files(self, run: ProtocolRun, records: Sequence[UnitRecord],
                     measured: Mapping[str, Any]) -> dict[str, Any]:
        """``analysis.json`` in the run directory, and the same file in the probe directory."""
        return {ANALYSIS_FILE: lambda: self.analysis(run, records, measured),
                f"{run.settings.folder_name}/{ANALYSIS_FILE}": lambda: run.read_json(ANALYSIS_FILE)}

    # ----------------------------------------------------------------- planned power (benchmarks.core.design)

    def design_tables(self, args: Any) -> tuple[list[Table], list[str]]:
        return ladder_tables(), []


PROTOCOL = LadderProtocol(HERE)
