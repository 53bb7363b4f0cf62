"""Scripted ladder models for the self-checks: coded outcomes (``scripted-ladder-flaky``) and a rung whose every
request fails (``scripted-ladder-down``).

A run names them with ``-p benchmarks.ladder.scenarios``; importing the module registers them once per
process, so runs in a subprocess and runs in the test's own process see the same classes.
"""

from __future__ import annotations

import hashlib

import models
from models import LanguageModel, ModelDescription, Response


class Flaky(LanguageModel):
    """Approves everything, except: about 1 unit in 12 times out, 1 in 12 is an HTTP error, 1 in 6 is prose."""

    def describe(self):
        return ModelDescription(id="scripted-ladder-flaky", revision="sha256:" + "1" * 64, backend="scripted")

    def render_chat(self, chat):
        return "".join(m["content"] for m in chat)

    def score_and_generate(self, prompts, choices=None, settings=None):
        out = []
        for index, prompt in enumerate(prompts):
            digest = int(hashlib.sha256(self.render_chat(prompt).encode()).hexdigest(), 16) % 12
            if digest == 0:
                out.append(Response(index=index, finish_reason="error", error="timeout", error_detail="slow"))
            elif digest == 1:
                out.append(Response(index=index, finish_reason="error", error="http_error", error_detail="HTTP 500"))
            elif digest in (2, 3):
                out.append(Response(index=index, text="It depends on the auditor.", finish_reason="stop"))
            else:
                out.append(Response(index=index, text="All rules hold.\nDECISION: APPROVE", finish_reason="stop"))
        return out


class Down(Flaky):
    """Every request fails with a coded HTTP error: no unit carries a decision."""

    def describe(self):
        return ModelDescription(id="scripted-ladder-down", revision="sha256:" + "2" * 64, backend="scripted")

    def score_and_generate(self, prompts, choices=None, settings=None):
        return [Response(index=i, finish_reason="error", error="http_error", error_detail="HTTP 503")
                for i in range(len(prompts))]


def register() -> None:
    """Register both models unless this process already has them."""
    for name, summary, build in (("scripted-ladder-flaky", "coded outcomes", Flaky),
                                 ("scripted-ladder-down", "every unit errored", Down)):
        if models.model_kind(name) is None:
            models.register_model(name, "test", summary, lambda build=build, **_: build())


register()
