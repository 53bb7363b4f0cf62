"""Ladder probe run: one rung, one generator state, one tuning seed; the probe runs once per run under a lock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import models
from benchmarks.core import atomic_write_json
from benchmarks.core.plugin import benchmark_run, mark_model_runs

from .analysis import probe_analysis
from .gate import gate_metrics, judge
from .instrument import gate_row, retune_violations
from .probe import ProbeSettings, run_probe
from .protocol import (
    CLAUSES,
    GATE,
    HERE,
    INSTRUMENT,
    PREREG,
    RETUNE_RULE,
    LadderError,
    check_probe_seed,
    finite,
)
from .records import Probe, find_probes, read_probe, read_probes

#: Test modules whose tests run the model (marked cpu or gpu by --device).
MODEL_RUN_MODULES = ("test_rules.py", "test_completeness.py", "test_analysis.py")
_SPEC = PREREG.values.probe


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("preregbench")
    group.addoption("--ladder-state", dest="ladder_state", default=None,
                    help=f"ladder generator state to probe (default: the preregistered {_SPEC.state})")
    group.addoption("--ladder-seed", dest="ladder_seed", default=None, type=int,
                    help=f"ladder tuning seed >= {_SPEC.min_tuning_seed} (default: {_SPEC.seed}); "
                         f"campaign seeds {list(_SPEC.campaign_seeds)} are refused")
    group.addoption("--ladder-units-per-tier", dest="ladder_units_per_tier", default=None, type=int,
                    help=f"ladder episodes per tier (default: the preregistered {_SPEC.units_per_tier})")
    group.addoption("--ladder-max-tokens", dest="ladder_max_tokens", default=None, type=int,
                    help=f"ladder generation bound (default: the preregistered {_SPEC.max_tokens})")
    group.addoption("--ladder-timeout", dest="ladder_timeout", default=None, type=float,
                    help=f"ladder per-unit timeout in seconds for served rungs (default: {_SPEC.timeout_s:g})")
    group.addoption("--ladder-batch-size", dest="ladder_batch_size", default=1, type=int,
                    help="ladder units sent to the backend at once (default 1: per-unit latency)")
    group.addoption("--ladder-retune-of", dest="ladder_retune_of", default=None,
                    help="ladder: the probe directory name this probe retunes (recorded in its metadata)")
    group.addoption("--ladder-dial", dest="ladder_dials", action="append", default=[],
                    help="ladder retune: NAME=JSON_VALUE for a registered dial (repeatable)")
    group.addoption("--ladder-round-dir", dest="ladder_round_dir", default=None,
                    help="ladder: a folder of probe directories to judge together (instrument verdict, retune rule); "
                         "collects test_instrument.py")
    group.addoption("--ladder-fleet", dest="ladder_fleet", action="append", default=[],
                    help="ladder: LABEL=MODEL for each fleet rung (R0 = the anchor) in --ladder-round-dir "
                         "(default: the simulated fleet when every probe is one of its workers)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The cross-probe rules run only when a round directory is given."""
    if collection_path.name == "test_instrument.py" and collection_path.parent == HERE:
        return True if not config.getoption("ladder_round_dir", default=None) else None
    return None


def _is_model_run(item: pytest.Item) -> bool:
    return Path(item.path).parent == HERE and Path(item.path).name in MODEL_RUN_MODULES


def _device(config: pytest.Config) -> str:
    return config.getoption("benchmark_device") or PREREG.values.model.device


