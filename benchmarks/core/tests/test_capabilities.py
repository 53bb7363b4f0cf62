"""A protocol declares what it needs from a model (``Protocol.needs``); a model that cannot provide it is refused
before any work, with one line (exit status 4), known from the model's name alone: no weights are read and no
server is contacted.

RES on a served model (no label logits) and P-Zombie on a served or scripted model (no activation taps) are
refused at collection, under pytest (in process and with two xdist workers) and ``preregbench run``; the stand-in
server counts every connection, and none reaches it.  CWR and the ladder take chats, which a served model does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import models
from benchmarks.core import tuning
from benchmarks.core.protocol import Protocol, UsageProblem
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.core.selfcheck import run_protocol
from benchmarks.cwr.protocol import PROTOCOL as CWR
from benchmarks.ladder.protocol import PROTOCOL as LADDER
from benchmarks.pzombie.protocol import PROTOCOL as PZOMBIE
from benchmarks.res.protocol import PROTOCOL as RES
from benchmarks.res.protocol import ResProtocol
from models import _registry
from models._hf import TransformersModel
from models._http import OpenAIChatModel
from models.tests.test_http import ScriptedServer, running

# The in-process runs below import numpy's compiled modules; imported before any pytester snapshot.
RUN_LIBRARIES_FIRST = ()

LOCAL = "use a local transformers model (a bundled name, a hub id or a path)"


def res_refusal(model: str, kind: str = "a served model") -> str:
    return (f"RES cannot run: it scores the logits of its label tokens and sends the rendered prompt text, which "
            f"{model} ({kind}) cannot do (it lacks label_logits, text); {LOCAL}")


def pzombie_refusal(model: str, kind: str, missing: str) -> str:
    doing = "runs its PX-Engine on forward hooks on the model's decoder layers"
    if "text" in missing:
        doing += " and generates from the rendered prompt text"
    return f"P-Zombie cannot run: it {doing}, which {model} ({kind}) cannot do (it lacks {missing}); {LOCAL}"


class CountingServer(ScriptedServer):
    """The models tests' scripted server, counting every connection it accepts (model listings included)."""

    def __init__(self) -> None:
        super().__init__()
        self.connections = 0

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self.lock:
            self.connections += 1
        return True


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with running(CountingServer()) as srv:
        yield srv


def lines_with(text: str, needle: str) -> list[str]:
    """The lines of ``text`` holding ``needle``, but for pytest's short test summary, which cuts a long message to
    the terminal's width after the node id (so whether it shows the needle depends on the checkout's path)."""
    return [line for line in text.splitlines() if needle in line and not line.startswith(("ERROR ", "FAILED "))]


# --------------------------------------------------------------------------- the vocabulary and the registry


def test_every_backend_declares_capabilities_from_the_vocabulary() -> None:
    vocabulary = set(models.CAPABILITIES)
    assert vocabulary == {models.LABEL_LOGITS, models.CHAT, models.TEXT, models.ACTIVATION_TAPS}
    assert TransformersModel.capabilities == vocabulary
    assert OpenAIChatModel.capabilities == {models.CHAT}
    assert models.ScriptedModel.capabilities == vocabulary - {models.ACTIVATION_TAPS}
    assert models.LanguageModel.capabilities == {models.LABEL_LOGITS, models.CHAT, models.TEXT}


