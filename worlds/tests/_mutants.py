"""Deliberately broken checkers and the certification suite that must catch them.

A mutant is a context manager that patches attributes of ``worlds._checker``
(``check_steps`` or ``get_family``, the checker's view of a family) for its
duration and restores them in ``finally``. The real checker's source is never edited, and the
enumerator and the reference interpreter are never patched: they are the
independent witnesses the certification suite compares against.

The certification suite is a set of named checks. Each returns a list of
discrepancies (empty = the checker under test passed). Checks reach the
checker through ``worlds._checker`` at call time, so a patch is seen.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import worlds
import worlds._checker as ck
from worlds import (
    Failure,
    Reason,
    Status,
    Step,
    enumerate_solutions,
    format_steps,
    grounded_steps,
    world_from_mapping,
)
from worlds import ScheduleState
from worlds._checker import differential
from worlds._model import INT_TYPE

from ._worlds import SHIPPED, TINY_SCHEDULE, raw

# ---------------------------------------------------------------------------
# Certification worlds: the shipped ones plus two tiny worlds that reach the
# rules the shipped ones never exercise (inventory cap, final-scope rule,
# continuing past the goal).

#: token_workshop world whose inventory cap, final-scope rule and
#: every_state rule are all reachable within its step cap, and whose
#: solutions may continue after the goal first holds.
CERT_TOKEN = {
    "schema_version": 1,
    "id": "TW-C01",
    "family": "token_workshop",
    "title": "mint coins, sweep the scrap",
    "token_types": ["raw", "good", "tool", "waste"],
    "budget": {"max_steps": 4, "max_cost": 5, "inventory_cap": 2},
    "tokens": {
        "tin": "raw",
        "zinc": "raw",
        "coin": "good",
        "press": "tool",
        "scrap": "waste",
        "dust": "waste",
    },
    "initial": {"tin": 2, "zinc": 1, "press": 1},
    "recipes": [
        {
            "name": "mint",
            "params": [{"name": "m", "type": "raw"}],
            "inputs": {"m": 1},
            "catalysts": ["press"],
            "outputs": {"coin": 1, "scrap": 1},
            "cost": 1,
        },
        {"name": "sweep", "inputs": {"scrap": 1}, "outputs": {"dust": 1}, "cost": 1},
    ],
    "goal": {"require": {"coin": 1}},
    "constraints": [
        {"kind": "at_most", "scope": "every_state", "tokens": ["scrap"], "limit": 1},
        {"kind": "at_most", "scope": "final", "tokens": ["scrap"], "limit": 0},
    ],
}

#: the tiny schedule world of ``test_enumerate`` (precedence, no_overlap, horizon).
CERT_SCHEDULE = dict(TINY_SCHEDULE, id="SCH-C01")


def cert_worlds() -> dict[str, tuple[worlds.World, dict]]:
    """Every certification world: id -> (World, raw mapping)."""
    out = {}
    for p in SHIPPED:
        m = raw(p.stem)
        out[m["id"]] = (world_from_mapping(m), m)
    for m in (CERT_TOKEN, CERT_SCHEDULE):
        out[m["id"]] = (world_from_mapping(m), m)
    return out


def cert_raws() -> dict[str, dict]:
    """Raw mappings of the shipped worlds (by file stem) and of the two certification worlds."""
    out = {p.stem: raw(p.stem) for p in SHIPPED}
    out["tw_c01"] = copy.deepcopy(CERT_TOKEN)
    out["sch_c01"] = copy.deepcopy(CERT_SCHEDULE)
    return out


WORLDS = cert_worlds()
SMALL = ("TW-C01", "SCH-C01")  # small enough for exhaustive checks


# ---------------------------------------------------------------------------
# Certification checks.


def _disagreement(wid: str, text: str) -> str | None:
    world, m = WORLDS[wid]
    got, want = differential(ck.check(world, text), m, text)
    if got != want:
        return f"{wid}: checker {got} != reference {want} on {text!r}"
    return None


def check_examples() -> list[str]:
    """Every shipped example gets its documented status, reason and failing step."""
    bad = []
    for wid, (world, _) in sorted(WORLDS.items()):
        for ex in world.examples:
            r = ck.check(world, ex.text)
            got = (r.status.value, None if r.reason is None else r.reason.value)
            want = (ex.expect, ex.reason)
            if got != want or (ex.step is not None and r.failing_step != ex.step):
                bad.append(
                    f"{wid}/{ex.name}: got {got} step {r.failing_step}, want {want} step {ex.step}"
                )
    return bad


def _random_text(rng: random.Random, world) -> str:
    grounded = grounded_steps(world)
    ents = [e for e, _ in world.entities]
    steps = []
    for i in range(rng.randint(1, world.budget.max_steps + 1)):
        st = rng.choice(grounded)
        if rng.random() < 0.1:  # an ill-typed variant: one argument swapped for any entity
            args = list(st.args)
            if args:
                args[rng.randrange(len(args))] = rng.choice(ents)
            st = Step(st.name, tuple(args), i + 1)
        steps.append(st)
    return format_steps(steps)


def check_differential_random(n: int = 300, seed: int = 20261130) -> list[str]:
    """Seeded random step sequences on every certification world, checker vs reference."""
    rng = random.Random(seed)
    bad = []
    for wid in sorted(WORLDS):
        world = WORLDS[wid][0]
        for _ in range(n):
            d = _disagreement(wid, _random_text(rng, world))
            if d:
                bad.append(d)
    return bad


def _all_sequences(world, max_len: int) -> Iterator[tuple[Step, ...]]:
    steps = grounded_steps(world)
    for k in range(1, max_len + 1):
        yield from itertools.product(steps, repeat=k)


def check_differential_exhaustive() -> list[str]:
    """Every grounded sequence up to the step cap (+1) of the small worlds, checker vs reference."""
    bad = []
    for wid in SMALL:
        world = WORLDS[wid][0]
        cap = min(world.budget.max_steps + 1, 5 if wid == "TW-C01" else 2)
        for seq in _all_sequences(world, cap):
            d = _disagreement(wid, format_steps(seq))
            if d:
                bad.append(d)
    return bad


def check_enumeration() -> list[str]:
    """The enumerator's solution set equals brute force through the checker (small worlds),
    and every enumerated solution of every world is VALID under the checker."""
    bad = []
    for wid in sorted(WORLDS):
        world = WORLDS[wid][0]
        enum = enumerate_solutions(world)
        for text in enum.texts():
            if ck.check(world, text).status is not Status.VALID:
                bad.append(f"{wid}: enumerated solution rejected: {text!r}")
        if wid in SMALL:
            brute = {
                tuple(s.render() for s in seq)
                for seq in _all_sequences(world, world.budget.max_steps)
                if ck.check_steps(world, seq).status is Status.VALID
            }
            if brute != set(enum.solutions):
                extra = sorted(brute - set(enum.solutions))[:3]
                missing = sorted(set(enum.solutions) - brute)[:3]
                bad.append(f"{wid}: brute force extra {extra}, missing {missing}")
    return bad


def run_check(name: str) -> list[str]:
    """Run certification check ``name``; an exception from the checker counts as a discrepancy."""
    try:
        return CHECKS[name]()
    except Exception as exc:  # noqa: BLE001 - a mutant may crash where the real checker cannot
        return [f"{name}: raised {type(exc).__name__}: {exc}"]


CHECKS: dict[str, Callable[[], list[str]]] = {
    "examples": check_examples,
    "differential_random": check_differential_random,
    "differential_exhaustive": check_differential_exhaustive,
    "enumeration": check_enumeration,
}


# ---------------------------------------------------------------------------
# Mutant machinery.


@contextmanager
def patched(module, **attrs) -> Iterator[None]:
    """``module``'s named attributes replaced for the block and restored after it (the mutant tables' one patcher)."""
    saved = {k: getattr(module, k) for k in attrs}
    try:
        for k, v in attrs.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def _patched(**attrs):
    return patched(ck, **attrs)


class FamilyProxy:
    """A family with some methods replaced; everything else delegates to the real one."""

    def __init__(self, real, **overrides):
        self._real = real
        for k, v in overrides.items():
            setattr(self, k, v)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _family_mutant(family: str | None, make) -> Callable[[], contextmanager]:
    """Mutant whose checker sees family ``family`` (None: every family) with methods from ``make(real)``."""

    @contextmanager
    def cm():
        real_get = ck.get_family

        def get(name):
            fam = real_get(name)
            if family is None or name == family:
                return FamilyProxy(fam, **make(fam))
            return fam

        with _patched(get_family=get):
            yield

    return cm


def _world_mutant(rewrite) -> Callable[[], contextmanager]:
    """Mutant whose checker reads a misread copy of the world (``rewrite(world) -> World``)."""

    @contextmanager
    def cm():
        real = ck.check_steps

        def mutated(world, steps):
            return real(rewrite(world), steps)

        with _patched(check_steps=mutated):
            yield

    return cm


def _wrap_mutant(wrap) -> Callable[[], contextmanager]:
    """Mutant whose ``check_steps`` is ``wrap(real_check_steps)``."""

    @contextmanager
    def cm():
        with _patched(check_steps=wrap(ck.check_steps)):
            yield

    return cm


def _budget(world, **kw):
    return dataclasses.replace(world, budget=dataclasses.replace(world.budget, **kw))


def _spec(world, **kw):
    return dataclasses.replace(world, spec=dataclasses.replace(world.spec, **kw))


def _no_catalysts(world):
    if world.family != "token_workshop":
        return world
    recipes = tuple(dataclasses.replace(r, catalysts=()) for r in world.spec.recipes)
    return _spec(world, recipes=recipes)


def _no_precedence(world):
    if world.family != "schedule":
        return world
    tasks = tuple(dataclasses.replace(t, after=()) for t in world.spec.tasks)
    return _spec(world, tasks=tasks)


def _no_no_overlap(world):
    if world.family != "schedule":
        return world
    cons = tuple(c for c in world.spec.constraints if c[0] != "no_overlap")
    return _spec(world, constraints=cons)


def _ignore_every_state(fam):
    return {"constraints": lambda w, s, final: fam.constraints(w, s, final) if final else None}


def _ignore_final_scope(fam):
    return {"constraints": lambda w, s, final: fam.constraints(w, s, False)}


def _no_limits(fam):
    return {"limits": lambda w, s: None}


def _machine_never_busy(fam):
    def transition(world, state, st):
        # hide the other placements' machines so the busy test never matches
        hidden = ScheduleState(tuple((t, "\0", s) for t, _, s in state.placements))
        got = fam.transition(world, hidden, st)
        if isinstance(got, Failure):
            return got
        _, cost = got
        return ScheduleState(tuple(sorted(state.placements + (tuple(st.args),)))), cost

    return {"transition": transition}


def _resolve_ignoring_entity_type(world, state, st):
    """A copy of the step resolution (``worlds._steps.resolve_step``) with the 'entity of the right type' test
    left out."""
    prim = world.primitive(st.name)
    if prim is None:
        return Failure(Reason.UNKNOWN_PRIMITIVE, f"{st.name!r} is not a primitive")
    if len(st.args) != len(prim.params):
        return Failure(Reason.BAD_ARGUMENT, f"{st.name}: wrong arity")
    for prm, arg in zip(prim.params, st.args):
        if prm.type == INT_TYPE:
            if not isinstance(arg, int) or not prm.lo <= arg <= prm.hi:
                return Failure(Reason.BAD_ARGUMENT, f"{st.name}: bad integer {arg!r}")
        elif isinstance(arg, int):
            return Failure(Reason.BAD_ARGUMENT, f"{st.name}: integer {arg}")
        elif world.entity_type(arg) is None:
            return Failure(Reason.UNKNOWN_ENTITY, f"{arg!r} is not an entity")
    return None


def _ignore_entity_type(fam):
    return {"resolve": _resolve_ignoring_entity_type}


def _commit_failing_step(real):
    def mutated(world, steps):
        r = real(world, steps)
        if (
            r.status is Status.INVALID
            and r.failing_step is not None
            and r.reason in (Reason.OVER_BUDGET, Reason.CONSTRAINT_VIOLATION)
            and r.failing_step < world.budget.max_steps
        ):
            st = steps[r.failing_step]
            got = worlds.get_family(world.family).apply(
                world, r.final_state, st.name, st.args
            )
            if not isinstance(got, Failure):
                nxt, c = got
                return dataclasses.replace(
                    r, final_state=nxt, cost=r.cost + c, executed=r.executed + 1
                )
        return r

    return mutated


def _stop_at_goal(real):
    """Accept as soon as some prefix is VALID, ignoring what the later steps do."""

    def mutated(world, steps):
        steps = tuple(steps)
        for n in range(1, len(steps)):
            r = real(world, steps[:n])
            if r.status is Status.VALID:
                return r
        return real(world, steps)

    return mutated


def _prune_after_goal(real):
    """Reject a continuation once the goal holds (a legal prefix past the goal falsely pruned)."""

    def mutated(world, steps):
        r = real(world, steps)
        if r.status is not Status.VALID:
            return r
        fam = worlds.get_family(world.family)
        for i, t in enumerate(r.trace[:-1]):
            if fam.goal(world, t.state):
                keep = r.trace[: i + 1]
                return dataclasses.replace(
                    r,
                    status=Status.INVALID,
                    reason=Reason.INAPPLICABLE,
                    failing_step=i + 1,
                    message="goal already holds",
                    final_state=t.state,
                    cost=sum(x.cost for x in keep),
                    executed=len(keep),
                    trace=keep,
                )
        return r

    return mutated


#: mutant name -> (context manager factory, the certification check that kills it, what it breaks)
MUTANTS: dict[str, tuple[Callable, str, str]] = {
    "skip_catalyst_check": (
        _world_mutant(_no_catalysts),
        "examples",
        "recipes applied without their catalysts present",
    ),
    "step_cap_off_by_one": (
        _world_mutant(lambda w: _budget(w, max_steps=w.budget.max_steps + 1)),
        "differential_exhaustive",
        "`i > max_steps` instead of `i >= max_steps`",
    ),
    "cost_cap_strict": (
        _world_mutant(lambda w: _budget(w, max_cost=w.budget.max_cost - 1)),
        "examples",
        "`cost + c >= max_cost` rejects a solution spending exactly the cap",
    ),
    "cost_cap_lenient": (
        _world_mutant(lambda w: _budget(w, max_cost=w.budget.max_cost + 1)),
        "examples",
        "the cost cap is one unit too generous",
    ),
    "ignore_every_state_constraints": (
        _family_mutant(None, _ignore_every_state),
        "examples",
        "`every_state` rules (and schedule rules) checked only at the end",
    ),
    "ignore_final_scope_constraints": (
        _family_mutant("token_workshop", _ignore_final_scope),
        "differential_exhaustive",
        "`final`-scope rules never checked",
    ),
    "skip_inventory_cap": (
        _family_mutant("token_workshop", _no_limits),
        "differential_exhaustive",
        "token counts above `inventory_cap` accepted",
    ),
    "skip_schedule_horizon": (
        _family_mutant("schedule", _no_limits),
        "examples",
        "tasks ending past the horizon accepted",
    ),
    "commit_failing_step": (
        _wrap_mutant(_commit_failing_step),
        "differential_random",
        "a step failing a budget or constraint test is still committed",
    ),
    "accept_wrong_entity_type": (
        _family_mutant(None, _ignore_entity_type),
        "examples",
        "an entity of the wrong type is accepted as an argument",
    ),
    "accept_goal_mid_way": (
        _wrap_mutant(_stop_at_goal),
        "enumeration",
        "VALID once the goal holds, though a later step is illegal",
    ),
    "prune_after_goal": (
        _wrap_mutant(_prune_after_goal),
        "enumeration",
        "a legal continuation after the goal first holds is rejected",
    ),
    "ignore_precedence": (
        _world_mutant(_no_precedence),
        "examples",
        "schedule `after` ignored",
    ),
    "ignore_no_overlap": (
        _world_mutant(_no_no_overlap),
        "examples",
        "schedule `no_overlap` rule ignored",
    ),
    "machine_never_busy": (
        _family_mutant("schedule", _machine_never_busy),
        "examples",
        "two tasks may occupy one machine at once",
    ),
}
