"""The fleet report over several probes: gate table, instrument verdict, feasibility and size ordering.

Usage: python -m benchmarks.ladder.report --fleet R0=MODEL --fleet R1=MODEL ... PROBE_DIR [PROBE_DIR ...]

Reads the probes (refusing to pool v1 with v2), prints the gate table, the
instrument verdict (v2 probes), per round the per-check accuracies, required
depth windows, their intersection and the log-inaccuracy ratios against the
strongest rung, and the Spearman correlation of overall error with the
fleet's parameter counts; ``--json`` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from benchmarks.core import stats

from .analysis import round_feasibility
from .instrument import format_table, gate_table, instrument_verdict
from .records import Probe, read_probes
from .spec import PREREG, LadderError
from .worker import SIMULATED_FLEET


def default_fleet(probes: Sequence[Probe]) -> dict[str, str]:
    """The simulated fleet, when every probe is one of its workers; otherwise the fleet must be named."""
    rungs = sorted({p.metadata.rung for p in probes})
    if set(rungs) <= set(SIMULATED_FLEET.values()):
        return dict(SIMULATED_FLEET)
    raise LadderError("name the fleet with LABEL=MODEL for each rung (R0 the anchor); probes found for: "
                      + ", ".join(rungs))


def fleet_report(probes: Sequence[Probe], fleet: Mapping[str, str]) -> dict[str, Any]:
    label_of = {model: label for label, model in fleet.items()}
    probes = sorted(probes, key=lambda p: (p.metadata.generator_state, label_of.get(p.metadata.rung, p.metadata.rung),
                                           p.folder.name))
    rows = gate_table(probes)
    out: dict[str, Any] = {"gate_table": [r.as_dict() for r in rows], "rounds": {}}
    if rows and rows[0].variant == "v2":
        out["instrument"] = instrument_verdict(rows, fleet).as_dict()
    spec = PREREG.values.fleet
    params = {label: (total, active) for label, total, active in
              zip(spec.rungs, spec.parameters_total, spec.parameters_active)}
    for state in sorted({p.metadata.generator_state for p in probes}):
        members = [p for p in probes if p.metadata.generator_state == state]
        approvable: dict[str, tuple[int, int]] = {}
        depths: list[int] = []
        for probe in members:
            units = [u for u in probe.units if u.ground_truth == "approve"
                     and u.outcome in ("correct", "wrong", "unparsed")]
            depths.extend(u.depth for u in units)
            if units:
                approvable[label_of.get(probe.metadata.rung, probe.metadata.rung)] = (
                    sum(u.outcome == "correct" for u in units), len(units))
        entry: dict[str, Any] = {}
        if approvable and depths:
            entry["feasibility"] = round_feasibility(approvable, sum(depths) / len(depths))
        errors = {label_of.get(r.rung, r.rung): r.result.metrics["overall_error"] for r in rows if r.state == state}
        labelled = [k for k in errors if k in params and errors[k] is not None]
        if len(labelled) >= 3:
            e = [errors[k] for k in labelled]
            rho_total = stats.spearman([params[k][0] for k in labelled], e)
            rho_active = stats.spearman([params[k][1] for k in labelled], e)
            entry["spearman_total"] = None if math.isnan(rho_total) else rho_total
            entry["spearman_active"] = None if math.isnan(rho_active) else rho_active
        out["rounds"][state] = entry
    out["seed_fleet"] = dict(zip(spec.rungs, spec.names))  # the configurations the labels stand for in the seed
    out["table_text"] = format_table(rows, {m: f"{l} {m}" for l, m in fleet.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Gate table, instrument verdict and feasibility over probes.")
    parser.add_argument("probe_dirs", nargs="+", type=Path)
    parser.add_argument("--fleet", action="append", default=[], metavar="LABEL=MODEL",
                        help="rung label (R0 = anchor) and the model name its probes carry")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if any("=" not in item for item in args.fleet):
        parser.error("--fleet takes LABEL=MODEL, e.g. R0=openai:qwen3.5@http://127.0.0.1:11434/v1")
    try:
        probes = read_probes(args.probe_dirs)
        fleet = dict(item.split("=", 1) for item in args.fleet) or default_fleet(probes)
        report = fleet_report(probes, fleet)
    except LadderError as exc:
        parser.error(str(exc))
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    print(report["table_text"])
    if "instrument" in report:
        print(f"instrument: {report['instrument']['verdict']}: {report['instrument']['reason']}")
    for state, entry in report["rounds"].items():
        feas = entry.get("feasibility")
        if feas:
            print(f"{state}: mean depth {feas['depth']:.1f}; window at that depth "
                  f"{feas['feasibility_window_at_depth'][0]:.4f}-{feas['feasibility_window_at_depth'][1]:.4f}")
            for rung, r in feas["rungs"].items():
                lo, hi = r["required_depth_window"]
                print(f"  {rung}: a {'>=' if r['bound'] else '='} {r['per_check_accuracy']:.4f}, needs k in "
                      f"[{lo:.1f}, {hi:.1f}]")
            print(f"  intersection: {feas['intersection']}; max log-inaccuracy ratio {feas['max_ratio']} "
                  f"(limit {feas['ratio_limit']:.2f})")
        if "spearman_total" in entry:
            print(f"  Spearman error vs parameters: total {entry['spearman_total']}, active {entry['spearman_active']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
