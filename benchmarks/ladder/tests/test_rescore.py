"""The ladder rescorer against a finished scripted probe: it agrees with the probe as written, and names the unit
of every primitive field changed afterwards (a reply's text, a recorded ground truth, an episode's check or facts)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from benchmarks.core.selfcheck import read_report
from benchmarks.ladder.prompts import parse_decision
from benchmarks.ladder.spec import HERE, PREREG
from benchmarks.ladder.worker import SIMULATED_FLEET
from canonical_hash import sha256_text

from .test_parser_fuzz import reference_decision
from .test_parser_fuzz import rescore as rescore_module
from .test_protocol_runs import run_ladder

SCRIPT = HERE / "rescore.py"
LIMIT = PREREG.values.probe.max_answer_chars


def reply(unit: dict[str, Any], text: str) -> None:
    """Change a unit's reply as a careful tamperer would: with the reply's length and hash."""
    unit.update(response_text=text, response_chars=len(text), response_sha256=sha256_text(text))


def rescore(*dirs: Path) -> tuple[int, dict[str, Any] | None, str]:
    """Exit status, the JSON it printed (None when it printed none) and its stderr, under ``python -S -I``."""
    done = subprocess.run([sys.executable, "-S", "-I", str(SCRIPT), *map(str, dirs)],
                          capture_output=True, text=True, cwd="/", check=False)
    return done.returncode, (json.loads(done.stdout) if done.stdout.strip() else None), done.stderr


def read_units(probe: Path) -> dict[str, dict[str, Any]]:
    return {u["unit_id"]: u for u in map(json.loads, (probe / "units.jsonl").read_text(encoding="utf-8").splitlines())}


def edit_unit(probe: Path, unit_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    units = read_units(probe)
    change(units[unit_id])
    (probe / "units.jsonl").write_text("".join(json.dumps(u, sort_keys=True) + "\n" for u in units.values()),
                                       encoding="utf-8")


def edit_episode(run_dir: Path, tier: int, index: int, change: Callable[[dict[str, Any]], None]) -> None:
    path = run_dir / "fixtures.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    [entry] = stored["sets"].values()
    [episode] = [e for e in entry["records"]["episodes"] if (e["tier"], e["index"]) == (tier, index)]
    change(episode)
    path.write_text(json.dumps(stored), encoding="utf-8")


def opposite(decision: str) -> str:
    return "reject" if decision == "approve" else "approve"


def named(report: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for d in report["disagreements"]:
        out.setdefault(d["unit"], set()).add(d["field"])
    return out


def test_the_rescorer_agrees_with_a_probe_and_names_the_unit_of_every_changed_primitive(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_ladder(pytester, results, "--model", SIMULATED_FLEET["R1"])
    report, run_dir = read_report(results, "ladder")
    summary = json.loads((run_dir / "summary.json").read_text())
    probe = run_dir / summary["probe"]
    label = summary["classifications"]["gate"]

    status, unchanged, err = rescore(probe)
    assert (status, err) == (0, "")
    assert unchanged["classification"] == label
    assert label == report["benchmark"]["protocols"]["ladder"]["classifications"]["gate"]["outcome"]["label"]
    assert unchanged["disagreements"] == [] and unchanged["probes"][0]["ground_truth_from"] == "fixtures.json"
    assert unchanged["probes"][0]["missing_units"] == []
    assert {f"clause_{c}": v for c, v in unchanged["probes"][0]["clauses"].items()} == {
        k: v for k, v in summary["classifications"].items() if k.startswith("clause_")}
    for key, value in unchanged["metrics"].items():
        assert summary["metrics"][key] == (pytest.approx(value) if value is not None else None), key
    # The run directory names its one probe: the same reading.
    assert rescore(run_dir) == (0, unchanged, "")

    units = read_units(probe)
    episodes = {(e["tier"], e["index"]): e
                for e in json.loads((run_dir / "fixtures.json").read_text())["sets"].popitem()[1]["records"]["episodes"]}
    correct = sorted(u for u, r in units.items() if r["outcome"] == "correct")
    approvable = next(u for u in correct if units[u]["ground_truth"] == "approve")
    one_failure = next(u for u in correct if units[u]["ground_truth"] == "reject"
                       and sum(not c["passes"] for c in episodes[(units[u]["tier"], units[u]["episode_index"])]["checks"]) == 1)

    def flip_reply(u: dict[str, Any]) -> None:
        reply(u, f"DECISION: {opposite(u['decision']).upper()}")

    def prose_reply(u: dict[str, Any]) -> None:
        reply(u, "Hard to say without the auditor.")

    def flip_truth(u: dict[str, Any]) -> None:
        u["ground_truth"] = opposite(u["ground_truth"])

    def flip_one_check(e: dict[str, Any]) -> None:
        check = next(c for c in e["checks"] if c["passes"] == (e["ground_truth"] == "approve"))
        check["passes"] = not check["passes"]

    def touch_facts(e: dict[str, Any]) -> None:
        e["facts"]["case"] = {**e["facts"]["case"], "note": "added after the run"}

    def where(unit_id: str) -> tuple[int, int]:
        return units[unit_id]["tier"], units[unit_id]["episode_index"]

    cases = [
        ("reply flipped", lambda d: edit_unit(d / probe.name, correct[0], flip_reply), correct[0],
         {"decision", "outcome"}),
        ("reply to prose", lambda d: edit_unit(d / probe.name, correct[-1], prose_reply), correct[-1],
         {"decision", "outcome"}),
        ("recorded ground truth", lambda d: edit_unit(d / probe.name, correct[5], flip_truth), correct[5],
         {"ground_truth"}),
        ("reply without its hash", lambda d: edit_unit(d / probe.name, correct[1], lambda u: u.update(
            response_text=u["response_text"] + " ")), correct[1], {"response_chars", "response_sha256"}),
        ("reply over the answer limit kept whole", lambda d: edit_unit(d / probe.name, correct[2], lambda u: reply(
            u, u["response_text"] + " " * LIMIT)), correct[2], {"error_code", "decision", "outcome"}),
        ("an approvable episode's check", lambda d: edit_episode(d, *where(approvable), flip_one_check), approvable,
         {"ground_truth", "outcome"}),
        ("a rejected episode's only failing check", lambda d: edit_episode(d, *where(one_failure), flip_one_check),
         one_failure, {"ground_truth", "outcome"}),
        ("episode facts", lambda d: edit_episode(d, *where(correct[3]), touch_facts), correct[3], {"episode_sha256"}),
    ]
    for name, change, unit, fields in cases:
        copy = tmp_path / name.replace(" ", "-").replace("'", "")
        shutil.copytree(run_dir, copy)
        change(copy)
        status, got, err = rescore(copy / probe.name)
        assert (status, err) == (1, ""), name
        assert named(got) == {unit: fields}, (name, got["disagreements"])
        now = read_units(copy / probe.name)[unit]
        for d in got["disagreements"]:
            assert d["recorded"] == now[d["field"]] != d["recomputed"], name

    # A probe directory on its own (no fixtures.json beside it) is read with the recorded ground truths:
    # a flipped one then shows in the outcome it no longer explains.
    alone = tmp_path / "alone" / probe.name
    shutil.copytree(probe, alone)
    status, got, _ = rescore(alone)
    assert status == 0 and got["probes"][0]["ground_truth_from"] == "units.jsonl"
    assert got["classification"] == label
    edit_unit(alone, correct[5], flip_truth)
    status, got, _ = rescore(alone)
    assert status == 1 and got["disagreements"] == [
        {"unit": correct[5], "field": "outcome", "recorded": "correct", "recomputed": "wrong"}]

    # A probe cut short is rescored as far as it got, and names the episodes it lacks.
    copy = tmp_path / "cut"
    shutil.copytree(run_dir, copy)
    lines = (copy / probe.name / "units.jsonl").read_text().splitlines()
    (copy / probe.name / "units.jsonl").write_text("\n".join(lines[:-3]) + "\n")
    status, got, _ = rescore(copy / probe.name)
    assert status == 0 and got["probes"][0]["units"] == len(units) - 3
    assert got["probes"][0]["missing_units"] == sorted(units)[-3:]

    # Several changed units are listed in unit order (tier, then index), whatever the ledger's line order.
    copy = tmp_path / "two-units"
    shutil.copytree(run_dir, copy)
    lines = (copy / probe.name / "units.jsonl").read_text().splitlines()
    (copy / probe.name / "units.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    edit_unit(copy / probe.name, correct[-1], prose_reply)
    edit_unit(copy / probe.name, correct[0], prose_reply)
    status, got, _ = rescore(copy / probe.name)
    assert [d["unit"] for d in got["disagreements"]] == [correct[0], correct[0], correct[-1], correct[-1]]


def test_a_changed_reply_moves_the_rescored_gate(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The rescorer's shares come from its own readings: turning enough correct replies of a rung of per-check
    accuracy 1 into prose lifts its recomputed overall error into the band, and its gate with it."""
    results = tmp_path / "results"
    run_ladder(pytester, results, "--model", SIMULATED_FLEET["R4"])
    _, run_dir = read_report(results, "ladder")
    probe = next(p.parent for p in run_dir.glob("*/metadata.json"))
    status, got, _ = rescore(probe)
    assert status == 0 and got["classification"] == "OVERALL_ERROR_BELOW_BAND"
    assert got["metrics"]["overall_error"] == 0.0
    per_tier = PREREG.values.probe.units_per_tier
    for tier in range(1, 6):
        for index in range(6):  # 6 of 30 per tier: 20% error everywhere
            edit_unit(probe, f"t{tier}-{index:03d}", lambda u: reply(u, "no idea"))
    status, got, _ = rescore(probe)
    assert status == 1 and len(got["disagreements"]) == 2 * 30
    assert got["metrics"]["overall_error"] == pytest.approx(30 / (5 * per_tier))
    assert got["classification"] == "IN_BAND"


