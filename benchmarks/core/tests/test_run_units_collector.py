"""The runner's tuning (``benchmarks.core.tuning``) keeps the cycle collector off the loaded model's objects while
``Protocol.run_units`` measures, and hands them back when the measurement ends, however it ends; with the switch
off (``PREREGBENCH_TUNING=off``) nothing is frozen."""

from __future__ import annotations

import gc
from typing import Any, Sequence

import pytest

from benchmarks.core import tuning
from benchmarks.core.protocol import Protocol


class _Model:
    def __init__(self) -> None:
        self.closed = False
        self.weights = {"layer": [0.5, 0.25]}  # an object the model made at load time, tracked by the collector

    def describe(self) -> Any:
        class _Description:
            def as_dict(self) -> dict[str, str]:
                return {"id": "stand-in"}
        return _Description()

    def close(self) -> None:
        self.closed = True


class _Run:
    def __init__(self, tuned: bool = True) -> None:
        self.started: dict[str, Any] | None = None
        self.tuning = tuning.ProcessTuning() if tuned else tuning.Untuned()
        self.protocol: Any = _Protocol.__new__(_Protocol)
        self.model = "scripted-oracle"  # a name whose load reads no weights: no figures are drawn ahead

    def start(self, description: dict[str, Any]) -> None:
        self.started = description


class _Protocol(Protocol):
    """Only what ``run_units`` calls; no prereg is read (the instance skips ``Protocol.__init__``)."""

    fail_at: int | None = None

    def load_model(self, run: Any) -> _Model:
        self.model = _Model()
        return self.model

    def batches(self, run: Any, todo: Sequence[int]):
        for unit in todo:
            yield [unit]

    def measure(self, run: Any, model: Any, batch: Sequence[int]) -> list[dict[str, int]]:
        if batch[0] == self.fail_at:
            raise RuntimeError("a measurement fault")
        return [{"unit": batch[0], "frozen": gc.get_freeze_count(), "walked": _walked(model, model.weights)}]


def _walked(*objects: Any) -> list[bool]:
    """Whether the collector's generations hold each object (a frozen object is in none of them)."""
    tracked = {id(o) for o in gc.get_objects()}
    return [id(o) in tracked for o in objects]


def protocol(fail_at: int | None = None) -> _Protocol:
    made = _Protocol.__new__(_Protocol)
    made.fail_at = fail_at
    return made


@pytest.fixture(autouse=True)
def _nothing_frozen_before() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_the_model_s_objects_are_frozen_while_measuring_and_unfrozen_after() -> None:
    made, run, records = protocol(), _Run(), []
    made.run_units(run, [1, 2, 3], records.append)
    assert [r["unit"] for r in records] == [1, 2, 3] and run.started == {"id": "stand-in"}
    # every batch saw the model and what it made at load time frozen, out of every generation's walk (a
    # count of frozen objects would not do: under xdist a frozen object of another thread may die meanwhile)
    assert all(r["frozen"] > 0 and r["walked"] == [False, False] for r in records), records
    assert gc.get_freeze_count() == 0 and made.model.closed
    assert _walked(made.model, made.model.weights) == [True, True]  # handed back to the collector


def test_with_tuning_off_nothing_is_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tuning.SWITCH, "off")
    made, records = protocol(), []
    run = _Run(tuned=True)
    run.tuning = tuning.for_run(run)  # what the runner gives a run with the switch off
    made.run_units(run, [1, 2], records.append)
    assert isinstance(run.tuning, tuning.Untuned) and run.tuning.record() == {"enabled": False,
                                                                             "switch": "PREREGBENCH_TUNING=off"}
    assert all(r["frozen"] == 0 and r["walked"] == [True, True] for r in records), records


def test_a_failed_measurement_unfreezes_too() -> None:
    made, records = protocol(fail_at=2), []
    with pytest.raises(RuntimeError, match="a measurement fault"):
        made.run_units(_Run(), [1, 2, 3], records.append)
    assert [r["unit"] for r in records] == [1]
    assert gc.get_freeze_count() == 0 and made.model.closed


class _FigureProtocol(_Protocol):
    def report_figures(self, run_dir: Any, summary: Any) -> list:
        return []


@pytest.mark.parametrize("model, asked", [("smollm2-135m-instruct", True), ("scripted-oracle", False)])
def test_the_figures_are_readied_before_a_weights_load_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                            model: str, asked: bool) -> None:
    calls: list[tuple[Any, Any, bool]] = []
    monkeypatch.setattr(tuning, "draw_figures_ahead",
                        lambda protocol, run_dir: calls.append((protocol, run_dir, hasattr(protocol, "model"))) or True)
    made = _FigureProtocol.__new__(_FigureProtocol)
    made.fail_at = None
    run = _Run()
    run.model, run.location, run.protocol = model, tmp_path / "res" / "run-1", made
    made.run_units(run, [1], [].append)
    # asked with the run's directory, before the model was loaded (the copy must be forked before torch is imported)
    assert calls == ([(made, tmp_path / "res" / "run-1", False)] if asked else [])
