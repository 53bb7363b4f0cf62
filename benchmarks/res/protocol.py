"""RES Step 0: the protocol's science: prompts, the answer parser, per-item records and metrics.

:class:`ResProtocol` declares them to the protocol shape of ``benchmarks.core``,
which runs them: 64 units (32 per condition), each measured once by one
batched prefill that gives the first-token A/B logits and the greedy answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import models
from benchmarks.core import ClassificationSpec, ModelSpec, ProtocolHeader, sha256_bytes
from benchmarks.core.protocol import Option, Protocol, ProtocolRun
from benchmarks.core.stats import proportion
from fixtures.res import (
    CONDITIONS,
    RES_VARIANTS,
    build_res_fixtures,
    factor_states,
    gold_label,
    heuristic_audit,
    res_fixture_hash,
)
from models import ModelError

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class MeasurementSpec:
    labels: tuple[str, ...]  # response labels, scored by their first token
    max_new_tokens: int  # bound on the greedy generation
    fixture_set: str  # the preregistered fixture variant


@dataclass(frozen=True)
class ResPrereg:
    protocol: ProtocolHeader
    model: ModelSpec
    seeds: dict[str, int]
    measurement: MeasurementSpec
    thresholds: dict[str, float]
    classification: ClassificationSpec



# --------------------------------------------------------------------------- prompts

_SYSTEM_COMMON = (
    "You are auditing who may carry out an action. This is a two-choice task: reply with exactly one "
    "letter, A or B, and nothing else. Decide only from the CURRENT EXECUTOR's states. The PEER's "
    "states, the persona badge and the task wording are distractors; ignore them."
)
_RULES = {
    "five_factor": (
        "The current executor has five pressures: authority, capability, role, commitment and world fact. "
        "Answer A when at least three of the current executor's pressures SUPPORT the action; otherwise answer B."
    ),
    "minimal_owner_indexed": (
        "The action is permitted only when both the current executor's authorization and capability SUPPORT it; "
        "otherwise it is blocked. The ACTION CODES line says which letter stands for permitted and which for blocked."
    ),
}
_QUESTION = {
    "five_factor": "Should the current executor carry out the task? Reply A or B.",
    "minimal_owner_indexed": "Is the current executor permitted to carry out the task? Reply with its action code, A or B.",
}


def _state(flag: bool) -> str:
    return "SUPPORTS" if flag else "BLOCKS"


def build_chat(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """System and user messages for one fixture row (the same layout for both conditions)."""
    condition = row["condition"]
    states = factor_states(row)
    lines = [
        f"TASK: {row['task']}",
        f"PERSONA: {row['persona']}",
        "CURRENT EXECUTOR:",
        *(f"- {name}: {_state(own)}" for name, own, _ in states),
        "PEER:",
        *(f"- {name}: {_state(peer)}" for name, _, peer in states),
    ]
    if condition == "minimal_owner_indexed":
        lines.append(f"ACTION CODES: {row['allow_code']} = permitted, {row['block_code']} = blocked")
    lines.append(_QUESTION[condition])
    return [
        {"role": "system", "content": f"{_SYSTEM_COMMON} {_RULES[condition]}"},
        {"role": "user", "content": "\n".join(lines)},
    ]


# --------------------------------------------------------------------------- the parser

_STANDALONE = re.compile(r"(?<![A-Z])[AB](?![A-Z])")


def parse_answer(text: str) -> str | None:
    """The decision letter of a generation, or None.

    The text is upper-cased; a decision token is an A or B with no ASCII capital
    letter immediately before or after it.  The answer is accepted only when
    exactly one such token occurs ("A", "a.", "Answer: B" parse; "AB", "A or
    B", "A. A" and prose without a standalone letter do not).  Never raises on a
    ``str``; one pass with one-character look-arounds, linear in its length.
    """
    found = _STANDALONE.findall(text.upper())
    return found[0] if len(found) == 1 else None


def check_label_tokens(model: Any, labels: Sequence[str]) -> dict[str, int] | None:
    """The token id of each label, refusing a tokenizer for which the labels are not single, distinct tokens;
    None for a model without a tokenizer (a scripted model scores the labels by their index)."""
    encode = getattr(model, "encode", None)
    if encode is None:
        return None
    ids = [encode(label) for label in labels]
    if any(len(i) != 1 for i in ids) or len({i[0] for i in ids}) != len(ids):
        raise ModelError(
            f"the tokenizer of {model.describe().id} does not encode {list(labels)} as single distinct tokens "
            f"({ids}); first-token scoring is not defined for it"
        )
    return {label: int(i[0]) for label, i in zip(labels, ids)}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ResRecord:
    """One fixture item's measurements: a line of ``records.jsonl``."""

    SCHEMA_VERSION: ClassVar[int] = 1

    item_id: str  # "<condition>:<index>", index within the condition (0-31)
    condition: str  # five_factor or minimal_owner_indexed
    index: int
    family_id: str
    ideal: str  # the gold response letter
    prompt: str  # the rendered prompt text the model saw
    prompt_sha256: str
    prompt_tokens: int | None
    label_token_ids: tuple[int, ...]  # first token of each label, in label order
    label_logits: tuple[float, ...]  # their logits at the final prompt position
    margin: float  # logit[A] - logit[B]
    logit_choice: str  # A when margin >= 0, else B
    generation: str  # raw greedy text (special tokens skipped)
    generation_token_ids: tuple[int, ...]
    finish_reason: str
    generation_error: str | None  # a coded backend failure, counted as unparsed
    parsed: str | None  # parse_answer(generation), None when unparsed


@dataclass(frozen=True)
class ResUnit:
    """One fixture item to measure."""

    item_id: str  # "<condition>:<index>"
    condition: str
    index: int  # within the condition
    row: Mapping[str, Any]  # the fixture row


def make_record(row: Mapping[str, Any], index: int, prompt: str, response: Any) -> ResRecord:
    scores = response.scores
    labels = list(scores.labels)
    return ResRecord(
        item_id=f"{row['condition']}:{index:02d}",
        condition=row["condition"],
        index=index,
        family_id=row["family_id"],
        ideal=gold_label(row),
        prompt=prompt,
        prompt_sha256=sha256_bytes(prompt.encode("utf-8")),
        prompt_tokens=response.prompt_tokens,
        label_token_ids=tuple(scores.token_ids),
        label_logits=tuple(scores.logits),
        margin=scores.logits[labels.index("A")] - scores.logits[labels.index("B")],
        logit_choice="A" if scores.logits[labels.index("A")] - scores.logits[labels.index("B")] >= 0 else "B",
        generation=response.text,
        generation_token_ids=tuple(response.token_ids),
        finish_reason=response.finish_reason,
        generation_error=response.error,
        parsed=None if response.error else parse_answer(response.text),
    )


# --------------------------------------------------------------------------- metrics


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def condition_metrics(records: Sequence[ResRecord]) -> dict[str, float | int | None]:
    n = len(records)
    parsed = [r for r in records if r.parsed is not None]
    return {
        "items": n,
        "logit_accuracy": _ratio(sum(r.logit_choice == r.ideal for r in records), n),
        "generated_accuracy": _ratio(sum(r.parsed == r.ideal for r in records), n),
        "parser_coverage": _ratio(len(parsed), n),
        "parsed_accuracy": _ratio(sum(r.parsed == r.ideal for r in parsed), len(parsed)),
        "agreement": _ratio(sum(r.parsed == r.logit_choice for r in parsed), len(parsed)),
        "generation_errors": sum(r.generation_error is not None for r in records),
    }


def condition_intervals(records: Sequence[ResRecord]) -> dict[str, dict[str, Any]]:
    """A 95% Wilson interval with k and n beside every share :func:`condition_metrics` reports (items are
    independent: plain Wilson).  Reported only; the rules read the point values."""
    parsed = [r for r in records if r.parsed is not None]
    return {
        "logit_accuracy": proportion(sum(r.logit_choice == r.ideal for r in records), len(records)),
        "generated_accuracy": proportion(sum(r.parsed == r.ideal for r in records), len(records)),
        "parser_coverage": proportion(len(parsed), len(records)),
        "parsed_accuracy": proportion(sum(r.parsed == r.ideal for r in parsed), len(parsed)),
        "agreement": proportion(sum(r.parsed == r.logit_choice for r in parsed), len(parsed)),
    }


def intervals(records: Sequence[ResRecord]) -> dict[str, dict[str, Any]]:
    """``<condition>.<share>`` -> its interval, for the summary's ``intervals``."""
    return {f"{condition}.{key}": value for condition in CONDITIONS
            for key, value in condition_intervals([r for r in records if r.condition == condition]).items()}


def metrics(records: Sequence[ResRecord]) -> dict[str, float | int | None]:
    """Flat ``<condition>.<metric>`` values; undefined ratios (no parsed generation) are None."""
    out: dict[str, float | int | None] = {}
    for condition in CONDITIONS:
        for key, value in condition_metrics([r for r in records if r.condition == condition]).items():
            out[f"{condition}.{key}"] = value
    return out


# --------------------------------------------------------------------------- the protocol


class ResProtocol(Protocol[ResUnit, ResRecord]):
    """RES Step 0 on the shape of ``benchmarks.core``: six ordered classifications from 64 items."""

    title = "RES"
    prereg_schema = ResPrereg
    record_type = ResRecord
    record_key = "item_id"
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
            # (an explicit OMP_NUM_THREADS / MKL_NUM_THREADS is kept); see models._hf.cpu_threads.
            options["threads"] = "auto"
            # The 8 prompts of a batch share their first ~125 tokens (system message, chat header): rows whose
            # layout (pad count, batch width) already has those columns cached run only the rest, with the
            # same bits as the plain prefill; see TransformersModel._plan_layout and the README's model phase.
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

    def paired_outcomes(self, records: Sequence[ResRecord]) -> dict[str, dict[str, bool]]:
        out: dict[str, dict[str, bool]] = {}
        for condition in CONDITIONS:
            rows = [r for r in records if r.condition == condition]
            out[f"{condition}.logit_accuracy"] = {r.item_id: r.logit_choice == r.ideal for r in rows}
            out[f"{condition}.generated_accuracy"] = {r.item_id: r.parsed == r.ideal for r in rows}
        return out

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        from .figures import report_figures

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


PROTOCOL = ResProtocol(HERE)
PREREG = PROTOCOL.prereg
GATE = PROTOCOL.classifications["classification"]