@pytest.mark.parametrize(("damage", "message"), [
    ("missing", "not a directory"),
    ("empty", "holds no probe directory"),
    ("torn", "the last line is torn"),
    ("not-json", "line 1 is not JSON"),
    ("bad-metadata", "not readable JSON"),
])
def test_unreadable_probes_are_one_line_and_status_2(tmp_path: Path, damage: str, message: str) -> None:
    probe = tmp_path / "v2-r2-seed202"
    if damage != "missing":
        probe.mkdir()
    if damage in ("torn", "not-json", "bad-metadata"):
        (probe / "metadata.json").write_text("{" if damage == "bad-metadata" else json.dumps({"generator_variant": "v2"}))
        (probe / "units.jsonl").write_text({"torn": '{"unit_id": "t1-', "not-json": "{oops\n"}.get(damage, ""))
    status, got, err = rescore(probe)
    assert (status, got) == (2, None)
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


# --------------------------------------------------------------------------- the rescorer's own decision reader

# The suite reads a reply with case-insensitive regex searches; the rescorer with a character scanner of its own
# (find, fold, skip).  The replies below are built to sit on the edges of the language both are meant to accept.

#: Every character str.isspace() accepts below U+3001, and neighbours that are not spaces.
_WHITESPACE = [chr(c) for c in range(0x3001) if chr(c).isspace()] + ["\u200b", "\ufeff", "\u180e"]
_CONTROL = [chr(c) for c in (*range(0x00, 0x20), 0x7f, *range(0x80, 0xa0))]
#: Letters that look like (or fold to) the ASCII letters of the parser's words.
_LOOKALIKE = {
    "a": ["A", "\u0410", "\u0430", "\uff21", "\u0391", "\u00e0", "a\u0301"],
    "c": ["C", "\u0421", "\u0441", "\u216d", "\uff43"],
    "d": ["D", "\u216e", "\uff44", "\u0501"],
    "e": ["E", "\u0415", "\u0435", "\u0395", "\uff45"],
    "i": ["I", "\u0130", "\u0131", "\u0456", "\u2170", "\uff49"],
    "j": ["J", "\u0458", "\uff4a"],
    "k": ["K", "\u212a", "\u043a", "\uff4b"],
    "n": ["N", "\u0578", "\uff4e"],
    "o": ["O", "\u041e", "\u043e", "\u03bf", "0", "\uff4f"],
    "p": ["P", "\u0420", "\u0440", "\u03c1", "\uff50"],
    "r": ["R", "\u0433", "\uff52"],
    "s": ["S", "\u017f", "\u0455", "\uff53"],
    "t": ["T", "\u0422", "\u0442", "\uff54"],
    "v": ["V", "\u0474", "\u2174", "\uff56"],
    "h": ["H", "\u04bb", "\uff48"],
}


