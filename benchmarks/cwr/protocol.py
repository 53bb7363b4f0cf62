"""Fiction-CWR on the protocol shape of ``benchmarks.core``: :class:`CwrProtocol` and its instance ``PROTOCOL``.

Conditions (seed table "Conditions"):

P  primitive probes: is this step legal here (``ANSWER: LEGAL|ILLEGAL``), or
   what exact state does this legal step produce (``STATE:`` block);
R  supplied-handbook retrieval: which artifact id is the valid solution (``ANSWER: H-XXXX``);
E  execute a candidate: ``ANSWER: ILLEGAL AT STEP k`` or ``ANSWER: LEGAL, GOAL MET|NOT MET`` plus the final ``STATE:``;
   on a pair's C (F) target the prompt also shows that condition's context (E_C, E_F), on a shipped world none;
F, C synthesis: the pair side's prompt body verbatim; the answer is an artifact graded by ``worlds.check``.

The top of the package.  :class:`CwrProtocol` declares the units (the P/R/E
items, then the F and C side of every pair), their measurement in batches of
one condition each (every condition has its own generation bound), the
metrics, the baselines file and the summary extras; ``benchmarks.core`` runs
them.  The science lives below it: the preregistration and record types
(:mod:`.spec`), the prompts and parsers (:mod:`.prompts`), the metrics
(:mod:`.metrics`), the units (:mod:`.units`), the pairs and generated splits
(:mod:`.pairs`, :mod:`.splits`), the baselines, the grading files, the report
figures and the planned power (:mod:`.design`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import models
from benchmarks.core import read_json_file
from benchmarks.core.protocol import Option, Protocol, UsageProblem
from benchmarks.core.run import ProtocolRun
from fixtures.cwr import E_CONTEXTS, build_cwr_items

from . import design as _design
from . import figures as _figures
from . import scripted as _scripted
from .arms import ARMS, arm_pairs, check_arm
from .baselines import pair_baselines
from .diagnostics import diagnostics
from .grading import (GRADING_FILE, PROGRAM_REFERENCE_FILE, PROGRAM_REFERENCE_SOURCE, REFERENCE_FILE,
                      REFERENCE_SOURCE, write_grading)
from .metrics import (
    baseline_intervals,
    check_counts,
    cluster_of,
    clustered_share,
    intervals,
    mastery_table,
    metrics,
    paired_table,
    paired_units,
    parse_status_counts,
    sensitivity_grid,
    token_counts,
)
from .pairs import MOTIF_REQUIRED, interchangeable_of, pair_subsets
from .prompts import (
    MAX_NUMBER_DIGITS,
    PARSE_STATUSES,
    chat,
    control_prompt,
    expected_answer_text,
    extract_artifact,
    grade_control,
    handbook,
    make_record,
    parse_control,
    parse_state,
    read_state,
    state_lines,
)
from .spec import (
    BASELINES_FILE,
    CONDITIONS,
    CONTROL_CONDITIONS,
    GATE,
    HERE,
    INTERVAL_METHOD,
    PAIR_SETS,
    PAIRS_FIXTURE,
    PREREG,
    SYNTHESIS_CONDITIONS,
    AnalysisSpec,
    BaselineSpec,
    ConfirmatoryDesignSpec,
    CwrPrereg,
    CwrRecord,
    DesignSpec,
    MeasurementSpec,
    SensitivitySpec,
    Unit,
    base_pair,
    gate_at,
)
from .splits import SPLIT_FILE, SplitSpec, generated_split, split_spec, splits_table
from .units import build_units, check_pair_set, pair_rows, run_pairs, split_controls, spread

__all__ = ["BASELINES_FILE", "CONDITIONS", "CONTROL_CONDITIONS", "GATE", "HERE", "INTERVAL_METHOD", "MAX_NUMBER_DIGITS",
           "PAIRS_FIXTURE", "PAIR_SETS", "PARSE_STATUSES", "PREREG", "PROTOCOL", "SYNTHESIS_CONDITIONS", "AnalysisSpec",
           "BaselineSpec", "ConfirmatoryDesignSpec", "CwrPrereg", "CwrProtocol", "CwrRecord", "CwrSettings",
           "DesignSpec", "MeasurementSpec", "SensitivitySpec", "SplitSpec", "Unit", "base_pair", "build_units",
           "chat", "check_counts", "check_pair_set", "cluster_of", "clustered_share", "control_prompt",
           "expected_answer_text", "extract_artifact", "gate_at", "generated_split", "grade_control", "handbook",
           "intervals", "make_record", "metrics", "paired_table", "paired_units", "pair_rows", "parse_control",
           "parse_state", "parse_status_counts", "read_state", "run_pairs", "sensitivity_grid", "split_spec",
           "spread", "state_lines", "token_counts"]



@dataclass(frozen=True)
class CwrSettings:
    """A run's settings beyond the preregistration's (they enter its identity)."""

    max_new_tokens: dict[str, int]  # generation bound per condition actually used
    units_per_condition: int | None  # reduced pass: units per condition; None measures every unit
    split: str | None = None  # the preregistered generated split measured; None: the showcase pair set
    split_seed_sha256: str | None = None  # a committed split's checked seed hash (the seed is never recorded)
    arm: str | None = None  # the diagnostic arm measured ([diagnostics] arms); None: the primary measurement


def controls_by_world(units: Sequence[Unit]) -> dict[str, dict[str, int]]:
    """P, R and E units per world they probe (the shipped worlds and the pair targets of the item set)."""
    out: dict[str, dict[str, int]] = {}
    for unit in units:
        if unit.condition in CONTROL_CONDITIONS:
            row = out.setdefault(unit.world_ref, {c: 0 for c in CONTROL_CONDITIONS})
            row[unit.condition] += 1
    return dict(sorted(out.items()))


def _positive(flag: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageProblem(f"{flag} must be a positive integer, got {value}")
    return value


class CwrProtocol(Protocol[Unit, CwrRecord]):
    """Fiction-CWR on the shape of ``benchmarks.core``: P/R/E controls and paired F/C synthesis, five ordered rules."""

    title = "CWR"
    prereg_schema = CwrPrereg
    record_type = CwrRecord
    record_key = "item_id"
    volatile_fields = ("endpoint",)
    #: A model that takes rendered text gets the text its own template makes of the chat (what is recorded);
    #: one that takes chats only (a served model) gets the chat, and the record holds its canonical JSON.
    needs = {models.CHAT: "sends each unit as a single-turn chat"}
    #: The rescorer grades through the reference interpreters the run copied from worlds/.
    shipped_code = {REFERENCE_FILE: f"worlds/{REFERENCE_SOURCE.name}",
                    PROGRAM_REFERENCE_FILE: f"worlds/{PROGRAM_REFERENCE_SOURCE.name}"}

    def executed_files(self, run_dir: Path) -> list[str]:
        """The interpreters ``grading.json`` tells the rescorer to load (a run's own are its two copies)."""
        index = read_json_file(Path(run_dir) / GRADING_FILE)
        if not isinstance(index, dict):
            raise ValueError(f"{GRADING_FILE} is not an object")
        named = [index.get("interpreter"), index.get("program_interpreter")]
        return [name if isinstance(name, str) else repr(name) for name in named if name is not None]
    options = (
        Option("max-new-tokens", "cap every condition's generation bound at this many tokens (a recorded deviation; "
               "for quick self-checks)", type=int),
        Option("units-per-condition", "measure only this many units per condition (P, R, E: items spread over the "
               "set; F and C: the same pairs on both sides); a recorded deviation for quick self-checks", type=int),
        Option("split", "measure the pairs of this preregistered generated split ([splits.NAME] in prereg.toml) "
               "instead of the showcase pairs"),
        Option("seed-file", "file holding a committed split's seed (default: the file named by "
               "PREREGBENCH_CWR_SEED_FILE); refused unless its sha256 is the one in prereg.toml"),
        Option("arm", "measure a preregistered diagnostic arm ([diagnostics] arms in prereg.toml: budget-less, "
               "budget-more, renaming-syllables, representation-tables): the F/C prompts state another budget, "
               "name everything with another label scheme or write the handbook as tables, and are graded "
               "under it; a diagnostic, recorded as a deviation"),
    )

    # settings

    def configure(self, run: ProtocolRun) -> CwrSettings:
        """The generation bounds (the preregistered ones, or capped by the option) and the reduced-pass size."""
        measurement = self.spec.measurement
        bounds = dict(measurement.max_new_tokens)
        if sorted(bounds) != sorted(CONDITIONS):
            raise UsageProblem(f"prereg measurement.max_new_tokens must name exactly {list(CONDITIONS)}")
        check_pair_set(measurement.pair_set)
        splits_table(self.spec.splits)
        cap = _positive("--cwr-max-new-tokens", run.option("max-new-tokens"))
        if cap is not None:
            bounds = {c: min(n, cap) for c, n in bounds.items()}
        split, committed = run.option("split"), None
        if split is not None:
            # Before any work: an unknown split, a family the generator cannot draw, a missing or wrong seed.
            committed = generated_split(split, run.option("seed-file")).record["seed_sha256"]
        arm = run.option("arm")
        if arm is not None:
            check_arm(arm)
        return CwrSettings(bounds, _positive("--cwr-units-per-condition", run.option("units-per-condition")),
                           split, committed, arm)

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The options that give a recorded run's settings (the seed of a committed split comes from the
        environment, as it did for the run)."""
        bounds = dict(settings.get("max_new_tokens") or {})
        frozen = dict(self.spec.measurement.max_new_tokens)
        return {"split": settings.get("split"), "units-per-condition": settings.get("units_per_condition"),
                "arm": settings.get("arm"),
                "max-new-tokens": max(bounds.values()) if bounds and bounds != frozen else None}

    def deviations(self, run: ProtocolRun) -> list[str]:
        found = []
        cap = run.option("max-new-tokens")
        if cap is not None:
            found.append(f"generation bounds capped at {cap} tokens: {run.settings.max_new_tokens} instead of "
                         f"{dict(self.spec.measurement.max_new_tokens)}")
        if run.settings.units_per_condition is not None:
            found.append(f"reduced pass: {run.settings.units_per_condition} units per condition instead of all")
        if run.settings.arm is not None:
            found.append(f"diagnostic arm {run.settings.arm}: {ARMS[run.settings.arm].what}, in the F/C prompts "
                         "and graded under it; not the primary measurement")
        return found

    def recognize_model(self, name: str) -> None:
        if name in _scripted.SCENARIOS or name in (_scripted.Flaky.NAME, _scripted.MOTIF_BLIND,
                                                   _scripted.FamilySlips.NAME):
            _scripted.register_scenarios()

    # units

    def pairs(self, run: ProtocolRun | None = None) -> tuple[Any, ...]:
        """The run's pairs (the showcase pair set without a run or a split)."""
        if run is None:
            return run_pairs()
        return arm_pairs(self.control_pairs(run), run.settings.arm)

    def control_pairs(self, run: ProtocolRun) -> tuple[Any, ...]:
        """The run's pairs as its P/R/E items see them: without the diagnostic arm's changes."""
        return run_pairs() if run.settings.split is None else run_pairs(run.settings.split, run.option("seed-file"))

    def controls_name(self, run: ProtocolRun) -> str:
        """The name of the run's P/R/E item set: the registered set's, or ``<it>:<split>`` for a split run."""
        name = self.spec.measurement.fixture_set
        return name if run.settings.split is None else f"{name}:{run.settings.split}"

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        """The P/R/E items and the run's F/C pairs (built by ``worlds``; identified by prompt hashes).

        On the showcase pair set the items are the registered set; a split run builds its own from the F and C
        targets of the split's base pairs, so every world it scores carries P, R and E items (a replica is its
        base relabelled)."""
        name = self.spec.measurement.fixture_set
        if name != "cwr-controls":
            raise UsageProblem(f"[measurement] fixture_set {name!r} in {self.prereg.path} is not a CWR item set; "
                               "the one registered set is 'cwr-controls'")
        seed = self.spec.seeds["fixtures"]
        if run.settings.split is None:  # generated from the prereg's seeds.fixtures (its frozen hash holds)
            items = build_cwr_items(seed)
        else:
            items = split_controls(self.control_pairs(run), seed)
        return {self.controls_name(run): items, PAIRS_FIXTURE: pair_rows(self.pairs(run))}

    def units(self, run: ProtocolRun) -> list[Unit]:
        items = run.fixture_sets[self.controls_name(run)]
        return build_units(items, self.pairs(run), run.settings.units_per_condition, self.control_pairs(run))

    # measurement

    def chat(self, run: ProtocolRun, unit: Unit) -> list[dict[str, str]]:
        return chat(unit.prompt_text)

    def answer_key(self, run: ProtocolRun):
        return _scripted.AnswerKey()

    def scripted_answer(self, run: ProtocolRun, unit: Unit) -> Unit:
        """A scripted model is handed the unit itself (its expected answer, or its target world for F/C)."""
        return unit

    def batches(self, run: ProtocolRun, todo: Sequence[Unit]) -> Iterable[Sequence[Unit]]:
        """Batches of one condition each, in condition order: a batch shares its condition's generation bound."""
        step = max(1, self.batch_size(run))
        for condition in CONDITIONS:
            rows = [u for u in todo if u.condition == condition]
            for start in range(0, len(rows), step):
                yield rows[start:start + step]

    def measure(self, run: ProtocolRun, model: Any, batch: Sequence[Unit]) -> list[CwrRecord]:
        (condition,) = {u.condition for u in batch}
        bound = run.settings.max_new_tokens[condition]
        chats = [chat(u.prompt_text) for u in batch]
        prompts = [model.render_chat(c) for c in chats]  # what the model sees; a served model's: the messages' JSON
        sent = prompts if models.TEXT in model.capabilities else chats
        responses = model.generate(sent, models.GenerationSettings(max_new_tokens=bound))
        limit = self.spec.measurement.max_answer_chars
        return [make_record(u, prompt, response, bound, limit) for u, prompt, response in zip(batch, prompts, responses)]

    def provenance_extra(self, run: ProtocolRun) -> dict[str, Any]:
        return {"max_new_tokens": run.settings.max_new_tokens, "units": len(run.units), "split": run.settings.split,
                "split_seed_sha256": run.settings.split_seed_sha256, "arm": run.settings.arm,
                "pairs": [p.pair_id for p in self.pairs(run)]}

    # results

    def baselines(self, run: ProtocolRun) -> dict[str, Any]:
        """``baselines.json``: copy, random and greedy baselines on every pair target (computed once per run)."""
        spec = self.spec
        return run.once(BASELINES_FILE, lambda: pair_baselines(self.pairs(run), spec.baselines.random_samples,
                                                               spec.seeds["baselines"]))

    def paired_outcomes(self, records: Sequence[CwrRecord]) -> dict[str, dict[str, bool]]:
        return {f"{c}.accuracy": {r.item_id: bool(r.correct) for r in records if r.condition == c} for c in CONDITIONS}

    def paired_clusters(self, records: Sequence[CwrRecord]) -> dict[str, str]:
        """F and C units by base pair: the replicas of one base share world, motif and demonstrations."""
        return {r.item_id: base_pair(r.pair_id) for r in records
                if r.condition in SYNTHESIS_CONDITIONS and r.pair_id is not None}

    def metrics(self, run: ProtocolRun, records: Sequence[CwrRecord]) -> dict[str, Any]:
        pairs = self.pairs(run)
        motif_required = {p.pair_id for p in pairs if p.novelty == MOTIF_REQUIRED}
        return metrics(records, self.baselines(run), motif_required, pair_subsets(pairs))

    def metric_names(self) -> tuple[str, ...]:
        return tuple(metrics([], {"copy_flagged_pairs": 0}, set(), pair_subsets(())))

    def result_files(self, run: ProtocolRun, records: Sequence[CwrRecord], measured: Mapping[str, Any]):
        files = {BASELINES_FILE: lambda: self.baselines(run), GRADING_FILE: lambda: self.grading(run)}
        if run.settings.split is not None:
            files[SPLIT_FILE] = lambda: generated_split(run.settings.split, run.option("seed-file")).record
        return files

    def grading(self, run: ProtocolRun) -> dict[str, Any]:
        """``grading.json`` and the files under ``grading/``: the worlds, unit inputs and demonstrations the
        units were graded against, and the reference interpreter (see :mod:`benchmarks.cwr.grading`)."""
        items = run.fixture_sets[self.controls_name(run)]
        pairs = self.pairs(run)
        return write_grading(run.dir, run.units, items, pairs, pair_subsets(pairs), self.control_pairs(run))

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        return _figures.report_figures(run_dir, summary)

    def pair_summary(self, run: ProtocolRun) -> dict[str, dict[str, Any]]:
        pairs = self.pairs(run)
        inter = interchangeable_of(pairs)
        return {p.pair_id: {"family": p.family, "novelty": p.novelty, "flags": list(p.flags),
                            "f_target": p.f.target.id, "c_target": p.c.target.id,
                            "interchangeable_edges": list(inter[p.pair_id])} for p in pairs}

    def summary(self, run: ProtocolRun, records: Sequence[CwrRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        shares = dict(sorted({**intervals(records), **baseline_intervals(self.baselines(run))}.items()))
        return {
            "sensitivity": sensitivity_grid(measured),
            "intervals": shares,
            "execution_by_context": {
                f"E_{c}": {"units": measured.get(f"E_{c}.units"), "correct": measured.get(f"E_{c}.correct"),
                           "accuracy": measured.get(f"E_{c}.accuracy"), "accuracy_interval": shares[f"E_{c}.accuracy"]}
                for c in E_CONTEXTS},
            "parse_statuses": parse_status_counts(records),
            "synthesis_checks": check_counts(records),
            "units": {c: sum(u.condition == c for u in run.units) for c in CONDITIONS},
            "max_new_tokens": dict(run.settings.max_new_tokens),
            "baselines": self.baselines(run),
            "pairs": self.pair_summary(run),
            "pair_subsets": pair_subsets(self.pairs(run)),
            "token_counts": token_counts(records),
            "diagnostics": diagnostics(records, self.pairs(run)),
            "mastery": mastery_table(records),
            "controls_by_world": controls_by_world(run.units),
        }

    # ----------------------------------------------------------------- planned power (benchmarks.core.design)

    def design_arguments(self, parser: Any) -> None:
        _design.design_arguments(parser)

    def design_tables(self, args: Any) -> tuple[Any, list[str]]:
        return _design.design_tables(args)



PROTOCOL = CwrProtocol(HERE)
