"""The lm-eval comparison script's task writing and checks (no model, no lm-eval)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.core.rundir import SUITE_ROOT
from benchmarks.res import protocol as res
from benchmarks.res.protocol import PROTOCOL, build_chat
from fixtures.res import CONDITIONS, build_res_fixtures, gold_label

_spec = importlib.util.spec_from_file_location("bench_vs_lmeval", SUITE_ROOT / "scripts" / "bench" / "bench_vs_lmeval.py")
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclasses resolve their annotations through sys.modules
_spec.loader.exec_module(bench)


def render(chat) -> str:
    """A stand-in chat template: every message's role and content, then the assistant turn."""
    return "".join(f"<{m['role']}>\n{m['content']}\n</{m['role']}>\n" for m in chat) + "<assistant>\n"


def expected_units(variant: str = "preregistered"):
    sets = build_res_fixtures(variant, seed=PROTOCOL.spec.seeds["fixtures"])
    return [(f"{c}:{i:02d}", row) for c in CONDITIONS for i, row in enumerate(sets[c])]


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("variant", ["preregistered", "balanced"])
def test_the_dataset_has_one_row_per_res_prompt_with_the_suites_rendered_context(tmp_path: Path, variant: str) -> None:
    rows, labels, max_new = bench.suite_prompts(render, variant)
    paths = bench.write_task(tmp_path, rows, labels, max_new, ["<|im_end|>"])
    written = read_rows(paths["dataset"])
    units = expected_units(variant)
    assert len(written) == len(units) == 64
    assert [r["item_id"] for r in written] == [item for item, _ in units]
    for record, (item, row) in zip(written, units):
        assert record["context"] == render(build_chat(row)), item
        assert record["condition"] == row["condition"]
        assert labels[record["gold"]] == gold_label(row)
    assert labels == list(PROTOCOL.spec.measurement.labels)
    assert max_new == PROTOCOL.spec.measurement.max_new_tokens


def test_the_task_files_score_the_labels_with_no_delimiter_on_the_dataset(tmp_path: Path) -> None:
    rows, labels, max_new = bench.suite_prompts(render)
    paths = bench.write_task(tmp_path, rows, labels, max_new, ["<|im_end|>", 'a "quoted" stop'])
    logits = yaml.safe_load(paths["logits"].read_text(encoding="utf-8"))
    generate = yaml.safe_load(paths["generate"].read_text(encoding="utf-8"))
    for task in (logits, generate):
        assert task["dataset_path"] == "json"
        assert task["dataset_kwargs"]["data_files"] == {"test": str(paths["dataset"])}
        assert task["test_split"] == "test"
        assert task["doc_to_text"] == "context"  # the dataset column, no template around it
        assert task["target_delimiter"] == "" and task["description"] == "" and task["num_fewshot"] == 0
    assert logits["task"] == bench.LOGIT_TASK and logits["output_type"] == "multiple_choice"
    assert logits["doc_to_choice"] == labels and logits["doc_to_target"] == "gold"
    assert generate["task"] == bench.GENERATE_TASK and generate["output_type"] == "generate_until"
    assert generate["generation_kwargs"] == {"until": ["<|im_end|>", 'a "quoted" stop'], "max_gen_toks": max_new,
                                             "do_sample": False}


def test_the_prompts_come_from_the_protocols_own_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(res, "build_chat", lambda row: [{"role": "user", "content": f"changed {row['family_id']}"}])
    rows, _, _ = bench.suite_prompts(render)
    assert [r.context for r in rows] == [render([{"role": "user", "content": f"changed {row['family_id']}"}])
                                         for _, row in expected_units()]


def test_the_token_check_names_a_row_whose_lm_eval_input_differs() -> None:
    suite = {"labels": ["A", "B"], "label_ids": {"A": 49, "B": 50},
             "rows": [{"item_id": "five_factor:00", "ids": [1, 2, 3]}, {"item_id": "five_factor:01", "ids": [4, 5]}]}
    same = [{"item_id": "five_factor:00", "inputs": [[1, 2, 3], [1, 2, 3]], "last": [49, 50], "continuation_tokens": [2, 2]},
            {"item_id": "five_factor:01", "inputs": [[4, 5], [4, 5]], "last": [49, 50], "continuation_tokens": [2, 2]}]
    ok, lines = bench.token_check(suite, same)
    assert ok and lines[0].startswith("token check: 2/2 rows identical")
    same[1]["inputs"][1] = [4, 6]
    ok, lines = bench.token_check(suite, same)
    assert not ok and lines[0].startswith("token check: 1/2 rows identical")
    assert any("five_factor:01 B: lm-eval input" in line for line in lines)


def test_a_missing_lm_eval_executable_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main([]) == 4
    assert "--lm-eval PATH is required" in capsys.readouterr().err
    assert bench.main(["--lm-eval", str(tmp_path / "nowhere" / "lm_eval")]) == 4
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no such executable" in err
    script = tmp_path / "lm_eval"
    script.write_text("no shebang\n")
    script.chmod(0o755)
    assert bench.main(["--lm-eval", str(script)]) == 4
    assert "not a console script" in capsys.readouterr().err


def test_a_suite_json_that_is_not_a_worker_output_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "lm_eval"
    script.write_text("#!/bin/false\n")
    script.chmod(0o755)
    broken = tmp_path / "suite.json"
    broken.write_text('{"rows": []}')
    assert bench.main(["--lm-eval", str(script), "--suite-json", str(broken), "--keep", str(tmp_path / "work")]) == 4
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not a worker output of this script" in err
