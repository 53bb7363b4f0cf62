"""P-Zombie on the protocol shape of ``benchmarks.core``: :class:`PzombieProtocol` and its instance ``PROTOCOL``.

The top of the package.  The units are (preset, measured prompt) pairs.
:meth:`PzombieProtocol.run_units` drives the PX-Engine
(``benchmarks.pzombie.px``) once per preset: it calibrates on the
calibration prompts (or reuses the preset's stored frozen state when a run
resumes), then measures every prompt from that state in its own process, one
ledger record each.  The science it declares lives below it: the
preregistration and record types (:mod:`.spec`), the metrics
(:mod:`.metrics`), the intervals (:mod:`.intervals`), the engine's
configuration and records (:mod:`.engine`), the figures (:mod:`.figures`)
and the planned power (:mod:`.design`).  Everything else (run directory,
resume checks, provenance, the generated rule and completeness tests, the
summary) is ``benchmarks.core``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

import models
from benchmarks.core.design import Table
from benchmarks.core.protocol import ModelChoice, Option, Protocol, ResumeRefused, UsageProblem
from benchmarks.core.run import ProtocolRun, identity_conflicts
from fixtures import FIXTURE_SETS

from . import px
from .design import design_tables
from .engine import engine_config, record_from_engine
from .figures import report_figures, write_figures
from .intervals import interval_record, intervals, paired_bootstrap, preset_intervals
from .metrics import EtaForms, aggregate, eta_squared_forms, metrics, preset_metrics, token_diversity, zone_entropy_bits
from .scales import is_scale_group, write_scale_report
from .spec import (
    CATEGORIES,
    CLASSIFICATIONS,
    DEVIATIONS_FROM_ORIGINAL,
    FIGURES,
    HERE,
    IMPLEMENTED_GENERATION,
    IMPLEMENTED_INTERVALS,
    OTHER_SCALE_WARMUP,
    PREREG,
    PRESET_PREFIX,
    PUBLISHED,
    ZONES,
    GenerationSpec,
    IntervalSpec,
    PzPrereg,
    PzRecord,
    PzSettings,
    PzUnit,
    RunSpec,
    ScaleSpec,
    WarmupSpec,
    calibration_file,
    unit_id,
)

__all__ = ["CATEGORIES", "CLASSIFICATIONS", "DEVIATIONS_FROM_ORIGINAL", "FIGURES", "HERE", "IMPLEMENTED_GENERATION",
           "IMPLEMENTED_INTERVALS", "OTHER_SCALE_WARMUP", "PREREG", "PRESET_PREFIX", "PROTOCOL", "PUBLISHED", "ZONES",
           "EtaForms", "GenerationSpec", "IntervalSpec", "PzPrereg", "PzRecord", "PzSettings", "PzUnit",
           "PzombieProtocol", "RunSpec", "ScaleSpec", "WarmupSpec", "aggregate", "calibration_file", "engine_config",
           "eta_squared_forms", "interval_record", "intervals", "metrics", "paired_bootstrap", "preset_intervals",
           "preset_metrics", "record_from_engine", "token_diversity", "unit_id", "zone_entropy_bits"]


class PzombieProtocol(Protocol[PzUnit, PzRecord]):
    """The P-Zombie evaluation on the shape of ``benchmarks.core``: four ordered classifications from the
    zone routing of 80 prompts under two presets."""

    title = "P-Zombie"
    prereg_schema = PzPrereg
    record_type = PzRecord
    record_key = "unit_id"
    volatile_fields = ("seconds",)
    unshardable = ("each preset's prompts are measured from one calibrated frozen state in one engine; run the "
                   "preregistered scales as separate runs instead")
    summary_file = "stats.json"
    figures = FIGURES
    needs = {
        models.ACTIVATION_TAPS: "runs its PX-Engine on forward hooks on the model's decoder layers",
        models.CHAT: "renders each prompt with the model's own chat template",
        models.TEXT: "generates from the rendered prompt text",
    }

    @property
    def options(self) -> tuple[Option, ...]:  # type: ignore[override]  # help texts quote the prereg's values
        run, bound = self.spec.run, self.spec.generation.max_new_tokens
        return (
            Option("max-new-tokens", f"generation bound per prompt, 1 to {bound} (default {bound}, as preregistered); "
                   "a lower value is recorded as a deviation", type=int),
            Option("isolation", "fork (load once, fork a child per prompt; CPU), spawn (fresh process per prompt) or "
                   f"inprocess (quick, a recorded deviation); default {run.isolation_cpu} on cpu, "
                   f"{run.isolation_cuda} on cuda", choices=px.ISOLATION_MODES),
            Option("preset", f"measure this preset only (default: {' and '.join(run.presets)}); a recorded deviation. "
                   f"H2/A2 compares the two and is then not decided, nor, without {run.rule_preset}, the rules that "
                   "read it", choices=run.presets),
        )

    # ----------------------------------------------------------------- settings

    def preregistered_model(self, scale: str | None) -> ModelChoice:
        name = scale or self.spec.run.default_scale
        if name not in self.spec.scales:
            raise UsageProblem(f"--scale {name!r} is not a P-Zombie scale; choose one of: {', '.join(self.spec.scales)}")
        chosen = self.spec.scales[name]
        return ModelChoice(chosen.model_id, chosen.revision)

    def default_device(self) -> str:
        return self.spec.run.default_device

    def configure(self, run: ProtocolRun) -> PzSettings:
        spec = self.spec
        cuda = run.device.startswith("cuda")
        for key, implemented in IMPLEMENTED_GENERATION.items():
            if getattr(spec.generation, key) != implemented:
                raise UsageProblem(f"[generation] {key} = {getattr(spec.generation, key)!r} in {self.prereg.path} is not "
                                   f"what this suite's generation does ({implemented!r}); restore the frozen value")
        for key, implemented in IMPLEMENTED_INTERVALS.items():
            if getattr(spec.intervals, key) != implemented:
                raise UsageProblem(f"[intervals] {key} = {getattr(spec.intervals, key)!r} in {self.prereg.path} is not "
                                   f"a method this version computes ({implemented!r}); restore the frozen value")
        dtypes = {"cuda": spec.generation.dtype_cuda, "cpu": spec.generation.dtype_cpu}
        bound = run.option("max-new-tokens")
        if bound is None:
            bound = spec.generation.max_new_tokens
        if not 1 <= bound <= spec.generation.max_new_tokens:
            raise UsageProblem(f"--pzombie-max-new-tokens {bound} is not valid; give 1 to {spec.generation.max_new_tokens}")
        isolation = run.option("isolation") or (spec.run.isolation_cuda if cuda else spec.run.isolation_cpu)
        if cuda and isolation == "fork":
            raise UsageProblem("--pzombie-isolation fork cannot run on cuda (CUDA does not survive fork); use spawn")
        chosen = run.option("preset")
        return PzSettings(scale=run.scale or spec.run.default_scale,
                          dtype=dtypes["cuda" if cuda else "cpu"],
                          isolation=isolation, max_new_tokens=bound,
                          presets=(chosen,) if chosen else tuple(spec.run.presets))

    def preregistered_scales(self) -> tuple[str, ...]:
        return tuple(self.spec.scales)

    def scale_from_settings(self, settings: Mapping[str, Any]) -> str | None:
        scale = settings.get("scale")
        return scale if isinstance(scale, str) else None

    def scale_report(self, parent: Path, runs: Mapping[str, Path]) -> list[Path]:
        """The cross-scale table of a ``--scale all`` group (:mod:`.scales`)."""
        return write_scale_report(parent, runs)

    def round_report(self, folder: Path, formats: str) -> list[Path] | None:
        """``preregbench report GROUP_DIR`` renders a scale group's cross-scale report again."""
        return write_scale_report(folder, formats=formats) if is_scale_group(folder) else None

    def options_from_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The options that give a recorded run's settings back (its scale: :meth:`scale_from_settings`)."""
        presets = list(settings.get("presets") or [])
        bound = settings.get("max_new_tokens")
        return {"max-new-tokens": None if bound == self.spec.generation.max_new_tokens else bound,
                "isolation": settings.get("isolation"),
                "preset": presets[0] if len(presets) == 1 else None}

    def undecided(self, run: ProtocolRun) -> dict[str, str]:
        """A run of one preset leaves H2/A2 undecided (it compares the two presets), and a run without the rule
        preset every rule that reads it."""
        measured = set(run.settings.presets)
        spec = self.spec.run
        out: dict[str, str] = {}
        if spec.rule_preset not in measured:
            for key in ("token_control", "combined", "eta2_target"):
                out[self.classifications[key].name] = (f"it reads {spec.rule_preset}, which this run did not measure "
                                                       f"(--pzombie-preset {run.settings.presets[0]})")
        if not {spec.rule_preset, spec.comparison_preset} <= measured:
            out[self.classifications["h2"].name] = (f"H2/A2 compares {spec.rule_preset} with {spec.comparison_preset}; "
                                                    f"this run measured {' and '.join(run.settings.presets)} only "
                                                    "(--pzombie-preset)")
        return out

    def deviations(self, run: ProtocolRun) -> list[str]:
        """Beyond another model and device (which core records): the bundled checkpoint, the bound, the isolation."""
        spec, settings = self.spec, run.settings
        found = []
        if run.model != run.preregistered.id and run.model in models.BUNDLED:
            found.append(f"{run.model} is the bundled offline checkpoint ({models.BUNDLED[run.model].summary}), "
                         "not the instruct checkpoint; its chat template is the registry's")
        if settings.max_new_tokens != spec.generation.max_new_tokens:
            found.append(f"max_new_tokens {settings.max_new_tokens} instead of {spec.generation.max_new_tokens}")
        expected = spec.run.isolation_cuda if run.device.startswith("cuda") else spec.run.isolation_cpu
        if settings.isolation != expected:
            found.append(f"isolation {settings.isolation!r} instead of {expected!r}")
        if tuple(settings.presets) != tuple(spec.run.presets):
            found.append(f"preset {' and '.join(settings.presets)} only, instead of {' and '.join(spec.run.presets)}")
        return found

    def operational(self, run: ProtocolRun) -> dict[str, Any]:
        """The seed's operational settings this run applies: the CUDA allocator setting of every process that loads
        the model and ``torch.cuda.empty_cache()`` before every generation (CUDA only), and whether decoding reuses
        the KV cache (the scale's ``use_cache``)."""
        cuda = run.device.startswith("cuda")
        conf, empty = self.spec.run.cuda_alloc_conf, self.spec.run.cuda_empty_cache  # read on every device
        return {"cuda_alloc_conf": conf if cuda else None,
                "empty_cache_before_generation": bool(cuda and empty),
                "use_cache": engine_config(run.settings.scale).use_cache}

    def provenance_extra(self, run: ProtocolRun) -> dict[str, Any]:
        return {"deviations_from_original": list(DEVIATIONS_FROM_ORIGINAL),
                "engine_config_sha256": engine_config(run.settings.scale).sha256(),
                "operational": self.operational(run)}

    # ----------------------------------------------------------------- units

    def fixture_sets(self, run: ProtocolRun) -> dict[str, Any]:
        name = self.spec.run.fixture_set
        return {name: FIXTURE_SETS[name]()}

    def prompts(self, run: ProtocolRun, phase: str) -> list[dict[str, Any]]:
        """The fixture rows of one phase ("calibration" or "measured"), in fixture order."""
        return [row for row in run.fixture_sets[self.spec.run.fixture_set] if row["phase"] == phase]

    def fixture_extras(self, run: ProtocolRun) -> dict[str, Any]:
        measured = self.prompts(run, "measured")
        return {"calibration_prompt_ids": [row["prompt_id"] for row in self.prompts(run, "calibration")],
                "measured_per_category": {c: sum(row["category"] == c for row in measured) for c in CATEGORIES}}

    def units(self, run: ProtocolRun) -> list[PzUnit]:
        return [PzUnit(unit_id(preset, row["prompt_id"]), preset, row["prompt_id"], row["category"], row["text"])
                for preset in run.settings.presets for row in self.prompts(run, "measured")]

    # ----------------------------------------------------------------- measurement

    def model_spec(self, run: ProtocolRun) -> px.ModelSpec:
        """How each engine process loads the model (device, dtype, torch seed and the pinned revision).

        A local model folder's revision is the hash of its files, taken here once: every process that loads
        the folder would otherwise hash it again (under spawn isolation, one process per prompt, each reading
        the whole checkpoint)."""
        options: dict[str, Any] = {"device": run.device, "dtype": run.settings.dtype, "seed": self.spec.seeds["torch"]}
        if run.revision:
            options["revision"] = run.revision
        elif Path(run.model).is_dir():
            options["revision"] = models.folder_hash(Path(run.model))
        return px.ModelSpec(run.model, options)

    def calibration_problem(self, run: ProtocolRun, preset: str) -> str | None:
        """Why a preset's stored frozen state cannot be resumed (another run wrote it), or None."""
        if not run.path(calibration_file(preset)).exists():
            return None
        try:
            stored = run.read_json(calibration_file(preset))
        except (OSError, ValueError) as exc:
            return f"{calibration_file(preset)} cannot be read ({exc})"
        if not isinstance(stored, dict):
            return f"{calibration_file(preset)} holds a JSON {type(stored).__name__}, not a calibration state"
        conflicts = identity_conflicts(stored.get("identity") or {}, run.identity())
        if stored.get("identity") and not conflicts:
            return None
        return f"{calibration_file(preset)} belongs to another run ({'; '.join(conflicts) or 'it carries no run identity'})"

    def resume_problems(self, run: ProtocolRun) -> list[str]:
        return [p for preset in run.settings.presets if (p := self.calibration_problem(run, preset))]

    def stored_calibration(self, run: ProtocolRun, preset: str) -> dict[str, Any] | None:
        """A preset's frozen state from an earlier session of this run (core's resume check refused any other)."""
        problem = self.calibration_problem(run, preset)
        if problem:
            raise ResumeRefused(f"{self.label}: run {run.run_id}: {problem}; leave out --run-id to start a new run")
        path = run.path(calibration_file(preset))
        return run.read_json(path.name) if path.exists() else None

    def resume_units(self, run: ProtocolRun, units: Sequence[PzUnit], recorded: frozenset) -> list[PzUnit]:
        """Only the units not yet recorded: each prompt is measured alone from its preset's frozen state, so no
        batch has to be measured again for a resumed run to equal an uninterrupted one."""
        return [unit for unit in units if self.unit_key(unit) not in recorded]

    def run_units(self, run: ProtocolRun, todo: Sequence[PzUnit], append: Callable[[PzRecord], None]) -> None:
        """Per preset with units left: calibrate (or take the stored frozen state), then measure its prompts."""
        settings = run.settings
        calibration = self.prompts(run, "calibration")
        rows = {row["prompt_id"]: row for row in self.prompts(run, "measured")}
        stored = {preset: self.stored_calibration(run, preset) for preset in run.settings.presets}
        config = engine_config(settings.scale)
        operational = self.operational(run)
        model = self.model_spec(run)
        if run.model in models.BUNDLED and settings.isolation == "fork":
            # Convert the bundled GGUF here, once, if its cache is missing: the loader process must only load
            # (a loader that computed before forking would hang its children, see DESIGN.md).
            models.bundled_folder(run.model)
        started = False

        def calibrated(preset: str, summary: dict[str, Any]) -> None:
            """Before the preset's first measured prompt: provenance (once), then keep the frozen state."""
            nonlocal started
            if not started:
                run.start(summary["model"])
                started = True
            if stored[preset] is None:
                run.write_json(calibration_file(preset), {
                    "preset": preset,
                    "calibration_prompt_ids": [row["prompt_id"] for row in calibration],
                    "identity": run.identity(str(summary["model"].get("revision") or "")),
                    **summary,
                })
            elif summary["frozen_state_sha256"] != stored[preset]["frozen_state_sha256"]:
                raise px.PxError(f"the resumed {preset} run was handed a different frozen state")

        for preset in run.settings.presets:
            mine = [unit for unit in todo if unit.preset == preset]
            if not mine:
                continue
            px.run_prompts(
                model,
                [{"id": unit.prompt_id, "text": unit.text} for unit in mine],
                preset=preset,
                config=config,
                settings=px.generation_settings(preset, settings.max_new_tokens, config),
                isolation=settings.isolation,
                calibration_prompts=[{"id": row["prompt_id"], "text": row["text"]} for row in calibration],
                on_calibrated=lambda summary, preset=preset: calibrated(preset, summary),
                on_record=lambda record: append(record_from_engine(record, rows[record.prompt_id])),
                frozen_state=stored[preset]["frozen_state"] if stored[preset] else None,
                timeout_s=self.spec.run.prompt_timeout_s,
                cuda_alloc_conf=operational["cuda_alloc_conf"],
                empty_cache=operational["empty_cache_before_generation"],
            )

    # ----------------------------------------------------------------- results

    def metrics(self, run: ProtocolRun, records: Sequence[PzRecord]) -> dict[str, Any]:
        return metrics(records)

    def metric_names(self) -> tuple[str, ...]:
        # No records leave out the ANOVA's sums of squares and degrees of freedom, which data of two categories give.
        anova = [f"{prefix}.{key}" for prefix in PRESET_PREFIX.values()
                 for key in ("df_between", "df_within", "ss_between", "ss_within")]
        return tuple(metrics([])) + tuple(anova)

    def paired_statistics(self, records_a: Sequence[PzRecord], records_b: Sequence[PzRecord]) -> list[dict[str, Any]]:
        """``preregbench compare``: eta^2 and R^2(TD -> H) of each preset, run A minus run B, by the paired
        bootstrap over the prompts both runs measured without an error (resampled within category, the same
        prompts in both runs; ``[intervals]`` gives the resamples and the seed)."""
        rows = []
        for preset, prefix in PRESET_PREFIX.items():
            found = paired_bootstrap([r for r in records_a if r.preset == preset],
                                     [r for r in records_b if r.preset == preset])
            for key in ("eta_squared", "r_squared_td"):
                row = found[key]
                rows.append({
                    "measure": f"{prefix}.{key}", "units": row["prompts"], "value_a": row.get("value_a"),
                    "value_b": row.get("value_b"), "difference": row["estimate"],
                    "interval": {"low": row["low"], "high": row["high"], "confidence": row.get("confidence"),
                                 "method": row.get("method")},
                    "resamples": row["resamples"], "seed": row["seed"],
                })
        return rows

    def summary(self, run: ProtocolRun, records: Sequence[PzRecord], measured: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "published_sr61_final_v2": PUBLISHED.get(run.settings.scale),
            "deviations_from_original": list(DEVIATIONS_FROM_ORIGINAL),
            "engine_config_sha256": engine_config(run.settings.scale).sha256(),
            "operational": self.operational(run),
            # The frozen definitions the telemetry and the statistics follow, as text beside the numbers.
            "definitions": {"telemetry": dict(self.spec.telemetry), "metrics": dict(self.spec.metrics)},
            "intervals": intervals(records),
        }

    def result_files(self, run: ProtocolRun, records: Sequence[PzRecord],
                     measured: Mapping[str, Any]) -> dict[str, Callable[[], Any]]:
        return {"aggregate.json": lambda: aggregate(records)}

    def write_figures(self, run: ProtocolRun, records: Sequence[PzRecord], measured: Mapping[str, Any]) -> None:
        write_figures(run.dir, records, measured, run.settings.scale)

    def report_figures(self, run_dir: Path, summary: Mapping[str, Any]) -> list[Any]:
        return report_figures(run_dir, summary)

    # ----------------------------------------------------------------- planned power (benchmarks.core.design)

    def design_tables(self, args: Any) -> tuple[list[Table], list[str]]:
        return design_tables(args)


PROTOCOL = PzombieProtocol(HERE)
