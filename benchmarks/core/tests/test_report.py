"""The renderers of report.html, report.md and index.html on hand-made run directories of the four protocols."""

from __future__ import annotations

import base64
import html
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from benchmarks.core.protocol import finite
from benchmarks.core.report import (
    FIGURES_DIR,
    INDEX_HTML,
    ReportError,
    escape_md,
    find_protocol,
    load_run,
    main,
    render_html,
    render_md,
    write_index,
    write_reports,
)
from benchmarks.core.rules import format_number

from ._report_runs import HOSTILE, HOSTILE_LINK, PROTOCOLS, make_run

#: Tags a report may contain; anything else (a script, a link, an iframe) is a failure.
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "span", "section", "table", "thead",
                "tbody", "tr", "th", "td", "ul", "li", "code", "strong", "figure", "img", "figcaption", "a"}
FIGURE_COUNT = {"res": 3, "pzombie": 2, "cwr": 3, "ladder": 1}


class Page(HTMLParser):
    """The tags, rule rows (by classification) and text of a rendered page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.rows: list[tuple[str, str, str]] = []  # (data-rule, row classes, row text)
        self.text: list[str] = []
        self._row: list | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "tr" and "data-rule" in attributes:
            self._row = [attributes["data-rule"], attributes.get("class", ""), []]

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append((self._row[0], self._row[1], " ".join(self._row[2])))
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._row is not None:
            self._row[2].append(data)


@pytest.fixture(params=PROTOCOLS)
def name(request) -> str:
    return request.param


@pytest.mark.parametrize("value", [0.0, 0.5, 1.0])
def test_every_rule_row_in_preregistered_order_with_its_role_and_values(tmp_path: Path, name: str, value: float) -> None:
    run_dir = make_run(tmp_path, name, value=value)
    protocol = find_protocol(name)
    summary = json.loads((run_dir / protocol.summary_file).read_text())
    view = load_run(run_dir, figures=False)
    page, md = Page(render_html(view)), render_md(view)
    expected_rows = []
    for block in [*protocol.classifications.values(), *protocol.breakdowns.values()]:
        outcome = block.evaluate(finite(summary["metrics"]))
        for index, rule in enumerate(block.rules):
            role = "did_not_fire" if index < outcome.index else "fired" if index == outcome.index else "preempted"
            expected_rows.append((rule.label, role))
            texts = [f"{c.metric} = " for c in rule.all + rule.any]
            row = next(r for r in page.rows if r[0] == rule.label)
            assert all(t in row[2] for t in texts), (rule.label, row)
            for cond in rule.all + rule.any:
                assert f"{cond.op} {format_number(cond.threshold)}" in row[2], (rule.label, row)
        if block.passing:
            expected_rows.append((block.passing, "passing"))
        assert block.name in md.replace("\\", "") and outcome.label in md.replace("\\", "")
        md_rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
        positions = [next(i for i, line in enumerate(md_rows) if f"| {r.label}" in line.replace("\\", "")) for r in block.rules]
        assert positions == sorted(positions), block.name
    got = [(label, next(role for role in ("passing", "did_not_fire", "fired", "preempted") if role in classes.split()))
           for label, classes, _ in page.rows]
    assert got == expected_rows


def test_hostile_strings_render_as_text_and_nothing_is_fetched(tmp_path: Path, name: str) -> None:
    run_dir = make_run(tmp_path, name)
    written = write_reports(run_dir)
    page_text = (run_dir / "report.html").read_text()
    page = Page(page_text)
    for tag, attributes in page.tags:
        assert tag in ALLOWED_TAGS and tag != "a", tag
        assert not [a for a in attributes if a.startswith("on")], (tag, attributes)
        if tag == "img":
            assert attributes["src"].startswith("data:image/svg+xml;base64,")
    assert [t for t, a in page.tags if t == "img"] == ["img"] * FIGURE_COUNT[name]
    text = "".join(page.text)
    assert HOSTILE in text and HOSTILE_LINK in text  # shown, as text
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", page_text, re.I)
    assert not re.search(r"url\(|@import", page_text, re.I)
    for _, attributes in page.tags:
        assert not any(re.match(r"\s*(https?:|//)", v or "", re.I) for v in attributes.values())
    for _, attributes in page.tags:  # every figure is a well-formed SVG with a size, and fetches nothing either
        if "src" in (attributes or {}):
            svg = base64.b64decode(attributes["src"].split(",", 1)[1]).decode()
            root = ET.fromstring(svg)
            assert float(root.get("width").rstrip("pt")) > 0 and float(root.get("height").rstrip("pt")) > 0
            assert not re.search(r"""(?:href|src)\s*=\s*["']\s*(?:https?:|//|data:)""", svg)
            assert "<script" not in svg and "<image" not in svg and "<foreignObject" not in svg
    md = (run_dir / "report.md").read_text()
    assert "<script" not in md and "<img" not in md and "<a " not in md and "](https://" not in md
    assert html.escape("</script>") in md
    figures = sorted(p for p in written if p.suffix == ".svg")
    assert len(figures) == FIGURE_COUNT[name]
    for path in figures:  # an SVG file opened on its own is a document: hostile tick labels stay inert there too
        assert f"]({FIGURES_DIR}/{path.name})" in md
        svg = path.read_text()
        assert "<script" not in svg and "<img" not in svg
        assert not [e for e in ET.fromstring(svg).iter() if e.tag.rsplit("}", 1)[-1] in ("script", "foreignObject", "image")]


