"""Every share a RES run reports in ``summary.json`` carries its 95% Wilson interval, k and n."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.selfcheck import proportion_fields
from fixtures.res import CONDITIONS

from .test_protocol_runs import COMPLETENESS, rescore, run_res

RUN_LIBRARIES_FIRST = ("benchmarks.res.scenarios",)  # imported before any pytester snapshot (root conftest)


def expected_counts(records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """(k, n) of every share, counted from the ledger."""
    out = {}
    for condition in CONDITIONS:
        rows = [r for r in records if r["condition"] == condition]
        parsed = [r for r in rows if r["parsed"] is not None]
        out.update({
            f"metrics.{condition}.logit_accuracy": (sum(r["logit_choice"] == r["ideal"] for r in rows), len(rows)),
            f"metrics.{condition}.generated_accuracy": (sum(r["parsed"] == r["ideal"] for r in rows), len(rows)),
            f"metrics.{condition}.parser_coverage": (len(parsed), len(rows)),
            f"metrics.{condition}.parsed_accuracy": (sum(r["parsed"] == r["ideal"] for r in parsed), len(parsed)),
            f"metrics.{condition}.agreement": (sum(r["parsed"] == r["logit_choice"] for r in parsed), len(parsed)),
        })
    return out


@pytest.mark.parametrize("model", ["scripted-random", "scripted-res-prose"])
def test_every_share_has_its_interval(pytester: pytest.Pytester, tmp_path: Path, model: str) -> None:
    """The heuristic audit's scores (fixed strategies on the whole fixture set) are not named as shares and carry
    no interval: they describe the frozen fixtures exactly."""
    _, report, run_dir = run_res(pytester, tmp_path, "--model", model, in_process=True)
    assert {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]
            if t["nodeid"].split("::")[-1] in COMPLETENESS} == dict.fromkeys(COMPLETENESS, "passed")
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    expected = expected_counts(records)
    fields = proportion_fields(summary)
    assert sorted(path for path, _, _ in fields) == sorted(expected)
    undefined = 0
    for path, value, interval in fields:
        assert interval is not None, f"{path} has no interval"
        assert (interval["k"], interval["n"]) == expected[path], path
        assert interval["method"] == "wilson" and interval["confidence"] == 0.95, path
        if interval["n"] == 0:
            undefined += 1
            assert value is None and interval["value"] is interval["low"] is interval["high"] is None, path
            continue
        assert value == interval["value"] == interval["k"] / interval["n"], path
        assert 0.0 <= interval["low"] <= value <= interval["high"] <= 1.0 and interval["low"] < interval["high"], path
    if model == "scripted-res-prose":  # no generation parses: parsed accuracy and agreement have no denominator
        assert undefined == 2 * len(CONDITIONS)
    else:
        assert undefined == 0
        assert any(0 < i["k"] < i["n"] for i in summary["intervals"].values())  # a share strictly inside (0, 1)
    # the stdlib rescorer recomputes every interval from the records alone
    rescored = rescore(run_dir)["intervals"]
    assert sorted(rescored) == sorted(summary["intervals"])
    for name, interval in summary["intervals"].items():
        for key in ("k", "n", "value", "low", "high"):
            assert rescored[name][key] == pytest.approx(interval[key], abs=1e-12), (name, key)