def settings_from(config: pytest.Config) -> ProbeSettings:
    """The probe settings the options ask for; a bad value is a usage error naming the valid ones."""
    from fixtures.ladder import STATES, retune

    name = config.getoption("ladder_state", default=None) or _SPEC.state
    if name not in STATES:
        raise pytest.UsageError(f"--ladder-state {name!r} is not valid; choose one of: {', '.join(STATES)}")
    state = STATES[name]
    dials: dict[str, Any] = {}
    for text in config.getoption("ladder_dials", default=[]) or []:
        key, sep, value = text.partition("=")
        try:
            dials[key] = json.loads(value) if sep else None
        except json.JSONDecodeError:
            dials[key] = None
        if not sep or dials[key] is None:
            raise pytest.UsageError(f"--ladder-dial {text!r}: write NAME=JSON_VALUE, e.g. distractors=6")
    retune_of = config.getoption("ladder_retune_of", default=None)
    if dials:
        if retune_of is None:
            raise pytest.UsageError("--ladder-dial moves dials only in a retune; name the probe it retunes "
                                    "with --ladder-retune-of")
        try:
            state = retune(state, f"{state.name}-retune", **dials)
        except Exception as exc:  # the generator names the dial that may not move
            raise pytest.UsageError(f"--ladder-dial: {exc}") from exc
    model = config.getoption("benchmark_model") or PREREG.values.model.id
    seed = config.getoption("ladder_seed", default=None)
    seed = _SPEC.seed if seed is None else seed
    units = config.getoption("ladder_units_per_tier", default=None) or _SPEC.units_per_tier
    max_tokens = config.getoption("ladder_max_tokens", default=None) or _SPEC.max_tokens
    timeout = config.getoption("ladder_timeout", default=None) or _SPEC.timeout_s
    deviations = []
    if model != PREREG.values.model.id:
        deviations.append(f"rung {model!r} instead of the preregistered {PREREG.values.model.id!r}")
    if name != _SPEC.state or seed != _SPEC.seed:
        deviations.append(f"state {name} seed {seed} instead of {_SPEC.state} seed {_SPEC.seed}")
    if units != _SPEC.units_per_tier:
        deviations.append(f"{units} units per tier instead of {_SPEC.units_per_tier}")
    if max_tokens != _SPEC.max_tokens:
        deviations.append(f"max_tokens {max_tokens} instead of {_SPEC.max_tokens}")
    if timeout != _SPEC.timeout_s:
        deviations.append(f"timeout {timeout:g} s instead of {_SPEC.timeout_s:g} s")
    try:
        check_probe_seed(seed)
        return ProbeSettings(rung=model, state=state, seed=seed, units_per_tier=units, max_tokens=max_tokens,
                             timeout_s=timeout, batch_size=config.getoption("ladder_batch_size", default=1),
                             retune_of=retune_of, deviations=tuple(deviations))
    except LadderError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if Path(metafunc.definition.path).parent != HERE:
        return
    if "rule" in metafunc.fixturenames:
        metafunc.parametrize("rule", GATE.labels)
    if "instrument_rule" in metafunc.fixturenames:
        metafunc.parametrize("instrument_rule", INSTRUMENT.labels)
    if "retune_rule_label" in metafunc.fixturenames:
        metafunc.parametrize("retune_rule_label", RETUNE_RULE.labels)
    if "clause_rule" in metafunc.fixturenames:
        metafunc.parametrize("clause_rule", [f"{c}:{label}" for c in sorted(CLAUSES) for label in CLAUSES[c].labels])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_model_runs(items, _is_model_run, _device(config))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse bad probe options (a campaign seed, an unknown state) before any test runs."""
    if not any(_is_model_run(item) for item in session.items):
        return
    try:
        settings_from(session.config)
    except pytest.UsageError as exc:
        pytest.exit(f"ladder probe cannot run: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def ladder_run(request: pytest.FixtureRequest):
    return benchmark_run(request.config, HERE)


@pytest.fixture(scope="session")
def probe_settings(request: pytest.FixtureRequest) -> ProbeSettings:
    return settings_from(request.config)


@pytest.fixture(scope="session")
def probe(request: pytest.FixtureRequest, ladder_run, probe_settings: ProbeSettings) -> Probe:
    """Run the probe once per run (one xdist worker runs it; the others wait and read the ledger)."""
    folder = ladder_run.path(probe_settings.folder_name)

    def provenance(model: models.LanguageModel) -> None:
        ladder_run.record_provenance(
            model=model.describe().as_dict(),
            seeds={"probe": probe_settings.seed},
            prereg=PREREG,
            fixtures={f"ladder-{probe_settings.state.name}": probe_settings.state.state_hash},
            extra={"deviations": list(probe_settings.deviations), "probe": folder.name},
        )

    with ladder_run.lock("probe"):
        run_probe(folder, probe_settings, _device(request.config), PREREG.sha256, on_model=provenance)
    return read_probe(folder)


@pytest.fixture(scope="session")
def measured(probe: Probe) -> dict[str, Any]:
    return gate_metrics(probe.units, probe.metadata.generator_variant)


@pytest.fixture(scope="session")
def rule_metrics(measured) -> dict[str, float]:
    return finite(measured)


@pytest.fixture(scope="session")
def analysis(ladder_run, probe: Probe, probe_settings: ProbeSettings, measured) -> dict[str, Any]:
    """The probe's gate row and analysis, written once to ``<probe>/analysis.json``."""
    design = {tier: probe_settings.state.approve_share for tier in range(1, 6)}

    def build() -> dict[str, Any]:
        result = judge(measured)
        report = {
            "probe": probe.folder.name,
            "gate": gate_row(probe).as_dict(),
            "metrics": measured,
            "gate_label": result.label,
            "clauses": result.clauses,
            "analysis": probe_analysis(probe.units, design),
        }
        atomic_write_json(probe.folder / "analysis.json", report)
        return report

    return ladder_run.once("analysis.json", build)


