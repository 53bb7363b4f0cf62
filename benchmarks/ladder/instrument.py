"""Across probes: the gate table, the instrument verdict of the v2 registration and the retune rule.

* **Gate table**: one row per probe (rung, state, seed, per-tier error, the
  four clauses, the gate label), computed from the ledgers.
* **Instrument verdict** (v2): PROVEN only when, in one round (one frozen
  generator state), every registered rung has exactly one probe and every one
  passes all four clauses.  Otherwise NOT_PROVEN, with the reason.  The anchor
  rule: when every other rung passes in a round and the anchor does not, the
  design question returns to the principal and no further round may follow.
  Rounds are the registered states only, at most as many as registered, and
  each state is probed on its registered seed.
* **Retune rule**: a rung's probe that failed may be followed by at most one
  retune, which may move registered dials only (every other dial equal), and
  a v1 retune is re-probed on the registered re-probe seed; a retune of a
  passing probe, a second retune or a retune that crosses variants is a violation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .gate import GateResult, gate_metrics, judge
from .records import Probe
from .spec import GATE, INSTRUMENT, PREREG, TIERS, LadderError

PROVEN, NOT_PROVEN = "PROVEN", "NOT_PROVEN"


@dataclass(frozen=True)
class GateRow:
    probe: str
    rung: str
    state: str
    variant: str
    seed: int
    result: GateResult

    def as_dict(self) -> dict[str, Any]:
        m = self.result.metrics
        return {
            "probe": self.probe, "rung": self.rung, "state": self.state, "variant": self.variant, "seed": self.seed,
            "tier_error": [m[f"tier{t}.error"] for t in TIERS], "overall_error": m["overall_error"],
            "tier45_error": m["tier45_error"], "tiers_at_floor": m["tiers_at_floor"],
            "errored_share": m["errored_share"], "clauses": dict(self.result.clauses), "gate": self.result.label,
        }


def gate_row(probe: Probe) -> GateRow:
    meta = probe.metadata
    result = judge(gate_metrics(probe.units, meta.generator_variant))
    return GateRow(probe.folder.name, meta.rung, meta.generator_state, meta.generator_variant, meta.seed, result)


def gate_table(probes: Sequence[Probe]) -> list[GateRow]:
    return [gate_row(p) for p in probes]


def format_table(rows: Sequence[GateRow], labels: Mapping[str, str] | None = None) -> str:
    """A fixed-width text table: per-tier error in percent, overall, the clauses and the gate."""
    labels = labels or {}
    head = f"{'rung':<32} {'state':<7} {'seed':>4}  " + " ".join(f"t{t:<4}" for t in TIERS) + \
        "  overall  a b c d  gate"
    lines = [head, "-" * len(head)]

    def pct(v: float | None) -> str:
        return "  n/a" if v is None else f"{100 * v:5.1f}"

    for row in rows:
        d = row.as_dict()
        marks = " ".join("P" if row.result.clause_passed(c) else "F" for c in "abcd")
        name = labels.get(row.rung, row.rung)
        lines.append(f"{name:<32} {row.state:<7} {row.seed:>4}  " + " ".join(pct(v) for v in d["tier_error"])
                     + f"  {pct(d['overall_error'])}  {marks}  {row.result.label}")
    return "\n".join(lines)


@dataclass(frozen=True)
class InstrumentVerdict:
    verdict: str  # PROVEN or NOT_PROVEN
    reason: str
    rounds: dict[str, dict[str, Any]]  # state -> {"rungs": {label: gate}, "all_pass": bool, "missing": [...]}
    anchor_returns_to_principal: bool

    def metrics(self) -> dict[str, int]:
        """What the preregistered ``instrument`` classification reads."""
        return {
            "rounds_all_pass": sum(bool(r.get("all_pass")) for r in self.rounds.values()),
            "anchor_stops": sum(bool(r.get("anchor_out_while_others_in")) for r in self.rounds.values()),
        }

    @property
    def label(self) -> str:
        """The preregistered classification's label (PROVEN, NOT_PROVEN or NOT_PROVEN_ANCHOR_RETURNS_TO_PRINCIPAL)."""
        return INSTRUMENT.evaluate(self.metrics()).label

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "label": self.label, "reason": self.reason, "rounds": self.rounds,
                "anchor_returns_to_principal": self.anchor_returns_to_principal, "metrics": self.metrics()}


