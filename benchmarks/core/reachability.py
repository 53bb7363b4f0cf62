"""Outcome reachability: can every preregistered label occur at the planned sample size?

A preregistered rule set can hold a label that no data set of the planned size
can produce (a threshold finer than 1/n allows, two demands that exclude each
other at that n).  Such a label is no outcome at all, and a run can never
report it.  :func:`reachability` settles the question for one classification
by exhibiting data: it feeds candidate data sets of the planned size, one after
another, through the protocol's own metric function and the compiled rules,
and keeps the first data set that each label decides (its *witness*).  A label
that no candidate reaches is reported as unreachable, with the size and the
number of data sets searched.

The candidates are the caller's: an exhaustive enumeration of count tables
where the space is small (then an unreachable label is proven unreachable),
or a seeded search (:func:`seeded`) where it is not (then "unreachable" means
"not found among that many").  Candidates on which a rule reads an undefined
metric (an empty denominator) decide nothing and are counted as undecided.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from .errors import PreregbenchError
from .protocol import finite
from .rules import Classification, RuleError

T = TypeVar("T")

__all__ = ["Reachability", "UnreachableOutcome", "outcome_labels", "reachability", "seeded"]


class UnreachableOutcome(PreregbenchError, AssertionError):
    """A preregistered label was decided by no candidate data set of the planned size."""


def outcome_labels(classification: Classification) -> list[str]:
    """Every label the classification can decide, in preregistered order (the passing state last)."""
    labels = list(classification.labels)
    if classification.passing is not None:
        labels.append(classification.passing)
    return labels


@dataclass(frozen=True)
class Reachability(Generic[T]):
    """The witnesses found for one classification, and the labels none was found for."""

    classification: str
    size: str  # the planned sample size in words, e.g. "32 items per condition"
    labels: tuple[str, ...]  # every decidable label, in preregistered order
    witnesses: dict[str, T]  # label -> the first candidate data set that decided it
    witness_metrics: dict[str, dict[str, float]]  # label -> the finite metrics of that witness
    searched: int  # candidates fed through the metrics
    undecided: int  # candidates on which a rule read an undefined metric
    exhausted: bool  # the candidates enumerate the whole data space and every one was searched
    problems: dict[str, str] = field(default_factory=dict)  # first undecided reason, for the message

    @property
    def unreachable(self) -> tuple[str, ...]:
        return tuple(label for label in self.labels if label not in self.witnesses)

    def message(self) -> str:
        """One line naming each unreachable label, the size and how far the search went."""
        missing = self.unreachable
        if not missing:
            return f"{self.classification}: every label reached at {self.size}"
        how = (f"no data set of that size decides it (all {self.searched} enumerated)" if self.exhausted
               else f"not decided by any of {self.searched} searched data sets")
        names = ", ".join(missing)
        plural = "labels" if len(missing) > 1 else "label"
        extra = f"; {self.undecided} undecided ({self.problems['first']})" if self.undecided else ""
        return (f"{self.classification}: {plural} {names} unreachable at {self.size}: {how}{extra}; "
                f"a label no data can produce is no outcome: change the rule or the planned size (with a "
                f"dated changelog entry) before running")

    def check(self) -> None:
        """Raise :class:`UnreachableOutcome` with :meth:`message` when a label has no witness."""
        if self.unreachable:
            raise UnreachableOutcome(self.message())


def reachability(classifications: Classification | Sequence[Classification], candidates: Iterable[T],
                 metrics: Callable[[T], Mapping[str, Any]], *, size: str,
                 exhaustive: bool = False) -> dict[str, Reachability[T]]:
    """Feed each candidate through ``metrics`` and every classification; stop once every label has a witness.

    ``metrics`` is the protocol's own metric computation on a candidate data
    set (records, or what its metric function takes); its values pass through
    :func:`benchmarks.core.protocol.finite` as in a run, so an undefined metric
    cannot decide.  Returns one :class:`Reachability` per classification name.
    """
    blocks = [classifications] if isinstance(classifications, Classification) else list(classifications)
    if not blocks:
        raise ValueError("reachability needs at least one classification")
    labels = {b.name: tuple(outcome_labels(b)) for b in blocks}
    witnesses: dict[str, dict[str, T]] = {b.name: {} for b in blocks}
    seen: dict[str, dict[str, dict[str, float]]] = {b.name: {} for b in blocks}
    undecided = {b.name: 0 for b in blocks}
    problems: dict[str, dict[str, str]] = {b.name: {} for b in blocks}
    searched = 0

    def done() -> bool:
        return all(len(witnesses[n]) == len(labels[n]) for n in labels)

    for candidate in candidates:
        searched += 1
        values = finite(metrics(candidate))
        for block in blocks:
            try:
                label = block.evaluate(values).label
            except RuleError as exc:
                undecided[block.name] += 1
                problems[block.name].setdefault("first", str(exc))
                continue
            if label not in witnesses[block.name]:
                witnesses[block.name][label] = candidate
                seen[block.name][label] = dict(values)
        if done():
            break
    return {
        b.name: Reachability(b.name, size, labels[b.name], witnesses[b.name], seen[b.name], searched,
                             undecided[b.name], exhaustive and not done(), problems[b.name])
        for b in blocks
    }


def seeded(draw: Callable[[random.Random], T], *, seed: int, count: int) -> Iterator[T]:
    """``count`` candidates from ``draw``, each given the same seeded :class:`random.Random` in turn."""
    if count <= 0:
        raise ValueError(f"count must be a positive number of candidates, got {count}")
    rng = random.Random(seed)
    for _ in range(count):
        yield draw(rng)
