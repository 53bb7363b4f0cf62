"""A resumed run measures every unit in the batch an uninterrupted run gives it (``Protocol.resume_units``).

Batch composition changes a model's numbers (padding width, kernel choice), so a session resumed after a kill
re-forms the batches of the whole run and measures again, whole, every batch that holds a unit not yet
recorded; the recorded units of those batches are compared with the ledger instead of appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.core.protocol import Protocol


@dataclass(frozen=True)
class _Unit:
    item_id: str
    condition: str


class _Protocol(Protocol):
    """Only the batching of a protocol; no prereg is read (the instance skips ``Protocol.__init__``)."""

    record_key = "item_id"

    def __init__(self, size: int, by_condition: bool) -> None:
        self.size, self.by_condition = size, by_condition

    def batch_size(self, run: Any) -> int:
        return self.size

    def batches(self, run: Any, todo: Sequence[_Unit]):
        if not self.by_condition:
            yield from super().batches(run, todo)
            return
        for condition in ("P", "Q"):  # one condition per batch, as CWR batches
            rows = [u for u in todo if u.condition == condition]
            for start in range(0, len(rows), self.size):
                yield rows[start:start + self.size]


class _Odd(_Protocol):
    """Batches that depend on how many units there are, not only on their order."""

    def batches(self, run: Any, todo: Sequence[_Unit]):
        step = 2 if len(todo) % 2 else 3
        for start in range(0, len(todo), step):
            yield todo[start:start + step]


def _units(conditions: str) -> list[_Unit]:
    return [_Unit(f"{c}:{i}", c) for i, c in enumerate(conditions)]


@given(st.text("PQ", min_size=1, max_size=40), st.integers(1, 9), st.booleans(), st.data())
def test_every_unit_is_measured_in_the_batch_an_uninterrupted_run_gives_it(conditions: str, size: int,
                                                                           by_condition: bool, data) -> None:
    units = _units(conditions)
    protocol = _Protocol(size, by_condition)
    recorded = frozenset(data.draw(st.sets(st.sampled_from([u.item_id for u in units]))))
    uninterrupted = [list(b) for b in protocol.batches(None, units)]
    todo = protocol.resume_units(None, units, recorded)
    resumed = [list(b) for b in protocol.batches(None, todo)]
    # the batches the resumed session measures are batches of the uninterrupted run, each one whole ...
    assert all(batch in uninterrupted for batch in resumed)
    # ... and they are exactly those holding a unit not yet recorded
    assert resumed == [b for b in uninterrupted if any(u.item_id not in recorded for u in b)]
    assert {u.item_id for u in units} - recorded <= {u.item_id for u in todo}


def test_nothing_recorded_measures_every_batch_and_everything_recorded_none() -> None:
    units, protocol = _units("PPQPQQPP"), _Protocol(3, True)
    assert protocol.resume_units(None, units, frozenset()) == [u for b in protocol.batches(None, units) for u in b]
    assert protocol.resume_units(None, units, frozenset(u.item_id for u in units)) == []


def test_batching_that_depends_on_the_count_falls_back_to_the_missing_units() -> None:
    units, protocol = _units("PPPPPPPP"), _Odd(3, False)  # 8 units: batches of 3, 3 and 2
    recorded = frozenset({"P:0", "P:1", "P:3", "P:4", "P:5"})
    # the whole batches would be P:0-2 and P:6-7, five units, which this protocol batches by 2: not the same
    assert [u.item_id for u in protocol.resume_units(None, units, recorded)] == ["P:2", "P:6", "P:7"]