def instrument_verdict(rows: Sequence[GateRow], fleet: Mapping[str, str],
                       rounds: Sequence[str] = PREREG.values.rounds.states,
                       seeds: Sequence[int] = PREREG.values.rounds.seeds,
                       anchor: str = PREREG.values.rounds.anchor) -> InstrumentVerdict:
    """The v2 instrument verdict over gate rows; ``fleet`` maps each registered rung label to its model name."""
    if any(r.variant != "v2" for r in rows):
        raise LadderError("the instrument verdict is a v2 verdict; v1 probes cannot enter it (the non-merge rule)")
    if anchor not in fleet:
        raise LadderError(f"the fleet must include the anchor rung {anchor!r}; got {sorted(fleet)}")
    by_model = {model: label for label, model in fleet.items()}
    seed_of = dict(zip(rounds, seeds))
    table: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.state not in seed_of:
            raise LadderError(f"probe {row.probe}: state {row.state!r} is not a registered round "
                              f"({', '.join(rounds)}); per-rung forks and extra rounds are not allowed")
        if row.seed != seed_of[row.state]:
            raise LadderError(f"probe {row.probe}: round {row.state} is registered on seed {seed_of[row.state]}, "
                              f"not {row.seed}")
        label = by_model.get(row.rung)
        if label is None:
            raise LadderError(f"probe {row.probe}: rung {row.rung!r} is not in the fleet {sorted(by_model)}")
        entry = table.setdefault(row.state, {"rungs": {}})
        if label in entry["rungs"]:
            raise LadderError(f"round {row.state}: rung {label} was probed twice; a round probes each rung once")
        entry["rungs"][label] = row.result.label
    in_band = GATE.passing
    proven_in: list[str] = []
    anchor_stop = False
    for state in [s for s in rounds if s in table]:
        entry = table[state]
        entry["missing"] = sorted(set(fleet) - set(entry["rungs"]))
        entry["all_pass"] = not entry["missing"] and all(v == in_band for v in entry["rungs"].values())
        others = [v for k, v in entry["rungs"].items() if k != anchor]
        entry["anchor_out_while_others_in"] = (
            not entry["missing"] and bool(others) and all(v == in_band for v in others)
            and entry["rungs"][anchor] != in_band
        )
        anchor_stop = anchor_stop or entry["anchor_out_while_others_in"]
        if entry["all_pass"]:
            proven_in.append(state)
    if proven_in:
        return InstrumentVerdict(PROVEN, f"every rung passed every clause in round {proven_in[0]}", table, False)
    if not table:
        reason = "no v2 probe was given"
    else:
        parts = []
        for state in [s for s in rounds if s in table]:
            entry = table[state]
            failing = sorted(k for k, v in entry["rungs"].items() if v != in_band)
            bits = []
            if entry["missing"]:
                bits.append(f"not probed: {', '.join(entry['missing'])}")
            if failing:
                bits.append(f"out of band: {', '.join(failing)}")
            parts.append(f"{state}: {'; '.join(bits)}")
        reason = "no round passed every rung (" + " | ".join(parts) + ")"
    if anchor_stop:
        reason += "; the anchor rule applies: the design question returns to the principal"
    return InstrumentVerdict(NOT_PROVEN, reason, table, anchor_stop)


def retune_violations(probes: Sequence[Probe], registered_dials: Mapping[str, Sequence[str]]) -> list[str]:
    """Every breach of the retune rule among ``probes`` (an empty list when the rule held)."""
    spec = PREREG.values.retune
    by_name = {p.folder.name: p for p in probes}
    problems: list[str] = []
    retunes: dict[str, list[Probe]] = {}
    for probe in probes:
        meta = probe.metadata
        if meta.retune_of is None:
            continue
        original = by_name.get(meta.retune_of)
        if original is None:
            problems.append(f"{probe.folder.name}: retunes {meta.retune_of}, which is not among the probes read")
            continue
        omet = original.metadata
        retunes.setdefault(omet.rung, []).append(probe)
        if omet.rung != meta.rung:
            problems.append(f"{probe.folder.name}: retunes a probe of another rung ({omet.rung})")
        if omet.generator_variant != meta.generator_variant:
            problems.append(f"{probe.folder.name}: a retune cannot change the generator variant")
            continue
        if omet.retune_of is not None:
            problems.append(f"{probe.folder.name}: retunes a retune; a rung gets one retune")
        if gate_row(original).result.passed:
            problems.append(f"{probe.folder.name}: retunes {omet.probe}, which passed the gate")
        allowed = set(registered_dials.get(meta.generator_variant, ()))
        moved = sorted(k for k in set(omet.dials) | set(meta.dials) if omet.dials.get(k) != meta.dials.get(k))
        foreign = [k for k in moved if k not in allowed]
        if foreign:
            problems.append(f"{probe.folder.name}: moves dials that are not registered: {', '.join(foreign)}")
        if meta.seed < PREREG.values.probe.min_tuning_seed:
            problems.append(f"{probe.folder.name}: seed {meta.seed} is below the tuning floor")
        if meta.generator_variant == "v1" and omet.seed != spec.first_probe_seed:
            problems.append(f"{probe.folder.name}: retunes a v1 probe on seed {omet.seed}; the registered first "
                            f"probe runs on seed {spec.first_probe_seed}")
        if meta.generator_variant == "v1" and meta.seed != spec.reprobe_seed:
            problems.append(f"{probe.folder.name}: a v1 retune is re-probed on seed {spec.reprobe_seed}, not {meta.seed}")
    for rung, items in sorted(retunes.items()):
        if len(items) > spec.max_per_rung:
            problems.append(f"rung {rung}: {len(items)} retunes; at most {spec.max_per_rung} is allowed")
    return problems


def rung_outcomes(probes: Sequence[Probe]) -> dict[str, str]:
    """v1 ladder outcome per rung: IN_BAND when its first probe or its one retune passed, else OUT_OF_BAND."""
    out: dict[str, str] = {}
    for probe in probes:
        passed = gate_row(probe).result.passed
        rung = probe.metadata.rung
        out[rung] = "IN_BAND" if passed or out.get(rung) == "IN_BAND" else "OUT_OF_BAND"
    return out
