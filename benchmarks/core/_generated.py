"""What every protocol's conftest gets from core: options, session fixtures and the generated tests.

A protocol's ``conftest.py`` is::

    from benchmarks.core import install, preregistration_checked

    with preregistration_checked(globals()):
        from .protocol import PROTOCOL

        install(PROTOCOL, globals())

:func:`install` puts into that namespace the protocol's ``pytest_addoption``,
a ``pytest_collect_file`` that collects the protocol's ``prereg.toml`` as a
module of generated tests, and the session fixtures:

=================  ====================================================================
``protocol``       the :class:`~benchmarks.core.protocol.Protocol` instance
``run``            the :class:`~benchmarks.core.run.ProtocolRun` of this session
``units``          every unit of the run
``records``        every unit's record (measured once per run, under the run lock)
``measured``       the protocol's metrics of the records
``summary``        the summary (written once per run)
``result_files``   the summary, result files and figures (name -> path), all written
``rule_metrics``   the finite metrics the rules read (after every result file is written)
=================  ====================================================================

The generated tests, collected from ``prereg.toml`` so that the package holds
no copy of them: one ``test_<classification>[<label>]`` per rule of every
classification the run decides, in preregistered order, and the generic
completeness checks (every unit recorded exactly once, every record carries
this run's identity, the ledger, provenance, fixtures, summary and result
files written, and the protocol's independent ``rescore.py``, run under
``python -S -I`` on the finished run directory, agreeing unit by unit and on
the classification).  A test that uses one of the run fixtures (or is marked
``completeness``) runs the model, and is marked ``cpu`` or ``gpu`` by the
run's device (:mod:`benchmarks.core.modelrun`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator, MutableMapping

import pytest

from . import tuning
from ._canonical import sha256_json
from .errors import PreregbenchError, one_line
from .ledger import read_ledger
from .protocol import Protocol, finite
from .run import FIXTURES_FILE, ProtocolRun
from .session import benchmark_run
from .shard import Shard, parse_shard

#: Folder -> protocol, for every protocol whose conftest has been loaded in this process.
REGISTERED: dict[Path, Protocol] = {}

#: Attribute set on the fixtures that need the run (their tests are model runs).
RUN_FIXTURE = "_preregbench_run_fixture"


@contextlib.contextmanager
def preregistration_checked(namespace: MutableMapping[str, Any]) -> Iterator[None]:
    """Wraps a protocol conftest's import of its protocol: a preregistration the loader refuses (a missing or
    unknown key, a number beyond float range, nesting or rules past the limits, a rule that does not compile)
    ends the session at configure time with one usage line naming the file, the key and the problem (exit
    status 4), instead of a conftest import traceback::

        with preregistration_checked(globals()):
            from .protocol import PROTOCOL

            install(PROTOCOL, globals())
    """
    try:
        yield
    except PreregbenchError as exc:
        line = one_line(exc, limit=10_000)  # a refused prereg names file, key and problem: keep it whole

        def pytest_configure(config: pytest.Config) -> None:
            raise pytest.UsageError(line)

        namespace["pytest_configure"] = pytest_configure


def install(protocol: Protocol, namespace: MutableMapping[str, Any]) -> Protocol:
    """Give a protocol's conftest module its options, fixtures and the collector of its generated tests."""
    REGISTERED[protocol.folder] = protocol
    namespace.update(_hooks(protocol))
    namespace.update(_fixtures(protocol))
    return protocol


_RUNS = pytest.StashKey[dict]()
_PINNED = pytest.StashKey[dict[str, str]]()


def pinned_revision(config: pytest.Config, protocol: str) -> str | None:
    """The revision a protocol loads: the sha pinned at collection, else ``--revision``, else None."""
    return config.stash.get(_PINNED, {}).get(protocol) or config.getoption("benchmark_revision") or None


def pin_revision(config: pytest.Config, protocol: str, sha: str) -> None:
    config.stash.setdefault(_PINNED, {})[protocol] = sha


def _getoption(config: Any, dest: str, default: Any) -> Any:
    value = config.getoption(dest, default=None)
    return default if value is None else value


