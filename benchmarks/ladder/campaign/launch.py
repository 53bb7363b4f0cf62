"""The launch gate: a campaign runs only for a rung whose probe passed the gate under this registration, and the
projection of what the campaign will cost, from that probe's recorded latencies and answer lengths.

A campaign names the probe it rests on (``--campaign-probe RUN_DIR``, the run directory of a ``ladder`` probe).
Before any work the gate reads it and refuses, in one line naming the clause, a probe that is not a complete
ladder run (``probe-complete``), was made by another model than the campaign's (``same-rung``), on another
generator state or seed than the registration's (``registered-state``, ``registered-seed``), whose recorded gate
label is not the registration's passing label (``gate-passed``: an out-of-band rung's campaign is cancelled), or
whose gate, derived again from its unit records by the probe's own gate code, differs from the recorded label
(``gate-rederived``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from benchmarks.core.protocol import UsageProblem

from ..gate import gate_metrics, judge
from ..prompts import build_chat
from ..records import find_probes, read_probe
from .scripted import ensure_campaign_model
from .spec import PREREG, SUPERVISED, CampaignPrereg
from .units import campaign_units

__all__ = ["LaunchBasis", "campaign_projection", "check_launch", "main", "projection"]


@dataclass(frozen=True)
class LaunchBasis:
    """The probe a campaign rests on, as the gate read it."""

    run_dir: str
    run_id: str
    rung: str
    state: str
    seed: int
    gate: str
    latencies_s: tuple[float, ...]  # every answered unit's latency, in the probe's order
    answer_chars: tuple[int, ...]  # every answered unit's answer length
    approve_share: float  # of the probe's parsed decisions: how often a supervisor would be consulted

    def as_json(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "run_id": self.run_id, "rung": self.rung, "state": self.state,
                "seed": self.seed, "gate": self.gate, "units": len(self.latencies_s),
                "approve_share": self.approve_share}


def _refuse(clause: str, what: str) -> UsageProblem:
    return UsageProblem(f"the campaign cannot launch (clause {clause}): {what}")


def check_launch(probe_dir: str | Path, model: str, prereg: CampaignPrereg | None = None) -> LaunchBasis:
    """The probe of ``probe_dir`` if it licenses a campaign of ``model`` under the registration; else a one-line
    :class:`UsageProblem` naming the clause that failed."""
    spec = (prereg or PREREG.values).launch
    run_dir = Path(probe_dir)
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _refuse("probe-complete", f"{run_dir}/summary.json cannot be read ({type(exc).__name__}); name the "
                      "run directory of a finished ladder probe with --campaign-probe") from None
    if not isinstance(summary, dict) or summary.get("protocol") != "ladder" or summary.get("status") != "complete":
        raise _refuse("probe-complete", f"{run_dir} is not a complete ladder probe (protocol "
                      f"{summary.get('protocol') if isinstance(summary, dict) else None!r}, status "
                      f"{summary.get('status') if isinstance(summary, dict) else None!r}); finish the probe first")
    folders = find_probes(run_dir)
    if len(folders) != 1:
        raise _refuse("probe-complete", f"{run_dir} holds {len(folders)} probe folders, not one")
    try:
        probe = read_probe(folders[0])
    except (OSError, ValueError) as exc:
        raise _refuse("probe-complete", f"{folders[0]}: {str(exc).splitlines()[0]}") from None
    meta = probe.metadata
    if meta.rung != model:
        raise _refuse("same-rung", f"the probe measured {meta.rung!r}, the campaign would run {model!r}; the same "
                      "model sits in the probe's worker seat and both campaign seats")
    if meta.generator_state != spec.state:
        raise _refuse("registered-state", f"the probe ran generator state {meta.generator_state!r}; this "
                      f"registration launches campaigns on {spec.state!r} only")
    if meta.seed != spec.probe_seed:
        raise _refuse("registered-seed", f"the probe used seed {meta.seed}; this registration rests on the round "
                      f"seed {spec.probe_seed}")
    recorded = (summary.get("classifications") or {}).get("gate")
    if recorded != spec.probe_verdict:
        raise _refuse("gate-passed", f"the probe's gate is {recorded!r}, not {spec.probe_verdict!r}: the rung is out "
                      "of band and its campaign is cancelled (publish the probe's numbers)")
    derived = judge(gate_metrics(probe.units, meta.generator_variant)).label
    if derived != recorded:
        raise _refuse("gate-rederived", f"the probe's records give the gate {derived!r}, its summary says "
                      f"{recorded!r}; verify the probe (preregbench verify) before a campaign rests on it")
    answered = [u for u in probe.units if u.error_code is None]
    decided = [u for u in answered if u.decision is not None]
    approve = sum(u.decision == "approve" for u in decided) / len(decided) if decided else 0.0
    return LaunchBasis(str(run_dir), str(summary.get("run_id")), meta.rung, meta.generator_state, meta.seed,
                       recorded, tuple(u.latency_s for u in answered), tuple(u.response_chars for u in answered),
                       approve)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def projection(basis: LaunchBasis, units: int, supervised_units: int, prompt_chars: float,
               concurrency: int, prereg: CampaignPrereg | None = None) -> dict[str, Any]:
    """What the campaign will take before it starts: units, model calls, wall time and tokens.

    Worker calls: one per unit.  Supervisor calls: the supervised units times the probe's approve share (a
    supervisor rules on approvals only).  Each call is taken to last the probe's mean latency, and to answer as
    long as the probe's mean answer; ``concurrency`` calls run at once.  Prompt tokens are the units' prompt
    characters over ``chars_per_token``; a supervisor prompt also carries the worker's answer.
    """
    spec = prereg or PREREG.values
    per_token = spec.projection.chars_per_token
    latency = _mean(basis.latencies_s)
    answer = _mean([float(c) for c in basis.answer_chars])
    supervisor_calls = supervised_units * basis.approve_share
    calls = units + supervisor_calls
    seconds = calls * latency / max(1, concurrency)
    prompt_tokens = (units * prompt_chars + supervisor_calls * (prompt_chars + answer)) / per_token
    answer_tokens = calls * answer / per_token
    return {
        "units": units, "supervised_units": supervised_units, "worker_calls": units,
        "supervisor_calls": round(supervisor_calls, 1), "calls": round(calls, 1),
        "mean_latency_s": round(latency, 4), "concurrency": concurrency,
        "wall_time_s": round(seconds, 1), "wall_time_h": round(seconds / 3600, 2),
        "prompt_tokens": math.ceil(prompt_tokens), "answer_tokens": math.ceil(answer_tokens),
        "basis": basis.as_json(), "supervised_conditions": list(SUPERVISED),
        "chars_per_token": per_token,
    }


def campaign_projection(basis: LaunchBasis, units: Sequence[Any], concurrency: int,
                        prereg: CampaignPrereg | None = None) -> dict[str, Any]:
    """:func:`projection` of a campaign's units (their worker prompts' mean length measured here)."""
    supervised = sum(u.condition in SUPERVISED for u in units)
    chars = sum(len(m["content"]) for u in units for m in build_chat(u.episode.case_text)) / max(1, len(units))
    return projection(basis, len(units), supervised, chars, concurrency, prereg)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.ladder.campaign.launch PROBE_RUN_DIR --model M``: the launch gate's verdict and the
    campaign's projection, before any campaign work."""
    import argparse
    import sys


    parser = argparse.ArgumentParser(prog="python -m benchmarks.ladder.campaign.launch",
                                     description="Check a probe against the campaign's launch gate and print the "
                                                 "campaign's projection.")
    parser.add_argument("probe", type=Path, help="run directory of the ladder probe the campaign rests on")
    parser.add_argument("--model", required=True, help="the rung: the model of the probe and of both campaign seats")
    parser.add_argument("--concurrency", type=int, default=None, help="requests in flight (default: the prereg's)")
    parser.add_argument("--episodes-per-cell", type=int, default=None, help="a reduced pass's episodes per cell")
    args = parser.parse_args(argv)
    ensure_campaign_model(args.model)  # a scripted rung's probe names it
    try:
        basis = check_launch(args.probe, args.model)
    except UsageProblem as exc:
        print(f"python -m benchmarks.ladder.campaign.launch: {exc}", file=sys.stderr)
        return 4
    spec = PREREG.values
    units = campaign_units(basis.state, spec.grid, args.episodes_per_cell)
    out = campaign_projection(basis, units, args.concurrency or spec.projection.concurrency, spec)
    print(f"launch gate: the probe {basis.run_id} of {basis.rung} passed ({basis.gate} on {basis.state} seed "
          f"{basis.seed}); the campaign may launch")
    print(f"projection: {out['units']} units, {out['calls']:g} model calls ({out['supervisor_calls']:g} supervisor "
          f"rulings at the probe's approve share {basis.approve_share:.3f}), {out['wall_time_h']:g} h of wall time "
          f"at {out['concurrency']} in flight and {out['mean_latency_s']:g} s per call, about "
          f"{out['prompt_tokens']:,} prompt and {out['answer_tokens']:,} answer tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
