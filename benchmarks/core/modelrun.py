"""Model runs at collection: cpu/gpu marking, usage checks, hub pinning and resume checks, before any test runs.

Registered by :mod:`benchmarks.core.plugin`.  For every protocol whose
conftest is loaded (:func:`benchmarks.core._generated.install`):

* a test that uses the run (one of its run fixtures, or marked
  ``completeness``, or generated from ``prereg.toml``) is a *model run*,
  marked ``gpu`` when the run's device is CUDA and ``cpu`` otherwise, so the
  default ``pytest`` run deselects it;
* when model-run tests are selected, the session stops before any test with
  one line (exit status 4) on: a bad protocol option, ``--device cuda``
  without a CUDA GPU, an unknown model name (with close matches), a model
  that lacks a capability the protocol needs (``Protocol.needs``: RES's label
  logits from a served model, P-Zombie's activation taps), a bad
  ``--api-key-env``, a hub model whose revision cannot be resolved offline,
  and a ``--run-id`` whose records or provenance belong to another model,
  revision, fixture set or settings; in that order, so a missing GPU is
  reported before any hub look-up;
* when a protocol's model-run tests were all deselected, the terminal summary
  says so ("no protocol run"); when the protocol was named on the command
  line and ``-m`` selected the other device's marker, that is a usage error.

Tests marked ``gpu`` outside a protocol run skip without CUDA, naming why.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import models

from ._generated import SHARD_CHECKS, GeneratedModule, is_run_fixture, pin_revision, pinned_revision, protocol_of, run_of
from .protocol import Protocol, UsageProblem
from .run import ProtocolRun

_STATE = pytest.StashKey["_Collected"]()
#: Set on the tests a shard session skips (read by the plugin's reporter: they are not counted in the shard).
SHARD_SKIP = "benchmark.shard_skip"
#: A session that decides a run whose ledger is complete (``preregbench merge``): the recorded revision, used
#: instead of resolving the model here (the model need not be present where shards are merged).
RECORDED_REVISION = pytest.StashKey[str]()


@dataclass
class _Collected:
    items: dict[str, list[pytest.Item]] = field(default_factory=dict)  # protocol -> its model-run items
    protocols: dict[str, Protocol] = field(default_factory=dict)
    idle: list[str] = field(default_factory=list)  # protocols whose model-run tests were all deselected


def cuda_missing() -> str | None:
    """Why CUDA cannot be used here, or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (install the 'models' extra)"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False on this machine"
    return None


def is_model_run(item: pytest.Item) -> bool:
    if isinstance(item.parent, GeneratedModule) or item.get_closest_marker("completeness") is not None:
        return True
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) or {}
    return any(is_run_fixture(d) for chain in defs.values() for d in chain)


def device_of(protocol: Protocol, config: pytest.Config) -> str:
    return config.getoption("benchmark_device") or protocol.default_device()


def hub_revision(name: str, requested: str | None, preregistered: Any) -> str | None:
    """The commit sha of a hub model (``--revision``, else the preregistered revision for the preregistered
    model, else ``main``), or None for names that carry their own revision (registry, served, local).

    Raises ``models.ModelUnavailableError`` when it cannot be resolved here.
    """
    if models.model_kind(name) is not None or name.startswith("openai:") or Path(name).is_dir() or "/" not in name:
        return None
    revision = requested or (preregistered.revision if name == preregistered.id and preregistered.revision else "main")
    sha, _ = models.resolve_revision(name, revision)
    return sha


#: Node id suffix of the collection error an xdist worker reports for a usage problem.
USAGE_NODE = "preregbench-usage"


class _Stopped(Exception):
    """A usage problem was reported; collect nothing more."""


