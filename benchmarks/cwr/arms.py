"""Fiction-CWR diagnostic arms: the run's F/C pairs with another stated budget (``--cwr-arm NAME``).

An arm is preregistered by name in ``[diagnostics] arms``; its definition is
here.  Each changes the budget of every F and C target, states the changed
budget in the synthesis prompt (the prompt is rendered again from the changed
world with the side's own demonstrations and examples) and grades against the
changed world.  The P/R/E items are the run's usual ones, so an arm run and a
run without an arm pair unit by unit (``preregbench compare``).

* ``budget-less``: the step cap cut to the target's optimum length (no step
  slack; the cost cap kept).  Every bounded solution under it is one under
  the frozen budget, so the pair's novelty and copy audit still hold.
* ``budget-more``: one step more and twice the cost cap.  New solutions may
  avoid the withheld motif: each target is enumerated again under the arm's
  budget, and a pair with a target solvable without the motif is relabelled
  witness-only (the witness-only gate then reads it).  The copy baseline is
  computed on the changed targets as always.

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


#: name -> (the arm's budget from the target's frozen budget and optimum length, whether it can admit new
#: solutions (so the novelty is audited again), what it is in words).
ARMS: dict[str, tuple[Callable[[Mapping[str, Any], int], dict[str, Any]], bool, str]] = {
    "budget-less": (_less, False, "the step cap cut to each target's optimum length"),
    "budget-more": (_more, True, "one step more and twice the cost cap on every target"),
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


def _side(side: Any, change: Callable[[Mapping[str, Any], int], dict[str, Any]]) -> Any:
    raw = copy.deepcopy(dict(side.target_raw))
    raw["budget"] = change(raw["budget"], side.optimum_length)
    target = worlds.world_from_mapping({k: v for k, v in raw.items() if k != "examples"},
                                       source=f"arm of {side.target.id}")
    prompt = worlds.render_prompt(raw, side.demonstrations, side.primitive_examples)
    return dataclasses.replace(side, target=target, target_raw=raw, prompt_text=prompt)


def _still_required(pair: Any) -> bool:
    """Whether every bounded solution of both changed targets realizes the side's withheld motif."""
    for condition in ("F", "C"):
        side = pair.side(condition)
        motif = side_motif(pair, condition)
        solutions = worlds.bounded_solutions(side.target).solutions
        if not solutions or not all(motif in worlds.production_edges(side.target, s) for s in solutions):
            return False
    return True


def arm_pair(pair: Any, name: str) -> Any:
    """``pair`` under arm ``name``: both targets with the arm's budget, prompts rendered again, novelty audited
    again where the arm can admit new solutions."""
    change, widens, _ = ARMS[name]
    changed = dataclasses.replace(pair, f=_side(pair.f, change), c=_side(pair.c, change),
                                  flags=(*pair.flags, f"{ARM_FLAG}{name}"))
    if widens and pair.novelty == MOTIF_REQUIRED and not _still_required(changed):
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
    out: dict[str, Any] = {"arm": name, "definition": ARMS.get(name, (None, None, "unknown"))[2],
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
