"""The stdlib rescorer agrees with the suite's parsers and verdict on varied replies, and notices a tampered record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import models
from benchmarks.core import canonical_json
from benchmarks.core.answers import EXCERPT_CHARS
from benchmarks.core.protocol import finite
from benchmarks.cwr.baselines import pair_baselines
from benchmarks.cwr.grading import GRADING_FILE, write_grading
from benchmarks.cwr.pairs import pair_subsets
from benchmarks.cwr.protocol import (
    GATE,
    HERE,
    PREREG,
    CwrRecord,
    build_units,
    make_record,
    metrics,
    run_pairs,
)
from benchmarks.cwr.scripted import AnswerKey
from fixtures.cwr import build_cwr_items

LIMIT = PREREG.values.measurement.max_answer_chars

VARIANTS = [
    lambda right, wrong: right,
    lambda right, wrong: wrong,
    lambda right, wrong: "Reasoning first.\n" + right + "\nDone.",
    lambda right, wrong: right.replace("ANSWER:", "**Answer:**").replace("STATE:", "State:"),
    lambda right, wrong: right + "\n" + right,
    lambda right, wrong: "```\n" + right + "\n```",
    lambda right, wrong: right.lower(),
    lambda right, wrong: "",
    lambda right, wrong: "Plan:\n```\n" + right + "\n```\nIt works.",  # F/C: prose around the block is not read
    lambda right, wrong: wrong + "\nor else\n" + right,  # F/C: two candidate artifacts
    lambda right, wrong: right + "\n" + "x" * LIMIT,  # over the answer limit: kept cut, coded answer_too_long
]


def _response(text: str, error: str | None = None):
    return models.Response(index=0, text=text, finish_reason="error" if error else "stop", error=error)


def _write_run(tmp_path: Path) -> tuple[Path, list]:
    pairs = run_pairs()
    items = build_cwr_items()
    units = build_units(items, pairs, None)
    (tmp_path / GRADING_FILE).write_text(json.dumps(write_grading(tmp_path, units, items, pairs, pair_subsets(pairs))))
    key = AnswerKey()
    for unit in units:
        key.add(unit.item_id, unit)
    records = []
    for index, unit in enumerate(units):
        right, wrong = key.right(unit.item_id), key.wrong(unit.item_id)
        text = VARIANTS[index % len(VARIANTS)](right, wrong)
        error = "timeout" if index % 37 == 36 else None
        records.append(make_record(unit, unit.prompt_text, _response(text, error), 8, LIMIT))
    lines = [canonical_json({**record.__dict__, "schema_version": CwrRecord.SCHEMA_VERSION}) for record in records]
    (tmp_path / "records.jsonl").write_text("".join(line + "\n" for line in lines))
    baselines = pair_baselines(pairs, 5, PREREG.values.seeds["baselines"])
    (tmp_path / "baselines.json").write_text(json.dumps(baselines))
    return tmp_path, records


def _rescore(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", "-I", str(HERE / "rescore.py"), str(run_dir)],
                          capture_output=True, text=True, cwd="/")


def test_rescorer_reproduces_every_unit_and_the_verdict(tmp_path):
    run_dir, records = _write_run(tmp_path)
    done = _rescore(run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["mismatched_units"] == [] and report["units"] == len(records)
    pairs = run_pairs()
    subsets = pair_subsets(pairs)
    measured = metrics(records, json.loads((run_dir / "baselines.json").read_text()), set(subsets["motif_required"]),
                       subsets)
    assert report["classification"] == GATE.evaluate(finite(measured)).label
    for key, value in report["metrics"].items():
        assert measured[key] == value or abs(measured[key] - value) < 1e-12, key
    # The secondary deficits on every named subset are recomputed too, on subsets that differ from all pairs.
    for name, ids in subsets.items():
        assert report["metrics"][f"pairs_{name}.n"] == measured[f"pairs_{name}.n"] > 0
        assert f"deficit_{name}.lower" in report["metrics"]
    assert len(subsets["exposure_matched"]) < len(pairs) and len(subsets["without_interchangeable"]) < len(pairs)
    assert 0 < measured["P.accuracy"] < 1  # the variants mix right, wrong and malformed replies
    errored = [r for r in records if r.generation_error is not None]
    assert errored and all(r.parse_status == "generation_error" and not r.correct for r in errored)
    cut = [r for r in records if r.generation_error == "answer_too_long"]
    assert cut and all(len(r.generation) == EXCERPT_CHARS and r.generation_chars > LIMIT for r in cut)
    assert sum(measured[f"{c}.errored"] for c in ("P", "R", "E", "F", "C")) == len(errored)
    assert measured["units.errored"] == report["metrics"]["units.errored"] == len(errored)
    assert measured["errored_share"] == report["metrics"]["errored_share"] == len(errored) / len(records)
    assert sum(measured[f"{c}.units"] for c in ("P", "R", "E", "F", "C")) == len(records)
    for context in ("C", "F", "none"):  # E split by context, in the suite and in the rescorer
        rows = [r for r in records if r.condition == "E" and r.context == context]
        answered = [r.correct for r in rows if r.generation_error is None]  # errored units are not scored
        assert rows and measured[f"E_{context}.units"] == report["metrics"][f"E_{context}.units"] == len(rows)
        assert (measured[f"E_{context}.accuracy"] == report["metrics"][f"E_{context}.accuracy"]
                == sum(answered) / len(answered))
    assert sum(measured[f"E_{c}.units"] for c in ("C", "F", "none")) == measured["E.units"]


def test_e_accuracy_is_split_by_context():
    """Right on every E_C item, wrong on every E_F item, right on half the context-free ones."""
    pairs = run_pairs()
    units = build_units(build_cwr_items(), pairs, None)
    key = AnswerKey()
    records, free = [], 0
    for unit in (u for u in units if u.condition == "E"):
        key.add(unit.item_id, unit)
        right = unit.context == "C" or (unit.context == "none" and (free := free + 1) % 2 == 0)
        text = key.right(unit.item_id) if right else key.wrong(unit.item_id)
        records.append(make_record(unit, unit.prompt_text, _response(text), 8, LIMIT))
    measured = metrics(records)
    n_free = sum(r.context == "none" for r in records)
    assert measured["E_C.accuracy"] == 1.0 and measured["E_F.accuracy"] == 0.0
    assert measured["E_none.accuracy"] == (n_free // 2) / n_free
    assert measured["E.units"] == measured["E_C.units"] + measured["E_F.units"] + measured["E_none.units"]
    assert measured["E.correct"] == measured["E_C.correct"] + measured["E_none.correct"]


def test_rescorer_notices_a_tampered_record(tmp_path):
    run_dir, records = _write_run(tmp_path)
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["correct"] = not first["correct"]
    lines[0] = json.dumps(first, sort_keys=True)
    (run_dir / "records.jsonl").write_text("\n".join(lines) + "\n")
    done = _rescore(run_dir)
    assert done.returncode == 1
    assert json.loads(done.stdout)["mismatched_units"] == [first["item_id"]]


def test_rescorer_refuses_a_torn_ledger(tmp_path):
    run_dir, _ = _write_run(tmp_path)
    with (run_dir / "records.jsonl").open("a") as handle:
        handle.write('{"item_id": "P:')
    done = _rescore(run_dir)
    assert done.returncode != 0 and "torn" in done.stderr


def _rescore_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("cwr_rescore_copy", HERE / "rescore.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rescorer_copy_baseline_agrees_with_the_suites_copy_audit(tmp_path):
    """Its own enumeration, motif signatures and relabelling give the suite's solution sets, signature classes and
    copy verdicts on every pair side; a solution of one replica, shown as the other's demonstration, is a copy."""
    import worlds

    rescore = _rescore_module()
    pairs = run_pairs()
    items = build_cwr_items()
    index = write_grading(tmp_path, build_units(items, pairs, None), items, pairs)
    grader = rescore.Grader(tmp_path, index)
    for pair in pairs:
        for side in (pair.f, pair.c):
            entry = index["pairs"][pair.pair_id][side.condition]
            raw = grader.world(entry["target"])
            mine = rescore.bounded_solutions(grader.ref, raw)
            suite = worlds.enumerate_solutions(side.target).solutions
            assert sorted(tuple(rescore.render(s) for s in sol) for sol in mine) == sorted(suite), entry["unit"]
            classes: dict = {}
            for sol in mine:
                classes.setdefault(rescore.signature(raw, sol), set()).add(tuple(rescore.render(s) for s in sol))
            assert sorted(sorted(c) for c in classes.values()) == sorted(sorted(c) for c in
                                                                         worlds.solution_classes(side.target, suite))
            assert rescore.copy_solves(grader, entry) is None  # no showcase demonstration copies its target
    pair = pairs[0]
    f_side, c_side = index["pairs"][pair.pair_id]["F"], index["pairs"][pair.pair_id]["C"]
    solution = worlds.enumerate_solutions(pair.f.target).solutions[0]
    crossed = {**c_side, "demonstrations": [{"world": f_side["target"], "steps": list(solution)}]}
    why = rescore.copy_solves(grader, crossed)
    assert why is not None and "renamed" in why
    sigs = {worlds.motif_signature(pair.c.target, s) for s in worlds.enumerate_solutions(pair.c.target).solutions}
    assert worlds.copy_audit(pair.f.target, solution, pair.c.target, sigs) is not None