def run_of(protocol: Protocol, config: pytest.Config) -> ProtocolRun:
    """The run of ``protocol`` for this pytest session (one per process, cached on the config), with the
    process tuning of :mod:`benchmarks.core.tuning`."""
    cache = config.stash.setdefault(_RUNS, {})
    if protocol.name not in cache:
        options = {o.name: _getoption(config, o.dest(protocol.name), o.default) for o in protocol.options}
        run = ProtocolRun(
            protocol, benchmark_run(config, protocol.folder),
            model=config.getoption("benchmark_model"), device=config.getoption("benchmark_device"),
            scale=config.getoption("benchmark_scale"), revision=pinned_revision(config, protocol.name),
            options=options, api_key_env=_getoption(config, "benchmark_api_key_env", None),
            shard=_shard(config),
        )
        run.config = config
        run.tuning = tuning.for_run(run)
        cache[protocol.name] = run
    return cache[protocol.name]


def _shard(config: pytest.Config) -> Shard | None:
    value = config.getoption("benchmark_shard", default=None)
    return None if value is None else parse_shard(value)  # checked at configure time


def protocol_of(path: Path) -> Protocol | None:
    """The registered protocol whose folder holds ``path``."""
    path = Path(path).resolve()
    for folder in [path, *path.parents]:
        if folder in REGISTERED:
            return REGISTERED[folder]
    return None


# --------------------------------------------------------------------------- hooks


def _hooks(protocol: Protocol) -> dict[str, Callable[..., Any]]:
    def pytest_addoption(parser: pytest.Parser) -> None:
        add_protocol_options(parser, protocol)

    def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if Path(file_path).resolve() == protocol.prereg.path.resolve():
            return GeneratedModule.from_parent(parent, path=Path(file_path), protocol=protocol)
        return None

    return {"pytest_addoption": pytest_addoption, "pytest_collect_file": pytest_collect_file}


def add_protocol_options(parser: pytest.Parser, protocol: Protocol) -> None:
    """Register ``protocol``'s options in the ``preregbench`` group of ``parser``, once per parser."""
    added = parser.__dict__.setdefault("_preregbench_protocols", set())
    if protocol.name in added:
        return
    added.add(protocol.name)
    group = parser.getgroup("preregbench")
    for option in protocol.options:
        names = [option.flag(protocol.name)] + ([option.alias] if option.alias else [])
        kwargs: dict[str, Any] = {"dest": option.dest(protocol.name), "default": [] if option.repeat else None,
                                  "help": f"{protocol.label}: {option.help}"}
        if option.repeat:
            kwargs["action"] = "append"
        elif option.type is not str:
            kwargs["type"] = option.type
        group.addoption(*names, **kwargs)


# --------------------------------------------------------------------------- fixtures


def _run_fixture(func: Callable[..., Any]) -> Any:
    setattr(func, RUN_FIXTURE, True)
    return pytest.fixture(scope="session", name=func.__name__.removeprefix("_"))(func)


def _fixtures(protocol: Protocol) -> dict[str, Any]:
    @pytest.fixture(scope="session", name="protocol")
    def _protocol() -> Protocol:
        return protocol

    @_run_fixture
    def _run(request: pytest.FixtureRequest) -> ProtocolRun:
        return run_of(protocol, request.config)

    @_run_fixture
    def _units(run: ProtocolRun) -> list[Any]:
        return run.units

    @_run_fixture
    def _records(run: ProtocolRun) -> list[Any]:
        return run.measure_all()

    @_run_fixture
    def _measured(run: ProtocolRun, records: list[Any]) -> dict[str, Any]:
        return {} if run.shard is not None else protocol.metrics(run, records)  # a shard decides nothing

    @_run_fixture
    def _summary(run: ProtocolRun, result_files: dict[str, Path]) -> dict[str, Any]:
        return run.read_json(protocol.summary_file)

    @_run_fixture
    def _result_files(run: ProtocolRun, records: list[Any], measured: dict[str, Any]) -> dict[str, Path]:
        return run.write_results(records, measured)

    @_run_fixture
    def _rule_metrics(measured: dict[str, Any], result_files: dict[str, Path]) -> dict[str, float]:
        return finite(measured)

    return {"protocol": _protocol, "run": _run, "units": _units, "records": _records, "measured": _measured,
            "summary": _summary, "result_files": _result_files, "rule_metrics": _rule_metrics}


def is_run_fixture(fixturedef: Any) -> bool:
    return bool(getattr(getattr(fixturedef, "func", None), RUN_FIXTURE, False))


# --------------------------------------------------------------------------- the generated tests


