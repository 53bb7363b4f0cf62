"""Fiction-CWR run: units of all five conditions, one measurement pass into a resumable ledger, baselines, summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import models
from benchmarks.core import read_ledger
from benchmarks.core.plugin import benchmark_run, mark_model_runs, pin_hub_revision, pinned_revision
from fixtures import FIXTURE_SETS, fixture_hash

from .baselines import pair_baselines
from .pairs import MOTIF_REQUIRED, synthesis_pairs
from .protocol import (
    CONDITIONS,
    GATE,
    HERE,
    PREREG,
    CwrRecord,
    Unit,
    chat,
    control_prompt,
    finite,
    make_record,
    metrics,
)
from .scripted import AnswerKey, register_scenarios
from .summary import build_summary

#: Test modules whose tests run the model (marked cpu or gpu by --device).
MODEL_RUN_MODULES = ("test_rules.py", "test_completeness.py")

register_scenarios()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("preregbench")
    group.addoption(
        "--cwr-max-new-tokens", dest="cwr_max_new_tokens", type=int, default=None,
        help="cap every CWR condition's generation bound at this many tokens (a recorded deviation; "
             "for quick self-checks)",
    )
    group.addoption(
        "--cwr-units-per-condition", dest="cwr_units_per_condition", type=int, default=None,
        help="measure only this many units per condition (P, R, E: items spread over the set; F and C: the same "
             "pairs on both sides); a recorded deviation for quick self-checks",
    )


# --------------------------------------------------------------------------- options


def _is_model_run(item: pytest.Item) -> bool:
    return Path(item.path).parent == HERE and Path(item.path).name in MODEL_RUN_MODULES


def _device(config: pytest.Config) -> str:
    return config.getoption("benchmark_device") or PREREG.values.model.device


def _model_name(config: pytest.Config) -> str:
    return config.getoption("benchmark_model") or PREREG.values.model.id


def _units_per_condition(config: pytest.Config) -> int | None:
    value = config.getoption("cwr_units_per_condition", default=None)
    if value is not None and value < 1:
        raise pytest.UsageError(f"--cwr-units-per-condition must be a positive integer, got {value}")
    return value


def max_new_tokens(config: pytest.Config) -> dict[str, int]:
    """The generation bound per condition for this run (the preregistered one, or capped by the option)."""
    bounds = dict(PREREG.values.measurement.max_new_tokens)
    if sorted(bounds) != sorted(CONDITIONS):
        raise pytest.UsageError(f"prereg measurement.max_new_tokens must name exactly {list(CONDITIONS)}")
    cap = config.getoption("cwr_max_new_tokens", default=None)
    if cap is not None:
        if cap < 1:
            raise pytest.UsageError(f"--cwr-max-new-tokens must be a positive integer, got {cap}")
        bounds = {c: min(n, cap) for c, n in bounds.items()}
    return bounds


def deviations(config: pytest.Config) -> list[str]:
    """Every way this run departs from the preregistration."""
    spec = PREREG.values
    found = []
    if _model_name(config) != spec.model.id:
        found.append(f"model {_model_name(config)!r} instead of the preregistered {spec.model.id!r}")
    if _device(config) != spec.model.device:
        found.append(f"device {_device(config)!r} instead of {spec.model.device!r}")
    if config.getoption("cwr_max_new_tokens", default=None) is not None:
        found.append(f"generation bounds capped at {config.getoption('cwr_max_new_tokens')} tokens: "
                     f"{max_new_tokens(config)} instead of {dict(spec.measurement.max_new_tokens)}")
    if _units_per_condition(config) is not None:
        found.append(f"reduced pass: {_units_per_condition(config)} units per condition instead of all")
    return found


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rule" in metafunc.fixturenames and Path(metafunc.definition.path).parent == HERE:
        metafunc.parametrize("rule", GATE.labels)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_model_runs(items, _is_model_run, _device(config))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check options and resolve a hub model's revision before any test runs."""
    if not any(_is_model_run(item) for item in session.items):
        return
    config = session.config
    max_new_tokens(config)
    _units_per_condition(config)
    spec = PREREG.values.model
    pin_hub_revision(config, "CWR", _model_name(config), preregistered_id=spec.id, preregistered_revision=spec.revision)


# --------------------------------------------------------------------------- units


def _spread(rows: list[Any], n: int | None) -> list[Any]:
    """``n`` rows evenly spaced over ``rows`` (all when n is None or not smaller)."""
    if n is None or n >= len(rows):
        return list(rows)
    if n == 1:
        return [rows[0]]
    return [rows[round(i * (len(rows) - 1) / (n - 1))] for i in range(n)]


def run_pairs() -> tuple[Any, ...]:
    """The preregistered pair set: every showcase pair and its replicas."""
    spec = PREREG.values.measurement
    if spec.pair_set != "showcase":
        raise pytest.UsageError(f"unknown pair set {spec.pair_set!r}; available: showcase")
    return synthesis_pairs(spec.replicas_per_pair)


