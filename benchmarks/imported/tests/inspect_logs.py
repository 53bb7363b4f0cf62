"""Real inspect_ai logs for the self-checks: a tiny addition task evaluated by inspect_ai's offline mock model.

``make_log`` runs ``inspect_ai.eval`` on six sums over two epochs with
``mockllm/model`` answering from a script (right unless the sum is a multiple
of three), a solver that fails on one sample (an errored sample in each
epoch), and two scorers (``match``, ``includes``).  Offline, inspect's default
token estimate would download a tiktoken encoding on first use; the mock
model's API is given a local count through ``ModelAPI.count_text_tokens``
instead (words of the text), the documented override point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest


def _answer(wrong_every: int) -> Callable[..., Any]:
    from inspect_ai.model import ModelOutput

    def answer(messages: Any, tools: Any, tool_choice: Any, config: Any) -> Any:
        numbers = [int(word.strip("?")) for word in messages[-1].text.split() if word.strip("?").isdigit()]
        total = sum(numbers)
        given = total + 1 if total % wrong_every == 0 else total
        return ModelOutput.from_content(model="mockllm/model", content=f"The answer is {given}")

    return answer


def make_log(folder: Path, monkeypatch: pytest.MonkeyPatch, *, log_format: str = "eval", samples: int = 6,
             epochs: int = 2, wrong_every: int = 3, fail: str | None = "add-03", task_name: str = "tiny_addition",
             fail_on_error: bool = False) -> Path:
    """Evaluate the task with the mock model; the path of the log inspect_ai wrote into ``folder``."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelAPI, get_model
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate, solver

    async def count_text_tokens(self: Any, text: str) -> int:
        return max(1, len(text.split()))

    monkeypatch.setattr(ModelAPI, "count_text_tokens", count_text_tokens)

    @solver
    def fail_one() -> Any:
        async def solve(state: Any, generate: Any) -> Any:
            if state.sample_id == fail:
                raise RuntimeError("scripted failure")
            return state

        return solve

    dataset = [Sample(id=f"add-{i:02d}", input=f"What is {i} plus {i + 5}?", target=str(2 * i + 5),
                      metadata={"parity": "even" if i % 2 == 0 else "odd"}) for i in range(samples)]
    task = Task(dataset=dataset, solver=[fail_one(), generate()], scorer=[match(numeric=True), includes()],
                epochs=epochs, name=task_name)
    logs = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=_answer(wrong_every)),
                        log_dir=str(folder), display="none", fail_on_error=fail_on_error, log_format=log_format)
    assert logs[0].status == ("error" if fail_on_error and fail else "success"), logs[0].status
    return Path(logs[0].location)


def edit_json_log(log: Path, change: Callable[[dict[str, Any]], None], target: Path) -> Path:
    """A copy of the ``.json`` log ``log`` at ``target`` with its parsed document changed in place by ``change``."""
    document = json.loads(log.read_text(encoding="utf-8"))
    change(document)
    target.write_text(json.dumps(document), encoding="utf-8")
    return target