def _stop(protocol: Protocol, problem: str, session: pytest.Session | None = None) -> None:
    """End the session before any test with one line and exit status 4.

    In an xdist worker (where ``pytest.exit`` would crash the worker) the line
    becomes a collection error of the protocol's folder, the worker keeps no
    test, and the controller turns the exit status into 4.
    """
    message = f"{protocol.label} cannot run: {problem}"
    if session is None or not hasattr(session.config, "workerinput"):
        pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)
    from _pytest.reports import CollectReport

    folder = protocol.folder.relative_to(session.config.rootpath) if protocol.folder.is_relative_to(
        session.config.rootpath) else protocol.folder
    report = CollectReport(f"{folder.as_posix()}::{USAGE_NODE}", "failed", message, [])
    session.ihook.pytest_collectreport(report=report)
    session.items[:] = []
    raise _Stopped(message)


def _named_on_command_line(protocol: Protocol, config: pytest.Config) -> bool:
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        try:
            path.resolve().relative_to(protocol.folder)
            return True
        except ValueError:
            continue
    return False


def _selects(config: pytest.Config, marker: str) -> bool:
    """Whether the ``-m`` expression selects a test carrying only ``marker``."""
    expr = config.option.markexpr
    if not expr:
        return True
    from _pytest.mark.expression import Expression

    return Expression.compile(expr).evaluate(lambda name, **kwargs: name == marker)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every protocol's model-run tests with the device marker (before ``-m`` deselects)."""
    state = config.stash.setdefault(_STATE, _Collected())
    for item in items:
        protocol = protocol_of(Path(item.path))
        if protocol is None or not is_model_run(item):
            continue
        device = device_of(protocol, config)
        item.add_marker(pytest.mark.gpu if device.startswith("cuda") else pytest.mark.cpu)
        state.items.setdefault(protocol.name, []).append(item)
        state.protocols[protocol.name] = protocol
        shard = config.getoption("benchmark_shard", default=None)
        if shard is not None:
            _skip_in_shard(item, shard)


def _skip_in_shard(item: pytest.Item, shard: str) -> None:
    """A shard session runs core's checks of what it measured (every unit of the shard recorded once with the
    shard's identity, ledger, provenance, fixtures, summary); every rule test and every other check reads the
    whole run, so it skips, naming why, and is not counted in the shard's completeness."""
    name = getattr(item, "originalname", None) or item.name
    if isinstance(item.parent, GeneratedModule) and name in SHARD_CHECKS:
        return
    is_rule = "verdict" in getattr(item, "fixturenames", ())
    reason = f"shard {shard}: {'decided' if is_rule else 'checked'} after merge (preregbench merge)"
    item.add_marker(pytest.mark.skip(reason=reason))
    item.user_properties.append((SHARD_SKIP, True))


def pytest_collection_finish(session: pytest.Session) -> None:
    try:
        _check_selected(session)
    except _Stopped:
        return


