"""RES Step 0 run: fixtures, one measurement pass over all 64 items, records and summary, once per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import models
from benchmarks.core import read_ledger
from benchmarks.core.plugin import benchmark_run, mark_model_runs, pin_hub_revision, pinned_revision
from fixtures.res import CONDITIONS, RES_VARIANTS, build_res_fixtures, gold_label, heuristic_audit, res_fixture_hash

from .protocol import GATE, HERE, PREREG, ResRecord, build_chat, check_label_tokens, finite, make_record, metrics
from .summary import build_summary

#: Test modules whose tests run the model (marked cpu or gpu by --device).
MODEL_RUN_MODULES = ("test_rules.py", "test_completeness.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("preregbench")
    group.addoption(
        "--fixture-set", dest="res_fixture_set", default=None,
        help=f"RES fixture variant, one of {', '.join(RES_VARIANTS)} (default: the preregistered one); "
             "a variant other than the preregistered one is recorded as a deviation",
    )


def _is_model_run(item: pytest.Item) -> bool:
    return Path(item.path).parent == HERE and Path(item.path).name in MODEL_RUN_MODULES


def _device(config: pytest.Config) -> str:
    return config.getoption("benchmark_device") or PREREG.values.model.device


def _model_name(config: pytest.Config) -> str:
    return config.getoption("benchmark_model") or PREREG.values.model.id


def _fixture_set(config: pytest.Config) -> str:
    name = config.getoption("res_fixture_set", default=None) or PREREG.values.measurement.fixture_set
    if name not in RES_VARIANTS:
        raise pytest.UsageError(f"--fixture-set {name!r} is not valid; choose one of: {', '.join(RES_VARIANTS)}")
    return name


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rule" in metafunc.fixturenames and Path(metafunc.definition.path).parent == HERE:
        metafunc.parametrize("rule", GATE.labels)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_model_runs(items, _is_model_run, _device(config))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Resolve a hub model's revision before any test runs; fail the session at once if it cannot be had."""
    if not any(_is_model_run(item) for item in session.items):
        return
    config = session.config
    _fixture_set(config)
    spec = PREREG.values.model
    pin_hub_revision(config, "RES", _model_name(config), preregistered_id=spec.id, preregistered_revision=spec.revision)


def deviations(config: pytest.Config) -> list[str]:
    """Every way this run departs from the preregistration."""
    found = []
    spec = PREREG.values
    if _model_name(config) != spec.model.id:
        found.append(f"model {_model_name(config)!r} instead of the preregistered {spec.model.id!r}")
    if _fixture_set(config) != spec.measurement.fixture_set:
        found.append(f"fixture set {_fixture_set(config)!r} instead of {spec.measurement.fixture_set!r}")
    if _device(config) != spec.model.device:
        found.append(f"device {_device(config)!r} instead of {spec.model.device!r}")
    return found


def load_res_model(config: pytest.Config, sets: dict[str, list[dict[str, Any]]]) -> models.LanguageModel:
    name = _model_name(config)
    spec = PREREG.values.model
    if models.model_kind(name) == "scripted":
        # Scripted reference models answer from the gold labels, looked up by the rendered prompt.
        gold: dict[str, str] = {}
        model = models.load_model(name, gold=lambda prompt: gold[prompt])
        for condition in CONDITIONS:
            for row in sets[condition]:
                gold[model.render_chat(build_chat(row))] = gold_label(row)
        return model
    options: dict[str, Any] = {"device": _device(config), "dtype": spec.dtype, "batch_size": spec.batch_size,
                               "seed": PREREG.values.seeds["torch"]}
    revision = pinned_revision(config, "RES")
    if revision:
        options["revision"] = revision
    return models.load_model(name, **options)


@pytest.fixture(scope="session")
def res_run(request: pytest.FixtureRequest):
    return benchmark_run(request.config, HERE)


@pytest.fixture(scope="session")
def fixture_set_name(request: pytest.FixtureRequest) -> str:
    return _fixture_set(request.config)


@pytest.fixture(scope="session")
def fixture_sets(res_run, fixture_set_name: str) -> dict[str, list[dict[str, Any]]]:
    sets = build_res_fixtures(fixture_set_name)
    res_run.once("fixtures.json", lambda: {
        "variant": fixture_set_name,
        "sha256": res_fixture_hash(sets),
        "heuristic_audit": heuristic_audit(sets),
        "sets": sets,
    })
    return sets


@pytest.fixture(scope="session")
def records(request: pytest.FixtureRequest, res_run, fixture_sets) -> list[ResRecord]:
    """Measure every fixture item once per run (one xdist worker measures; the others wait and read)."""
    config = request.config
    spec = PREREG.values.measurement
    settings = models.GenerationSettings(max_new_tokens=spec.max_new_tokens)
    items = [(row, index) for condition in CONDITIONS for index, row in enumerate(fixture_sets[condition])]
    with res_run.lock("measure"):
        with res_run.ledger("records.jsonl", ResRecord, key="item_id") as ledger:
            todo = [(row, i) for row, i in items if f"{row['condition']}:{i:02d}" not in ledger]
            if todo:
                model = load_res_model(config, fixture_sets)
                try:
                    check_label_tokens(model, spec.labels)
                    described = model.describe().as_dict()
                    previous = res_run.load_provenance()
                    if previous is not None and previous.model.get("revision") != described["revision"]:
                        raise models.ModelError(
                            f"run {res_run.run_id} was started with {previous.model.get('id')} @ "
                            f"{previous.model.get('revision')}; resume it with the same model"
                        )
                    res_run.record_provenance(
                        model=described,
                        seeds=PREREG.values.seeds,
                        prereg=PREREG,
                        fixtures={f"res-{request.getfixturevalue('fixture_set_name')}": res_fixture_hash(fixture_sets)},
                        extra={"deviations": deviations(config)},
                    )
                    step = PREREG.values.model.batch_size
                    for start in range(0, len(todo), step):
                        chunk = todo[start : start + step]
                        prompts = [model.render_chat(build_chat(row)) for row, _ in chunk]
                        responses = model.score_and_generate(prompts, list(spec.labels), settings)
                        for (row, index), prompt, response in zip(chunk, prompts, responses):
                            ledger.append(make_record(row, index, prompt, response))
                finally:
                    model.close()
    return read_ledger(res_run.path("records.jsonl"), ResRecord)


@pytest.fixture(scope="session")
def measured(records) -> dict[str, Any]:
    """All metrics, undefined ratios as None."""
    return metrics(records)


@pytest.fixture(scope="session")
def rule_metrics(measured) -> dict[str, float]:
    return finite(measured)


@pytest.fixture(scope="session")
def summary(request: pytest.FixtureRequest, res_run, fixture_sets, records, measured) -> dict[str, Any]:
    return res_run.once("summary.json", lambda: build_summary(
        run=res_run,
        variant=request.getfixturevalue("fixture_set_name"),
        sets=fixture_sets,
        records=records,
        measured=measured,
        deviations=deviations(request.config),
    ))