@st.composite
def spelled(draw: st.DrawFn, word: str) -> str:
    """``word`` in any letter case, now and then a letter replaced by a look-alike, dropped or doubled."""
    out = []
    for letter in word:
        roll = draw(st.integers(0, 59))
        if roll == 0 and letter in _LOOKALIKE:
            out.append(draw(st.sampled_from(_LOOKALIKE[letter])))
        elif roll == 1:
            continue  # a near miss: a letter left out
        elif roll == 2:
            out.append(letter * 2)
        else:
            out.append(letter.upper() if draw(st.booleans()) else letter)
    return "".join(out)


_GAP = st.one_of(st.sampled_from(["", " ", "**", " **"]),
                 st.lists(st.sampled_from([" ", "\t", "\n", "*", "_", "~"] + _WHITESPACE + _CONTROL),
                          max_size=4).map("".join))
_SEPARATOR = st.one_of(st.sampled_from([":", "=", "-"]),
                       st.sampled_from(["::", "\u2013", "\u2014", "\uff1a", ";", ".", ""]))
_SUFFIX = st.one_of(st.sampled_from(["", "d", "D", "ed", "ED", "\n", "."]),
                    st.sampled_from(["s", "eD", "x", "_", "1", "-ed", "!", "\u0301"]))
_VERDICT = st.sampled_from(["approve", "reject"]).flatmap(spelled)
_MARKER = st.builds(lambda m, g1, s, g2, v, x: m + g1 + s + g2 + v + x,
                    spelled("decision"), _GAP, _SEPARATOR, _GAP, _VERDICT, _SUFFIX)
