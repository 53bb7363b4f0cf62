"""The RES report's figures (``ResProtocol.report_figures``), drawn from the run's ledger and summary.

* logit margin distribution (logit[A] - logit[B]) by condition and gold label;
* logit choice against the parsed generated answer, one confusion table per condition;
* parser coverage per condition beside the preregistered coverage threshold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from benchmarks.core.report import Figure, pyplot, read_jsonl

LABELS = ("A", "B")
_GOLD_COLOURS = {"A": "#1f77b4", "B": "#d62728"}


def _conditions(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r.get("condition")) for r in records))


def report_figures(run_dir: Path, summary: Mapping[str, Any]) -> list[Figure]:
    plt = pyplot()
    records = read_jsonl(run_dir / str((summary.get("records") or {}).get("file") or "records.jsonl"))
    conditions = _conditions(records) or ["five_factor", "minimal_owner_indexed"]
    figures = []

    fig, axes = plt.subplots(1, len(conditions), figsize=(5.0 * len(conditions), 3.6), squeeze=False)
    for ax, condition in zip(axes[0], conditions):
        for offset, gold in enumerate(LABELS):
            margins = [float(r["margin"]) for r in records if r.get("condition") == condition and r.get("ideal") == gold
                       and isinstance(r.get("margin"), (int, float))]
            ys = [offset + 0.15 * ((i % 7) - 3) / 3 for i in range(len(margins))]
            ax.scatter(margins, ys, s=14, alpha=0.7, color=_GOLD_COLOURS[gold], label=f"gold {gold} (n={len(margins)})")
        ax.axvline(0.0, color="grey", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(LABELS)), [f"gold {g}" for g in LABELS])
        ax.set_xlabel("logit margin: logit[A] - logit[B]")
        ax.set_title(condition)
        ax.legend(fontsize=8, loc="best")
    fig.suptitle("First-token logit margin by condition and gold label (right of the line: A chosen)")
    fig.tight_layout()
    figures.append(Figure("margin_by_condition", "Logit margin by condition and gold label", fig,
                          "Each point is one item; the dashed line at 0 separates logit choice A (right) from B."))

    columns = [*LABELS, "unparsed"]
    fig, axes = plt.subplots(1, len(conditions), figsize=(4.2 * len(conditions), 3.4), squeeze=False)
    for ax, condition in zip(axes[0], conditions):
        rows = [r for r in records if r.get("condition") == condition]
        table = [[sum(1 for r in rows if r.get("logit_choice") == logit and (r.get("parsed") or "unparsed") == generated)
                  for generated in columns] for logit in LABELS]
        ax.pcolormesh(range(len(columns) + 1), range(len(LABELS) + 1), table, cmap="Blues", vmin=0,
                      vmax=max(1, max(max(t) for t in table)), edgecolors="white")
        ax.invert_yaxis()
        for i, row in enumerate(table):
            for j, count in enumerate(row):
                ax.text(j + 0.5, i + 0.5, str(count), ha="center", va="center", fontsize=11)
        ax.set_xticks([j + 0.5 for j in range(len(columns))], [f"gen {c}" for c in columns])
        ax.set_yticks([i + 0.5 for i in range(len(LABELS))], [f"logit {c}" for c in LABELS])
        agreement = (summary.get("metrics") or {}).get(f"{condition}.agreement")
        ax.set_title(f"{condition}\nagreement {agreement:.3f}" if isinstance(agreement, (int, float)) else condition)
    fig.suptitle("Logit choice against the parsed generated answer")
    fig.tight_layout()
    figures.append(Figure("logit_vs_generated", "Logit choice against generated answer", fig,
                          "Counts of items per condition; the diagonal is agreement, the last column unparsed generations."))

    metrics = summary.get("metrics") or {}
    threshold = (summary.get("thresholds") or {}).get("coverage")
    coverage = [metrics.get(f"{c}.parser_coverage") for c in conditions]
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    ax.bar(range(len(conditions)), [v if isinstance(v, (int, float)) else 0.0 for v in coverage], color="#4c72b0")
    for i, v in enumerate(coverage):
        ax.text(i, (v if isinstance(v, (int, float)) else 0.0) + 0.02,
                f"{v:.3f}" if isinstance(v, (int, float)) else "undefined", ha="center")
    if isinstance(threshold, (int, float)):
        ax.axhline(threshold, color="#a4161a", linestyle="--", linewidth=1, label=f"coverage threshold {threshold:g}")
        ax.legend(fontsize=8, loc="lower right")
    ax.set_xticks(range(len(conditions)), conditions)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("share of generations parsed")
    ax.set_title("Parser coverage by condition")
    fig.tight_layout()
    figures.append(Figure("parser_coverage", "Parser coverage", fig,
                          "Share of greedy generations the answer parser accepted, against the preregistered threshold."))
    return figures
