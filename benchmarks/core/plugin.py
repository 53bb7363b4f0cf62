"""The suite's pytest plugin: options, markers, run directories and the verdict.

Loaded by the root ``conftest.py``.  What it adds to a pytest session:

* the ``benchmark`` option group (``--model``, ``--revision``, ``--device``,
  ``--scale``, ``--results-dir``, ``--run-id``) and the markers ``cpu``,
  ``gpu``, ``completeness``;
* one run id per session, shared with xdist workers, and a run directory
  ``<results-dir>/<protocol>/<run-id>/`` per protocol that runs;
* the ``verdict`` fixture, through which a preregistered rule test passes,
  fails with a one-line message, or is skipped as preempted;
* the run's classification, completeness status and provenance in the
  pytest-json-report file (key ``benchmark``), in ``report.json`` inside each
  run directory, and in the terminal summary; after ``report.json``, the run's
  ``manifest.json`` (size and sha256 of every file it wrote,
  :mod:`benchmarks.core.manifest`);
* the Hypothesis profiles (``HYPOTHESIS_PROFILE=ci`` selects the CI one) and
  syrupy snapshots stored under the top-level ``snapshots/`` folder.

Faults: a bad ``--run-id`` or ``--results-dir`` is one usage line (exit
status 4) before any work; a file of the run that cannot be written during
a test (disk full, file-size limit, permission) ends the session after that
test with one line naming the file and the errno, the run reported
``broken``; a damaged ``provenance.json`` at the session end is a problem of
the run, named in the report, never a traceback.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import pytest

from . import modelrun, registry, tuning
from .modelrun import SHARD_SKIP
from ._canonical import FileReadError, FileWriteError, atomic_write_json, errno_name
from ._generated import add_protocol_options
from .errors import one_line
from .ledger import LedgerError
from .manifest import MANIFEST_FILE, ManifestError, write_manifest
from .provenance import ProvenanceError, read_provenance, utc_now
from .report import RunNotFinished, write_index, write_reports
from .rules import Classification, Outcome, RuleError
from .rundir import PROVENANCE_FILE, REPORT_FILE, RunDirError, check_run_dir, new_run_id, protocol_dir_of
from .scales import SCALE_ALL, ScaleGroupError, python_command, run_scales, summary_lines, without_owned
from .session import (RUN_ID_PATTERN, SCALE_GROUP_FORM, SCALE_GROUP_RESULT, STATE, SessionState, benchmark_run,
                      check_results_dir, check_run_id)
from .shard import ShardError, parse_shard

DEVICES = ("cpu", "cuda")
#: Errors of a write that the system refused: they end a run with one line, never a traceback.
WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO})
_FAULT = "benchmark.fault"
_KIND = "benchmark.kind"
_PROTOCOL = "benchmark.protocol"
_VERDICT = "benchmark.verdict"

_hypothesis_loaded = False


def _register_hypothesis_profiles() -> None:
    global _hypothesis_loaded
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # pragma: no cover - hypothesis is a runtime dependency
        return
    if not _hypothesis_loaded:
        settings.register_profile(
            "ci",
            derandomize=True,
            database=None,
            print_blob=True,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        settings.register_profile("dev", deadline=None)
        # A plain run (no HYPOTHESIS_PROFILE): Hypothesis's defaults without its 200 ms deadline, which a loaded
        # machine misses on a test's first, cold call (imports, caches) and which measures nothing the suite checks.
        # On a machine Hypothesis takes for CI (``CI`` set) its defaults are its CI ones, derandomized.
        settings.register_profile("suite", deadline=None)
        _hypothesis_loaded = True
    profile = os.environ.get("HYPOTHESIS_PROFILE")
    if not profile:
        settings.load_profile("suite")
    if profile:
        try:
            settings.load_profile(profile)
        except Exception as exc:
            raise pytest.UsageError(
                f"HYPOTHESIS_PROFILE={profile!r} is not a registered Hypothesis profile; use 'ci' or 'dev'"
            ) from exc


# --------------------------------------------------------------------------- options and configuration


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("preregbench", "preregbench")
    group.addoption("--model", dest="benchmark_model", default=None,
                    help="model to run (a registry name, a hub id or a local path); default: the protocol's preregistered model")
    group.addoption("--revision", dest="benchmark_revision", default=None,
                    help="model revision to resolve to an immutable sha; default: the preregistered one")
    group.addoption("--device", dest="benchmark_device", default=None,
                    help=f"device for model runs, one of {', '.join(DEVICES)}; default: the protocol's")
    group.addoption("--scale", dest="benchmark_scale", default=None,
                    help="model scale for protocols that preregister several (e.g. P-Zombie's 270M, 1B)")
    group.addoption("--results-dir", dest="benchmark_results_dir", default="results",
                    help="folder that receives <protocol>/<run-id>/ (relative paths are taken from the rootdir)")
    group.addoption("--run-id", dest="benchmark_run_id", default=None,
                    help="reuse a run id to resume a killed run in its directory; default: a new id")
    group.addoption("--shard", dest="benchmark_shard", default=None, metavar="K/N",
                    help="measure only shard K of N of the run's units (a run directory of its own; its rules are "
                         "decided once the shards are joined with 'preregbench merge')")
    group.addoption("--api-key-env", dest="benchmark_api_key_env", default=None, metavar="NAME",
                    help="environment variable holding a served model's API key (openai:MODEL@BASE_URL); "
                         "only the name is printed or recorded")
    if _help_requested():
        _add_every_protocol_option(parser)


def _help_requested(argv: list[str] | None = None) -> bool:
    """Whether this process was started as ``pytest --help`` (the only case that lists every protocol's options)."""
    args = sys.argv[1:] if argv is None else argv
    return any(a in ("-h", "--help") for a in args)


def _add_every_protocol_option(parser: pytest.Parser) -> None:
    """Register the options of every protocol of the suite, so that ``pytest --help`` lists them without a path.

    Ordinary runs register a protocol's options from its conftest only, and so
    import only the protocols they run; a protocol whose options are already in
    ``parser`` is not registered twice.
    """
    for name in registry.names():
        protocol = registry.find(name)  # one that cannot be loaded here is reported when it is run
        if protocol is not None:
            add_protocol_options(parser, protocol)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "cpu: runs a model on the CPU (excluded from the default run; select with -m cpu)",
        "gpu: runs a model on a CUDA device (excluded from the default run; select with -m gpu)",
        "slow: a self-check on a real bundled model that takes minutes (excluded from the default run; .ci/run runs them with -m slow)",
        "completeness: technical-completeness check of a protocol run (separate from the scientific rules)",
    ):
        declared = {m.split(":", 1)[0].split("(", 1)[0].strip() for m in config.getini("markers")}
        if line.split(":", 1)[0] not in declared:
            config.addinivalue_line("markers", line)
    _register_hypothesis_profiles()
    if not config.pluginmanager.has_plugin("benchmark-modelrun"):
        config.pluginmanager.register(modelrun, "benchmark-modelrun")

    device = config.getoption("benchmark_device")
    if device is not None and device not in DEVICES:
        raise pytest.UsageError(f"--device {device!r} is not valid; choose one of: {', '.join(DEVICES)}")
    run_id = config.getoption("benchmark_run_id")
    if run_id is not None:
        check_run_id(run_id)
    shard = config.getoption("benchmark_shard")
    if shard is not None:
        try:
            shard = str(parse_shard(shard))
        except ShardError as exc:
            raise pytest.UsageError(str(exc)) from None
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file-size limit makes a write fail (EFBIG), not kill us

    # syrupy keeps snapshots in <root>/snapshots/, unless the user chose an extension.
    if hasattr(config.option, "default_extension") and not config.option.default_extension:
        config.option.default_extension = "benchmarks.core._snapshots.SuiteSnapshotExtension"
    # The JSON report is the result artifact: always build it; the plugin saves it into the run dirs.
    if hasattr(config.option, "json_report") and not config.option.json_report:
        config.option.json_report = True
        config.option.json_report_file = None

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "benchmark_run_id" in workerinput:
        run_id, started = workerinput["benchmark_run_id"], workerinput["benchmark_started_at"]
    else:
        run_id, started = run_id or new_run_id(), utc_now()
    results = Path(config.getoption("benchmark_results_dir"))
    if not results.is_absolute():
        results = config.rootpath / results
    if workerinput is None:
        check_results_dir(results)
    config.stash[STATE] = SessionState(run_id=run_id, started_at=started, results_dir=results, shard=shard)
    if workerinput is None:
        config.pluginmanager.register(_Reporter(config), "benchmark-reporter")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--scale all``: this session runs no test itself; it runs every preregistered scale of the protocol as
    a run of its own (:mod:`benchmarks.core.scales`) and returns the worst of their statuses."""
    if config.getoption("benchmark_scale", None) != SCALE_ALL or config.getoption("help", False) \
            or config.getoption("version", 0):
        return None
    folder, base, command = _scale_group_form(config)
    protocol = registry.find(folder.name)
    if protocol is None or Path(protocol.folder).resolve() != folder:
        try:
            protocol = registry.load_folder(folder)
        except registry.RegistryError as exc:
            raise pytest.UsageError(str(exc)) from None
    results = Path(config.getoption("benchmark_results_dir"))
    if not results.is_absolute():
        results = config.rootpath / results
    check_results_dir(results)
    run_id = config.getoption("benchmark_run_id")
    if run_id is not None:
        check_run_id(run_id)
    try:
        result = run_scales(protocol, results, run_id, base, command, cwd=config.invocation_params.dir)
    except ScaleGroupError as exc:
        raise pytest.UsageError(str(exc)) from None
    for line in summary_lines(result):
        print(line, flush=True)
    config.stash[SCALE_GROUP_RESULT] = result
    return result.status


def _scale_group_form(config: pytest.Config) -> tuple[Path, list[str], Any]:
    """(protocol folder, the arguments every scale gets, the command line of a scale) of a ``--scale all``
    session: each scale is a ``preregbench run`` when the session is one, else a ``pytest`` session."""
    if SCALE_GROUP_FORM in config.stash:
        folder, args = config.stash[SCALE_GROUP_FORM]
        return Path(folder).resolve(), without_owned(args), python_command("-m", "benchmarks.core.cli", "run",
                                                                           str(Path(folder).resolve()))
    where = config.invocation_params.dir
    folders = set()
    for arg in config.args:
        path = Path(arg.split("::", 1)[0])
        folder = protocol_dir_of(path if path.is_absolute() else where / path, config.rootpath)
        folders.add(folder)
    if len(folders) != 1 or None in folders:
        raise pytest.UsageError(f"--scale {SCALE_ALL} runs one protocol: give its folder alone (pytest "
                                f"benchmarks/pzombie --scale {SCALE_ALL})")
    return folders.pop(), without_owned(config.invocation_params.args), python_command("-m", "pytest")


def pytest_report_header(config: pytest.Config) -> str:
    state = config.stash[STATE]
    return f"preregbench: run {state.run_id}, results under {state.results_dir}/<protocol>/{state.run_id}/"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand the session's run id to every worker."""
    state = node.config.stash[STATE]
    node.workerinput["benchmark_run_id"] = state.run_id
    node.workerinput["benchmark_started_at"] = state.started_at


