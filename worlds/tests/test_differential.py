"""Differential replay: the checker against the independently written reference interpreter."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worlds import Step, check, format_steps, grounded_steps, load_world
from worlds import reference_replay as replay

from ._worlds import SHIPPED, example_cases, raw

WORLDS = {p.stem: load_world(p) for p in SHIPPED}
RAWS = {p.stem: raw(p.stem) for p in SHIPPED}


def _state_tuple(state):
    return getattr(state, "inventory", None) or getattr(state, "placements", ())


def _agree(stem, text):
    r = check(WORLDS[stem], text)
    ref = replay(RAWS[stem], text)
    got = (
        r.status.value,
        None if r.reason is None else r.reason.value,
        r.failing_step,
        tuple(_state_tuple(r.final_state)),
        r.cost,
        r.executed,
    )
    want = (ref.status, ref.reason, ref.failing_step, ref.state, ref.cost, ref.executed)
    assert got == want, f"{stem}: checker {got} != reference {want} on {text!r}"


@pytest.mark.parametrize(("stem", "name"), example_cases())
def test_reference_agrees_on_shipped_examples(stem, name):
    ex = next(e for e in WORLDS[stem].examples if e.name == name)
    _agree(stem, ex.text)


@st.composite
def _random_sequence(draw):
    stem = draw(st.sampled_from(sorted(WORLDS)))
    world = WORLDS[stem]
    names = [p.name for p in world.primitives] * 3 + ["nope"]
    ents = [e for e, _ in world.entities]
    args = st.one_of(st.sampled_from(ents), st.integers(0, 8), st.just("ghost"))
    grounded = grounded_steps(world)
    steps = []
    for i in range(draw(st.integers(1, world.budget.max_steps + 1))):
        if (
            draw(st.integers(0, 9)) < 8
        ):  # mostly type-correct steps, so execution is exercised
            steps.append(draw(st.sampled_from(grounded)))
            continue
        name = draw(st.sampled_from(names))
        prim = world.primitive(name)
        n = (
            len(prim.params)
            if prim is not None and draw(st.booleans())
            else draw(st.integers(0, 3))
        )
        steps.append(Step(name, tuple(draw(args) for _ in range(n)), i + 1))
    return stem, format_steps(steps)


@settings(max_examples=400, deadline=None)
@given(_random_sequence())
def test_reference_agrees_on_random_step_sequences(case):
    _agree(*case)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(WORLDS)),
    st.text(alphabet=st.sampled_from(list("ab_(),  \t\n\r#0123x")), max_size=40),
)
def test_reference_agrees_on_grammar_edge_text(stem, text):
    _agree(stem, text)


@pytest.mark.parametrize("digits", [639, 640, 641, 4301, 20_000])
def test_reference_agrees_on_integer_literals_at_the_digit_bound(digits):
    """Both sides draw the malformed line at 640 digits, and neither raises past Python's own digit limit."""
    for stem in sorted(WORLDS):
        step = WORLDS[stem].primitives[0].name if hasattr(WORLDS[stem], "primitives") else "a"
        _agree(stem, f"{step}({'7' * digits})\n")
