"""Fiction-CWR: the seed's diagnostic analyses, reported in ``summary.json`` beside the rules and read by none.

* **Per family and per tier**: F and C validity with their clustered
  intervals and the F - C deficit with the interval the rules read
  (Tango's score interval with a Rao-Scott design effect over base pairs),
  on the pairs of each family and of each difficulty tier (the generated
  pairs' tier; showcase pairs are ``untiered``).
* **E_F - E_C**: the difference of E accuracy shown the F context and shown
  the C context, with Newcombe's hybrid score interval built from the two
  clustered intervals.  The two sets of items sit on different targets of
  the same base pairs; treating them as independent widens the interval when
  their outcomes are positively correlated, so it does not overclaim.
* **Partial credit**: per F/C answer, the legal prefix the checker executed
  before its first failure (all steps of a valid answer, none of a malformed
  or unextracted one); its mean per condition beside the targets' mean
  optimum length.
* **Renaming (by replica)**: F and C validity and the F - C deficit per
  replica index.  Replica 0 is the base pair; replica k > 0 is the same base
  under fresh labels, order and ids (the seed's renaming diagnostic with the
  label scheme held, its labels drawn again): validity that moves with the
  replica index is label sensitivity, not recombination.
* **Budget regrade**: every extracted F/C artifact checked again against its
  target with less slack (the step cap cut to the target's optimum length)
  and with more (one step more, the cost cap doubled), beside the frozen budget: F
  and C validity with clustered intervals, the F - C deficit with the rules'
  interval, and the answers whose verdict the budget changes (the budgets
  of the arms in :mod:`.arms`).  The prompts
  stated the frozen budget; this asks how much of the contrast rides on the
  budget's slack, not how a model would answer another stated budget.
* **Motif avoidance**: a valid F or C answer whose artifact does not realize
  the pair's withheld motif (its production edges, in the target's labels,
  miss the motif).  The seed: "a valid familiar alternative triggers fixture
  reassessment"; the answer stays valid, and its pair is listed for
  reassessment.

Errored units (a provider or harness failure) are left out of every share
here, as in the rules' metrics.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import worlds
from benchmarks.core.paired import tango_rao_scott_interval

from .arms import ARMS
from .metrics import clustered_share, errored, paired_units, scored
from .pairs import base_id, replica_index, side_motif
from .spec import PREREG, SYNTHESIS_CONDITIONS, CwrRecord, preregistered_names

#: The tier of a pair without one (the showcase pairs).
UNTIERED = "untiered"


def pair_tier(pair: Any, manifests: Mapping[str, Mapping[str, Any]]) -> str:
    """A pair's difficulty tier: the name of its base manifest's ``tier`` (generated pairs), else
    :data:`UNTIERED`."""
    tier = (manifests.get(base_id(pair.pair_id)) or {}).get("tier")
    if isinstance(tier, Mapping):
        tier = tier.get("name")
    return str(tier) if tier else UNTIERED


def _deficit(records: Sequence[CwrRecord], only: set[str]) -> dict[str, Any]:
    units = paired_units(records, only)
    if not units:
        return {"pairs": 0, "bases": 0, "estimate": None, "lower": None, "upper": None}
    interval = tango_rao_scott_interval(units, PREREG.values.analysis.confidence)
    return {"pairs": len(units), "bases": len({base for base, _, _ in units}), "estimate": interval.estimate,
            "lower": interval.low, "upper": interval.high}


def _group(records: Sequence[CwrRecord], pair_ids: set[str]) -> dict[str, Any]:
    rows = [r for r in records if r.pair_id in pair_ids]
    out: dict[str, Any] = {}
    for condition in SYNTHESIS_CONDITIONS:
        side = [r for r in rows if r.condition == condition]
        answered = scored(side)
        out[condition] = {"units": len(side), "errored": len(side) - len(answered),
                          "validity": sum(r.correct for r in answered) / len(answered) if answered else None,
                          "validity_interval": clustered_share(answered, lambda r: r.correct) if answered else None}
    out["deficit"] = _deficit(records, pair_ids)
    return out


def by_group(records: Sequence[CwrRecord], pairs: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """``{"by_family": {family: group}, "by_tier": {tier: group}}``, a group being F and C validity with
    their intervals and the clustered F - C deficit over its pairs."""
    manifests = {p.pair_id: p.manifest for p in pairs}
    families: dict[str, set[str]] = {}
    tiers: dict[str, set[str]] = {}
    for pair in pairs:
        families.setdefault(pair.family, set()).add(pair.pair_id)
        tiers.setdefault(pair_tier(pair, manifests), set()).add(pair.pair_id)
    return {"by_family": {name: _group(records, ids) for name, ids in sorted(families.items())},
            "by_tier": {name: _group(records, ids) for name, ids in sorted(tiers.items())}}


def difference_of_shares(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """first - second with Newcombe's hybrid score interval from the two shares' own intervals (each Wilson on
    its effective size); None bounds when a share is undefined."""
    if first.get("value") is None or second.get("value") is None:
        return {"estimate": None, "lower": None, "upper": None, "method": "newcombe-hybrid"}
    p1, l1, u1 = first["value"], first["low"], first["high"]
    p2, l2, u2 = second["value"], second["low"], second["high"]
    d = p1 - p2
    return {"estimate": d, "lower": max(-1.0, d - math.hypot(p1 - l1, u2 - p2)),
            "upper": min(1.0, d + math.hypot(u1 - p1, p2 - l2)), "method": "newcombe-hybrid",
            "confidence": first.get("confidence")}


def execution_interaction(records: Sequence[CwrRecord]) -> dict[str, Any]:
    """E_F accuracy - E_C accuracy with its interval (both shares clustered, errored units left out)."""
    shares = {c: clustered_share(scored([r for r in records if r.condition == "E" and r.context == c]),
                                 lambda r: r.correct) for c in ("F", "C")}
    return {"E_F.accuracy": shares["F"], "E_C.accuracy": shares["C"],
            "E_F_minus_E_C": difference_of_shares(shares["F"], shares["C"])}


def _steps(target: worlds.World, artifact: str) -> tuple[Any, ...]:
    parsed = worlds.get_family(target.family).parse(artifact)
    return tuple(parsed.steps) if parsed.ok else ()


def partial_credit(records: Sequence[CwrRecord], pairs: Sequence[Any]) -> dict[str, Any]:
    """Per condition: answered units, the mean legal prefix (steps the checker executed before the first failure)
    and the mean optimum length of their targets."""
    by_id = {p.pair_id: p for p in pairs}
    out: dict[str, Any] = {}
    for condition in SYNTHESIS_CONDITIONS:
        prefixes, optima = [], []
        for r in scored([r for r in records if r.condition == condition and r.pair_id in by_id]):
            side = by_id[r.pair_id].side(condition)
            executed = 0
            if r.parse_status == "ok" and r.parsed is not None:
                executed = worlds.check(side.target, r.parsed).executed
            prefixes.append(executed)
            optima.append(side.optimum_length)
        out[condition] = {"units": len(prefixes),
                          "mean_legal_prefix": sum(prefixes) / len(prefixes) if prefixes else None,
                          "mean_optimum_length": sum(optima) / len(optima) if optima else None}
    return out


def motif_avoidance(records: Sequence[CwrRecord], pairs: Sequence[Any]) -> dict[str, Any]:
    """Valid F/C answers that do not realize the pair's withheld motif: the units, the count per condition and the
    pairs to reassess."""
    by_id = {p.pair_id: p for p in pairs}
    units = []
    for r in records:
        if r.condition not in SYNTHESIS_CONDITIONS or not r.correct or errored(r) or r.pair_id not in by_id:
            continue
        pair = by_id[r.pair_id]
        side = pair.side(r.condition)
        edges = worlds.production_edges(side.target, _steps(side.target, r.parsed))
        if side_motif(pair, r.condition) not in edges:
            units.append({"unit": r.item_id, "pair": r.pair_id, "condition": r.condition,
                          "motif": "{} -{}-> {}".format(*side_motif(pair, r.condition))})
    return {"units": units, "F": sum(u["condition"] == "F" for u in units),
            "C": sum(u["condition"] == "C" for u in units),
            "pairs_to_reassess": sorted({u["pair"] for u in units})}


def by_replica(records: Sequence[CwrRecord], pairs: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """``{"r<k>": group}`` per replica index (a group as in :func:`by_group`), and the spread of each condition's
    validity over the replica indices."""
    replicas: dict[int, set[str]] = {}
    for pair in pairs:
        replicas.setdefault(replica_index(pair.pair_id), set()).add(pair.pair_id)
    groups = {f"r{k}": _group(records, ids) for k, ids in sorted(replicas.items())}
    spread = {}
    for condition in SYNTHESIS_CONDITIONS:
        values = [g[condition]["validity"] for g in groups.values() if g[condition]["validity"] is not None]
        spread[condition] = max(values) - min(values) if values else None
    return {"replicas": groups, "validity_spread": spread}


def _arm_budget(arm: str) -> Any:
    """A World budget changed as arm ``arm`` changes a world file's (:data:`.arms.ARMS`)."""
    change = ARMS[arm].budget
    assert change is not None, f"arm {arm} does not change the budget"

    def apply(budget: Any, optimum: int) -> Any:
        caps = change({"max_steps": budget.max_steps, "max_cost": budget.max_cost}, optimum)
        return dataclasses.replace(budget, max_steps=caps["max_steps"], max_cost=caps["max_cost"])
    return apply