def write_fault(exc: BaseException) -> str | None:
    """The one line that ends a run for a write the system refused (None for any other exception)."""
    if isinstance(exc, FileWriteError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno in WRITE_FAULTS:
        where = exc.filename if exc.filename is not None else "a file of the run"
        return f"{where}: {errno_name(exc.errno)} ({exc.strerror or exc}); fix the cause and resume with the same --run-id"
    return None


def _is_protocol_run(item: pytest.Item) -> bool:
    return any(key == _KIND for key, _ in item.user_properties) or modelrun.is_model_run(item)


#: Errors whose message is one complete line about a file of the run: reported without a traceback.
_FILE_PROBLEMS = (LedgerError, FileReadError, ProvenanceError, RunDirError)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """In a protocol's model-run test: a write fault is reported as its one line instead of a traceback and
    stops the session after this test; a damaged or unsafe file of the run (ledger, JSON file, provenance, run
    directory) is reported as its one line.  Other tests keep their tracebacks."""
    report = yield
    if call.excinfo is None or not _is_protocol_run(item):
        return report
    line = write_fault(call.excinfo.value)
    if line is not None:
        report.longrepr = f"run ended: {line}"
        report.user_properties.append((_FAULT, line))
        item.session.shouldstop = f"run ended: {line}"
    elif isinstance(call.excinfo.value, _FILE_PROBLEMS) and not report.skipped:
        report.longrepr = f"{type(call.excinfo.value).__name__}: {call.excinfo.value}"
    return report


# --------------------------------------------------------------------------- tagging and the verdict fixture


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        is_rule = "verdict" in getattr(item, "fixturenames", ())
        is_complete = item.get_closest_marker("completeness") is not None
        if not (is_rule or is_complete):
            continue
        if is_rule and is_complete:
            raise pytest.UsageError(f"{item.nodeid}: a test is either a rule test (uses 'verdict') or a completeness test, not both")
        folder = protocol_dir_of(item.path, config.rootpath)
        if folder is None:
            raise pytest.UsageError(
                f"{item.nodeid}: rule and completeness tests belong to a protocol folder with a prereg.toml; "
                "move the test under benchmarks/<protocol>/"
            )
        item.user_properties.append((_KIND, "rule" if is_rule else "completeness"))
        item.user_properties.append((_PROTOCOL, folder.name))


class Verdict:
    """Applies one preregistered rule of a classification to the run's metrics."""

    def __init__(self, node: pytest.Item):
        self._node = node

    def check(self, classification: Classification, label: str, metrics: Mapping[str, float], *,
              undefined_skips: bool = False) -> Outcome:
        """Pass, fail (one line: measured value and threshold) or skip as preempted.

        The whole classification is derived from ``metrics`` in every call, so the
        outcome of one rule test depends neither on test order nor on the worker.
        Only the rules up to the deciding one are read: a rule that is preempted
        is skipped without reading its metrics, which may be undefined.  With
        ``undefined_skips`` (a breakdown, not a decision) a classification that
        reads an undefined metric skips, naming it, instead of failing.
        """
        index, rule = classification.rule(label)
        props = self._node.user_properties
        try:
            outcome = classification.evaluate(metrics)
        except RuleError as exc:
            if undefined_skips:
                raise pytest.skip.Exception(f"{classification.name} is undefined: {exc}", _use_item_location=True) from None
            raise
        if index > outcome.index:  # preempted: its metrics are never read
            role, detail = "preempted", f"preempted by {outcome.label}"
        else:
            for name in rule.metrics:
                if name in metrics:
                    props.append((name, float(metrics[name])))
            for cond in rule.all + rule.any:
                if cond.threshold_name:
                    props.append((f"threshold.{cond.threshold_name}", cond.threshold))
            if index < outcome.index:
                role, detail = "did_not_fire", rule.why_not(metrics)
            else:
                role, detail = "fired", rule.why_fired(metrics)
        props.append(("classification", outcome.label))
        props.append((_VERDICT, {
            "classification": classification.name,
            "rule": label,
            "rule_index": index,
            "role": role,
            "detail": detail,
            "outcome": outcome.as_dict(),
        }))
        if role == "preempted":  # reported at the rule test's own location
            raise pytest.skip.Exception(f"preempted by {outcome.label}", _use_item_location=True)
        if role == "fired" and not rule.passes:
            pytest.fail(f"{label}: {detail}", pytrace=False)
        return outcome


@pytest.fixture
def verdict(request: pytest.FixtureRequest) -> Verdict:
    """Apply a preregistered rule: ``verdict.check(classification, rule_label, metrics)``."""
    return Verdict(request.node)


# --------------------------------------------------------------------------- collecting outcomes (controller)


class _Reporter:
    """Registered in the controlling process only: gathers outcomes and writes the verdict."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.state = config.stash[STATE]
        self.readable: list[Path] = []  # run directories whose report.json this session wrote
        self.report_problems: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = {k: v for k, v in report.user_properties if isinstance(k, str)}
        kind = props.get(_KIND)
        if kind is None:
            return
        entry = self.state.tests.setdefault(report.nodeid, {"kind": kind, "protocol": props[_PROTOCOL], "outcome": "passed"})
        if _FAULT in props:
            entry["fault"] = props[_FAULT]
        if _VERDICT in props:
            entry["verdict"] = props[_VERDICT]
        if SHARD_SKIP in props and report.skipped:
            entry["shard_skip"] = True
        if report.skipped:
            entry["outcome"] = "skipped"
        elif report.failed:
            entry["outcome"] = "failed" if report.when == "call" else "error"

    def summary(self) -> dict[str, Any]:
        state = self.state
        if state.summary is None:
            protocols = sorted({t["protocol"] for t in state.tests.values()})
            state.summary = {
                "run_id": state.run_id,
                "started_at": state.started_at,
                "protocols": {name: _protocol_summary(state, name) for name in protocols},
            }
        return state.summary

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        json_report["benchmark"] = self.summary()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write ``report.json`` into each run directory, except where that would destroy a verdict.

        A session stopped by a usage error (a refused resume among them) writes
        nothing; a session that is not complete leaves an existing run's
        ``report.json`` as it was and says so in the terminal summary.
        """
        if session.exitstatus == pytest.ExitCode.USAGE_ERROR:
            return
        summary = self.summary()
        report = getattr(getattr(self.config, "_json_report", None), "report", None)
        unwritable = {str(self.state.results_dir / name / self.state.run_id) for name in self.state.unwritable}
        written: dict[Path, dict[str, Any]] = {}
        for entry in summary["protocols"].values():
            target = Path(entry["run_dir"]) / REPORT_FILE
            if report is None or entry["run_dir"] in unwritable:
                continue
            if os.path.lexists(target) and entry["status"] != "complete":
                entry["problems"].append(f"{target} of the earlier session was left as it was ({entry['status']} now)")
                continue
            try:
                atomic_write_json(target, report)
            except (FileWriteError, ValueError) as exc:  # no space left even for the verdict: say so, no traceback
                entry["problems"].append(f"the verdict was not written: {exc}")
                continue
            if not entry.get("shard"):  # a shard's report.json is its verdict; it has no results to render
                self.readable.append(Path(entry["run_dir"]))
            written[Path(entry["run_dir"])] = entry
        self._write_readable_reports()
        for run_dir, entry in written.items():
            try:  # last: the size and sha256 of every file the run wrote, report.json and the reports included
                write_manifest(run_dir)
            except (FileWriteError, ManifestError, OSError) as exc:
                entry["problems"].append(f"{MANIFEST_FILE} was not written: {exc}")

    def _write_readable_reports(self) -> None:
        """``report.html`` and ``report.md`` of each run whose ``report.json`` was just written, then the results
        folder's ``index.html`` (before any file that lists the run's files).  A report that cannot be rendered
        leaves the verdict and the run's JSON files as they are; the terminal summary names the problem."""
        for run_dir in self.readable:
            try:
                write_reports(run_dir, drawn_ahead=tuning.DRAWN_AHEAD)
            except RunNotFinished:  # no results to show: report.json says why
                continue
            except Exception as exc:  # never a traceback, never a changed verdict
                self.report_problems.append(f"{run_dir}: report not rendered: {type(exc).__name__}: {one_line(exc)}")
        if self.readable:
            try:
                write_index(self.state.results_dir)
            except Exception as exc:
                self.report_problems.append(f"{self.state.results_dir}: index not rendered: {type(exc).__name__}: {one_line(exc)}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        summary = self.summary()
        if not summary["protocols"]:
            return
        tr = terminalreporter
        tr.write_sep("=", "benchmark verdict")
        for name, entry in summary["protocols"].items():
            c = entry["completeness"]
            tr.write_line(
                f"{name}: run {entry['run_id']}  {entry['status'].upper()} "
                f"({c['passed']}/{c['tests']} completeness checks passed)"
            )
            if entry.get("shard"):
                tr.write_line(f"  shard {entry['shard']}: decided after merge (preregbench merge OUT SHARD_DIR...)")
            for cname, centry in entry["classifications"].items():
                outcome = centry["outcome"]
                position, total = outcome["decided_by_rule"] + 1, len(centry["rules"])
                where = f"rule {position} of {total}: " if position <= total else ""
                tr.write_line(f"  {cname}: {outcome['label']} ({where}{outcome['reason']})")
            for problem in entry["problems"]:
                tr.write_line(f"  problem: {problem}")
            prov = entry["provenance"]
            if prov:
                model, git = prov["model"], prov["git"]
                dirty = " (dirty)" if git.get("dirty") else ""
                tr.write_line(
                    f"  model {model.get('id')} @ {model.get('revision')}; prereg sha256 {prov['prereg_sha256'][:12]}; "
                    f"runner sha256 {prov['runner_sha256'][:12]}; git {str(git.get('commit'))[:12]}{dirty}"
                )
            tr.write_line(f"  results: {entry['run_dir']}")
            if Path(entry["run_dir"]) in self.readable and (Path(entry["run_dir"]) / "report.html").is_file():
                tr.write_line(f"  report: {Path(entry['run_dir']) / 'report.html'}")
        for problem in self.report_problems:
            tr.write_line(f"report problem: {problem}")



def _protocol_summary(state: SessionState, protocol: str) -> dict[str, Any]:
    tests = {nodeid: t for nodeid, t in sorted(state.tests.items()) if t["protocol"] == protocol}
    complete = [t for t in tests.values() if t["kind"] == "completeness" and not t.get("shard_skip")]
    problems = []
    for fault in dict.fromkeys(t["fault"] for t in tests.values() if "fault" in t):
        problems.append(f"run ended: {fault}")
    for nodeid, t in tests.items():
        if t["outcome"] == "error":
            problems.append(f"{nodeid}: error outside the test body")
        elif t["kind"] == "completeness" and t["outcome"] == "failed":
            problems.append(f"{nodeid}: failed")
        elif t["kind"] == "rule" and t["outcome"] == "failed" and t.get("verdict", {}).get("role") != "fired":
            problems.append(f"{nodeid}: the rule could not be evaluated")

    classifications: dict[str, Any] = {}
    for nodeid, t in tests.items():
        v = t.get("verdict")
        if not v:
            continue
        entry = classifications.setdefault(v["classification"], {"outcome": v["outcome"], "rules": []})
        if entry["outcome"] != v["outcome"]:
            problems.append(
                f"{nodeid}: rule tests disagree on {v['classification']} "
                f"({entry['outcome']['label']} vs {v['outcome']['label']})"
            )
        entry["rules"].append(
            {"rule": v["rule"], "index": v["rule_index"], "role": v["role"], "outcome": t["outcome"], "detail": v["detail"]}
        )
    for entry in classifications.values():  # a list in preregistered order (JSON objects get sorted keys)
        entry["rules"].sort(key=lambda r: r["index"])

    counts = {o: sum(1 for t in complete if t["outcome"] == o) for o in ("passed", "failed", "error", "skipped")}
    run_dir = state.results_dir / protocol / state.run_id
    writable = True
    provenance = None
    try:
        check_run_dir(state.results_dir, protocol, state.run_id)
        run_dir.mkdir(parents=True, exist_ok=True)
    except (RunDirError, OSError) as exc:
        problems.append(f"the run directory cannot be used: {write_fault(exc) or exc}")
        writable = False
        state.unwritable.add(protocol)
    if writable:
        try:
            record = read_provenance(run_dir / PROVENANCE_FILE)
        except ProvenanceError as exc:  # a damaged file: the run is broken and the report says why
            problems.append(str(exc))
            record = None
        if record is not None:
            if record.finished_at is None:
                record = record.finished()
                try:
                    atomic_write_json(run_dir / PROVENANCE_FILE, asdict(record))
                except (FileWriteError, ValueError) as exc:
                    problems.append(f"the finish time was not recorded: {exc}")
            provenance = asdict(record)
    if problems:
        status = "broken"
    elif complete and counts["passed"] == len(complete):
        status = "complete"
    else:
        status = "unchecked"
    return {
        "run_id": state.run_id,
        "run_dir": str(run_dir),
        **({"shard": state.shard} if state.shard else {}),
        "status": status,
        "completeness": {"tests": len(complete), **counts},
        "rule_tests": sum(1 for t in tests.values() if t["kind"] == "rule"),
        "problems": problems,
        "classifications": classifications,
        "provenance": provenance,
    }


__all__ = ["DEVICES", "RUN_ID_PATTERN", "Verdict", "benchmark_run", "check_results_dir", "check_run_id", "verdict"]
