"""Reports written at the end of real (scripted) runs, and opened in headless Chromium.

The runs go through pytester like every protocol self-check: a scripted RES
run and a scripted ladder probe into one results folder.  The browser test
loads each ``report.html`` and the folder's ``index.html`` over the DevTools
protocol, waits for the load event, and asserts that the page logged no
error, requested nothing but itself (and its own ``data:`` figures), shows
the classification and every rule row, and lays out every figure with a
non-zero size.  Screenshots go to ``$PREREGBENCH_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.core.report import INDEX_HTML, REPORT_HTML, REPORT_MD, find_protocol, write_index, write_reports
from benchmarks.core.selfcheck import read_report, run_protocol

from ._chromium import Browser, find_chromium
from ._report_runs import HOSTILE

RES_DIR = find_protocol("res").folder
LADDER_DIR = find_protocol("ladder").folder
LADDER_MODEL = "ladder-worker-a0.984-seed8"  # the simulated fleet's rung R1


def rule_labels(summary: dict) -> list[str]:
    return [label for labels in summary["rule_order"].values() for label in labels]


def test_a_run_ends_with_its_reports_and_the_index(pytester: pytest.Pytester, tmp_path: Path) -> None:
    results = tmp_path / "results"
    result = run_protocol(pytester, RES_DIR, results, "--model", "scripted-oracle")
    assert result.ret == 0, result.stdout.str()
    report, run_dir = read_report(results, "res", result)
    for name in (REPORT_HTML, REPORT_MD, "report_figures/parser_coverage.svg"):
        assert (run_dir / name).is_file(), name
    assert (results / INDEX_HTML).is_file()
    assert f"report: {run_dir / REPORT_HTML}" in result.stdout.str()
    label = report["benchmark"]["protocols"]["res"]["classifications"]["gate"]["outcome"]["label"]
    assert label in (run_dir / REPORT_HTML).read_text() and label in (run_dir / REPORT_MD).read_text().replace("\\", "")


def test_a_report_that_cannot_be_rendered_leaves_the_verdict(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A file where the figures folder goes: the report fails, one line says so, the verdict and exit status stand."""
    results = tmp_path / "results"
    run_dir = results / "res" / "blocked"
    run_dir.mkdir(parents=True)
    (run_dir / "report_figures").write_text("in the way")
    result = run_protocol(pytester, RES_DIR, results, "--model", "scripted-oracle", "--run-id", "blocked")
    assert result.ret == 0, result.stdout.str()
    lines = [line for line in result.stdout.str().splitlines() if line.startswith("report problem:")]
    assert len(lines) == 1 and "report_figures is not a real directory" in lines[0], result.stdout.str()
    report = json.loads((run_dir / "report.json").read_text())
    entry = report["benchmark"]["protocols"]["res"]
    assert entry["status"] == "complete" and entry["problems"] == []
    assert entry["classifications"]["gate"]["outcome"]["label"] == "RESPONSE_INTERFACE_GATE_PASSED"
    assert not (run_dir / REPORT_HTML).exists() and (results / INDEX_HTML).is_file()


def test_reports_of_scripted_runs_in_headless_chromium(pytester: pytest.Pytester, tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (apt-get install chromium); the reports were not opened in a browser")
    results = tmp_path / "results"
    assert run_protocol(pytester, RES_DIR, results, "--model", "scripted-oracle").ret == 0
    run_protocol(pytester, LADDER_DIR, results, "--model", LADDER_MODEL)  # its gate fails: exit status 1
    pages = {}
    for name in ("res", "ladder"):
        report, run_dir = read_report(results, name)
        pages[name] = (run_dir, report["benchmark"]["protocols"][name])
    # a copy of the RES run with hostile text where the report shows it: it must stay text
    hostile = results / "res" / "hostile"
    shutil.copytree(pages["res"][0], hostile)
    summary = json.loads((hostile / "summary.json").read_text())
    summary["deviations"].append(f"deviation {HOSTILE}")
    (hostile / "summary.json").write_text(json.dumps(summary))
    write_reports(hostile, "html")
    write_index(results)
    pages["hostile"] = (hostile, pages["res"][1])
    shots = Path(os.environ.get("PREREGBENCH_SCREENSHOTS") or tmp_path / "screens")
    shots.mkdir(parents=True, exist_ok=True)
    with Browser(binary, tmp_path / "profile") as browser:
        for name, (run_dir, entry) in pages.items():
            page = browser.page()
            page.send("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 900, "deviceScaleFactor": 1,
                                                             "mobile": False})
            url = (run_dir / REPORT_HTML).as_uri()
            page.open(url)
            assert page.console_errors() == [], name
            assert [u for u in page.requests() if u != url and not u.startswith("data:image/svg+xml;base64,")] == [], name
            text = page.evaluate("document.body.innerText")
            summary = json.loads((run_dir / find_protocol(run_dir.parent.name).summary_file).read_text())
            for cname, label in summary["classifications"].items():
                assert cname in text and label in text, (name, cname)
            rows = page.evaluate("[...document.querySelectorAll('tr[data-rule]')].map(r => r.dataset.rule)")
            for label in rule_labels(summary):
                assert label in rows and label in text, (name, label)
            sizes = page.evaluate("[...document.querySelectorAll('img.figure')].map(i => "
                                  "[i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().width, "
                                  "i.getBoundingClientRect().height])")
            assert sizes and all(min(s) > 0 for s in sizes), (name, sizes)
            assert page.evaluate("document.scripts.length") == 0
            if name == "hostile":
                assert f"deviation {HOSTILE}" in text
                assert page.evaluate("document.querySelectorAll('img:not(.figure)').length") == 0
            assert page.screenshot(shots / f"{name}.png").stat().st_size > 10_000
        page = browser.page()
        url = (results / INDEX_HTML).as_uri()
        page.open(url)
        assert page.console_errors() == [] and page.requests() == [url]
        links = page.evaluate("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
        assert sorted(links) == sorted(str((pages[n][0] / REPORT_HTML).relative_to(results)) for n in pages)
        text = page.evaluate("document.body.innerText")
        assert "RESPONSE_INTERFACE_GATE_PASSED" in text and LADDER_MODEL in text
        page.screenshot(shots / "index.png")