#: The budget variants the regrade checks against: (name, the variant's budget from the target's frozen one and
#: its optimum length): the two arms' budgets beside the frozen one.
BUDGETS = (
    ("less_slack", _arm_budget("budget-less")),
    ("frozen", lambda b, optimum: b),
    ("more_slack", _arm_budget("budget-more")),
)


def budget_regrade(records: Sequence[CwrRecord], pairs: Sequence[Any]) -> dict[str, Any]:
    """Per budget variant (:data:`BUDGETS`): F and C validity of the answered units regraded on the target under
    that budget, the clustered F - C deficit, and per condition the answers whose verdict differs from the frozen
    budget's."""
    by_id = {p.pair_id: p for p in pairs}
    answered = [r for r in scored(records) if r.condition in SYNTHESIS_CONDITIONS and r.pair_id in by_id]
    frozen = {r.item_id: r.correct for r in answered}
    out: dict[str, Any] = {}
    for name, change in BUDGETS:
        regraded = []
        for r in answered:
            side = by_id[r.pair_id].side(r.condition)
            target = dataclasses.replace(side.target, budget=change(side.target.budget, side.optimum_length))
            valid = (r.parse_status == "ok" and r.parsed is not None
                     and worlds.check(target, r.parsed).status is worlds.Status.VALID)
            regraded.append(dataclasses.replace(r, correct=valid))
        row: dict[str, Any] = {}
        for condition in SYNTHESIS_CONDITIONS:
            side = [r for r in regraded if r.condition == condition]
            row[condition] = {"units": len(side),
                              "validity": sum(r.correct for r in side) / len(side) if side else None,
                              "validity_interval": clustered_share(side, lambda r: r.correct) if side else None,
                              "changed": sorted(r.item_id for r in side if r.correct != frozen[r.item_id])}
        row["deficit"] = _deficit(regraded, set(by_id))
        out[name] = row
    return out