def test_capabilities_are_known_from_the_name_without_building_the_model(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a model was built to learn its capabilities")

    monkeypatch.setattr(OpenAIChatModel, "__init__", never)
    monkeypatch.setattr(TransformersModel, "from_hub", never)
    monkeypatch.setattr(TransformersModel, "from_local", never)
    monkeypatch.setattr(models, "load_bundled", never)
    assert models.model_capabilities("openai:m@http://127.0.0.1:9/v1") == {models.CHAT}
    assert models.model_capabilities("org/name") == TransformersModel.capabilities
    assert models.model_capabilities(str(tmp_path)) == TransformersModel.capabilities
    assert models.model_capabilities("smollm2-135m-instruct") == TransformersModel.capabilities
    assert models.model_capabilities("scripted-oracle") == models.ScriptedModel.capabilities
    with pytest.raises(models.UnknownModelError, match="did you mean 'scripted-oracle'"):
        models.model_capabilities("scripted-oracel")


def test_a_registry_entry_declares_its_capabilities_or_takes_its_kind_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_ENTRIES", dict(_registry._ENTRIES))  # the process's registry is left as it was
    build = lambda **_: models.ScriptedModel("x", models.Constant("A"))  # noqa: E731 -- never called here
    models.register_model("caps-declared", "scripted", "chat only", build, capabilities=[models.CHAT])
    models.register_model("caps-scripted", "scripted", "a scripted kind", build)
    models.register_model("caps-other", "research", "a kind of its own", build)
    assert models.model_capabilities("caps-declared") == {models.CHAT}
    assert models.model_capabilities("caps-scripted") == models.ScriptedModel.capabilities
    assert models.model_capabilities("caps-other") == models.LanguageModel.capabilities
    with pytest.raises(models.ModelError, match=r"\['telepathy'\] are not capabilities; choose from label_logits"):
        models.register_model("caps-odd", "scripted", "odd", build, capabilities=["chat", "telepathy"])
    assert models.model_kind("caps-odd") is None


def test_backends_with_names_those_that_have_every_capability() -> None:
    local, served = ("a local transformers model (a bundled name, a hub id or a path)",
                     "a served model (openai:MODEL@BASE_URL)")
    assert models.backends_with([models.CHAT]) == (local, served)
    assert models.backends_with([models.CHAT, models.LABEL_LOGITS]) == (local,)
    assert models.kind_name("openai-http") == "a served model" and models.kind_name("research") == "a research model"


# --------------------------------------------------------------------------- what each protocol needs


def test_each_protocol_needs_what_it_calls() -> None:
    assert list(RES.needs) == [models.LABEL_LOGITS, models.CHAT, models.TEXT]
    assert list(PZOMBIE.needs) == [models.ACTIVATION_TAPS, models.CHAT, models.TEXT]
    assert list(CWR.needs) == list(LADDER.needs) == [models.CHAT]
    assert list(Protocol.needs) == [models.CHAT, models.TEXT]  # the shape's default: render the chat, send the text
    for protocol in (RES, PZOMBIE, CWR, LADDER):  # the bundled models run every protocol
        for bundled in sorted(models.BUNDLED):
            assert protocol.capability_problem(bundled, models.model_capabilities(bundled)) is None


def test_the_refusal_is_one_line_naming_protocol_model_capability_and_what_to_use() -> None:
    served = "openai:m@http://127.0.0.1:9/v1"
    assert f"{RES.label} cannot run: {RES.capability_problem(served, models.model_capabilities(served))}" \
        == res_refusal(served)
    problem = PZOMBIE.capability_problem("scripted-oracle", models.model_capabilities("scripted-oracle"))
    assert f"P-Zombie cannot run: {problem}" == pzombie_refusal("scripted-oracle", "a scripted model", "activation_taps")
    for protocol in (CWR, LADDER):
        assert protocol.capability_problem(served, models.model_capabilities(served)) is None
        assert protocol.capability_problem("scripted-oracle", [models.TEXT]) == (
            f"it {protocol.needs[models.CHAT]}, which scripted-oracle (a scripted model) cannot do (it lacks chat); "
            "use a local transformers model (a bundled name, a hub id or a path) or a served model "
            "(openai:MODEL@BASE_URL)")
    assert "\n" not in res_refusal(served)


def test_a_protocol_that_needs_an_unknown_capability_is_refused_at_definition() -> None:
    odd = type("OddRes", (ResProtocol,), {"needs": {"telepathy": "reads the model's mind"}})
    with pytest.raises(TypeError, match=r"OddRes.needs names \['telepathy'\], which are not model capabilities"):
        odd(RES.folder)


class _ChatOnly(models.ScriptedModel):
    """A scripted model whose class says it takes chats only, unlike its registry entry."""

    capabilities = frozenset({models.CHAT})


class _Run:
    def __init__(self) -> None:
        self.model = "scripted-oracle"
        self.tuning = tuning.Untuned()
        self.started: dict[str, Any] | None = None

    def start(self, description: dict[str, Any]) -> None:
        self.started = description


class _Loads(Protocol):
    """Only what ``run_units`` calls; no prereg is read (the instance skips ``Protocol.__init__``)."""

    title = "toy"

    def load_model(self, run: Any) -> models.LanguageModel:
        self.model = _ChatOnly("scripted-oracle", models.Constant("A"))
        self.model.close = lambda: setattr(self, "closed", True)  # type: ignore[method-assign]
        return self.model

    def measure(self, run: Any, model: Any, batch: Any) -> list[Any]:
        raise AssertionError("a unit was measured")


def test_the_built_model_has_the_last_word_before_anything_is_started() -> None:
    protocol, run, appended = _Loads.__new__(_Loads), _Run(), []
    with pytest.raises(UsageProblem) as refused:
        protocol.run_units(run, [1, 2], appended.append)  # type: ignore[arg-type]
    assert str(refused.value) == ("toy cannot run: it sends the rendered prompt text, which scripted-oracle (a scripted "
                                  f"model) cannot do (it lacks text); {LOCAL}")
    assert run.started is None and appended == [] and protocol.closed


# --------------------------------------------------------------------------- refused before any work


def preregbench_run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", "run", *args], cwd=SUITE_ROOT, env=env,
                          text=True, capture_output=True, timeout=600, check=False)


