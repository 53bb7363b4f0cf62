"""``preregbench compare RUN_A RUN_B`` (also ``python -m benchmarks.core.compare``): two runs, unit by unit.

Two finished runs of one protocol on the same fixture sets (the same sha256
of every set, read from each run's ``provenance.json``; anything else is
refused with the reason, exit 4) are compared on every per-unit binary
outcome the protocol declares (:meth:`Protocol.paired_outcomes`): RES's logit
and generated accuracy per condition, CWR's accuracy per condition, the
ladder's correct decisions overall and per tier.  For each, over the units
both runs recorded:

* the 2x2 table of paired outcomes (both right, A only, B only, neither);
* each run's accuracy and the difference A - B with a 95% paired-difference
  interval: Newcombe's hybrid score method for paired proportions when the
  units are independent; when the protocol puts units in clusters
  (:meth:`Protocol.paired_clusters`: CWR's replicas of one base pair), Tango's
  score interval on the pooled table divided by its Rao-Scott design effect
  (:func:`benchmarks.core.paired.tango_rao_scott_interval`, the interval CWR's
  own rules read), with the number of clusters and the design effect;
* the exact McNemar p-value: two-sided, the binomial test of the discordant
  counts against 1/2 (1 when there are no discordant units), over units
  (it does not model clusters; the interval does).

A protocol may add statistics that are not per-unit successes
(:meth:`Protocol.paired_statistics`: P-Zombie's eta squared and R squared per
preset, by the paired bootstrap over prompts stratified by category); they
are printed as a second table and listed under ``statistics``.

The table is printed, and ``compare.json`` is written where ``--json`` says
(default: ``compare.json`` in the current directory; never inside a run
directory, whose files a manifest freezes).  Exit status 0 when the
comparison was made, 4 for a usage problem or runs that cannot be compared.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Mapping

from .errors import PreregbenchError
from . import bounded, registry
from .commandline import CommandParser, run_command
from ._canonical import FileReadError, FileWriteError, atomic_write_json
from .ledger import LedgerError, read_ledger
from .registry import RegistryError
from .scales import ScaleGroupError, group_runs, read_group
from .provenance import ProvenanceError, read_provenance
from .paired import design_effect, mcnemar_exact, tango_rao_scott_interval
from .stats import paired_difference_interval

EXIT_OK, EXIT_OVER_LIMIT, EXIT_USAGE = 0, 3, 4


class CompareRefused(PreregbenchError, ValueError):
    """Two runs that cannot be compared; the message is one line saying why."""


class CompareOverLimit(CompareRefused):
    """A run's file is over a reading limit (:mod:`benchmarks.core.bounded`): exit status 3."""