_THINK = st.sampled_from(["<think>", "</think>", "<THINK>", "</Think>", "<think", "think>", "< think>", "</ think>"])
_NOISE = st.one_of(st.text(st.characters(codec=None, categories=None), max_size=6),
                   st.sampled_from(_CONTROL + _WHITESPACE), st.sampled_from([".", "!", "9" * 25, "é", "ß", "\ud800"]))
_SEGMENT = st.one_of(_MARKER, _VERDICT, _THINK, _NOISE, _GAP)
_REPLY = st.one_of(st.lists(_SEGMENT, max_size=8).map("".join),
                   st.tuples(_GAP, _VERDICT, _SUFFIX, _GAP).map("".join))  # a bare verdict, or a near miss of one


@st.composite
def huge(draw: st.DrawFn) -> str:
    """One adversarial segment repeated into a reply of tens of thousands of characters, a decision at either end."""
    piece = draw(st.one_of(_MARKER, _GAP.filter(bool), _THINK, _NOISE.filter(bool)))
    times = draw(st.integers(1000, 40000 // max(1, len(piece))))
    head, tail = draw(st.sampled_from(["", "DECISION: APPROVE "])), draw(st.one_of(_MARKER, st.just("")))
    return head + piece * times + tail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_REPLY)
@example("DECISION:\x00APPROVE")
@example("DECISION\x1c:\x1fREJECT")  # the file/unit separators count as white space for both readers
@example("DECISION: \u0410PPROVE")  # a Cyrillic A is no A
@example("\uff24\uff25\uff23\uff29\uff33\uff29\uff2f\uff2e: APPROVE")  # full-width letters are no marker
@example("DECISION: APPROVE\nDECISION: REJECT")
@example("DECISION: APPROVED_")
@example("DECISION:\u2028**\u00a0reject")
def test_both_decision_readers_accept_the_same_replies(text: str) -> None:
    """Near misses, odd white space, control characters, look-alike letters and several decisions: the rescorer's
    scanner, the suite's parser and the regular expressions that define the reply format read each the same."""
    got = parse_decision(text)
    assert rescore_module.decision_of(text) == got
    assert reference_decision(text) == got


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(huge())
def test_both_decision_readers_agree_on_huge_replies(text: str) -> None:
    """Replies of up to 40,000 characters of one repeated hostile segment (the regex definition is quadratic on
    some of them, so only the two linear readers meet here)."""
    assert rescore_module.decision_of(text) == parse_decision(text)
