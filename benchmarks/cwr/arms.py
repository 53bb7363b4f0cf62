"""Fiction-CWR diagnostic arms: the run's F/C pairs under another budget or label scheme (``--cwr-arm NAME``).

An arm is preregistered by name in ``[diagnostics] arms``; its definition is
here.  Each changes every F and C target and its synthesis prompt and grades
against the changed world.  The P/R/E items are the run's usual ones, so an
arm run and a run without an arm pair unit by unit (``preregbench compare``).

* ``budget-less``: the step cap cut to the target's optimum length (no step
  slack; the cost cap kept).  Every bounded solution under it is one under
  the frozen budget, so the pair's novelty and copy audit still hold.
* ``budget-more``: one step more and twice the cost cap.  New solutions may
  avoid the withheld motif: each target is enumerated again under the arm's
  budget, and a pair with a target solvable without the motif is relabelled
  witness-only (the witness-only gate then reads it).  The copy baseline is
  computed on the changed targets as always.
* ``renaming-syllables`` (the renaming diagnostic): every pair built again
  from its own spec (same base, replica seeds, source variants) with the
  fresh names drawn as pronounceable nonce words (``tavoki``) instead of six
  random letters (``xqbunk``); ids and declaration order change with them.
  Demonstrations are chosen on the base's labels, so both sides show the
  same demonstrations and examples, relabelled; the isomorphism, copy and
  witness audits run again on the rebuilt targets.
* ``representation-tables`` (the representation diagnostic): the same
  targets, prompts written again with the handbook's declarations (tokens
  and recipes; machines and tasks; types, inputs, primitives and cases) as
  Markdown tables instead of lines of words; the kind of world, rules,
  constraints, budget, start, goal, examples and demonstration keep their
  words.

A budget arm's prompt is rendered again from the changed world with the
side's own demonstrations and examples, so it states the changed budget.
An arm run is a diagnostic: its deviations say so, and its label is not the
protocol's claim.  ``python -m benchmarks.cwr.arms PRIMARY_RUN ARM_RUN`` reads
it against the run without an arm of the same model, split and settings: per
synthesis condition the paired change in validity with its clustered
interval, and both runs' F - C deficits.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import worlds
from benchmarks.core import read_json_file
from benchmarks.core.paired import tango_rao_scott_interval
from benchmarks.core.protocol import UsageProblem

from .pairs import ARM_FLAG, MOTIF_REQUIRED, side_motif
from .spec import PREREG, base_pair, preregistered_names


def _less(budget: Mapping[str, Any], optimum: int) -> dict[str, Any]:
    return {**budget, "max_steps": optimum}


def _more(budget: Mapping[str, Any], optimum: int) -> dict[str, Any]:
    return {**budget, "max_steps": budget["max_steps"] + 1, "max_cost": 2 * budget["max_cost"]}


Budget = Callable[[Mapping[str, Any], int], dict[str, Any]]


@dataclass(frozen=True)
class Arm:
    """A diagnostic arm: what it is in words, and one of: the budget it gives a target (from the target's frozen
    budget and optimum length; ``widens``: it can admit new solutions, so the novelty is audited again), the
    label scheme the pair is rebuilt under (``worlds.LABEL_SCHEMES``), the handbook rendering of the prompts
    (``worlds.RENDERINGS``)."""

    what: str
    budget: Budget | None = None
    widens: bool = False
    labels: str | None = None
    rendering: str | None = None


ARMS: dict[str, Arm] = {
    "budget-less": Arm("the step cap cut to each target's optimum length", budget=_less),
    "budget-more": Arm("one step more and twice the cost cap on every target", budget=_more, widens=True),
    "renaming-syllables": Arm("every pair rebuilt with pronounceable nonce labels (three consonant-vowel "
                              "syllables) instead of six random letters", labels="syllables"),
    "representation-tables": Arm("every handbook's declarations written as Markdown tables instead of lines of "
                                 "words (the same world, rules and evidence)", rendering="tables"),
}


def preregistered_arms() -> tuple[str, ...]:
    """The arms ``[diagnostics] arms`` lists, each one defined here (else the import stops, before any work)."""
    return preregistered_names("[diagnostics] arms", PREREG.values.diagnostics.arms, sorted(ARMS), "defines")


def check_arm(name: str) -> str:
    """``name`` if the preregistration lists it; else a one-line usage problem."""
    listed = preregistered_arms()
    if name not in listed:
        raise UsageProblem(f"--cwr-arm {name!r} is not a preregistered arm; [diagnostics] arms in "
                           f"benchmarks/cwr/prereg.toml lists: {', '.join(listed) or 'none'}")
    return name


def _side(side: Any, change: Budget) -> Any:
    raw = copy.deepcopy(dict(side.target_raw))
    raw["budget"] = change(raw["budget"], side.optimum_length)
    target = worlds.world_from_mapping({k: v for k, v in raw.items() if k != "examples"},
                                       source=f"arm of {side.target.id}")
    prompt = worlds.render_prompt(raw, side.demonstrations, side.primitive_examples)
    return dataclasses.replace(side, target=target, target_raw=raw, prompt_text=prompt)


def _rendered(side: Any, rendering: str) -> Any:
    """``side`` with its prompt written again, its handbook in ``rendering`` (world, demonstrations and examples
    unchanged)."""
    prompt = worlds.render_prompt(side.target_raw, side.demonstrations, side.primitive_examples, rendering)
    return dataclasses.replace(side, prompt_text=prompt)


def _still_required(pair: Any) -> bool:
    """Whether every bounded solution of both changed targets realizes the side's withheld motif."""
    for condition in ("F", "C"):
        side = pair.side(condition)
        motif = side_motif(pair, condition)
        solutions = worlds.bounded_solutions(side.target).solutions
        if not solutions or not all(motif in worlds.production_edges(side.target, s) for s in solutions):
            return False
    return True