def build_units(items: dict[str, list[dict[str, Any]]], pairs: tuple[Any, ...],
                per_condition: int | None) -> tuple[list[Unit], dict[str, Any]]:
    """Every unit of the run in a fixed order, and the target world of each F/C unit."""
    from fixtures.cwr import resolve_world

    units: list[Unit] = []
    targets: dict[str, Any] = {}
    for condition in ("P", "R", "E"):
        for item in _spread(items[condition], per_condition):
            world, raw = resolve_world(item["world_ref"])
            units.append(Unit(item["item_id"], condition, item["kind"], None, item["world_ref"], world.family,
                              control_prompt(item, world, raw), item["expected"],
                              item["context"] if condition == "E" else None))
    chosen = _spread(list(pairs), per_condition)
    for condition in ("F", "C"):
        for pair in chosen:
            side = pair.f if condition == "F" else pair.c
            unit_id = f"{condition}:{pair.pair_id}"
            units.append(Unit(unit_id, condition, "synthesis", pair.pair_id, f"pair:{pair.pair_id}:{condition}",
                              side.target.family, side.prompt_text, None))
            targets[unit_id] = side.target
    return units, targets


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def cwr_run(request: pytest.FixtureRequest):
    return benchmark_run(request.config, HERE)


@pytest.fixture(scope="session")
def control_items(cwr_run) -> dict[str, list[dict[str, Any]]]:
    name = PREREG.values.measurement.fixture_set
    items = FIXTURE_SETS[name]()
    cwr_run.once("fixtures.json", lambda: {"fixture_set": name, "sha256": fixture_hash(name), "items": items})
    return items


@pytest.fixture(scope="session")
def pairs() -> tuple[Any, ...]:
    return run_pairs()


@pytest.fixture(scope="session")
def units(request: pytest.FixtureRequest, control_items, pairs) -> tuple[list[Unit], dict[str, Any]]:
    return build_units(control_items, pairs, _units_per_condition(request.config))


@pytest.fixture(scope="session")
def baselines(cwr_run, pairs) -> dict[str, Any]:
    spec = PREREG.values
    return cwr_run.once("baselines.json", lambda: pair_baselines(pairs, spec.baselines.random_samples,
                                                                  spec.seeds["baselines"]))


def load_cwr_model(config: pytest.Config, units: list[Unit], targets: dict[str, Any]) -> models.LanguageModel:
    name = _model_name(config)
    spec = PREREG.values.model
    if models.model_kind(name) == "scripted":
        key = AnswerKey()
        model = models.load_model(name, gold=key)
        for unit in units:
            key.add(model.render_chat(chat(unit.prompt_text)), unit, targets.get(unit.item_id))
        return model
    options: dict[str, Any] = {"device": _device(config), "dtype": spec.dtype, "batch_size": spec.batch_size,
                               "seed": PREREG.values.seeds["torch"]}
    revision = pinned_revision(config, "CWR")
    if revision:
        options["revision"] = revision
    return models.load_model(name, **options)


@pytest.fixture(scope="session")
def records(request: pytest.FixtureRequest, cwr_run, units, control_items, pairs) -> list[CwrRecord]:
    """Measure every unit once per run (one xdist worker measures; the others wait and read)."""
    config = request.config
    unit_list, targets = units
    bounds = max_new_tokens(config)
    with cwr_run.lock("measure"):
        with cwr_run.ledger("records.jsonl", CwrRecord, key="item_id") as ledger:
            todo = [u for u in unit_list if u.item_id not in ledger]
            if todo:
                model = load_cwr_model(config, unit_list, targets)
                try:
                    described = model.describe().as_dict()
                    previous = cwr_run.load_provenance()
                    if previous is not None and previous.model.get("revision") != described["revision"]:
                        raise models.ModelError(
                            f"run {cwr_run.run_id} was started with {previous.model.get('id')} @ "
                            f"{previous.model.get('revision')}; resume it with the same model"
                        )
                    cwr_run.record_provenance(
                        model=described, seeds=PREREG.values.seeds, prereg=PREREG,
                        fixtures={PREREG.values.measurement.fixture_set: fixture_hash(PREREG.values.measurement.fixture_set)},
                        extra={"deviations": deviations(config), "max_new_tokens": bounds,
                               "units": len(unit_list), "pairs": [p.pair_id for p in pairs]},
                    )
                    step = PREREG.values.model.batch_size
                    for condition in CONDITIONS:
                        rows = [u for u in todo if u.condition == condition]
                        settings = models.GenerationSettings(max_new_tokens=bounds[condition])
                        for start in range(0, len(rows), step):
                            chunk = rows[start:start + step]
                            prompts = [model.render_chat(chat(u.prompt_text)) for u in chunk]
                            responses = model.generate(prompts, settings)
                            for unit, prompt, response in zip(chunk, prompts, responses):
                                ledger.append(make_record(unit, prompt, response, bounds[condition],
                                                          targets.get(unit.item_id)))
                finally:
                    model.close()
    return read_ledger(cwr_run.path("records.jsonl"), CwrRecord)


@pytest.fixture(scope="session")
def measured(records, baselines, pairs) -> dict[str, Any]:
    """All metrics, undefined ratios as None."""
    return metrics(records, baselines, {p.pair_id for p in pairs if p.novelty == MOTIF_REQUIRED})


@pytest.fixture(scope="session")
def rule_metrics(measured) -> dict[str, float]:
    return finite(measured)


@pytest.fixture(scope="session")
def summary(request: pytest.FixtureRequest, cwr_run, control_items, units, records, measured, baselines,
            pairs) -> dict[str, Any]:
    return cwr_run.once("summary.json", lambda: build_summary(
        run=cwr_run, records=records, measured=measured, baselines=baselines, units=units[0], pairs=pairs,
        max_new_tokens=max_new_tokens(request.config), deviations=deviations(request.config),
    ))
