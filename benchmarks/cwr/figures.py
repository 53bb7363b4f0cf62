"""The CWR report's figures (``CwrProtocol.report_figures``), drawn from the run's ledger, summary and baselines.

* accuracy per condition (F and C validity, P, R and E accuracy, E by context);
* F against C per base pair (a pair's replicas ``<pair>~r<k>`` pooled into its base pair);
* the copy, random and greedy baselines beside the model on the F and C sides;
* primitive mastery per family over the worlds scored (the gate reads the least), with tau.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from benchmarks.core.report import Figure, pyplot, read_jsonl

#: Condition -> the metric holding its accuracy (validity for the synthesis sides).
ACCURACY = {"F": "F.validity", "C": "C.validity", "P": "P.accuracy", "R": "R.accuracy", "E": "E.accuracy",
            "E_F": "E_F.accuracy", "E_C": "E_C.accuracy", "E_none": "E_none.accuracy"}


def _value(metrics: Mapping[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bars(ax: Any, names: list[str], values: list[float | None], colour: str, offset: float = 0.0,
          width: float = 0.8, label: str | None = None) -> None:
    xs = [i + offset for i in range(len(names))]
    ax.bar(xs, [v or 0.0 for v in values], width, color=colour, label=label)
    for x, v in zip(xs, values):
        ax.text(x, (v or 0.0) + 0.02, "n/a" if v is None else f"{v:.2f}", ha="center", fontsize=7)


def report_figures(run_dir: Path, summary: Mapping[str, Any]) -> list[Figure]:
    plt = pyplot()
    metrics = summary.get("metrics") or {}
    figures = []

    names = [c for c in ACCURACY if f"{c}.units" in metrics or ACCURACY[c] in metrics]
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    _bars(ax, names, [_value(metrics, ACCURACY[c]) for c in names], "#4c72b0")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("accuracy (F, C: validity)")
    ax.set_title("Accuracy per condition")
    fig.tight_layout()
    figures.append(Figure("accuracy_by_condition", "Accuracy per condition", fig,
                          "F and C: share of synthesis artifacts the checker accepts; P, R, E: exact-match accuracy of "
                          "the controls (E split by the context its prompt shows)."))

    records = read_jsonl(run_dir / str((summary.get("records") or {}).get("file") or "records.jsonl"))
    sides: dict[str, dict[str, list[bool]]] = {}
    for r in records:
        if r.get("condition") in ("F", "C") and r.get("pair_id"):
            base = str(r["pair_id"]).split("~", 1)[0]
            sides.setdefault(base, {"F": [], "C": []})[r["condition"]].append(bool(r.get("correct")))
    bases = sorted(sides)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(bases) + 2), 3.8))
    rate = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    _bars(ax, bases, [rate(sides[b]["F"]) for b in bases], "#55a868", -0.2, 0.4, "F (familiar)")
    _bars(ax, bases, [rate(sides[b]["C"]) for b in bases], "#c44e52", 0.2, 0.4, "C (withheld)")
    ax.set_xticks(range(len(bases)), bases, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("validity")
    ax.legend(fontsize=8)
    estimate = _value(metrics, "deficit.estimate")
    ax.set_title("F against C per base pair" + (f" (deficit F - C {estimate:.3f})" if estimate is not None else ""))
    fig.tight_layout()
    avoidance = ((summary.get("diagnostics") or {}).get("motif_avoidance") or {})
    reassess = [str(p) for p in avoidance.get("pairs_to_reassess") or []]
    note = (f" Fixtures to reassess: {len(avoidance.get('units') or [])} valid answers avoid the withheld motif, on "
            f"{', '.join(reassess)} (a valid familiar alternative; the answers stay valid)." if reassess else
            " No valid answer avoids the withheld motif.")
    figures.append(Figure("f_vs_c_by_pair", "F against C per base pair", fig,
                          "Share of valid artifacts on the familiar (F) and withheld (C) side of each base pair, "
                          "its replicas pooled." + note))

    baselines = {}
    path = run_dir / "baselines.json"
    if path.is_file() and not path.is_symlink():
        import json

        try:
            baselines = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            baselines = {}
    rows: dict[str, dict[str, list[float]]] = {"F": {}, "C": {}}
    for pair in (baselines.get("pairs") or {}).values():
        for side in pair.get("sides") or []:
            bucket = rows.get(side.get("condition"))
            if bucket is None:
                continue
            bucket.setdefault("copy", []).append(1.0 if side.get("copy_solves") else 0.0)
            bucket.setdefault("random", []).append(float(side.get("random_valid_rate") or 0.0))
            bucket.setdefault("greedy", []).append(1.0 if side.get("greedy_status") == "VALID" else 0.0)
    kinds = ["model", "copy", "random", "greedy"]
    colours = {"model": "#4c72b0", "copy": "#8c8c8c", "random": "#ccb974", "greedy": "#64b5cd"}
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for k, kind in enumerate(kinds):
        values = []
        for condition in ("F", "C"):
            if kind == "model":
                values.append(_value(metrics, ACCURACY[condition]))
            else:
                xs = rows[condition].get(kind) or []
                values.append(sum(xs) / len(xs) if xs else None)
        _bars(ax, ["F", "C"], values, colours[kind], (k - 1.5) * 0.2, 0.2, kind)
    ax.set_xticks(range(2), ["F (familiar)", "C (withheld)"])
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("share of targets solved")
    ax.set_title("Baselines beside the model")
    ax.legend(fontsize=8, ncol=4, loc="upper center")
    fig.tight_layout()
    figures.append(Figure("baselines", "Baselines beside the model", fig,
                          "Model validity against the copy baseline (a shipped solution replayed), the random-sample "
                          "valid rate and the greedy planner, per synthesis side."))

    mastery = summary.get("mastery") or {}
    if mastery:
        families = sorted(mastery)
        values = [_value(mastery[f], "accuracy") for f in families]
        low = [max(0.0, (v or 0.0) - float((mastery[f].get("accuracy_interval") or {}).get("low") or (v or 0.0)))
               for f, v in zip(families, values)]
        high = [max(0.0, float((mastery[f].get("accuracy_interval") or {}).get("high") or (v or 0.0)) - (v or 0.0))
                for f, v in zip(families, values)]
        tau = next((float(mastery[f]["tau"]) for f in families if isinstance(mastery[f].get("tau"), (int, float))),
                   None)
        fig, ax = plt.subplots(figsize=(max(4.5, 1.2 * len(families) + 2), 3.4))
        _bars(ax, families, values, "#8172b2")
        ax.errorbar(range(len(families)), [v or 0.0 for v in values], yerr=[low, high], fmt="none", ecolor="black",
                    capsize=4)
        if tau is not None:
            ax.axhline(tau, color="#c44e52", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(families)), families)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("P accuracy")
        ax.set_title("Primitive mastery per family (worlds scored)")
        fig.tight_layout()
        rows = "; ".join(
            f"{f}: {mastery[f].get('p_correct')} of {mastery[f].get('p_units')} probes right on "
            f"{mastery[f].get('worlds_probed')} base targets ({mastery[f].get('worlds_scored')} worlds scored)"
            f"{'' if mastery[f].get('established') else ', below tau'}" for f in families)
        figures.append(Figure("mastery_by_family", "Primitive mastery per family", fig,
                              "P accuracy on the worlds the run scores, per family, with its clustered 95% interval; "
                              f"the dashed line is tau{'' if tau is None else f' = {tau:.2f}'}, and the mastery gate "
                              f"reads the least family. {rows}."))
    return figures
