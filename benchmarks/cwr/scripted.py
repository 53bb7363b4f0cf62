"""Scripted CWR responders: an enumerator-backed solver and policies that reach each classification.

A scripted model sees only the rendered prompt text.  The run fills an
:class:`AnswerKey` (``benchmarks.core``'s, one entry per unit) mapping each
rendered prompt to its unit: item id, condition, expected answer, and for F/C
the target world, so a policy is handed the world by item id; it never parses
the world out of the prompt.

* right answer, P/R/E: the checker-derived expected answer, written in the
  prompt's reply format;
* right answer, F/C: the first valid solution (sorted) that
  ``worlds.bounded_solutions`` finds for the target world: the solver
  searches, it does not read a stored witness;
* wrong answer: a parseable but wrong reply (flipped verdict, a distractor
  id, a shifted step, a perturbed state; F/C: the enumerated solution minus
  its last step, which leaves the goal unmet).

``scripted-oracle`` (from ``models``) answers every prompt right; the models
registered here (``SCENARIOS``) mix right and wrong answers by condition, and
``scripted-cwr-flaky`` answers right with prose around every F/C artifact
while about one unit in twelve (by prompt hash) fails with a provider error,
and ``scripted-cwr-motif-blind`` solves only the targets that have a valid
solution without the withheld motif (and uses that one).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import models
import worlds
from benchmarks.core import AnswerKey as CoreAnswerKey
from models import ModelDescription, Response, ScriptedModel

from .prompts import expected_answer_text, state_lines
from .spec import Unit


@functools.lru_cache(maxsize=256)
def _solve(target: worlds.World) -> tuple[str, ...]:
    solutions = worlds.bounded_solutions(target).solutions
    if not solutions:
        raise models.ModelError(f"the enumerator finds no valid solution for {target.id}")
    return solutions[0]


class AnswerKey(CoreAnswerKey):
    """Rendered prompt -> its :class:`~benchmarks.cwr.protocol.Unit`; calling it writes the right answer."""

    def unit(self, prompt: str) -> Unit:
        return self.lookup(prompt)

    def __call__(self, prompt: str) -> str:
        return self.right(prompt)

    def right(self, prompt: str) -> str:
        unit = self.unit(prompt)
        if unit.condition in ("F", "C"):
            return "".join(step + "\n" for step in _solve(unit.target))
        return expected_answer_text({"condition": unit.condition, "kind": unit.kind, "expected": unit.expected},
                                    unit.family)

    def wrong(self, prompt: str) -> str:
        unit = self.unit(prompt)
        expected = unit.expected
        if unit.condition in ("F", "C"):
            solution = _solve(unit.target)
            return "".join(step + "\n" for step in solution[:-1]) or "# no steps\n"
        if unit.condition == "P" and unit.kind == "verdict":
            return "ANSWER: " + ("ILLEGAL" if expected["verdict"] == "LEGAL" else "LEGAL")
        if unit.condition == "P":
            return "STATE:\n" + "\n".join(state_lines(unit.family, _perturbed(unit.family, expected["state"])))
        if unit.condition == "R":
            return "ANSWER: H-0000" if expected["artifact"] != "H-0000" else "ANSWER: H-0001"
        if expected["verdict"] == "ILLEGAL":
            return f"ANSWER: ILLEGAL AT STEP {expected['step'] + 1}"
        goal = "GOAL NOT MET" if expected["goal"] else "GOAL MET"
        return f"ANSWER: LEGAL, {goal}\nSTATE:\n" + "\n".join(state_lines(unit.family, expected["state"]))


def _perturbed(family: str, state: dict[str, Any]) -> dict[str, Any]:
    """A state of ``family`` that differs from ``state`` (the world family's nearest wrong answer)."""
    return worlds.get_family(family).state_lines.neighbour(state)


@functools.lru_cache(maxsize=256)
def _solve_without(target: worlds.World, motif: tuple[str, str, str]) -> tuple[str, ...] | None:
    """The first bounded solution of ``target`` that does not realize ``motif`` (None when each one does)."""
    for solution in worlds.bounded_solutions(target).solutions:
        if motif not in worlds.production_edges(target, solution):
            return solution
    return None


@dataclass(frozen=True)
class MotifBlind(models.Policy):
    """Right on P, R and E; on F and C the first valid solution that avoids the pair's withheld motif, and where
    every solution needs the motif the wrong answer (its first solution minus the last step)."""

    key: AnswerKey

    def __call__(self, prompt: str) -> str:
        unit = self.key.unit(prompt)
        if unit.condition not in ("F", "C"):
            return self.key.right(prompt)
        assert unit.target is not None and unit.motif is not None, unit.item_id
        solution = _solve_without(unit.target, unit.motif)
        return self.key.wrong(prompt) if solution is None else "".join(step + "\n" for step in solution)

    def describe(self) -> dict[str, Any]:
        return {"policy": "cwr.MotifBlind"}


@dataclass(frozen=True)
class ByCondition(models.Policy):
    """Right or wrong per condition; for C, right on the first ``c_right_share`` of the pairs (sorted by id)."""

    key: AnswerKey
    right_on: tuple[str, ...]  # conditions answered right
    c_right_share: float = 1.0  # share of C units answered right when "C" is in right_on
    label: str = ""

    def __call__(self, prompt: str) -> str:
        unit = self.key.unit(prompt)
        right = unit.condition in self.right_on
        if right and unit.condition == "C" and self.c_right_share < 1.0:
            pairs = sorted({u.pair_id for u in self.key.entries.values() if u.condition == "C"})
            right = pairs.index(unit.pair_id) < round(self.c_right_share * len(pairs))
        return self.key.right(prompt) if right else self.key.wrong(prompt)

    def describe(self) -> dict[str, Any]:
        return {"policy": "cwr.ByCondition", "right_on": list(self.right_on), "c_right_share": self.c_right_share,
                "label": self.label}


@dataclass(frozen=True)
class FamilySlips(models.Policy):
    """Right on every unit but the P units on ``family``'s worlds, of which one in ``every`` (in item order) is
    answered wrong; F solved, C not: a model whose pooled P accuracy passes tau while one family's does not."""

    key: AnswerKey
    family: str
    every: int

    NAME = "scripted-cwr-program-slips"

    def __call__(self, prompt: str) -> str:
        unit = self.key.unit(prompt)
        if unit.condition == "C":
            return self.key.wrong(prompt)
        if unit.condition == "P" and unit.family == self.family:
            probes = sorted(u.item_id for u in self.key.entries.values()
                            if u.condition == "P" and u.family == self.family)
            if probes.index(unit.item_id) % self.every == 0:
                return self.key.wrong(prompt)
        return self.key.right(prompt)

    def describe(self) -> dict[str, Any]:
        return {"policy": "cwr.FamilySlips", "family": self.family, "every": self.every}


#: name -> (conditions answered right, share of C answered right, what the scenario shows)
SCENARIOS: dict[str, tuple[tuple[str, ...], float, str]] = {
    "scripted-cwr-f-only": (("P", "R", "E", "F"), 1.0, "masters primitives, solves every F target and no C target"),
    "scripted-cwr-most-c": (("P", "R", "E", "F", "C"), 0.75, "solves every F target and three quarters of the C targets"),
    "scripted-cwr-no-mastery": (("R", "E", "F"), 1.0, "answers every P probe wrong"),
    "scripted-cwr-c-only": (("P", "R", "E", "C"), 1.0, "masters primitives, solves every C target and no F target"),
}


def _factory(name: str, right_on: tuple[str, ...], share: float) -> Callable[..., ScriptedModel]:
    def build(*, gold: Any = None, **_: Any) -> ScriptedModel:
        if not isinstance(gold, AnswerKey):
            raise models.ModelError(f"{name} runs only inside the CWR protocol (it needs the run's answer key)")
        return ScriptedModel(name, ByCondition(gold, right_on, share, name))
    return build


def register_scenarios() -> None:
    """Register the scenario models once per process (the protocol does so when a run names one)."""
    for name, (right_on, share, summary) in SCENARIOS.items():
        if models.model_kind(name) is None:
            models.register_model(name, "scripted", f"CWR scenario: {summary}", _factory(name, right_on, share))
    if models.model_kind(MOTIF_BLIND) is None:
        models.register_model(MOTIF_BLIND, "scripted", "CWR scenario: solves only where a solution avoids the "
                              "withheld motif", _motif_blind)
    if models.model_kind(FamilySlips.NAME) is None:
        models.register_model(FamilySlips.NAME, "scripted", "CWR scenario: misses one dataflow P probe in five, "
                              "every other control right, solves every F target and no C target", _program_slips)
    if models.model_kind(Flaky.NAME) is None:
        models.register_model(Flaky.NAME, "scripted", "CWR scenario: right answers with prose around each "
                              "artifact; about one unit in twelve is a provider error", _flaky)


class Flaky(ScriptedModel):
    """Right on every unit, F/C artifacts in a fenced block between two lines of prose; a unit whose prompt's
    sha256 is 0 modulo 12 (about one in twelve) is a coded provider error instead (``timeout``, or
    ``http_error`` when the hash is 0 modulo 24)."""

    NAME = "scripted-cwr-flaky"

    def __init__(self, key: AnswerKey):
        super().__init__(self.NAME, ByCondition(key, ("P", "R", "E", "F", "C"), 1.0, self.NAME))
        self.key = key

    def describe(self) -> ModelDescription:
        return ModelDescription(id=self.NAME, revision="sha256:" + "3" * 64, backend="scripted",
                                extra={"policy": "cwr.Flaky"})

    def score_and_generate(self, prompts, choices=None, settings=models.GenerationSettings()):
        out = []
        for index, prompt in enumerate(prompts):
            text = prompt if isinstance(prompt, str) else self.render_chat(prompt)
            digest = int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)
            if digest % 12 == 0:
                error = "http_error" if digest % 24 == 0 else "timeout"
                out.append(Response(index=index, finish_reason="error", error=error, error_detail="scripted fault"))
                continue
            answer = self.key.right(text)
            if self.key.unit(text).condition in ("F", "C"):
                answer = f"Here is a plan that reaches the goal:\n```\n{answer}```\nEach step is legal."
            out.append(Response(index=index, text=answer, finish_reason="stop"))
        return out


def _flaky(*, gold: Any = None, **_: Any) -> Flaky:
    if not isinstance(gold, AnswerKey):
        raise models.ModelError(f"{Flaky.NAME} runs only inside the CWR protocol (it needs the run's answer key)")
    return Flaky(gold)


MOTIF_BLIND = "scripted-cwr-motif-blind"


def _program_slips(*, gold: Any = None, **_: Any) -> ScriptedModel:
    if not isinstance(gold, AnswerKey):
        raise models.ModelError(f"{FamilySlips.NAME} runs only inside the CWR protocol (it needs the run's answer "
                                "key)")
    return ScriptedModel(FamilySlips.NAME, FamilySlips(gold, "dataflow", 5))


def _motif_blind(*, gold: Any = None, **_: Any) -> ScriptedModel:
    if not isinstance(gold, AnswerKey):
        raise models.ModelError(f"{MOTIF_BLIND} runs only inside the CWR protocol (it needs the run's answer key)")
    return ScriptedModel(MOTIF_BLIND, MotifBlind(gold))