def _relabelled(pair: Any, labels: str, name: str) -> Any:
    """``pair`` built again from its spec with the replicas' names drawn by label scheme ``labels``: the same
    base, seeds, source variants and demonstration choice (made on the base's labels), every construction audit
    run again.  The manifest, novelty and flags stay the pair's (all of them are facts of the base)."""
    if pair.spec is None:
        raise UsageProblem(f"arm {name}: pair {pair.pair_id} carries no pair spec to rebuild it from")
    try:
        rebuilt, _ = worlds.build_pair(dataclasses.replace(pair.spec, labels=labels))
    except worlds.WorldsError as exc:
        raise UsageProblem(f"arm {name}: pair {pair.pair_id} cannot be rebuilt with {labels} labels: "
                           f"{str(exc).splitlines()[0]}") from None
    if rebuilt.motif != pair.motif:
        raise UsageProblem(f"arm {name}: pair {pair.pair_id} rebuilt with {labels} labels withholds "
                           f"{rebuilt.motif}, not {pair.motif}; the pair's construction is label dependent")
    return dataclasses.replace(rebuilt, manifest=pair.manifest, novelty=pair.novelty, flags=pair.flags)


def arm_pair(pair: Any, name: str) -> Any:
    """``pair`` under arm ``name``: both targets with the arm's budget, prompts rendered again, novelty audited
    again where the arm can admit new solutions; or the pair rebuilt under the arm's label scheme."""
    arm = ARMS[name]
    flags = (*pair.flags, f"{ARM_FLAG}{name}")
    if arm.labels is not None:
        return dataclasses.replace(_relabelled(pair, arm.labels, name), flags=flags)
    if arm.rendering is not None:
        return dataclasses.replace(pair, f=_rendered(pair.f, arm.rendering), c=_rendered(pair.c, arm.rendering),
                                   flags=flags)
    assert arm.budget is not None, name
    changed = dataclasses.replace(pair, f=_side(pair.f, arm.budget), c=_side(pair.c, arm.budget), flags=flags)
    if arm.widens and pair.novelty == MOTIF_REQUIRED and not _still_required(changed):
        changed = dataclasses.replace(changed, novelty=worlds.WITNESS_ONLY)
    return changed


#: (arm, the pairs' ids and prompt bodies) -> the pairs under the arm (a run asks for its pairs many times).
_CACHE: dict[tuple[str, tuple[tuple[str, str, str], ...]], tuple[Any, ...]] = {}


def arm_pairs(pairs: tuple[Any, ...], name: str | None) -> tuple[Any, ...]:
    """The run's pairs under arm ``name`` (unchanged for None)."""
    if name is None:
        return tuple(pairs)
    key = (name, tuple((p.pair_id, p.f.prompt_text, p.c.prompt_text) for p in pairs))
    if key not in _CACHE:
        if len(_CACHE) >= 4:
            _CACHE.clear()
        _CACHE[key] = tuple(arm_pair(p, name) for p in pairs)
    return _CACHE[key]


# --------------------------------------------------------------------------- an arm against the primary run

#: What must be equal in the two runs' ``summary.json`` for the arm to be read against the primary run.
_SAME = (("protocol",), ("model", "id"), ("model", "revision"), ("prereg_sha256",), ("settings", "split"),
         ("settings", "split_seed_sha256"), ("settings", "max_new_tokens"), ("settings", "units_per_condition"))