def test_a_non_preregistered_model_is_stated_at_the_top(tmp_path: Path, name: str) -> None:
    run_dir = make_run(tmp_path, name, model="someone/else")
    view = load_run(run_dir, figures=False)
    page, md = render_html(view), render_md(view)
    preregistered = find_protocol(name).preregistered_model(None).id
    banner = f"Non-preregistered model: this run used someone/else, not the preregistered {preregistered}"
    assert page.index(html.escape(banner)) < page.index('id="classification"')
    assert md.index("Non-preregistered model") < md.index("## Classification")


def test_no_banner_when_the_model_is_the_preregistered_one(tmp_path: Path) -> None:
    protocol = find_protocol("res")
    run_dir = make_run(tmp_path, "res", model=protocol.preregistered_model(None).id, hostile=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["deviations"] = []
    (run_dir / "summary.json").write_text(json.dumps(summary))
    view = load_run(run_dir, figures=False)
    assert "Non-preregistered" not in render_html(view) and "Non\\-preregistered" not in render_md(view)
    assert "None: the run follows the preregistration." in render_html(view)


def test_completeness_deviations_intervals_and_provenance_are_shown(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "cwr")
    page = html.unescape(render_html(load_run(run_dir, figures=False)))
    assert "2 of 3 completeness checks passed; run status broken" in page
    assert "test_records_file_written" in page and f"test_odd[{HOSTILE}]" in page
    assert "deficit" in page and re.search(r"<td>0\.33</td><td>-0\.1</td><td>0\.7</td>", page)
    assert "c" * 40 + " (dirty: uncommitted changes)" in page
    assert "sha256:" + "a" * 64 in page and "b" * 64 + " (12 files)" in page and "python 3.11" in page


def test_a_changed_prereg_falls_back_to_the_recorded_tests(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "res")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["prereg_sha256"] = "f" * 64
    (run_dir / "summary.json").write_text(json.dumps(summary))
    view = load_run(run_dir, figures=False)
    assert any("preregistration of res has changed" in n for n in view.notes)
    assert [r.label for r in view.classifications[0].rules] == summary["rule_order"]["gate"]


def test_a_run_without_a_summary_is_refused_in_one_line(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "res")
    (run_dir / "summary.json").unlink()
    with pytest.raises(ReportError, match="summary.json is missing; a report needs a finished run") as caught:
        write_reports(run_dir)
    assert "\n" not in str(caught.value)
    (run_dir / "summary.json").write_text("{not json")
    with pytest.raises(ReportError) as caught:
        write_reports(run_dir)
    assert "\n" not in str(caught.value) and "summary.json" in str(caught.value)


def test_a_figure_that_cannot_be_drawn_leaves_the_rest_of_the_report(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "pzombie")
    (run_dir / "records.jsonl").write_text('{"schema_version": 99}\n')
    view = load_run(run_dir)
    assert view.figures == [] and any("figures could not be drawn" in n for n in view.notes)
    assert "ANTI" in render_html(view) or view.classifications



@pytest.mark.parametrize("damage", [b"\n", b"\r\n", "repeat"])
def test_figures_are_drawn_only_from_a_ledger_the_strict_reader_accepts(tmp_path: Path, damage: Any) -> None:
    run_dir = make_run(tmp_path, "res")
    assert load_run(run_dir).figures, "the undamaged hand-made run has figures"
    ledger = run_dir / "records.jsonl"
    data = ledger.read_bytes()
    if damage == "repeat":
        data += data.splitlines(keepends=True)[0]
    elif damage == b"\r\n":
        data = data.replace(b"\n", b"\r\n")
    else:
        data += damage
    ledger.write_bytes(data)
    view = load_run(run_dir)
    assert view.figures == []
    note = next(n for n in view.notes if "figures could not be drawn" in n)
    assert "records.jsonl: line" in note and "\n" not in note
    label = json.loads((run_dir / "summary.json").read_text())["classifications"]["gate"]
    assert label in render_html(view)  # the rest of the report is there

def test_index_lists_every_run_and_links_its_report(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for name in PROTOCOLS:
        write_reports(make_run(results, name), "html")
    (results / "res" / "not-a-run").mkdir()
    index = write_index(results)
    assert index == results / INDEX_HTML
    page = Page(index.read_text())
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert sorted(links) == sorted(f"{name}/hand-made/report.html" for name in PROTOCOLS)
    assert all((results / link).is_file() for link in links)
    rows = [a for t, a in page.tags if t == "tr" and a.get("class") == "run"]
    assert len(rows) == 4
    text = "".join(page.text)
    assert text.index("pzombie") < text.index("ladder") < text.index("cwr")  # newest first
    assert HOSTILE in text and "<script>" not in index.read_text()


def test_the_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "results", "ladder")
    assert main([str(run_dir), "--format", "md"]) == 0
    assert (run_dir / "report.md").is_file() and not (run_dir / "report.html").exists()
    assert main([str(run_dir), "--format=html"]) == 0 and (run_dir / "report.html").is_file()
    assert main(["--index", str(tmp_path / "results")]) == 0 and (tmp_path / "results" / INDEX_HTML).is_file()
    capsys.readouterr()
    for argv, needle in [([], "the following arguments are required: DIR"),
                         ([str(run_dir), "--format", "pdf"], "argument --format: invalid choice: 'pdf'"),
                         ([str(run_dir), "--colour"], "unrecognized arguments: --colour"),
                         ([str(tmp_path / "nowhere")], "is not a run directory"),
                         ([str(run_dir), str(run_dir)], f"unrecognized arguments: {run_dir}"),
                         (["--index"], "the following arguments are required: DIR")]:
        assert main(argv) == 4, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, (argv, err)


def test_preregbench_dispatches_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.core.cli import main as cli

    assert cli(["report", "--format", "svg", str(tmp_path)]) == 4
    assert "argument --format: invalid choice: 'svg'" in capsys.readouterr().err
    assert cli(["--help"]) == 0
    usage = capsys.readouterr().out
    flat = " ".join(usage.split())  # argparse wraps its help to the terminal's width
    assert re.search(r"\n +report +re-render", usage) and "RUN_DIR [--format html|md|both]" in flat


def test_a_lone_surrogate_is_written_as_an_escape(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "ladder")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["deviations"].append("torn \ud800 text")
    (run_dir / "summary.json").write_text(json.dumps(summary))
    write_reports(run_dir)
    assert "torn \\ud800 text" in (run_dir / "report.html").read_text(encoding="utf-8")
    assert "torn \\\\ud800 text" in (run_dir / "report.md").read_text(encoding="utf-8")  # the backslash escaped


def test_shares_are_shown_with_their_intervals(tmp_path: Path) -> None:
    """A summary's ``intervals`` map: each share as "value [low, high], n = N" beside the measured value of every
    rule condition that reads it, and in a table of its own; an undefined share says so."""
    from benchmarks.core.stats import proportion

    run_dir = make_run(tmp_path, "res", value=0.75, hostile=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["intervals"] = {"five_factor.logit_accuracy": proportion(24, 32),
                            "minimal_owner_indexed.parsed_accuracy": proportion(0, 0),
                            "broken": {"value": 0.5}}  # not an interval: left out, never a crash
    (run_dir / "summary.json").write_text(json.dumps(summary))
    view = load_run(run_dir, figures=False)
    assert [name for name, _ in view.proportions] == ["five_factor.logit_accuracy", "minimal_owner_indexed.parsed_accuracy"]
    shown = "five_factor.logit_accuracy = 0.75 [0.5789, 0.8675], n = 32 >= 0.75 (accuracy)"
    page, md = html.unescape(render_html(view)), render_md(view)
    assert shown in page and escape_md(shown) in md
    assert escape_md("minimal_owner_indexed.logit_accuracy = 0.75 >= 0.75") in md  # no interval: the value alone
    assert re.search(r"five_factor\.logit_accuracy</td><td>0\.75 \[0\.5789, 0\.8675\], n = 32</td><td>24</td>"
                     r"<td>wilson</td>", page)
    assert "undefined, n = 0" in page
    assert f"| {escape_md('five_factor.logit_accuracy')} | {escape_md('0.75 [0.5789, 0.8675], n = 32')} | 24 | wilson |" in md