def test_rescorer_copy_baseline_finds_reordered_copies_as_the_suite_does(tmp_path):
    """A target solution shown out of order (in the target's own names, and in the other replica's names) is a
    reordered copy for both the suite's copy audit and the rescorer's copy baseline, with the same kind."""
    import itertools

    import worlds

    rescore = _rescore_module()
    pairs = [p for p in run_pairs() if p.pair_id == "PAIR-SCH-01"]
    items = build_cwr_items()
    index = write_grading(tmp_path, build_units(items, pairs, None), items, pairs)
    grader = rescore.Grader(tmp_path, index)
    pair = pairs[0]
    target = pair.f.target
    solutions = worlds.enumerate_solutions(target).solutions
    sigs = {worlds.motif_signature(target, s) for s in solutions}
    entry = index["pairs"][pair.pair_id]["F"]
    kinds = {}
    for source, world_file in ((target, entry["target"]), (pair.c.target, index["pairs"][pair.pair_id]["C"]["target"])):
        for solution in worlds.enumerate_solutions(source).solutions[:20]:
            for order in itertools.permutations(solution):
                why = worlds.copy_audit(source, list(order), target, sigs, solutions)
                if why is None or "reordered" not in why:
                    continue
                kind = "reordered and relabelled" if "relabelled" in why else "reordered"
                if kind in kinds:
                    continue
                shown = {**entry, "demonstrations": [{"world": world_file, "steps": list(order)}]}
                kinds[kind] = rescore.copy_solves(grader, shown)
    assert set(kinds) == {"reordered", "reordered and relabelled"}
    assert kinds["reordered"].endswith("reordered, become a target solution")
    assert kinds["reordered and relabelled"].endswith("reordered and relabelled, become a target solution")