@dataclass(frozen=True)
class PairedMeasure:
    name: str
    units: int
    both: int
    first_only: int
    second_only: int
    neither: int
    #: (cluster, success in A, success in B) of every shared unit when the units come in clusters, else empty
    clustered: tuple[tuple[Hashable, bool, bool], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        n = self.units
        extra: dict[str, Any] = {}
        if self.clustered:
            interval = tango_rao_scott_interval(self.clustered)
            extra = {"clusters": len({cluster for cluster, _, _ in self.clustered}),
                     "design_effect": design_effect(self.clustered)}
        else:
            interval = paired_difference_interval(self.both, self.first_only, self.second_only, self.neither)
        return {
            "measure": self.name,
            "units": n,
            "table": {"both": self.both, "a_only": self.first_only, "b_only": self.second_only, "neither": self.neither},
            "accuracy_a": (self.both + self.first_only) / n,
            "accuracy_b": (self.both + self.second_only) / n,
            "difference": interval.estimate,
            "interval": {"low": interval.low, "high": interval.high, "confidence": interval.confidence,
                         "method": interval.method, **extra},
            "mcnemar_exact_p": mcnemar_exact(self.first_only, self.second_only),
        }


def paired_table(name: str, a: Mapping[str, bool], b: Mapping[str, bool],
                 clusters: Mapping[str, Hashable] | None = None) -> PairedMeasure:
    """The paired table of the units both runs recorded.  When ``clusters`` names a cluster for any of them,
    the measure is clustered (a unit without one is a cluster of its own)."""
    shared = sorted(set(a) & set(b))
    cells = [0, 0, 0, 0]
    for unit in shared:
        cells[(0 if a[unit] else 2) + (0 if b[unit] else 1)] += 1
    both, a_only, b_only, neither = cells[0], cells[1], cells[2], cells[3]
    clustered: tuple[tuple[Hashable, bool, bool], ...] = ()
    if clusters and any(unit in clusters for unit in shared):
        clustered = tuple((clusters.get(unit, ("unit", unit)), bool(a[unit]), bool(b[unit])) for unit in shared)
    return PairedMeasure(name, len(shared), both, a_only, b_only, neither, clustered)


# --------------------------------------------------------------------------- reading runs


def _checkout() -> Path | None:
    """The git checkout holding the current directory (trusted, as ``verify`` trusts its repository), or None."""
    try:
        done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=Path.cwd(), capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def _tracked(root: Path, *paths: Path) -> bool:
    """Whether git tracks every one of ``paths`` in the checkout ``root`` (a file only unpacked there is not)."""
    try:
        done = subprocess.run(["git", "ls-files", "--error-unmatch", "--", *(str(p.relative_to(root)) for p in paths)],
                              cwd=root, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _protocol(name: str, prereg_path: Any = None, run_dir: Path | None = None) -> Any:
    """The run's protocol: the registered one of that name, else the protocol folder of the checkout holding the
    current directory whose prereg the run recorded (a protocol scaffolded into a checkout of yours, its prereg
    and protocol.py tracked by git there); never a folder inside the run directory, outside that checkout or
    only unpacked into it (results downloaded next to a run are not code of yours)."""
    try:
        return registry.get(name)
    except RegistryError as exc:
        unknown = f"protocol {name!r} recorded in provenance.json cannot be loaded here: {exc}"
    root = _checkout()
    if root is None or not isinstance(prereg_path, str) or not prereg_path or Path(prereg_path).is_absolute():
        raise CompareRefused(unknown)
    prereg = (root / prereg_path).resolve()
    folder = prereg.parent
    inside_run = run_dir is not None and prereg.is_relative_to(Path(run_dir).resolve())
    code = folder / "protocol.py"
    if not prereg.is_relative_to(root) or inside_run or not prereg.is_file() or folder.name != name \
            or code.is_symlink() or not code.is_file() or not _tracked(root, prereg, code):
        raise CompareRefused(f"{unknown} (nor is {prereg_path} a protocol folder of the checkout {root} whose "
                             "prereg.toml and protocol.py git tracks)")
    try:
        found = registry.load_folder(folder)
    except RegistryError as exc:
        raise CompareRefused(str(exc)) from None
    if found.name != name:
        raise CompareRefused(f"{folder}/protocol.py defines protocol {found.name!r}, not {name!r}")
    return found


def load_run(run_dir: Path) -> tuple[Any, Any, list[Any]]:
    """(protocol, provenance, records) of a finished run directory; a one-line :class:`CompareRefused` otherwise."""
    run_dir = Path(run_dir)
    if run_dir.is_symlink():
        raise CompareRefused(f"{run_dir}: is a symbolic link; give the run directory itself (compare reads nothing "
                             "through a link)")
    if not run_dir.is_dir():
        raise CompareRefused(f"{run_dir}: no such run directory")
    try:
        provenance = read_provenance(run_dir / "provenance.json")
    except bounded.OverLimitError as exc:
        raise CompareOverLimit(str(exc)) from None
    except (ProvenanceError, FileReadError) as exc:
        raise CompareRefused(str(exc)) from None
    if provenance is None:
        raise CompareRefused(f"{run_dir}: no provenance.json; not a run directory of the suite")
    protocol = _protocol(provenance.protocol, provenance.prereg_path, run_dir)
    ledger = protocol.find_ledger(run_dir)
    if ledger is None:
        raise CompareRefused(f"{run_dir}: no ledger of protocol {provenance.protocol!r} found")
    try:
        records = read_ledger(ledger, protocol.record_type, protocol.record_key)
    except (LedgerError, FileReadError, ValueError) as exc:
        refused = CompareOverLimit if isinstance(exc, bounded.OverLimitError) else CompareRefused
        raise refused(str(exc) if str(ledger) in str(exc) else f"{ledger}: {exc}") from None
    return protocol, provenance, records


def compare_runs(run_a: Path, run_b: Path) -> dict[str, Any]:
    protocol_a, prov_a, records_a = load_run(run_a)
    protocol_b, prov_b, records_b = load_run(run_b)
    if prov_a.protocol != prov_b.protocol:
        raise CompareRefused(f"the runs are of different protocols ({prov_a.protocol} and {prov_b.protocol})")
    problem = protocol_a.pairing_problem(records_a, records_b)
    if problem:
        raise CompareRefused(f"the runs cannot be compared sample by sample: {problem}")
    fix_a, fix_b = dict(prov_a.fixtures_sha256), dict(prov_b.fixtures_sha256)
    if fix_a != fix_b:
        names = sorted(set(fix_a) | set(fix_b))
        differing = [n for n in names if fix_a.get(n) != fix_b.get(n)]
        first = differing[0]
        raise CompareRefused(
            f"the runs used different fixtures: set {first!r} has sha256 {_short(fix_a.get(first))} in A and "
            f"{_short(fix_b.get(first))} in B; only runs on the same fixture hashes are compared unit by unit")
    outcomes_a, outcomes_b = protocol_a.paired_outcomes(records_a), protocol_b.paired_outcomes(records_b)
    statistics = protocol_a.paired_statistics(records_a, records_b)
    if not outcomes_a and not statistics:
        raise CompareRefused(f"protocol {prov_a.protocol!r} declares no per-unit outcomes or statistics to compare")
    clusters = protocol_a.paired_clusters(records_a)
    conflicting = sorted(u for u, c in protocol_b.paired_clusters(records_b).items() if u in clusters and clusters[u] != c)
    if conflicting:
        raise CompareRefused(f"unit {conflicting[0]!r} belongs to cluster {clusters[conflicting[0]]!r} in A and to "
                             "another in B; the runs do not share their units' structure")
    measures = [paired_table(name, outcomes_a[name], outcomes_b.get(name, {}), clusters) for name in outcomes_a]
    measures = [m for m in measures if m.units]
    return {
        "protocol": prov_a.protocol,
        "run_a": {"run_dir": str(run_a), "run_id": prov_a.run_id, "model": prov_a.model.get("id"),
                  "revision": prov_a.model.get("revision")},
        "run_b": {"run_dir": str(run_b), "run_id": prov_b.run_id, "model": prov_b.model.get("id"),
                  "revision": prov_b.model.get("revision")},
        "fixtures_sha256": fix_a,
        "measures": [m.as_dict() for m in measures],
        "statistics": list(statistics),
    }


def compare_groups(group_a: Path, group_b: Path) -> dict[str, Any]:
    """Two ``--scale all`` groups of one protocol, scale by scale: :func:`compare_runs` of every scale both
    groups ran, in the first group's order, under ``scales`` (each with its ``scale``); a scale without a run in
    one of them is listed under ``not_compared`` with the reason."""
    try:
        found_a, runs_a = group_runs(group_a)
        found_b, runs_b = group_runs(group_b)
    except ScaleGroupError as exc:
        raise CompareRefused(str(exc)) from None
    if found_a["protocol"] != found_b["protocol"]:
        raise CompareRefused(f"the groups are of different protocols ({found_a['protocol']} and {found_b['protocol']})")
    compared: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for scale in [s for s in runs_a if s in runs_b]:
        absent = [str(d) for d in (runs_a[scale], runs_b[scale]) if not (d / "provenance.json").is_file()]
        if absent:
            skipped[scale] = f"no run at {absent[0]}"
            continue
        try:
            compared[scale] = compare_runs(runs_a[scale], runs_b[scale])
        except CompareOverLimit:
            raise
        except CompareRefused as exc:
            skipped[scale] = str(exc)
    for scale in [s for s in (*runs_a, *runs_b) if not (s in runs_a and s in runs_b)]:
        skipped[scale] = f"scale {scale} is in one group only"
    if not compared:
        reasons = "; ".join(f"{s}: {why}" for s, why in skipped.items()) or "the groups share no scale"
        raise CompareRefused(f"no scale can be compared ({reasons})")
    return {"protocol": found_a["protocol"], "group_a": {"dir": str(group_a), "group_id": found_a.get("group_id")},
            "group_b": {"dir": str(group_b), "group_id": found_b.get("group_id")},
            "scales": [{"scale": scale, **found} for scale, found in compared.items()], "not_compared": skipped}


def compare(path_a: Path, path_b: Path) -> dict[str, Any]:
    """Two run directories (:func:`compare_runs`) or two scale groups (:func:`compare_groups`)."""
    try:
        groups = [read_group(p) is not None for p in (path_a, path_b)]
    except ScaleGroupError as exc:
        raise CompareRefused(str(exc)) from None
    if all(groups):
        return compare_groups(path_a, path_b)
    if any(groups):
        which = path_a if groups[0] else path_b
        raise CompareRefused(f"{which} is a scale group and the other a run; give two runs or two groups (--scale all)")
    return compare_runs(path_a, path_b)


def group_table(result: Mapping[str, Any]) -> str:
    """The printed comparison of two groups: the table of each scale, then the scales not compared."""
    blocks = [f"{result['protocol']} scale groups: A = {result['group_a']['group_id']}, "
              f"B = {result['group_b']['group_id']}"]
    for found in result["scales"]:
        blocks.append(f"\n[{found['scale']}] " + table(found))
    for scale, why in result["not_compared"].items():
        blocks.append(f"\n[{scale}] not compared: {why}")
    return "\n".join(blocks)


def _short(digest: Any) -> str:
    return "(absent)" if digest is None else str(digest)[:12]


def table(result: Mapping[str, Any]) -> str:
    head = (f"{result['protocol']}: A = {result['run_a']['run_id']} ({result['run_a']['model']}), "
            f"B = {result['run_b']['run_id']} ({result['run_b']['model']})")
    rows = [("measure", "n", "acc A", "acc B", "A - B", "95% interval", "clusters", "A only", "B only", "McNemar p")]
    for m in result["measures"]:
        iv = m["interval"]
        rows.append((m["measure"], str(m["units"]), f"{m['accuracy_a']:.3f}", f"{m['accuracy_b']:.3f}",
                     f"{m['difference']:+.3f}", f"[{iv['low']:+.3f}, {iv['high']:+.3f}]",
                     str(iv["clusters"]) if "clusters" in iv else "-",
                     str(m["table"]["a_only"]), str(m["table"]["b_only"]), _p_text(m["mcnemar_exact_p"])))
    lines = [head]
    if result["measures"]:
        lines += _aligned(rows)
    if result.get("statistics"):
        rows = [("statistic", "n", "A", "B", "A - B", "95% interval", "method")]
        for m in result["statistics"]:
            iv = m["interval"]
            span = "undefined" if iv["low"] is None or iv["high"] is None else f"[{iv['low']:+.3f}, {iv['high']:+.3f}]"
            rows.append((m["measure"], str(m["units"]), _value(m["value_a"]), _value(m["value_b"]),
                         _value(m["difference"], signed=True), span, str(iv.get("method", ""))))
        lines += ([""] if result["measures"] else []) + _aligned(rows)
    return "\n".join(lines)


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(r, widths))) for r in rows]


