"""The registry and the scripted reference models."""

from __future__ import annotations

import pytest

from models import (
    CapabilityError,
    Constant,
    GenerationSettings,
    ModelError,
    NoisyChecks,
    Opposite,
    Oracle,
    Prose,
    RandomChoice,
    ScriptedModel,
    UnknownModelError,
    available_models,
    load_model,
    register_model,
)

GOLD = {f"item {i}": "AB"[i % 2] for i in range(40)}


def test_unknown_name_lists_close_matches_and_available_names() -> None:
    with pytest.raises(UnknownModelError) as info:
        load_model("smollm2-135m")
    message = str(info.value)
    assert "did you mean 'smollm2-135m-instruct'?" in message
    for name in available_models():
        assert name in message
    with pytest.raises(UnknownModelError, match="available: "):
        load_model("nothing-like-it")


def test_duplicate_and_malformed_names_are_refused() -> None:
    with pytest.raises(ModelError, match="already registered"):
        register_model("scripted-oracle", "scripted", "again", lambda **_: None)
    with pytest.raises(ModelError, match="must not contain"):
        register_model("org/name", "scripted", "x", lambda **_: None)


def test_oracle_constant_and_opposite() -> None:
    prompts = sorted(GOLD)
    oracle = load_model("scripted-oracle", gold=GOLD.__getitem__)
    responses = oracle.score_and_generate(prompts, ["A", "B"], GenerationSettings(max_new_tokens=4))
    assert [r.text for r in responses] == [GOLD[p] for p in prompts]
    assert [r.scores.choice for r in responses] == [GOLD[p] for p in prompts]
    assert all(r.scores.margin in (1.0, -1.0) for r in responses)
    constant = load_model("scripted-constant", answer="B")
    assert {r.scores.choice for r in constant.score(prompts, ["A", "B"])} == {"B"}
    wrong = ScriptedModel("wrong", Opposite(Oracle(GOLD.__getitem__), ("A", "B")))
    assert all(r.text != GOLD[p] for p, r in zip(prompts, wrong.generate(prompts)))
    with pytest.raises(ModelError, match="needs gold="):
        load_model("scripted-oracle")


def test_scorer_and_writer_can_disagree() -> None:
    prompts = sorted(GOLD)
    split = ScriptedModel("right-in-generation-only", scorer=Constant("A"), writer=Prose("The answer is {answer}.", Oracle(GOLD.__getitem__)))
    responses = split.score_and_generate(prompts, ["A", "B"], GenerationSettings(max_new_tokens=8))
    assert {r.scores.choice for r in responses} == {"A"}
    assert [r.text for r in responses] == [f"The answer is {GOLD[p]}." for p in prompts]
    assert [r.text for r in split.score(prompts, ["A", "B"])] == [""] * len(prompts)


def test_random_choice_is_seeded_per_prompt_not_per_order() -> None:
    prompts = sorted(GOLD)
    model = load_model("scripted-random", seed=3)
    forward = [r.text for r in model.generate(prompts)]
    backward = [r.text for r in model.generate(prompts[::-1])][::-1]
    assert forward == backward
    assert 10 <= forward.count("A") <= 30
    other = [r.text for r in load_model("scripted-random", seed=4).generate(prompts)]
    assert other != forward


def test_noisy_checks_reads_each_check_with_the_given_accuracy() -> None:
    truth = {f"case {i}": [bool((i >> k) & 1) for k in range(10)] for i in range(400)}
    reads: list[list[bool]] = []

    def decide(read):
        reads.append(list(read))
        return "approve" if all(read) else "reject"

    worker = NoisyChecks(truth.__getitem__, decide, accuracy=0.8, seed=1)
    prompts = sorted(truth)
    answers = [worker(p) for p in prompts]
    correct = sum(r == t for read, p in zip(reads, prompts) for r, t in zip(read, truth[p]))
    rate = correct / (10 * len(prompts))
    assert abs(rate - 0.8) < 0.03, rate
    assert answers == [worker(p) for p in prompts]  # deterministic
    perfect = NoisyChecks(truth.__getitem__, lambda read: str(read), accuracy=1.0)
    assert all(perfect(p) == str(truth[p]) for p in prompts)
    with pytest.raises(ModelError, match="accuracy must lie in"):
        NoisyChecks(truth.__getitem__, decide, accuracy=1.5)


def test_scripted_description_is_a_stable_content_hash() -> None:
    a = ScriptedModel("m", RandomChoice(("A", "B"), seed=1)).describe()
    b = ScriptedModel("m", RandomChoice(("A", "B"), seed=1)).describe()
    c = ScriptedModel("m", RandomChoice(("A", "B"), seed=2)).describe()
    assert a.revision == b.revision != c.revision
    assert a.revision.startswith("sha256:") and a.backend == "scripted"


def test_scripted_models_have_no_taps() -> None:
    with pytest.raises(CapabilityError, match="need a local transformers model"):
        with load_model("scripted-constant").taps(lambda event: None):
            pass