def test_rescorer_reordering_is_a_bijection():
    rescore = _rescore_module()
    window = [("start", ("a", "m", 0)), ("start", ("b", "m", 1))]
    assert rescore.reorders_onto(window, window[::-1], {"start"}, False)
    assert not rescore.reorders_onto(window, [window[0], window[0]], {"start"}, False)
    # relabelled: a -> y, b -> x keeps one entity map; two window entities onto one solution entity does not
    assert rescore.reorders_onto(window, [("start", ("x", "m", 1)), ("start", ("y", "m", 0))], {"start"}, True)
    assert not rescore.reorders_onto(window, [("start", ("x", "m", 1)), ("start", ("x", "m", 0))], {"start"}, True)
    assert not rescore.reorders_onto(window, [("start", ("x", "n", 1)), ("start", ("y", "m", 0))], {"start"}, True)
    assert not rescore.reorders_onto(window, [("stop", ("x", "m", 1)), ("stop", ("y", "m", 0))], {"start"}, True)
    assert rescore.reorders_onto(window, [("go", ("x", "m", 1)), ("go", ("y", "m", 0))], set(), True)


def test_rescorer_program_copy_baseline_agrees_with_the_suite_on_dataflow_pairs(tmp_path):
    """On generated dataflow pairs the rescorer's own program enumeration gives the suite's bounded programs, its
    copy baseline clears the generated demonstrations, and it flags, as the suite's audit does, a target program
    shown as the demonstration: verbatim, with exchanged inputs, and with its last wire not the goal."""
    import worlds
    from benchmarks.cwr.splits import build_split

    rescore = _rescore_module()
    spec = PREREG.values.splits["development"]
    pairs = [p for p in build_split("development", spec, spec.seed, None).pairs if p.family == "dataflow"][:4]
    items = build_cwr_items()
    index = write_grading(tmp_path, build_units(items, pairs, None), items, pairs)
    assert index["program_interpreter"] == "grading/dataflow_reference.py"
    grader = rescore.Grader(tmp_path, index)
    for pair in pairs:
        for side in (pair.f, pair.c):
            entry = index["pairs"][pair.pair_id][side.condition]
            suite = worlds.enumerate_programs(side.target).solutions
            assert rescore.program_solutions(grader, entry["target"]) == sorted(suite), entry["unit"]
            assert rescore.copy_solves(grader, entry) is None
    pair = pairs[0]
    entry = index["pairs"][pair.pair_id]["F"]
    target = pair.f.target
    solutions = worlds.enumerate_programs(target).solutions
    sigs = {worlds.motif_signature(target, s) for s in solutions}
    sol = list(solutions[0])
    by_type: dict[str, list[str]] = {}
    for n, t in target.spec.inputs:
        by_type.setdefault(t, []).append(n)
    names = next(v for v in by_type.values() if len(v) == 2)  # the inputs a and b of the pipeline, relabelled
    exchange = {names[0]: names[1], names[1]: names[0]}
    exchanged = [worlds.Binding(b.target, b.name, tuple(exchange.get(a, a) for a in b.args)).render()
                 for b in worlds.parse_program("\n".join(sol)).steps]
    last = worlds.parse_program(sol[-1]).steps[0]
    moved = sol[:-1] + [worlds.Binding("result", last.name, last.args).render()]
    for demo in (sol, exchanged, moved):
        suite_why = worlds.copy_audit(pair.f.demonstrations[0].source, demo, target, sigs, solutions)
        mine = rescore.copy_solves(grader, {**entry, "demonstrations": [{"world": entry["target"], "steps": demo}]})
        assert (suite_why is None) == (mine is None), (demo, suite_why, mine)
    assert rescore.copy_solves(grader, {**entry, "demonstrations": [{"world": entry["target"], "steps": sol}]})
    assert rescore.copy_solves(grader, {**entry, "demonstrations": [{"world": entry["target"], "steps": moved}]})


def test_the_rescorer_loads_interpreters_only_under_the_names_a_run_copies_them_to() -> None:
    """The stdlib rescorer spells the two names itself; they are the ones grading.py writes and verify checks."""
    from benchmarks.cwr import grading, rescore
    from benchmarks.cwr.protocol import PROTOCOL

    assert (rescore.INTERPRETER_FILE, rescore.PROGRAM_INTERPRETER_FILE) == (grading.REFERENCE_FILE,
                                                                           grading.PROGRAM_REFERENCE_FILE)
    assert set(PROTOCOL.shipped_code) == {grading.REFERENCE_FILE, grading.PROGRAM_REFERENCE_FILE}
    for inside, source in PROTOCOL.shipped_code.items():
        assert (Path(grading.__file__).resolve().parents[2] / source).is_file(), source
