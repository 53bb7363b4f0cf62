"""RES Step 0 on the protocol shape of ``benchmarks.core``: :class:`ResProtocol` and its instance ``PROTOCOL``.

The top of the package.  The science it declares to core lives below it:
the preregistration and record types (:mod:`.spec`), the prompts, the parser
and the record of a response (:mod:`.prompts`), the metrics (:mod:`.metrics`),
the report figures (:mod:`.figures`) and the planned power (:mod:`.design`).
Core runs it: 64 units (32 per condition), each measured once by one batched
prefill that gives the first-token A/B logits and the greedy answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import models
from benchmarks.core.design import Table
from benchmarks.core.protocol import Option, Protocol
from benchmarks.core.run import ProtocolRun
from fixtures.res import CONDITIONS, RES_VARIANTS, build_res_fixtures, gold_label, heuristic_audit, res_fixture_hash

from .design import res_tables
from .figures import report_figures
from .metrics import condition_intervals, condition_metrics, intervals, metrics
from .prompts import build_chat, check_label_tokens, make_record, parse_answer
from .spec import GATE, HERE, PREREG, MeasurementSpec, ResPrereg, ResRecord, ResUnit

__all__ = ["CONDITIONS", "GATE", "HERE", "PREREG", "PROTOCOL", "MeasurementSpec", "ResPrereg", "ResProtocol",
           "ResRecord", "ResUnit", "build_chat", "check_label_tokens", "condition_intervals", "condition_metrics",
           "intervals", "make_record", "metrics", "parse_answer"]


class ResProtocol(Protocol[ResUnit, ResRecord]):
    """RES Step 0 on the shape of ``benchmarks.core``: six ordered classifications from 64 items."""

    title = "RES"
    prereg_schema = ResPrereg
    record_type = ResRecord
    record_key = "item_id"
    needs = {
        models.LABEL_LOGITS: "scores the logits of its label tokens",
        models.CHAT: "renders each item's chat with the model's own chat template",
        models.TEXT: "sends the rendered prompt text",
    }
    options = (
        Option("fixture-set", "fixture variant (default: the preregistered one); another variant is a recorded "
               "deviation", choices=RES_VARIANTS, alias="--fixture-set"),
    )

    def __init__(self, folder: Path | None = None):
        super().__init__(folder)
        self._label_token_ids: dict[str, dict[str, int] | None] = {}  # by run id, from check_model

    def configure(self, run: ProtocolRun) -> dict[str, Any]:
        return {"fixture_set": run.option("fixture-set") or self.spec.measurement.fixture_set}

    def deviations(self, run: ProtocolRun) -> list[str]:
        variant, preregistered = run.settings["fixture_set"], self.spec.measurement.fixture_set
        return [] if variant == preregistered else [f"fixture set {variant!r} instead of {preregistered!r}"]

    # units

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        variant = run.settings["fixture_set"]
        return {f"res-{variant}": build_res_fixtures(variant, seed=self.spec.seeds["fixtures"])}

    def _sets(self, run: ProtocolRun) -> dict[str, list[dict[str, Any]]]:
        return run.fixture_sets[f"res-{run.settings['fixture_set']}"]

    def fixture_extras(self, run: ProtocolRun) -> dict[str, Any]:
        sets = self._sets(run)
        return {"variant": run.settings["fixture_set"], "res_fixture_sha256": res_fixture_hash(sets),
                "heuristic_audit": heuristic_audit(sets)}

    def units(self, run: ProtocolRun) -> list[ResUnit]:
        sets = self._sets(run)
        return [ResUnit(f"{condition}:{index:02d}", condition, index, row)
                for condition in CONDITIONS for index, row in enumerate(sets[condition])]

    # measurement

    def chat(self, run: ProtocolRun, unit: ResUnit) -> list[dict[str, str]]:
        return build_chat(unit.row)

    def scripted_answer(self, run: ProtocolRun, unit: ResUnit) -> str:
        return gold_label(unit.row)

    def model_options(self, run: ProtocolRun) -> dict[str, Any]:
        options = super().model_options(run)
        if models.check_model_name(run.model) in {"bundled", "hub", "local"}:
            # transformers on the CPU: torch's thread count, capped by the cores other processes leave idle
            # (an explicit OMP_NUM_THREADS / MKL_NUM_THREADS is kept); see benchmarks.core.tuning.cpu_threads.
            options["threads"] = "auto"
            # The 8 prompts of a batch share their first ~125 tokens (system message, chat header): rows whose
            # layout (pad count, batch width) already has those columns cached run only the rest, with the
            # same bits as the plain prefill; see models._prefix.PrefixCache and the README's model phase.
            options["shared_prefix"] = "layout"
        return options

    def check_model(self, run: ProtocolRun, model: Any) -> None:
        self._label_token_ids[run.run_id] = check_label_tokens(model, self.spec.measurement.labels)

    def provenance_extra(self, run: ProtocolRun) -> dict[str, Any]:
        # The label -> token id map first-token scoring reads (null for a model without a tokenizer).
        return {"label_token_ids": self._label_token_ids.get(run.run_id)}

    def measure(self, run: ProtocolRun, model: Any, batch: Sequence[ResUnit]) -> list[ResRecord]:
        spec = self.spec.measurement
        prompts = [model.render_chat(build_chat(unit.row)) for unit in batch]
        responses = model.score_and_generate(prompts, list(spec.labels),
                                             models.GenerationSettings(max_new_tokens=spec.max_new_tokens))
        return [make_record(unit.row, unit.index, prompt, response)
                for unit, prompt, response in zip(batch, prompts, responses)]

    # results

    def metrics(self, run: ProtocolRun, records: Sequence[ResRecord]) -> dict[str, Any]:
        return metrics(records)

    def metric_names(self) -> tuple[str, ...]:
        return tuple(metrics([]))

    def paired_outcomes(self, records: Sequence[ResRecord]) -> dict[str, dict[str, bool]]:
        out: dict[str, dict[str, bool]] = {}
        for condition in CONDITIONS:
            rows = [r for r in records if r.condition == condition]
            out[f"{condition}.logit_accuracy"] = {r.item_id: r.logit_choice == r.ideal for r in rows}
            out[f"{condition}.generated_accuracy"] = {r.item_id: r.parsed == r.ideal for r in rows}
        return out

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        return report_figures(run_dir, summary)

    def summary(self, run: ProtocolRun, records: Sequence[ResRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        sets = self._sets(run)
        return {
            "fixture_set": run.settings["fixture_set"],
            "fixture_sha256": res_fixture_hash(sets),
            "heuristic_audit": heuristic_audit(sets),
            "label_token_ids": [list(ids) for ids in sorted({r.label_token_ids for r in records})],
            "intervals": intervals(records),
        }

    # planned power

    def design_tables(self, args: Any) -> tuple[list[Table], list[str]]:
        return res_tables(), []


PROTOCOL = ResProtocol(HERE)
