"""The RES rescorer against a finished scripted run: it agrees with the run as written, and names the unit of
every primitive field changed afterwards (a logit, a margin, a reply, a bit or a code of a fixture row)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from benchmarks.res.spec import HERE

from .test_protocol_runs import run_res

SCRIPT = HERE / "rescore.py"

RUN_LIBRARIES_FIRST = ("benchmarks.res.scenarios",)  # imported before any pytester snapshot (root conftest)


def rescore(run_dir: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    """Exit status, the JSON it printed (None when it printed none) and its stderr, under ``python -S -I``."""
    done = subprocess.run([sys.executable, "-S", "-I", str(SCRIPT), str(run_dir), *args],
                          capture_output=True, text=True, cwd="/", check=False)
    return done.returncode, (json.loads(done.stdout) if done.stdout.strip() else None), done.stderr


def edit_records(run_dir: Path, unit: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = run_dir / "records.jsonl"
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["item_id"] == unit:
            change(record)
        lines.append(json.dumps(record, sort_keys=True))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit_row(run_dir: Path, condition: str, index: int, change: Callable[[dict[str, Any]], None]) -> None:
    path = run_dir / "fixtures.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    [entry] = stored["sets"].values()
    change(entry["records"][condition][index])
    path.write_text(json.dumps(stored), encoding="utf-8")


def flip_margin(record: dict[str, Any]) -> None:
    record["margin"] = -record["margin"]


def swap_logits(record: dict[str, Any]) -> None:
    record["label_logits"] = record["label_logits"][::-1]


def other_reply(record: dict[str, Any]) -> None:
    record["generation"] = "B" if record["parsed"] == "A" else "A"


def prose_reply(record: dict[str, Any]) -> None:
    record["generation"] = "Either A or B would do."


def fields_of(report: dict[str, Any], unit: str) -> set[str]:
    return {d["field"] for d in report["disagreements"] if d["unit"] == unit}


def test_the_rescorer_agrees_with_a_run_and_names_the_unit_of_every_changed_primitive(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """One scripted run (generations right on five-factor, wrong on the minimal audit: MIXED_GATE_OUTCOME), then a
    copy of it per change; each change is one primitive field of one unit, and only that unit is named."""
    _, report, run_dir = run_res(pytester, tmp_path, "--model", "scripted-res-mixed", in_process=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    label = summary["classifications"]["gate"]
    assert label == report["benchmark"]["protocols"]["res"]["classifications"]["gate"]["outcome"]["label"]

    status, unchanged, err = rescore(run_dir)
    assert (status, err) == (0, "")
    assert unchanged["classification"] == label == "MIXED_GATE_OUTCOME"
    assert unchanged["disagreements"] == [] and unchanged["mismatched_items"] == []
    assert unchanged["items"] == 64 and unchanged["missing_items"] == []
    for key, value in unchanged["metrics"].items():
        assert summary["metrics"][key] == pytest.approx(value), key

    records = {json.loads(line)["item_id"]: json.loads(line)
               for line in (run_dir / "records.jsonl").read_text().splitlines()}
    fixtures = json.loads((run_dir / "fixtures.json").read_text())
    [rows] = [entry["records"] for entry in fixtures["sets"].values()]
    # A five-factor row with exactly three supports (A) and a minimal row with both supports (its allow code):
    # clearing one set bit changes the gold letter of each.
    five = next(i for i, row in enumerate(rows["five_factor"]) if sum(row["self_bits"]) == 3)
    minimal = next(i for i, row in enumerate(rows["minimal_owner_indexed"]) if row["self_bits"] == [1, 1])
    five_unit, minimal_unit = f"five_factor:{five:02d}", f"minimal_owner_indexed:{minimal:02d}"

    def clear_first_set_bit(row: dict[str, Any]) -> None:
        row["self_bits"][row["self_bits"].index(1)] = 0

    def flip_peer_bit(row: dict[str, Any]) -> None:
        row["peer_bits"][0] = 1 - row["peer_bits"][0]

    def swap_codes(row: dict[str, Any]) -> None:
        row["allow_code"], row["block_code"] = row["block_code"], row["allow_code"]

    cases = [
        ("margin sign", lambda d: edit_records(d, "five_factor:03", flip_margin), "five_factor:03", {"margin"}),
        ("logits swapped", lambda d: edit_records(d, "minimal_owner_indexed:07", swap_logits),
         "minimal_owner_indexed:07", {"margin", "logit_choice"}),
        ("reply text", lambda d: edit_records(d, "five_factor:10", other_reply), "five_factor:10", {"parsed"}),
        ("reply to prose", lambda d: edit_records(d, "minimal_owner_indexed:20", prose_reply),
         "minimal_owner_indexed:20", {"parsed"}),
        ("prompt text", lambda d: edit_records(d, "five_factor:17", lambda r: r.update(prompt=r["prompt"] + " ")),
         "five_factor:17", {"prompt_sha256"}),
        ("five-factor self bit", lambda d: edit_row(d, "five_factor", five, clear_first_set_bit), five_unit,
         {"ideal", "fixture_sha256"}),
        ("minimal self bit", lambda d: edit_row(d, "minimal_owner_indexed", minimal, clear_first_set_bit),
         minimal_unit, {"ideal", "fixture_sha256"}),
        ("action codes swapped", lambda d: edit_row(d, "minimal_owner_indexed", 5, swap_codes),
         "minimal_owner_indexed:05", {"ideal", "fixture_sha256"}),
    ]
    for name, change, unit, expected in cases:
        copy = tmp_path / name.replace(" ", "-")
        shutil.copytree(run_dir, copy)
        change(copy)
        status, got, err = rescore(copy)
        assert status == 1 and err == "", name
        assert fields_of(got, unit) == expected, (name, got["disagreements"])
        assert {d["unit"] for d in got["disagreements"] if d["field"] != "fixture_sha256"} == {unit}, name
        changed_rows = "fixture_sha256" in expected
        # A changed fixture row no longer has the hash every record was measured under.
        assert {d["unit"] for d in got["disagreements"] if d["field"] == "fixture_sha256"} == (
            set(records) if changed_rows else set()), name
        now = {json.loads(line)["item_id"]: json.loads(line) for line in (copy / "records.jsonl").read_text().splitlines()}
        for d in got["disagreements"]:
            if d["unit"] == unit and d["field"] != "fixture_sha256":
                assert d["recorded"] == now[unit][d["field"]] != d["recomputed"], name
        # Every other unit reads as recorded.
        assert got["mismatched_items"] == sorted({d["unit"] for d in got["disagreements"]}), name

    # A peer bit is a distractor: the gold letters stand, only the fixture hash says the rows changed.
    copy = tmp_path / "peer-bit"
    shutil.copytree(run_dir, copy)
    edit_row(copy, "five_factor", 0, flip_peer_bit)
    status, got, _ = rescore(copy)
    assert status == 1 and {d["field"] for d in got["disagreements"]} == {"fixture_sha256"}
    assert got["classification"] == label

    # A run cut short is rescored as far as it got, and names what it lacks.
    copy = tmp_path / "cut"
    shutil.copytree(run_dir, copy)
    lines = (copy / "records.jsonl").read_text().splitlines()
    (copy / "records.jsonl").write_text("\n".join(lines[:40]) + "\n")
    status, got, _ = rescore(copy)
    assert status == 0 and got["items"] == 40
    assert got["missing_items"] == [f"minimal_owner_indexed:{i:02d}" for i in range(8, 32)]

    # The disagreements are listed in unit order: five-factor items, then minimal items, by index.
    copy = tmp_path / "two-units"
    shutil.copytree(run_dir, copy)
    edit_records(copy, "minimal_owner_indexed:01", flip_margin)
    edit_records(copy, "five_factor:31", flip_margin)
    status, got, _ = rescore(copy)
    assert [d["unit"] for d in got["disagreements"]] == ["five_factor:31", "minimal_owner_indexed:01"]
    # The margin is recomputed from the logits: a flipped sign is given back.
    assert [d["recomputed"] for d in got["disagreements"]] == [records["five_factor:31"]["margin"],
                                                             records["minimal_owner_indexed:01"]["margin"]]


def test_a_gold_change_moves_the_rescored_classification(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The rescorer's metrics come from its own gold letters: swapping the action codes of nine minimal rows of an
    oracle run drops both recomputed minimal accuracies from 1 to 23/32, below 0.75, and the label with them."""
    _, _, run_dir = run_res(pytester, tmp_path, "--model", "scripted-oracle", in_process=True)
    status, got, _ = rescore(run_dir)
    assert status == 0 and got["classification"] == "RESPONSE_INTERFACE_GATE_PASSED"

    def swap_codes(row: dict[str, Any]) -> None:
        row["allow_code"], row["block_code"] = row["block_code"], row["allow_code"]

    for index in range(9):
        edit_row(run_dir, "minimal_owner_indexed", index, swap_codes)
    status, got, _ = rescore(run_dir)
    assert status == 1
    assert got["metrics"]["minimal_owner_indexed.logit_accuracy"] == pytest.approx(23 / 32)
    assert got["metrics"]["minimal_owner_indexed.generated_accuracy"] == pytest.approx(23 / 32)
    assert got["classification"] == "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED"
    assert sorted({d["unit"] for d in got["disagreements"] if d["field"] == "ideal"}) == [
        f"minimal_owner_indexed:{i:02d}" for i in range(9)]


