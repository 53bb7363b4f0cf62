"""The round report over a folder of probe directories: a scripted round of two simulated rungs (the anchor
R0 and the saturated R4) on v2-r3, seed 203, rendered with ``preregbench report ROUND_DIR``; its four
figures per round are non-empty SVG, their numbers are the probes' own analysis numbers, hostile rung
names render as text, and nothing points outside the page."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.report import ReportError
from benchmarks.core.report import main as report_main
from benchmarks.core.selfcheck import project_root
from benchmarks.core.tests._chromium import Browser, find_chromium
from benchmarks.ladder.gate import TIERS
from benchmarks.ladder.records import METADATA_FILE, find_probes, read_probes
from benchmarks.ladder.report import fleet_report
from benchmarks.ladder.round_report import ROUND_FIGURES_DIR, ROUND_HTML, ROUND_MD, round_data, write_round_reports
from benchmarks.ladder.round_report import main as round_report_main
from benchmarks.ladder.spec import HERE, PREREG
from benchmarks.ladder.worker import SIMULATED_FLEET

STATE, SEED = PREREG.values.rounds.states[2], PREREG.values.rounds.seeds[2]
RUNGS = ("R0", "R4")
UNITS_PER_TIER = 6
FIGURES = ("error_by_tier", "failure_signature", "approve_rate", "depth_windows")
HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)>"&\''


@pytest.fixture(scope="module")
def round_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two simulated rungs probed through the real probe machinery, each in a pytest process of its own."""
    root = tmp_path_factory.mktemp("round")
    for label in RUNGS:
        command = [sys.executable, "-m", "pytest", str(HERE), "-m", "cpu", f"--rootdir={project_root(HERE)}",
                   f"--results-dir={root / label}", "-p", "no:cacheprovider", "-p", "no:randomly",
                   "--model", SIMULATED_FLEET[label], "--ladder-state", STATE, "--ladder-seed", str(SEED),
                   "--ladder-units-per-tier", str(UNITS_PER_TIER), "-q"]
        done = subprocess.run(command, cwd=project_root(HERE), capture_output=True, text=True, timeout=600)
        assert len(find_probes(root / label)) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return root


def md(label: str) -> str:
    """A label as the Markdown page spells it (underscores escaped)."""
    return label.replace("_", "\\_")


def analysis_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "analysis.json").read_text(encoding="utf-8"))


def svgs_of(page: str) -> dict[str, bytes]:
    """figure id -> the SVG of its data URI."""
    return {m[1]: base64.b64decode(m[2]) for m in
            re.finditer(r'<figure id="figure-([^"]+)"><img class="figure" alt="[^"]*" src="data:image/svg\+xml;base64,'
                        r'([A-Za-z0-9+/=]+)"', page)}


def test_report_command_writes_the_round_report_with_four_figures(round_dir: Path) -> None:
    assert report_main([str(round_dir)]) == 0
    page = (round_dir / ROUND_HTML).read_text(encoding="utf-8")
    svgs = svgs_of(page)
    assert sorted(svgs) == sorted(f"r0_{STATE}_{name}" for name in FIGURES)
    for stem, svg in svgs.items():
        assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg and b"<path" in svg, stem
        assert len(svg) > 2000, stem
        assert (round_dir / ROUND_FIGURES_DIR / f"{stem}.svg").read_bytes() == svg
    markdown = (round_dir / ROUND_MD).read_text(encoding="utf-8")
    for stem in svgs:
        assert f"]({ROUND_FIGURES_DIR}/{stem}.svg)" in markdown
    # the instrument verdict and the gate table the ladder computes over the same probes
    probes = read_probes(find_probes(round_dir))
    expected = fleet_report(probes, SIMULATED_FLEET)
    assert f"Instrument verdict: {expected['instrument']['label']}: " in page
    assert f"Instrument verdict: {md(expected['instrument']['label'])}: " in markdown
    for row in expected["gate_table"]:
        assert f"<td>{row['gate']}</td>" in page and f"| {md(row['gate'])} |" in markdown
    # the ordinary run directories are left alone: no round report inside a probe's run directory
    assert not list(round_dir.glob(f"*/ladder/*/{ROUND_HTML}"))


def test_figure_numbers_are_the_probes_analysis_numbers(round_dir: Path) -> None:
    folders = find_probes(round_dir)
    probes = read_probes(folders)
    data = round_data(probes, SIMULATED_FLEET)["figures"][STATE]
    assert data["rungs"] == list(RUNGS)
    for probe in probes:
        label = next(k for k, v in SIMULATED_FLEET.items() if v == probe.metadata.rung)
        recorded = analysis_of(probe.folder)
        assert data["tier_error"][label] == [recorded["metrics"][f"tier{t}.error"] for t in TIERS]
        assert data["overall_error"][label] == recorded["metrics"]["overall_error"]
        for key in ("error_on_approvable", "error_on_rejectable", "refusal_share_of_errors"):
            assert data[key][label] == recorded["analysis"][key], key
        tiers = recorded["analysis"]["tiers"]
        assert data["approve_rate"][label] == [tiers[str(t)]["approve_rate"] for t in TIERS]
        assert data["generated_approvable_share"][label] == [tiers[str(t)]["generated_approvable_share"] for t in TIERS]
        assert data["design_approvable_share"] == tiers["1"]["design_approvable_share"]
    assert data["feasibility"] == fleet_report(probes, SIMULATED_FLEET)["rounds"][STATE]["feasibility"]
    # the simulation's shape: the anchor errs, the saturated rung does not and its window is a bound
    assert data["overall_error"]["R0"] > data["overall_error"]["R4"] == 0
    assert data["feasibility"]["rungs"]["R4"]["bound"]
    # the numbers printed beneath the figures are these numbers
    write_round_reports(round_dir, "html")
    page = (round_dir / ROUND_HTML).read_text(encoding="utf-8")
    table = re.search(rf'<table class="figure-data" data-figure="r0_{STATE}_error_by_tier">(.*?)</table>',
                      page).group(1)
    cells = re.findall(r"<tr><td>R0</td>(.*?)</tr>", table)[0]
    assert re.findall(r"<td>([^<]*)</td>", cells) == [f"{v:.3f}" for v in data["tier_error"]["R0"]] + [
        f"{data['overall_error']['R0']:.3f}"]
    window = data["feasibility"]["rungs"]["R0"]["required_depth_window"]
    assert f"<tr><td>R0</td><td>{window[0]:.1f}</td><td>{window[1]:.1f}</td><td>no</td></tr>" in page


