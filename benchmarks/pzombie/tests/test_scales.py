"""P-Zombie at every scale: ``--scale all`` groups, their cross-scale table, compare and re-rendering.

The groups here hold synthetic records (``scenarios.prefill_group``): each scale's run finds every unit
recorded and is decided from its ledger in its own process, so the commands, the children, the table and
the comparison are all the real ones in seconds.  The table is checked against statistics this file computes
from each scale's ledger with its own code.  The slow test measures one scale on the bundled Gemma 3 270M,
kills the group partway and resumes it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import models
from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.pzombie.scales import SCALES_JSON, SCALES_MD
from benchmarks.pzombie.scenarios import prefill_group
from benchmarks.pzombie.spec import CATEGORIES, PUBLISHED

SCALES = ("270M", "1B", "4B", "E2B")
SCENARIO_OF = {"270M": "confirmed", "1B": "ambiguous", "4B": "flat", "E2B": "token_driven"}
RUN_ARGS = ("--model", "gemma-3-270m", "--device", "cpu", "-p", "no:cacheprovider", "-p", "no:randomly")
#: Where the bundled models' converted weights live, read before any test can move HOME.
BUNDLED_CACHE = models.cache_root()


def suite_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=SUITE_ROOT, env=suite_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_group(results: Path, group_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("run", "pzombie", "--scale", "all", *RUN_ARGS, f"--results-dir={results}", f"--run-id={group_id}", *args)


def ledger_bytes(parent: Path) -> dict[str, bytes]:
    return {scale: (parent / "pzombie" / scale / "records.jsonl").read_bytes()
            for scale in SCALES if (parent / "pzombie" / scale / "records.jsonl").exists()}


# --------------------------------------------------------------------------- this file's own statistics


def own_statistics(run_dir: Path, preset: str = "ACTIVE_MANIFOLD") -> dict[str, Any]:
    """eta^2 (one-way ANOVA of H over the categories), F, R^2 (pearson TD -> H) and the mean H per category of
    one preset's error-free records, from the ledger's raw lines."""
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines() if line.strip()]
    ok = [r for r in rows if r["preset"] == preset and r.get("error") is None]
    h = [float(r["zone_entropy"]) for r in ok]
    grand = sum(h) / len(h)
    groups = {c: [float(r["zone_entropy"]) for r in ok if r["category"] == c] for c in CATEGORIES}
    between = sum(len(g) * (sum(g) / len(g) - grand) ** 2 for g in groups.values())
    within = sum((x - sum(g) / len(g)) ** 2 for g in groups.values() for x in g)
    td = [float(r["token_diversity"]) for r in ok]
    mt = sum(td) / len(td)
    sxy = sum((a - mt) * (b - grand) for a, b in zip(td, h))
    sxx, syy = sum((a - mt) ** 2 for a in td), sum((b - grand) ** 2 for b in h)
    k, n = len(groups), len(h)
    return {"eta_squared": between / (between + within), "f": (between / (k - 1)) / (within / (n - k)),
            "r_squared_td": sxy * sxy / (sxx * syy), "n_ok": n,
            "mean_h": {c: sum(g) / len(g) for c, g in groups.items()}}


# --------------------------------------------------------------------------- one group, run once


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A group whose four scales hold records of four shapes, run with ``preregbench run pzombie --scale all``."""
    results = tmp_path_factory.mktemp("scales") / "results"
    parent = prefill_group(results, "G", SCENARIO_OF)
    before = ledger_bytes(parent)
    done = run_group(results, "G")
    assert ledger_bytes(parent) == before  # every unit was recorded: nothing is measured again
    return done, parent


