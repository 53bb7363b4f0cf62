"""Preregistered decision rules and ordered classifications.

A condition is a comparison ``<metric> <op> <operand>`` where the operand is a
number or the name of a preregistered threshold.  A rule fires when all of its
``all`` conditions hold and at least one of its ``any`` conditions holds (an
absent list places no demand), or unconditionally when it is ``otherwise``.

A classification is an ordered tuple of rules.  The first rule that fires
decides the classification; when none fires, the preregistered passing state
is the classification.  A rule may itself be a passing state (``passes``),
as in a gate whose success is one rule among failures.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Mapping

from .errors import PreregbenchError

_OPS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")
_NAME = re.compile(r"^[A-Za-z_][\w.\-]*$")


class RuleError(PreregbenchError, ValueError):
    """A rule or classification is malformed, or cannot be evaluated on the given metrics."""


def format_number(value: float) -> str:
    """Short, stable spelling of a measured value or threshold for messages."""
    if isinstance(value, bool):
        return str(value).lower()
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


@dataclass(frozen=True)
class Condition:
    """``metric op threshold``; ``threshold_name`` keeps the preregistered name when one was used."""

    metric: str
    op: str
    threshold: float
    threshold_name: str | None = None

    @classmethod
    def parse(cls, text: str, thresholds: Mapping[str, float]) -> "Condition":
        match = _CONDITION.match(text)
        if not match:
            raise RuleError(
                f"condition {text!r} is not of the form '<metric> <op> <number or threshold name>' "
                f"with op one of {', '.join(_OPS)}"
            )
        metric, op, operand = match.groups()
        try:
            value = float(operand)
        except ValueError:
            if operand not in thresholds:
                known = ", ".join(sorted(thresholds)) or "none declared"
                raise RuleError(f"condition {text!r} names threshold {operand!r}, which is not declared (thresholds: {known})") from None
            return cls(metric, op, float(thresholds[operand]), operand)
        if not math.isfinite(value):
            raise RuleError(f"condition {text!r} has a non-finite threshold")
        return cls(metric, op, value)

    def holds(self, metrics: Mapping[str, float]) -> bool:
        return _OPS[self.op](measured(metrics, self.metric), self.threshold)

    def describe(self, metrics: Mapping[str, float]) -> str:
        """``five_factor.generated_accuracy 0.59 < 0.75`` (the operator as it stands)."""
        return f"{self.metric} {format_number(measured(metrics, self.metric))} {self.op} {format_number(self.threshold)}"

    def describe_negation(self, metrics: Mapping[str, float]) -> str:
        negated = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[self.op]
        return f"{self.metric} {format_number(measured(metrics, self.metric))} {negated} {format_number(self.threshold)}"


def measured(metrics: Mapping[str, float], name: str) -> float:
    if name not in metrics:
        known = ", ".join(sorted(metrics)) or "none"
        raise RuleError(f"metric {name!r} was not measured (measured: {known})")
    value = metrics[name]
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RuleError(f"metric {name!r} is {value!r}; a rule needs a finite number")
    return float(value)


@dataclass(frozen=True)
class Rule:
    label: str
    all: tuple[Condition, ...] = ()
    any: tuple[Condition, ...] = ()
    otherwise: bool = False
    passes: bool = False

    def __post_init__(self) -> None:
        if not _NAME.match(self.label):
            raise RuleError(f"rule label {self.label!r} must be an identifier-like name")
        if self.otherwise and (self.all or self.any):
            raise RuleError(f"rule {self.label}: 'otherwise' takes no conditions")
        if not self.otherwise and not (self.all or self.any):
            raise RuleError(f"rule {self.label}: give 'all' and/or 'any' conditions, or 'otherwise = true'")

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(sorted({c.metric for c in self.all + self.any}))

    def fires(self, metrics: Mapping[str, float]) -> bool:
        if self.otherwise:
            return True
        return all(c.holds(metrics) for c in self.all) and (not self.any or any(c.holds(metrics) for c in self.any))

    def why_fired(self, metrics: Mapping[str, float]) -> str:
        if self.otherwise:
            return "no earlier rule fired"
        parts = [c.describe(metrics) for c in self.all]
        held = [c.describe(metrics) for c in self.any if c.holds(metrics)]
        if held:
            alone = len(held) == 1 or not parts
            parts.append(" or ".join(held) if alone else "(" + " or ".join(held) + ")")
        return " and ".join(parts)

    def why_not(self, metrics: Mapping[str, float]) -> str:
        """Why a rule that did not fire did not: its conditions that do not hold.

        A rule that did not fire may hold a condition on an undefined metric that
        was never needed (an earlier ``all`` condition already failed); such a
        condition is left out of the reason rather than read.
        """
        if self.otherwise:
            return "not reached"
        broken = [c.describe_negation(metrics) for c in self.all if _known(c, metrics) is False]
        if self.any and all(_known(c, metrics) is False for c in self.any):
            broken.append(" and ".join(c.describe_negation(metrics) for c in self.any))
        return " and ".join(broken)


def _known(condition: Condition, metrics: Mapping[str, float]) -> bool | None:
    """Whether the condition holds, or None when its metric is undefined."""
    try:
        return condition.holds(metrics)
    except RuleError:
        return None


@dataclass(frozen=True)
class Outcome:
    """The classification decided by the metrics, and where in the order it was decided."""

    classification: str
    label: str
    index: int
    passed: bool  # whether the decided label is a passing state
    reason: str  # why, with measured values and thresholds (no label prefix)

    def as_dict(self) -> dict:
        return {
            "classification": self.classification,
            "label": self.label,
            "decided_by_rule": self.index,
            "passed": self.passed,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Classification:
    """An ordered, preregistered rule set.  ``rules`` are tried in order."""

    name: str
    rules: tuple[Rule, ...]
    passing: str | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        labels = [r.label for r in self.rules]
        dupes = sorted({l for l in labels if labels.count(l) > 1})
        if dupes:
            raise RuleError(f"classification {self.name}: duplicate rule labels {dupes}")
        if not self.rules:
            raise RuleError(f"classification {self.name}: no rules")
        for rule in self.rules[:-1]:
            if rule.otherwise:
                raise RuleError(f"classification {self.name}: 'otherwise' rule {rule.label} must be last")
        if self.passing is None and not self.rules[-1].otherwise:
            raise RuleError(
                f"classification {self.name}: when no rule fires there must be an outcome; "
                "declare 'passing' or end with an 'otherwise' rule"
            )
        if self.passing is not None and self.rules[-1].otherwise:
            raise RuleError(f"classification {self.name}: 'passing' can never be reached after an 'otherwise' rule")
        if self.passing is not None and self.passing in labels:
            raise RuleError(f"classification {self.name}: passing state {self.passing} is also a rule label")

    @property
    def labels(self) -> list[str]:
        """Rule labels in preregistered order (a list, for parametrize)."""
        return [r.label for r in self.rules]

    def rule(self, label: str) -> tuple[int, Rule]:
        for index, rule in enumerate(self.rules):
            if rule.label == label:
                return index, rule
        raise RuleError(f"classification {self.name} has no rule {label!r} (rules: {', '.join(self.labels)})")

    def evaluate(self, metrics: Mapping[str, float]) -> Outcome:
        """Decide the classification from the metrics alone."""
        for index, rule in enumerate(self.rules):
            if rule.fires(metrics):
                return Outcome(self.name, rule.label, index, rule.passes, rule.why_fired(metrics))
        assert self.passing is not None  # guaranteed by __post_init__
        return Outcome(self.name, self.passing, len(self.rules), True, "no failure rule fired")