@pytest.mark.parametrize("how", ["pytest", "pytest -n 2", "preregbench run"])
def test_res_on_a_served_model_is_refused_before_any_request(pytester: pytest.Pytester, tmp_path: Path,
                                                             server: CountingServer, how: str) -> None:
    model = f"openai:m@{server.url}/ok/v1"
    results = tmp_path / "results"
    if how == "preregbench run":
        done = preregbench_run("res", "--results-dir", str(results), "-p", "no:cacheprovider", "--model", model)
        code, text = done.returncode, done.stdout + done.stderr
    else:
        workers = ("-n", "2") if how == "pytest -n 2" else ()
        result = run_protocol(pytester, RES.folder, results, "--model", model, *workers, in_process=not workers)
        code, text = result.ret, result.stdout.str() + result.stderr.str()
    assert code == pytest.ExitCode.USAGE_ERROR, text
    found = lines_with(text, "RES cannot run:")
    assert found and all(res_refusal(model) in line for line in found), text
    assert "Traceback" not in text
    assert server.connections == 0 and server.requests == []
    assert not results.exists()  # no run directory, so no ledger


@pytest.mark.parametrize("served", [True, False], ids=["served", "scripted"])
def test_pzombie_without_activation_taps_is_refused_before_any_request(pytester: pytest.Pytester, tmp_path: Path,
                                                                       server: CountingServer, served: bool) -> None:
    model = f"openai:m@{server.url}/ok/v1" if served else "scripted-oracle"
    results = tmp_path / "results"
    result = run_protocol(pytester, PZOMBIE.folder, results, "--device", "cpu", "--model", model, in_process=True)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    expected = (pzombie_refusal(model, "a served model", "activation_taps, text") if served
                else pzombie_refusal(model, "a scripted model", "activation_taps"))
    found = lines_with(text, "P-Zombie cannot run:")
    assert found and all(expected in line for line in found), text
    assert server.connections == 0 and server.requests == []
    assert not results.exists()  # no run directory, so no ledger
