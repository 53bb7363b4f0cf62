"""Scripted rungs for the campaign's self-checks: one model in both seats, of a set per-check accuracy.

``campaign-a<accuracy>[-s<supervisor accuracy>]-seed<seed>`` is the **neutral** supervisor: in the worker seat it
reads each check of the episode right with probability ``accuracy`` and approves when every check as read passes
(the ladder's scripted worker); in the supervisor seat it reads the checks again, independently, right with
probability ``supervisor accuracy`` (default: ``accuracy``), and allows an approval when every check as read
passes, so it blocks true violations at that per-check accuracy.

``-lenient<q>`` after the accuracies makes either seat pass a case that should be rejected with probability ``q``
whatever it read (the worker approves it, the supervisor allows it): violations get approved, so a supervisor has
something to catch, and some get through, so the ledger has damages to record.

``campaign-a<accuracy>-averse<p>[-<condition>]-seed<seed>`` is **consequence-averse**: as the neutral one, and
besides, in the supervisor seat under ``condition`` (default ``ledger``) it blocks an approvable case with
probability ``p``.  Under the ledger that is the over-blocking H-L1 predicts; under ``review`` it is the opposite
(the ledger then blocks less), which reaches H-L1's other outcome.

Each draw is seeded by the seed and the rendered prompt, so a resumed run answers every prompt as before.  The
run's answer key tells the model, per prompt, which seat it sits in, the episode's true checks and the condition.
The same names run a ladder probe (the worker seat alone), so a campaign's launch gate can rest on a probe of the
same scripted rung.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import models
from models import Policy, ScriptedModel

__all__ = ["CAMPAIGN_MODEL", "CampaignSeats", "ensure_campaign_model"]

CAMPAIGN_MODEL = re.compile(r"^campaign-a(?P<a>[01](?:\.\d+)?)(?:-s(?P<s>[01](?:\.\d+)?))?"
                            r"(?:-lenient(?P<q>[01](?:\.\d+)?))?(?:-averse(?P<p>[01](?:\.\d+)?)(?:-(?P<condition>review|ledger))?)?"
                            r"-seed(?P<seed>\d+)$")


def _rng(seed: int, *parts: str) -> random.Random:
    digest = hashlib.sha256(json.dumps([seed, *parts]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class CampaignSeats(Policy):
    """The answer of either seat from the key's entry for the prompt (``seat``, ``checks``, ``condition``)."""

    key: Callable[[str], Mapping[str, Any]]
    accuracy: float
    seed: int
    averse: float = 0.0
    averse_condition: str = "ledger"
    supervisor_accuracy: float | None = None
    lenient: float = 0.0

    def __call__(self, prompt: str) -> str:
        info = self.key(prompt)
        truth = [bool(c) for c in info["checks"]]
        rng = _rng(self.seed, info["seat"], prompt)
        accuracy = self.accuracy if info["seat"] == "worker" or self.supervisor_accuracy is None \
            else self.supervisor_accuracy
        read = [t if rng.random() < accuracy else not t for t in truth]
        if info["seat"] == "worker":
            approve = all(read) or (not all(truth) and rng.random() < self.lenient)
            return "Checked every condition.\nDECISION: " + ("APPROVE" if approve else "REJECT")
        block = not all(read) and (all(truth) or rng.random() >= self.lenient)
        if not block and all(truth) and info["condition"] == self.averse_condition and rng.random() < self.averse:
            block = True
        return "Checked the agent's decision.\nRULING: " + ("BLOCK" if block else "ALLOW")

    def describe(self) -> dict[str, Any]:
        return {"policy": "CampaignSeats", "accuracy": self.accuracy, "seed": self.seed, "averse": self.averse,
                "averse_condition": self.averse_condition, "supervisor_accuracy": self.supervisor_accuracy,
                "lenient": self.lenient}


def ensure_campaign_model(name: str) -> bool:
    """Register ``name`` if it is a campaign model name not yet registered; True when it names one."""
    match = CAMPAIGN_MODEL.match(name)
    if not match:
        return False
    if models.model_kind(name) is None:
        accuracy, seed = float(match["a"]), int(match["seed"])
        supervisor = float(match["s"]) if match["s"] else None
        averse = float(match["p"]) if match["p"] else 0.0
        lenient = float(match["q"]) if match["q"] else 0.0
        condition = match["condition"] or "ledger"
        if not all(0.0 <= v <= 1.0 for v in (accuracy, averse, lenient, supervisor if supervisor is not None else 0.0)):
            return False

        def factory(key: Callable[[str], Mapping[str, Any]] | None = None,
                    checks: Callable[[str], Any] | None = None, **_: Any) -> ScriptedModel:
            if key is None:  # the ladder probe's answer key: the true checks of each episode (the worker seat)
                if checks is None:
                    raise models.ModelError(f"{name} needs the run's answer key")
                key = lambda prompt: {"seat": "worker", "checks": checks(prompt), "condition": "autonomous"}  # noqa: E731
            return ScriptedModel(name, CampaignSeats(key, accuracy, seed, averse, condition, supervisor, lenient))

        what = f"campaign rung, per-check accuracy {accuracy:g}" + (
            f" (supervisor seat {supervisor:g})" if supervisor is not None else "") + (
            f", overlooks a violation with probability {lenient:g}" if lenient else "") + f", seed {seed}" + (
            f", blocks approvable cases with probability {averse:g} under {condition}" if averse else ", neutral")
        models.register_model(name, "scripted", what, factory)
    return True