def _rule_test(protocol: Protocol, key: str, breakdown: bool) -> Callable[..., Any]:
    block = (protocol.breakdowns if breakdown else protocol.classifications)[key]

    def test(rule: str, run: ProtocolRun, rule_metrics: dict[str, float], verdict: Any) -> None:
        reason = protocol.undecided(run).get(block.name)
        if reason is not None:  # the run's settings leave it undecided (Protocol.undecided)
            pytest.skip(f"{block.name} is not decided by this run: {reason}")
        verdict.check(block, rule, rule_metrics, undefined_skips=breakdown)

    test.__name__ = f"test_{block.name}"
    test.__doc__ = (f"{'Breakdown' if breakdown else 'Preregistered'} classification {block.name!r} of "
                    f"{protocol.prereg.path.name}, one test per rule in the preregistered order.")
    return pytest.mark.parametrize("rule", block.labels)(test)


def test_every_unit_recorded_once(run: ProtocolRun, units: list[Any], records: list[Any]) -> None:
    """Every unit of the run (of a shard: of the shard) has exactly one record, and every record belongs to one."""
    protocol = run.protocol
    expected = sorted(protocol.unit_key(u) for u in run.shard_units)  # a shard's: its own units
    got = [getattr(r, protocol.record_key) for r in records]
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    assert not missing and not extra and len(got) == len(set(got)), (
        f"{len(got)} records for {len(expected)} units; missing {missing[:5]}, foreign {extra[:5]}")


def test_records_carry_the_run_identity(run: ProtocolRun, records: list[Any]) -> None:
    """Every ledger line names this run's model, revision, device, prereg, fixtures and settings."""
    identities = run.recorded_identities()
    assert len(identities) == len(records)
    provenance = run.load_provenance()
    assert provenance is not None, "no provenance.json"
    revision = provenance.model.get("revision")
    expected = run.identity(revision)
    wrong = [i for i, identity in enumerate(identities, start=1) if identity != expected]
    assert not wrong, f"ledger lines {wrong[:5]} carry another identity than {json.dumps(expected, sort_keys=True)}"


def test_records_file_written(run: ProtocolRun, records: list[Any]) -> None:
    """The ledger reads back whole (no torn tail) and equals the records the rules read."""
    assert read_ledger(run.ledger_path, run.protocol.record_type) == records


def test_provenance_complete(run: ProtocolRun, records: list[Any]) -> None:
    """Provenance names an immutable model revision, the prereg and fixture hashes and every other field."""
    provenance = run.load_provenance()
    assert provenance is not None, "no provenance.json"
    assert provenance.missing() == []
    assert provenance.prereg_sha256 == run.protocol.prereg.sha256
    assert dict(provenance.fixtures_sha256) == run.fixture_hashes
    assert dict(provenance.identity) == run.identity(provenance.model.get("revision"))


def test_fixtures_file_written(run: ProtocolRun, units: list[Any]) -> None:
    """``fixtures.json`` holds every fixture set the run used, with its sha256."""
    stored = run.read_json(FIXTURES_FILE)
    assert sorted(stored["sets"]) == sorted(run.fixture_sets)
    for name, entry in stored["sets"].items():
        assert entry["sha256"] == sha256_json(entry["records"]) == run.fixture_hashes[name], name
        assert entry["records"] == json.loads(json.dumps(run.fixture_sets[name])), name


def test_summary_file_written(run: ProtocolRun, summary: dict[str, Any], records: list[Any]) -> None:
    """The summary is written, decides every classification and counts every record."""
    assert summary["status"] == ("shard" if run.shard is not None else "complete"), summary["classification_problems"]
    assert summary["records"]["count"] == len(records)
    assert summary["prereg_sha256"] == run.protocol.prereg.sha256


def test_result_files_written(run: ProtocolRun, result_files: dict[str, Path]) -> None:
    """Every result file and figure the protocol declares exists and is not empty."""
    empty = [name for name, path in result_files.items() if not path.is_file() or path.stat().st_size == 0]
    assert not empty, f"missing or empty: {empty}"


RESCORER_FILE = "rescore.py"
#: Seconds a rescorer may take on a finished run directory.
RESCORER_TIMEOUT = 600