def test_hostile_rung_names_render_as_text_and_nothing_points_outside(round_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "hostile-round"
    shutil.copytree(round_dir, copy, ignore=shutil.ignore_patterns("round_report*"))
    fleet = {}
    for label, folder in zip(RUNGS, sorted(find_probes(copy), key=lambda f: f.parts[-4])):
        metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        metadata["rung"] = f"{HOSTILE}{label}"
        (folder / METADATA_FILE).write_text(json.dumps(metadata), encoding="utf-8")
        fleet[label if label == "R0" else f"{label}{HOSTILE}"] = metadata["rung"]  # the anchor keeps its label
    with pytest.raises(ReportError, match="name the fleet"):  # no longer the simulated fleet
        write_round_reports(copy)
    write_round_reports(copy, fleet=fleet)
    page = (copy / ROUND_HTML).read_text(encoding="utf-8")
    markdown = (copy / ROUND_MD).read_text(encoding="utf-8")
    for text in (page, markdown):
        assert "<script" not in text and "<img src=x" not in text
        assert not re.search(r"https?://", text.replace("http://www.w3.org/", ""))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown
    assert len(svgs_of(page)) == 4
    for svg in svgs_of(page).values():
        # the SVG draws text as paths and names it only in escaped comments: no rung name survives as markup
        assert b"<script" not in svg and b"<img" not in svg and b"&lt;script&gt;" in svg
        assert not re.search(rb'(href|src)="https?://', svg)


def test_a_folder_without_probes_is_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert report_main([str(tmp_path / "empty")]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "empty" in err


def test_round_report_in_headless_chromium(round_dir: Path, tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (apt-get install chromium); the round report was not opened "
                    "in a browser")
    write_round_reports(round_dir, "html")
    url = (round_dir / ROUND_HTML).as_uri()
    with Browser(binary, tmp_path / "profile") as browser:
        page = browser.page()
        page.send("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False})
        page.open(url)
        assert page.console_errors() == []
        assert [u for u in page.requests() if u != url and not u.startswith("data:image/svg+xml;base64,")] == []
        assert page.evaluate("document.scripts.length") == 0
        sizes = page.evaluate("[...document.querySelectorAll('img.figure')].map(i => [i.naturalWidth, "
                              "i.naturalHeight, i.getBoundingClientRect().width, i.getBoundingClientRect().height])")
        assert len(sizes) == 4 and all(min(s) > 0 for s in sizes), sizes
        assert "Instrument verdict: NOT_PROVEN" in page.evaluate("document.body.innerText")


@pytest.mark.parametrize("damage", ["metadata", "ledger", "twice"])
def test_an_unreadable_round_is_refused_with_one_line(round_dir: Path, tmp_path: Path, damage: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "round"
    shutil.copytree(round_dir, copy, ignore=shutil.ignore_patterns("round_report*"))
    folder = find_probes(copy)[0]
    if damage == "metadata":
        (folder / METADATA_FILE).write_text("{not json", encoding="utf-8")
    elif damage == "ledger":
        with (folder / "units.jsonl").open("a", encoding="utf-8") as ledger:
            ledger.write('{"unit_id": "t1-000", "broken\n{"also": 1}\n')
    else:  # the same rung's probe twice in one round
        shutil.copytree(folder, copy / "again" / folder.name)
    assert report_main([str(copy)]) == 4
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
    assert not (copy / ROUND_HTML).exists()
    assert {"metadata": METADATA_FILE, "ledger": "units.jsonl", "twice": "was probed twice"}[damage] in captured.err


def test_the_ladder_command_names_any_fleet(round_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "round"
    shutil.copytree(round_dir, copy, ignore=shutil.ignore_patterns("round_report*"))
    fleet = {"R0": SIMULATED_FLEET["R0"], "R4": SIMULATED_FLEET["R4"]}  # a two-rung fleet: nothing is missing
    assert round_report_main([str(copy), "--format", "html"] + [f"--fleet={k}={v}" for k, v in fleet.items()]) == 0
    page = (copy / ROUND_HTML).read_text(encoding="utf-8")
    verdict = fleet_report(read_probes(find_probes(copy)), fleet)["instrument"]
    assert "not probed" not in verdict["reason"]
    assert f"Instrument verdict: {verdict['label']}: {verdict['reason']}" in page.replace("&#x27;", "'")
    assert not (copy / ROUND_MD).exists()
    with pytest.raises(SystemExit):
        round_report_main([str(copy), "--fleet", "R0"])