@pytest.mark.parametrize(("damage", "message"), [
    ("no-records", "records.jsonl: no such file"),
    ("no-fixtures", "fixtures.json: no such file"),
    ("torn", "the last line is torn"),
    ("not-json", "line 2 is not JSON"),
    ("row-gone", "names no fixture row"),
    ("bad-bits", "self_bits must be a list of 0/1"),
])
def test_unreadable_runs_are_one_line_and_status_2(tmp_path: Path, damage: str, message: str) -> None:
    """Damaged input is refused with one line on stderr and exit status 2, never a traceback."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    row = {"condition": "five_factor", "family_id": "f", "self_bits": [1, 1, 1, 0, 0]}
    record = {"item_id": "five_factor:00", "condition": "five_factor", "index": 0, "family_id": "f", "ideal": "A",
              "label_logits": [1.0, 0.0], "margin": 1.0, "logit_choice": "A", "generation": "A",
              "generation_error": None, "parsed": "A", "prompt": "A or B?"}
    fixtures = {"variant": "preregistered", "sets": {"res-preregistered": {
        "sha256": "", "records": {"five_factor": [row], "minimal_owner_indexed": []}}}}
    lines = [json.dumps(record)]
    if damage == "row-gone":
        fixtures["sets"]["res-preregistered"]["records"]["five_factor"] = []
    if damage == "bad-bits":
        row["self_bits"] = [1, 1, "x", 0, 0]
    text = "\n".join(lines) + "\n"
    if damage == "torn":
        text = text[:-3]
    if damage == "not-json":
        text += "{oops\n"
    if damage != "no-records":
        (run_dir / "records.jsonl").write_text(text)
    if damage != "no-fixtures":
        (run_dir / "fixtures.json").write_text(json.dumps(fixtures))
    status, got, err = rescore(run_dir)
    assert (status, got) == (2, None)
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