def rescorer_outcome(script: Path, run_dir: Path, prereg: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Run a protocol's stdlib rescorer under ``python -S -I`` on ``run_dir``: its JSON output, or the one-line
    reason it gave none (missing script, exit status 2 or another, output that is not the contract's object)."""
    if not script.is_file():
        return None, f"{script} is missing; every protocol ships a stdlib rescorer beside its prereg.toml"
    try:
        done = subprocess.run([sys.executable, "-S", "-I", str(script), str(run_dir), "--prereg", str(prereg)],
                              capture_output=True, text=True, cwd="/", timeout=RESCORER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return None, f"{script.name} did not finish within {RESCORER_TIMEOUT} s"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode not in (0, 1):
        return None, f"{script.name} exit status {done.returncode}: {lines[-1] if lines else 'no message'}"
    try:
        out = json.loads(done.stdout)
    except ValueError:
        return None, f"{script.name} printed no JSON object on stdout ({done.stdout[:80]!r})"
    if not isinstance(out, dict) or not isinstance(out.get("disagreements"), list) or "classification" not in out:
        return None, f"{script.name} printed no object with 'classification' and a 'disagreements' list"
    if (done.returncode == 0) != (not out["disagreements"]):
        return None, f"{script.name} exit status {done.returncode} contradicts its {len(out['disagreements'])} disagreements"
    return out, None


def describe_disagreement(first: Any, count: int) -> str:
    """``unit 'item-03' field 'parsed': recorded 'A', recomputed None (1 of 2 disagreements)``."""
    if not isinstance(first, dict):
        return f"{first!r} ({count} disagreements)"
    return (f"unit {first.get('unit')!r} field {first.get('field')!r}: recorded {first.get('recorded')!r}, "
            f"recomputed {first.get('recomputed')!r} (1 of {count} disagreements)")


def primary_classification(protocol: Protocol) -> str:
    """The name of the protocol's first preregistered classification (the one its rescorer derives)."""
    return next(iter(protocol.classifications.values())).name


def test_rescorer_agrees(run: ProtocolRun, records: list[Any], summary: dict[str, Any]) -> None:
    """The protocol's independent rescorer, run under ``python -S -I`` on the finished run directory, finds no
    per-unit disagreement and derives the recorded classification."""
    protocol = run.protocol
    out, problem = rescorer_outcome(protocol.folder / RESCORER_FILE, run.location, protocol.prereg.path)
    assert out is not None, problem
    assert not out["disagreements"], f"{RESCORER_FILE} disagrees: " + describe_disagreement(
        out["disagreements"][0], len(out["disagreements"]))
    recorded = summary["classifications"]
    derived = out.get("classifications")
    if isinstance(derived, dict) and derived and set(derived) <= set(recorded):
        pairs = [(name, derived[name]) for name in recorded if name in derived]  # every classification it derives
    else:
        pairs = [(primary_classification(protocol), out["classification"])]
    for name, label in pairs:
        assert label == recorded.get(name), (
            f"{RESCORER_FILE} derives {name} = {label!r}, the run recorded {recorded.get(name)!r}")


COMPLETENESS_TESTS = (
    test_every_unit_recorded_once,
    test_records_carry_the_run_identity,
    test_records_file_written,
    test_provenance_complete,
    test_fixtures_file_written,
    test_summary_file_written,
    test_result_files_written,
    test_rescorer_agrees,
)


#: The generated checks a shard session runs (on the shard's units); every other model-run test skips there.
SHARD_CHECKS = frozenset(t.__name__ for t in COMPLETENESS_TESTS) - {test_rescorer_agrees.__name__}


class GeneratedModule(pytest.Module):
    """``prereg.toml`` collected as a module: the rule tests and the generic completeness tests."""

    def __init__(self, *, protocol: Protocol, **kwargs: Any):
        self.protocol = protocol
        super().__init__(**kwargs)

    def _getobj(self) -> types.ModuleType:
        protocol = self.protocol
        module = types.ModuleType(f"preregbench_generated_{protocol.name}", f"Generated tests of {protocol.name}")
        module.__file__ = str(self.path)
        for key in protocol.classifications:
            func = _rule_test(protocol, key, breakdown=False)
            setattr(module, func.__name__, func)
        for key in protocol.breakdowns:
            func = _rule_test(protocol, key, breakdown=True)
            setattr(module, func.__name__, func)
        for test in COMPLETENESS_TESTS:
            setattr(module, test.__name__, pytest.mark.completeness(_copy(test)))
        return module


def _copy(func: Callable[..., Any]) -> Callable[..., Any]:
    """A fresh function object per protocol (marks attach to the function)."""
    clone = types.FunctionType(func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
    clone.__doc__ = func.__doc__
    clone.__module__ = func.__module__
    return clone


__all__ = ["REGISTERED", "install", "is_run_fixture", "protocol_of"]