#: The analyses a preregistration may name in ``[diagnostics] analyses``.
ANALYSES = ("by_family", "by_tier", "execution_interaction", "partial_credit", "motif_avoidance", "by_replica",
            "budget_regrade")


def preregistered_analyses() -> tuple[str, ...]:
    return preregistered_names("[diagnostics] analyses", PREREG.values.diagnostics.analyses, ANALYSES, "computes")


def diagnostics(records: Sequence[CwrRecord], pairs: Sequence[Any]) -> dict[str, Any]:
    """The preregistered diagnostic analyses (``[diagnostics] analyses``, module docstring), as the
    ``diagnostics`` block of ``summary.json``."""
    wanted = preregistered_analyses()
    groups = by_group(records, pairs) if {"by_family", "by_tier"} & set(wanted) else {}
    compute = {"by_family": lambda: groups["by_family"], "by_tier": lambda: groups["by_tier"],
               "execution_interaction": lambda: execution_interaction(records),
               "partial_credit": lambda: partial_credit(records, pairs),
               "motif_avoidance": lambda: motif_avoidance(records, pairs),
               "by_replica": lambda: by_replica(records, pairs),
               "budget_regrade": lambda: budget_regrade(records, pairs)}
    return {name: compute[name]() for name in wanted}


preregistered_analyses()  # an analysis this version does not compute stops the import, before any work