def test_every_scale_is_decided_as_a_run_of_its_own(group: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, parent = group
    assert done.returncode == 1, done.stdout + done.stderr  # 1B, 4B and E2B fail a gate: the group's worst
    for scale in SCALES:
        stats = json.loads((parent / "pzombie" / scale / "stats.json").read_text())
        assert stats["status"] == "complete" and stats["settings"]["scale"] == scale and stats["run_id"] == scale
        combined = stats["classifications"]["combined"]
        assert f"pzombie {scale}: combined: {combined};" in done.stdout
    assert f"pzombie scale group G: exit 1; {parent / 'report.html'}" in done.stdout
    group_file = json.loads((parent / "group.json").read_text())
    assert group_file["scales"] == list(SCALES) and group_file["protocol"] == "pzombie"


def test_the_table_holds_each_scales_own_statistics(group: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, parent = group
    table = json.loads((parent / SCALES_JSON).read_text())
    assert table["status"] == "complete" and table["complete_scales"] == 4
    assert [row["scale"] for row in table["scales"]] == list(SCALES)
    for row in table["scales"]:
        mine = own_statistics(parent / row["run_dir"])
        found = row["presets"]["ACTIVE_MANIFOLD"]
        for key in ("eta_squared", "f", "r_squared_td"):
            assert found[key] == pytest.approx(mine[key], rel=1e-9), (row["scale"], key)
        assert found["n_ok"] == mine["n_ok"] == 80
        for c in CATEGORIES:
            assert found["mean_h"][c] == pytest.approx(mine["mean_h"][c], rel=1e-9)
        low, high = found["eta_squared_interval"]["low"], found["eta_squared_interval"]["high"]
        assert low <= found["eta_squared"] <= high
        stats = json.loads((parent / row["run_dir"] / "stats.json").read_text())
        assert row["classifications"] == stats["classifications"] and row["verdict"] == stats["classifications"]["combined"]
        assert row["published"] == PUBLISHED[row["scale"]]
        assert any("instead of the preregistered" in d for d in row["deviations"])  # the bundled model stood in


def test_the_markdown_table_has_the_seeds_layout_beside_the_published_rows(
        group: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, parent = group
    text = (parent / SCALES_MD).read_text()
    assert "| Scale | Source | η² | F | p\\_approx | R²(TD→H) | Mean H (math/logic/creative/synth) | Verdict |" in text
    # the seed's section 8, as published
    for line in ("| 270M | SR-61 FINAL V2 | 0.290 | 10.34 | 1.3e-05 | 0.051 | 1.38 / 1.71 / 2.05 / 2.00 | "
                 "ANTI\\_P\\_ZOMBIE\\_CONFIRMED |",
                 "| 4B | SR-61 FINAL V2 | 0.025 | 0.66 | 0.584 | 0.014 | 0.32 / 0.13 / 0.14 / 0.26 | "
                 "ETA2\\_BELOW\\_THRESHOLD |"):
        assert line in text
    table = json.loads((parent / SCALES_JSON).read_text())
    for row in table["scales"]:
        eta = row["presets"]["ACTIVE_MANIFOLD"]["eta_squared"]
        assert f"| {row['scale']} | this group | {eta:.3f} |" in text
    assert (parent / "scales_figures" / "eta2_r2_by_scale.svg").read_text().lstrip().startswith("<?xml")


def test_the_group_report_is_one_self_contained_page(group: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, parent = group
    html = (parent / "report.html").read_text()
    assert "Content-Security-Policy" in html and "<script" not in html and "http://" not in html
    assert 'src="data:image/svg+xml;base64,' in html and 'data-figure="eta2_r2_by_scale"' in html
    for scale in SCALES:
        assert f'href="pzombie/{scale}/report.html"' in html


def test_each_scale_is_recomputed_by_verify_at_its_own_scale(group: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, parent = group
    for scale in ("1B", "E2B"):
        done = cli("verify", str(parent / "pzombie" / scale))
        assert done.returncode == 1, done.stdout + done.stderr  # EXPLORATORY: the bundled model stood in
        assert "not recomputed" not in done.stdout and "TAMPERED" not in done.stdout, done.stdout


def test_a_resume_with_other_options_stops_at_the_first_scale(
        group: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    _, parent = group
    copy = tmp_path / "results" / "pzombie-scales" / "G"
    shutil.copytree(parent, copy)
    before = ledger_bytes(copy)
    # the pytest form: each scale is a pytest session of its own
    done = subprocess.run([sys.executable, "-m", "pytest", "benchmarks/pzombie", "-m", "cpu", "--scale", "all",
                           *RUN_ARGS, f"--results-dir={tmp_path / 'results'}", "--run-id", "G",
                           "--pzombie-max-new-tokens", "5"],
                          cwd=SUITE_ROOT, env=suite_env(), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "max_new_tokens: 60 -> 5" in done.stdout + done.stderr
    assert "scale 270M stopped on a usage error; the later scales were not started" in done.stdout
    assert "pzombie E2B: " in done.stdout and "[not started]" in done.stdout
    assert ledger_bytes(copy) == before


# --------------------------------------------------------------------------- report, hostile runs


def test_a_hostile_or_missing_scale_is_a_row_saying_why(group: tuple[subprocess.CompletedProcess[str], Path],
                                                        tmp_path: Path) -> None:
    _, parent = group
    copy = tmp_path / "G"
    shutil.copytree(parent, copy)
    stats_path = copy / "pzombie" / "1B" / "stats.json"
    stats = json.loads(stats_path.read_text())
    stats["model"]["id"] = "<script>alert(1)</script>"
    stats_path.write_text(json.dumps(stats))
    wrong = copy / "pzombie" / "4B" / "stats.json"
    moved = json.loads(wrong.read_text())
    moved["settings"]["scale"] = "1B"
    wrong.write_text(json.dumps(moved))
    shutil.rmtree(copy / "pzombie" / "E2B")
    done = cli("report", str(copy))
    assert done.returncode == 0, done.stderr
    table = json.loads((copy / SCALES_JSON).read_text())
    rows = {row["scale"]: row for row in table["scales"]}
    assert table["status"] == "incomplete" and table["complete_scales"] == 2
    assert rows["4B"]["status"] == "missing" and "scale '1B', not '4B'" in rows["4B"]["problem"]
    assert rows["E2B"]["status"] == "missing" and "no stats.json" in rows["E2B"]["problem"]
    html = (copy / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize("content", [b"{not json", b'{"kind": "scale-group", "protocol": "pzombie", "scales": ["../x"]}',
                                     b'{"kind": "other", "protocol": "pzombie", "scales": ["270M"]}'])
def test_a_damaged_group_file_is_one_line(tmp_path: Path, content: bytes) -> None:
    folder = tmp_path / "G"
    folder.mkdir()
    (folder / "group.json").write_bytes(content)
    done = cli("report", str(folder))
    assert done.returncode == 4 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "group.json" in done.stderr and not (folder / "report.html").exists()


# --------------------------------------------------------------------------- compare


def test_two_groups_are_compared_scale_by_scale(group: tuple[subprocess.CompletedProcess[str], Path],
                                                tmp_path: Path) -> None:
    _, parent = group
    other = prefill_group(tmp_path / "results", "H", {"270M": "flat", "1B": "ambiguous", "4B": "flat"})
    target = tmp_path / "compare.json"
    done = cli("compare", str(parent), str(other), "--json", str(target))
    assert done.returncode == 0, done.stderr
    result = json.loads(target.read_text())
    assert [found["scale"] for found in result["scales"]] == ["270M", "1B", "4B"] and "E2B" in result["not_compared"]
    by_scale = {found["scale"]: found for found in result["scales"]}
    rows = {r["measure"]: r for r in by_scale["270M"]["statistics"]}
    mine_a = own_statistics(parent / "pzombie" / "270M")["eta_squared"]
    mine_b = own_statistics(other / "pzombie" / "270M")["eta_squared"]
    assert rows["active.eta_squared"]["difference"] == pytest.approx(mine_a - mine_b, rel=1e-9)
    same = {r["measure"]: r for r in by_scale["1B"]["statistics"]}["active.eta_squared"]
    assert same["difference"] == 0 and same["interval"]["low"] == same["interval"]["high"] == 0
    assert "[270M] pzombie:" in done.stdout and "[E2B] not compared:" in done.stdout


def test_a_group_is_not_compared_with_a_run(group: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    _, parent = group
    done = cli("compare", str(parent), str(parent / "pzombie" / "1B"), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 4 and "is a scale group and the other a run" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- refusals before any work


@pytest.mark.parametrize("args, says", [
    (("run", "res", "--scale", "all"), "RES preregisters no scales"),
    (("run", "pzombie", "--scale", "all", "--shard", "1/2"), "shard one scale at a time"),
])
def test_what_a_group_cannot_do_is_refused_in_one_line(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    done = cli(*args, "--device", "cpu", f"--results-dir={tmp_path / 'results'}")
    assert done.returncode == 4, done.stdout + done.stderr
    assert says in done.stderr and not (tmp_path / "results").exists()


def test_a_folder_that_is_no_group_is_not_taken_over(tmp_path: Path) -> None:
    taken = tmp_path / "results" / "pzombie-scales" / "G"
    taken.mkdir(parents=True)
    (taken / "notes.txt").write_text("mine")
    done = run_group(tmp_path / "results", "G")
    assert done.returncode == 4 and "holds no group.json" in done.stderr
    assert sorted(p.name for p in taken.iterdir()) == ["notes.txt"]


def test_the_pytest_form_takes_one_protocol_folder(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "benchmarks/pzombie", "benchmarks/res", "--scale", "all",
                           f"--results-dir={tmp_path / 'results'}", "-p", "no:cacheprovider"],
                          cwd=SUITE_ROOT, env=suite_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 4 and "--scale all runs one protocol" in done.stderr
    assert not (tmp_path / "results").exists()


# --------------------------------------------------------------------------- a real scale, killed and resumed

#: Options of the measured scale (and of the prefilled ones, which a group shares): short and in one process.
MEASURED_OPTIONS = {"max-new-tokens": 2, "isolation": "inprocess", "preset": "ACTIVE_MANIFOLD"}
KILL_AFTER = 12


@pytest.mark.slow
def test_a_killed_scale_resumes_alone_on_the_bundled_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """270M, 1B and 4B hold records; E2B (the uncached path, use_cache false) is measured on the bundled Gemma 3
    270M, the group is SIGKILLed during it and resumed: the finished scales' ledgers are untouched, E2B ends with
    every prompt once, and the table is complete."""
    monkeypatch.setenv("PREREGBENCH_CACHE", str(BUNDLED_CACHE))
    results = tmp_path / "results"
    parent = prefill_group(results, "K", {s: SCENARIO_OF[s] for s in ("270M", "1B", "4B")},
                           preset=MEASURED_OPTIONS["preset"],
                           options={k: v for k, v in MEASURED_OPTIONS.items() if k != "preset"})
    before = ledger_bytes(parent)
    args = ["run", "pzombie", "--scale", "all", *RUN_ARGS, f"--results-dir={results}", "--run-id=K",
            *[a for k, v in MEASURED_OPTIONS.items() for a in (f"--pzombie-{k}", str(v))]]
    ledger = parent / "pzombie" / "E2B" / "records.jsonl"
    log = tmp_path / "killed.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.core.cli", *args], cwd=SUITE_ROOT, env=suite_env(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 900
        try:
            while not (ledger.exists() and ledger.read_bytes().count(b"\n") >= KILL_AFTER):
                assert proc.poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, f"no {KILL_AFTER} E2B records within 900 s"
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the group, its scale's process and anything below
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (parent / SCALES_JSON).exists()
    done = cli(*args, timeout=1800)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert {s: b for s, b in ledger_bytes(parent).items() if s != "E2B"} == before
    units = [json.loads(line)["unit_id"] for line in ledger.read_text().splitlines()]
    assert len(units) == len(set(units)) == 80
    table = json.loads((parent / SCALES_JSON).read_text())
    assert table["status"] == "complete"
    e2b = table["scales"][3]
    assert e2b["settings"]["scale"] == "E2B" and e2b["presets"]["ACTIVE_MANIFOLD"]["n_ok"] == 80
    assert e2b["classifications"]["h2"] is None  # one preset: H2/A2 undecided
    stats = json.loads((parent / "pzombie" / "E2B" / "stats.json").read_text())
    assert stats["operational"]["use_cache"] is False
    assert not math.isnan(e2b["presets"]["ACTIVE_MANIFOLD"]["eta_squared"])


def test_a_terminated_group_stops_after_the_running_scale(tmp_path: Path) -> None:
    """SIGTERM to the group while its first scale runs: the scale gets it too (or, sent before the scale's process
    started, finishes), no later scale starts, the table says incomplete and the exit status is 2."""
    results = tmp_path / "results"
    parent = prefill_group(results, "T", SCENARIO_OF)
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.core.cli", "run", "pzombie", "--scale", "all", *RUN_ARGS,
                             f"--results-dir={results}", "--run-id=T"], cwd=SUITE_ROOT, env=suite_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the group names each scale before it starts it
        seen.append(line)
        if line.startswith("--scale all: pzombie 270M (1 of 4)"):
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.stdout.read()
    assert proc.wait(timeout=600) == 2, "".join(seen) + rest
    assert "interrupted during scale 270M; resume with --run-id T" in rest
    for scale in ("1B", "4B", "E2B"):
        assert f"pzombie {scale}: " in rest and f"--scale all: pzombie {scale}" not in rest
        assert not (parent / "pzombie" / scale / "report.json").exists()
    assert json.loads((parent / SCALES_JSON).read_text())["status"] == "incomplete"