def _check_selected(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    selected = {id(item) for item in session.items}
    for name, items in sorted(state.items.items()):
        protocol = state.protocols[name]
        if not any(id(item) in selected for item in items):
            device = device_of(protocol, config)
            mine = "gpu" if device.startswith("cuda") else "cpu"
            other = "cpu" if mine == "gpu" else "gpu"
            if _named_on_command_line(protocol, config) and _selects(config, other) and not _selects(config, mine):
                _stop(protocol, f"-m {config.option.markexpr!r} selects tests marked {other}, but the run's device is "
                                f"{device}, so its model-run tests are marked {mine}; use -m {mine}, or pass "
                                f"--device {'cuda' if other == 'gpu' else 'cpu'}", session)
            state.idle.append(name)
            continue
        check_run(protocol, config, session)
    if state.idle and hasattr(config, "workerinput"):  # the controller of an xdist run sees warnings, not this state
        import warnings

        warnings.warn(PreregbenchNote(_idle_line(state, config)), stacklevel=1)


class PreregbenchNote(pytest.PytestWarning):
    """Something a reader of the session should know (e.g. that no protocol ran)."""


def _idle_line(state: _Collected, config: pytest.Config) -> str:
    names = ", ".join(state.protocols[n].label for n in state.idle)
    expr = config.option.markexpr or ""
    return f"no protocol run ({names}): their model-run tests were deselected by -m {expr!r}; add -m cpu or -m gpu"


_ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


def api_key_problem(name: str | None, kind: str) -> str | None:
    """What is wrong with ``--api-key-env NAME`` for a model of this kind (None when nothing is).

    Only the variable's name is ever printed or recorded, never its value.
    """
    if name is None:
        return None
    if not _ENV_NAME.match(name):
        return (f"--api-key-env {name!r} is not an environment variable name; give a name such as "
                "OPENAI_API_KEY (letters, digits, underscores)")
    if kind != "openai-http":
        return f"--api-key-env applies to served models (openai:MODEL@BASE_URL) only; leave it out for a {kind} model"
    if not os.environ.get(name):
        return f"--api-key-env {name}: the environment variable {name} is not set or empty; export the key in it"
    return None


def check_run(protocol: Protocol, config: pytest.Config, session: pytest.Session | None = None) -> ProtocolRun:
    """Everything that can be known before the first test: one line and exit status 4 when it fails."""
    try:
        run = run_of(protocol, config)
        if run.shard is not None:
            run.shard_units  # a shard that holds no unit, or a protocol whose batching cannot be split, stops here
    except (UsageProblem, pytest.UsageError) as exc:
        _stop(protocol, str(exc), session)
    # A run whose every unit is recorded (a merge decides it): no model is loaded or looked up.
    recorded = config.stash.get(RECORDED_REVISION, None)
    sha = recorded if recorded is not None else _check_model(protocol, run, config, session)
    if sha is not None:
        pin_revision(config, protocol.name, sha)
        run.revision = sha
    try:
        run.check_resume()
    except UsageProblem as exc:
        _stop(protocol, str(exc), session)
    return run


def _check_model(protocol: Protocol, run: ProtocolRun, config: pytest.Config,
                 session: pytest.Session | None) -> str | None:
    """The device, model name, capabilities and key of a run that will load its model (one line and exit status 4
    when one fails), and the hub commit it pins (None for names that carry their own revision)."""
    if run.device.startswith("cuda"):
        missing = cuda_missing()
        if missing:
            _stop(protocol, f"--device {run.device} needs a CUDA GPU and {missing}; run it on a machine with an "
                            "NVIDIA GPU, or pass --device cpu -m cpu", session)
    protocol.recognize_model(run.model)
    try:
        kind = models.check_model_name(run.model)
    except models.UnknownModelError as exc:
        _stop(protocol, str(exc), session)
    # From the registry entry or the backend's class: no weights are read, no server is contacted.
    problem = protocol.capability_problem(run.model, models.model_capabilities(run.model))
    if problem:
        _stop(protocol, problem, session)
    problem = api_key_problem(run.api_key_env, kind)
    if problem:
        _stop(protocol, problem, session)
    try:
        return hub_revision(run.model, config.getoption("benchmark_revision"), run.preregistered)
    except models.ModelUnavailableError as exc:
        _stop(protocol, str(exc), session)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        reason = cuda_missing()
        if reason:
            raise pytest.skip.Exception(f"gpu test needs a CUDA device: {reason}", _use_item_location=True)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Controller of an xdist run: a worker's usage problem makes the exit status 4."""
    if report.failed and report.nodeid.endswith(f"::{USAGE_NODE}"):
        _USAGE_REPORTED.add(report.nodeid)


_USAGE_REPORTED: set[str] = set()


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Any:
    usage = bool(_USAGE_REPORTED) and not hasattr(session.config, "workerinput")
    if usage:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
    result = yield
    if usage:  # after every other plugin (some fold their own status into it)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.idle:
        terminalreporter.write_line(_idle_line(state, config))


__all__ = ["check_run", "cuda_missing", "hub_revision", "is_model_run", "pinned_revision"]
