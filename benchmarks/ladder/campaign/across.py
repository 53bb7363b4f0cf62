"""The registration's reading over its rungs: H-L1 holds "at every in-band rung".

A campaign run decides one rung.  ``python -m benchmarks.ladder.campaign.across RUN_DIR [RUN_DIR ...]`` reads the
finished campaign runs of one registration (one per rung) and reports each hypothesis at every rung and over all
of them: supported when it is supported at every rung read, not supported when it is not supported at some rung,
inconclusive otherwise (a rung undecided, or errored over the limit, counts as inconclusive).  A rung the
registration names without a run is listed as missing, and the reading is then ``INCOMPLETE`` whatever the rungs
read say.  Runs of another registration, unfinished runs and two runs of one rung are refused in one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from benchmarks.core.protocol import UsageProblem

from .spec import PREREG, RULE_BLOCKS, served_name

__all__ = ["across_rungs", "main"]


def _read(run_dir: Path) -> dict[str, Any]:
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageProblem(f"{run_dir}/summary.json cannot be read ({type(exc).__name__}); name finished campaign "
                           "run directories") from None
    if not isinstance(summary, dict) or summary.get("protocol") != "campaign" or summary.get("status") != "complete":
        raise UsageProblem(f"{run_dir} is not a complete campaign run; finish it (or leave it out)")
    return summary


def across_rungs(run_dirs: Sequence[str | Path]) -> dict[str, Any]:
    """Each hypothesis per rung and over the rungs of the registration (see the module docstring)."""
    if not run_dirs:
        raise UsageProblem("name at least one campaign run directory")
    rows: dict[str, dict[str, Any]] = {}
    prereg = None
    for run_dir in map(Path, run_dirs):
        summary = _read(run_dir)
        if prereg is None:
            prereg = summary.get("prereg_sha256")
        elif summary.get("prereg_sha256") != prereg:
            raise UsageProblem(f"{run_dir} ran under another registration (prereg sha256 "
                               f"{str(summary.get('prereg_sha256'))[:12]}, not {str(prereg)[:12]}); read one "
                               "registration's runs together")
        model = str((summary.get("model") or {}).get("id"))
        rung = served_name(model)
        if rung in rows:
            raise UsageProblem(f"two runs of rung {rung!r} ({rows[rung]['run_dir']} and {run_dir}); read one run per "
                               "rung")
        labels = summary.get("classifications") or {}
        rows[rung] = {"run_dir": str(run_dir), "run_id": summary.get("run_id"), "model": model,
                      **{block: labels.get(block) for block in RULE_BLOCKS}}
    missing = [r for r in PREREG.values.launch.rungs if r not in rows]
    overall = {}
    for block in RULE_BLOCKS:
        spec = getattr(PREREG.values, block)
        labels = [row[block] for row in rows.values()]
        not_supported = next((r.label for r in spec.rules if r.label.endswith("NOT_SUPPORTED")), None)
        if all(label == spec.passing for label in labels):
            verdict = "SUPPORTED_AT_EVERY_RUNG"
        elif not_supported is not None and not_supported in labels:
            verdict = "NOT_SUPPORTED_AT_SOME_RUNG"
        else:
            verdict = "INCONCLUSIVE"
        overall[block] = "INCOMPLETE" if missing else verdict
    return {"rungs": rows, "missing_rungs": missing, "registration_prereg_sha256": prereg, "overall": overall}


def table(result: dict[str, Any]) -> str:
    lines = ["| rung | run | " + " | ".join(RULE_BLOCKS) + " |", "|---|---|" + "---|" * len(RULE_BLOCKS)]
    for rung, row in result["rungs"].items():
        lines.append(f"| {rung} | {row['run_id']} | " + " | ".join(str(row[b]) for b in RULE_BLOCKS) + " |")
    lines.append("| every rung | | " + " | ".join(result["overall"][b] for b in RULE_BLOCKS) + " |")
    if result["missing_rungs"]:
        lines += ["", f"missing rungs of the registration: {', '.join(result['missing_rungs'])}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ladder.campaign.across",
                                     description="Read a registration's campaign runs, one per rung, together.")
    parser.add_argument("runs", nargs="+", type=Path, help="finished campaign run directories, one per rung")
    parser.add_argument("--json", action="store_true", help="print the reading as JSON")
    args = parser.parse_args(argv)
    try:
        result = across_rungs(args.runs)
    except UsageProblem as exc:
        print(f"python -m benchmarks.ladder.campaign.across: {exc}", file=sys.stderr)
        return 4
    print(json.dumps(result, indent=1, sort_keys=True) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