# --------------------------------------------------------------------------- a round directory (test_instrument.py)


def _fleet(config: pytest.Config, probes: list[Probe]) -> dict[str, str]:
    from .report import default_fleet

    given = config.getoption("ladder_fleet", default=[]) or []
    fleet: dict[str, str] = {}
    for item in given:
        label, sep, model = item.partition("=")
        if not sep or not label or not model:
            raise pytest.UsageError(f"--ladder-fleet {item!r}: write LABEL=MODEL, e.g. R0=openai:qwen3.5@http://...")
        fleet[label] = model
    if fleet:
        return fleet
    try:
        return default_fleet(probes)
    except LadderError as exc:
        raise pytest.UsageError(f"--ladder-fleet: {exc}") from exc


@pytest.fixture(scope="session")
def round_probes(request: pytest.FixtureRequest) -> list[Probe]:
    root = Path(request.config.getoption("ladder_round_dir"))
    folders = find_probes(root)
    if not folders:
        raise pytest.UsageError(f"--ladder-round-dir={root}: no probe directory (with metadata.json) under it")
    try:
        return read_probes(folders)
    except LadderError as exc:
        raise pytest.UsageError(f"--ladder-round-dir={root}: {exc}") from exc


@pytest.fixture(scope="session")
def round_report(request: pytest.FixtureRequest, ladder_run, round_probes) -> dict[str, Any]:
    """Gate table, instrument verdict (v2), feasibility and retune check, written once to ``instrument.json``."""
    from fixtures.ladder import REGISTERED_DIALS

    from .report import fleet_report

    fleet = _fleet(request.config, round_probes)

    def build() -> dict[str, Any]:
        report = fleet_report(round_probes, fleet)
        report["fleet"] = fleet
        report["probes"] = [str(p.folder) for p in round_probes]
        report["retune_violations"] = retune_violations(round_probes, REGISTERED_DIALS)
        return report

    return ladder_run.once("instrument.json", build)


@pytest.fixture(scope="session")
def instrument_metrics(round_report) -> dict[str, float]:
    if "instrument" not in round_report:
        pytest.skip("the instrument verdict is a v2 verdict; the probes under --ladder-round-dir are v1")
    return {k: float(v) for k, v in round_report["instrument"]["metrics"].items()}


@pytest.fixture(scope="session")
def retune_metrics(round_report) -> dict[str, float]:
    return {"retune_violations": float(len(round_report["retune_violations"]))}