def _value(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "undefined"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _p_text(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


DESCRIPTION = ("Compare two runs of one protocol on the same fixtures, unit by unit, or two --scale all groups scale "
               "by scale. Exit 0, 3 when a run's file is over a reading limit, 4 when the runs cannot be compared.")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("run_a", type=Path, help="RESULTS_DIR/PROTOCOL/RUN_ID of the first run, or the directory of "
                        "a --scale all group")
    parser.add_argument("run_b", type=Path, help="the second run, of the same protocol on the same fixtures (or a "
                        "second group)")
    parser.add_argument("--json", type=Path, default=Path("compare.json"), help="where to write compare.json")


def main(argv: list[str] | None = None) -> int:
    return run_command("preregbench compare", DESCRIPTION, add_arguments, command, argv)


def command(args: argparse.Namespace) -> int:
    try:
        result = compare(args.run_a, args.run_b)
    except CompareRefused as exc:
        print(f"preregbench compare: {exc}", file=sys.stderr)
        return EXIT_OVER_LIMIT if isinstance(exc, CompareOverLimit) else EXIT_USAGE
    target = args.json.resolve()
    for run_dir in (args.run_a, args.run_b):
        if target.is_relative_to(run_dir.resolve()):
            print(f"preregbench compare: --json {args.json} lies inside run directory {run_dir}; write it elsewhere",
                  file=sys.stderr)
            return EXIT_USAGE
    print(group_table(result) if "scales" in result else table(result))
    try:
        atomic_write_json(target, result)
    except (FileWriteError, ValueError, OSError) as exc:
        print(f"preregbench compare: {target} not written: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"written: {target}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CompareRefused", "PairedMeasure", "compare", "compare_groups", "compare_runs", "main", "paired_table"]