def _at(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        document = document.get(key) if isinstance(document, Mapping) else None
    return document


def _read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = read_json_file(run_dir / "summary.json")
    records_file = run_dir / "records.jsonl"
    if not isinstance(summary, dict) or summary.get("status") != "complete":
        raise UsageProblem(f"{run_dir}: not a complete run (summary.json status {_at(summary or {}, ('status',))!r}); "
                           "compare finished runs")
    records = [json.loads(line) for line in records_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not all(isinstance(r, dict) and isinstance(r.get("item_id"), str) for r in records):
        raise UsageProblem(f"{records_file}: a line is not a record object with an item_id; verify the run first")
    return summary, records


def compare_arm(primary_dir: Path, arm_dir: Path) -> dict[str, Any]:
    """The arm run against the primary run on the same pairs, model and settings: per synthesis condition the
    validity in each and the paired change (arm - primary) with Tango's score interval and the Rao-Scott design
    effect over base pairs; each run's F - C deficit with the interval its rules read; the P/R/E items are the
    same set (checked). Refuses, in one line, runs that differ in anything but the arm."""
    primary, primary_records = _read_run(Path(primary_dir))
    arm, arm_records = _read_run(Path(arm_dir))
    name = _at(arm, ("settings", "arm"))
    if _at(primary, ("settings", "arm")) is not None or name is None:
        raise UsageProblem("compare a run without --cwr-arm (first) with a run of a diagnostic arm (second); got arms "
                           f"{_at(primary, ('settings', 'arm'))!r} and {name!r}")
    for path in _SAME:
        if _at(primary, path) != _at(arm, path):
            raise UsageProblem(f"the runs differ in {'.'.join(path)} ({_at(primary, path)!r} and {_at(arm, path)!r}); "
                               "an arm is read only against the primary run of the same model and settings")
    controls = [k for k in primary.get("fixtures_sha256") or {} if k.startswith("cwr-controls")]
    if not controls or any(primary["fixtures_sha256"][k] != (arm.get("fixtures_sha256") or {}).get(k)
                           for k in controls):
        raise UsageProblem("the runs' P/R/E item sets differ; an arm changes the F/C targets only")
    if sorted(primary.get("pairs") or {}) != sorted(arm.get("pairs") or {}):
        raise UsageProblem("the runs measured different pairs; an arm measures the primary run's pairs")
    confidence = PREREG.values.analysis.confidence
    answered = {}
    for label, records in (("primary", primary_records), ("arm", arm_records)):
        answered[label] = {r["item_id"]: (r["pair_id"], bool(r["correct"])) for r in records
                           if r.get("condition") in ("F", "C") and r.get("generation_error") is None}
    out: dict[str, Any] = {"arm": name, "definition": ARMS[name].what if name in ARMS else "unknown",
                           "primary_run": primary.get("run_id"), "arm_run": arm.get("run_id"),
                           "classifications": {"primary": _at(primary, ("classifications", "cwr")),
                                               "arm": _at(arm, ("classifications", "cwr"))}}
    for condition in ("F", "C"):
        both = sorted(i for i in answered["primary"] if i.startswith(f"{condition}:") and i in answered["arm"])
        units = [(base_pair(answered["primary"][i][0]), answered["arm"][i][1], answered["primary"][i][1])
                 for i in both]
        row: dict[str, Any] = {"units": len(units)}
        for label, index in (("primary", 2), ("arm", 1)):
            row[f"{label}_validity"] = sum(u[index] for u in units) / len(units) if units else None
        if units:
            interval = tango_rao_scott_interval(units, confidence)
            row["change"] = {"estimate": interval.estimate, "lower": interval.low, "upper": interval.high,
                             "confidence": confidence, "method": interval.method}
        else:
            row["change"] = None
        out[condition] = row
    for label, summary in (("primary", primary), ("arm", arm)):
        metrics = summary.get("metrics") or {}
        out[f"deficit_{label}"] = {k: metrics.get(f"deficit.{k}") for k in ("estimate", "lower", "upper", "bases")}
    return out


def arm_table(result: Mapping[str, Any]) -> str:
    """The comparison as a Markdown table."""
    lines = [f"arm {result['arm']} ({result['definition']}): {result['arm_run']} against {result['primary_run']}",
             "", "| | units | primary validity | arm validity | change (arm - primary) [95%] |", "|---|---|---|---|---|"]
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    for condition in ("F", "C"):
        row = result[condition]
        change = row["change"] or {}
        lines.append(f"| {condition} | {row['units']} | {fmt(row['primary_validity'])} | {fmt(row['arm_validity'])} | "
                     f"{fmt(change.get('estimate'))} [{fmt(change.get('lower'))}, {fmt(change.get('upper'))}] |")
    for label in ("primary", "arm"):
        d = result[f"deficit_{label}"]
        lines.append(f"| F - C, {label} | {d['bases']} bases | | | {fmt(d['estimate'])} [{fmt(d['lower'])}, "
                     f"{fmt(d['upper'])}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cwr.arms",
                                     description="Read a diagnostic arm run against the primary run it varies.")
    parser.add_argument("primary", type=Path, help="run directory of the run without --cwr-arm")
    parser.add_argument("arm", type=Path, help="run directory of the arm run (same model, split and settings)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    try:
        result = compare_arm(args.primary, args.arm)
    except (UsageProblem, OSError, ValueError) as exc:
        print(f"python -m benchmarks.cwr.arms: {exc}", file=sys.stderr)
        return 4
    print(json.dumps(result, indent=1, sort_keys=True) if args.json else arm_table(result))
    return 0


preregistered_arms()  # an arm this version does not define stops the import, before any work

if __name__ == "__main__":
    raise SystemExit(main())
