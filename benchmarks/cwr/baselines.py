"""Copy, random and greedy baselines on every pair target (seeded, deterministic, no model).

* copy: each demonstration of a side and every contiguous window of it,
  written verbatim, renamed, relabelled, reordered, or reordered and relabelled onto the target
  (``worlds.copy_audit`` with every bounded target solution).  A copy that solves
  the target flags the pair: the fixture must be rejected before any model
  outcome is seen.
* random: ``random_samples`` sequences of grounded steps of the target, each
  of a uniform length from 1 to the step cap; the share that is VALID. For a
  dataflow target a sample is a program of that length whose binding *i*
  binds ``w<i+1>`` (the last binds the goal wire), each with a uniform
  primitive and uniform arguments among the inputs and the wires bound before
  it (types are not consulted: the sampler knows the names, not the rules).
* greedy: from s0, repeatedly take the legal step that most increases goal
  progress (then lowest cost, then name) until the goal holds, no step is
  legal, or the step cap is reached; whether the result is VALID. Dataflow
  progress: the number of cases on which the best wire of the goal type holds
  the expected value (the goal wire, once bound, counts double, so a complete
  match is taken at once); steps are the type-correct bindings of the state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

import worlds
from benchmarks.core.stats import proportion

#: Flag set on a pair whose target a copied demonstration solves.
COPY_FLAG = "copy_baseline_solves_target"


@dataclass(frozen=True)
class SideBaselines:
    """Baseline outcomes on one target world."""

    condition: str  # F or C
    target_id: str
    copy_solves: tuple[str, ...]  # per solving demonstration: why it solves (empty: no copy solves)
    random_valid: int  # VALID samples
    random_samples: int
    greedy_steps: tuple[str, ...]
    greedy_status: str  # VALID / INVALID / MALFORMED
    greedy_reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition, "target_id": self.target_id, "copy_solves": list(self.copy_solves),
            "random_valid": self.random_valid, "random_samples": self.random_samples,
            "random_valid_rate": self.random_valid / self.random_samples if self.random_samples else None,
            # the random samples are independent draws: plain Wilson
            "random_valid_rate_interval": proportion(self.random_valid, self.random_samples),
            "greedy_steps": list(self.greedy_steps), "greedy_status": self.greedy_status,
            "greedy_reason": self.greedy_reason,
        }


def _text(steps: Sequence[str]) -> str:
    return "".join(s + "\n" for s in steps)


def copy_baseline(target: worlds.World, demonstrations: Sequence[tuple[worlds.World, Sequence[str]]]) -> tuple[str, ...]:
    """Why each demonstration that solves ``target`` when copied does so.

    ``worlds.copy_audit`` over the demonstration and every contiguous window
    of it: verbatim (the checker), renamed (a target solution's motif
    signature), relabelled onto a bounded target solution, reordered into
    one, or reordered and relabelled.
    """
    solutions = worlds.bounded_solutions(target).solutions
    signatures = {worlds.motif_signature(target, solution) for solution in solutions}
    found = []
    for index, (demo_world, steps) in enumerate(demonstrations):
        why = worlds.copy_audit(demo_world, tuple(steps), target, signatures, solutions)
        if why is not None:
            found.append(f"demonstration {index}: {why}")
    return tuple(found)


def random_baseline(target: worlds.World, samples: int, seed: int) -> int:
    """How many of ``samples`` seeded random candidates of the target's family (``Family.random_artifacts``)
    are VALID."""
    rng = random.Random(f"{seed}:random:{target.id}")
    family = worlds.get_family(target.family)
    return sum(worlds.check(target, text).ok for text in family.random_artifacts(target, rng, samples))


def greedy_baseline(target: worlds.World) -> tuple[tuple[str, ...], worlds.CheckResult]:
    """The greedy step sequence and its check result (progress: the family's ``goal_progress``)."""
    family = worlds.get_family(target.family)
    steps: list[str] = []
    state = target.initial_state
    while len(steps) < target.budget.max_steps and not family.goal(target, state):
        if family.goal_unreachable(target, state):
            break  # no continuation can meet the goal (a program's goal wire is bound, wrongly)
        alphabet = sorted(step.render() for step in family.alphabet(target, state, len(steps)))
        options = []
        for step in alphabet:
            result = worlds.check(target, _text([*steps, step]))
            if result.executed == len(steps) + 1:
                options.append((-family.goal_progress(target, result.final_state), result.cost, step,
                                result.final_state))
        if not options:
            break
        _, _, step, state = min(options, key=lambda o: o[:3])
        steps.append(step)
    return tuple(steps), worlds.check(target, _text(steps) if steps else "")


def side_demonstrations(side: Any) -> list[tuple[worlds.World, tuple[str, ...]]]:
    """(source world, steps) of every demonstration on a pair side."""
    return [(demo.source, tuple(demo.steps)) for demo in side.demonstrations]


def side_baselines(side: Any, samples: int, seed: int) -> SideBaselines:
    target = side.target
    greedy_steps, greedy = greedy_baseline(target)
    return SideBaselines(
        condition=side.condition, target_id=target.id,
        copy_solves=copy_baseline(target, side_demonstrations(side)),
        random_valid=random_baseline(target, samples, seed), random_samples=samples,
        greedy_steps=greedy_steps, greedy_status=greedy.status.value,
        greedy_reason=greedy.reason.value if greedy.reason else None,
    )


def pair_baselines(pairs: Sequence[Any], samples: int, seed: int) -> dict[str, Any]:
    """Baselines on both sides of every pair, the pairs a copy flags, and over every target the greedy solves and
    the random valid samples (the baseline-competence gate reads their shares)."""
    rows = {}
    flagged = []
    totals = {"targets": 0, "greedy_solved": 0, "random_valid": 0, "random_samples": 0}
    for pair in pairs:
        sides = [side_baselines(pair.f, samples, seed), side_baselines(pair.c, samples, seed)]
        flags = sorted({COPY_FLAG for s in sides if s.copy_solves})
        if flags:
            flagged.append(pair.pair_id)
        rows[pair.pair_id] = {"flags": flags, "sides": [s.as_dict() for s in sides]}
        for side in sides:
            totals["targets"] += 1
            totals["greedy_solved"] += side.greedy_status == "VALID"
            totals["random_valid"] += side.random_valid
            totals["random_samples"] += side.random_samples
    return {"pairs": rows, "copy_flagged_pairs": len(flagged), "flagged": sorted(flagged), **totals}
