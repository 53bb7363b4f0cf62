"""Typed preregistration loading and the ordered-rule semantics."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.core import (
    Classification,
    ClassificationSpec,
    Condition,
    PreregError,
    ProtocolHeader,
    RuleError,
    classification,
    load_prereg,
    sha256_file,
)

TOY = Path(__file__).parent / "data" / "toy" / "prereg.toml"


@dataclass(frozen=True)
class ToyPrereg:
    protocol: ProtocolHeader
    thresholds: dict[str, float]
    seeds: dict[str, int]
    classification: ClassificationSpec


def write(tmp_path: Path, text: str, folder: str = "toy") -> Path:
    path = tmp_path / folder / "prereg.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_toy_prereg_loads_typed_and_hashed() -> None:
    prereg = load_prereg(TOY, ToyPrereg)
    assert prereg.values.protocol.registered == dt.date(2026, 11, 30)
    assert prereg.values.thresholds == {"min_coverage": 0.95, "min_accuracy": 0.75, "min_agreement": 0.5}
    assert prereg.sha256 == sha256_file(TOY)
    gate = classification(prereg)
    assert gate.labels == ["UNPARSEABLE", "LOW_ACCURACY", "DISAGREEMENT"]
    assert gate.rules[1].all == (Condition("accuracy", "<", 0.75, "min_accuracy"),)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('seed_document = "none"\n', 'seed_document = "none"\nauthor = "x"\n'), "key 'protocol.author': unknown key"),
        (('title = "Toy gate for plugin self-checks"\n', ""), "key 'protocol.title': missing required key"),
        (("min_accuracy = 0.75", 'min_accuracy = "0.75"'), "key 'thresholds.min_accuracy': expected a number"),
        (("python = 7", "python = 7.5"), "key 'seeds.python': expected an integer"),
        (("registered = 2026-11-30", 'registered = "soon"'), "key 'protocol.registered': expected an ISO 8601 date"),
        (('label = "LOW_ACCURACY"\n', 'label = "LOW_ACCURACY"\nthreshold = 1\n'),
         "key 'classification.rules[1].threshold': unknown key"),
        (('all = ["accuracy < min_accuracy"]', 'all = ["accuracy < min_acc"]'),
         "names threshold 'min_acc', which is not declared"),
        (('all = ["accuracy < min_accuracy"]', 'all = ["accuracy ~ min_accuracy"]'), "is not of the form"),
        (('name = "toy"', 'name = "other"'), "key 'protocol.name' is 'other' but the file lives in the folder 'toy'"),
        (("[seeds]", "[seeds\n"), "not valid TOML"),
    ],
)
def test_bad_prereg_names_file_and_key(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    old, new = edit
    text = TOY.read_text()
    assert old in text
    path = write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(PreregError) as info:
        load_prereg(path, ToyPrereg)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_extra_threshold_is_allowed_but_unknown_table_is_not(tmp_path: Path) -> None:
    text = TOY.read_text()
    load_prereg(write(tmp_path, text.replace("min_agreement = 0.5", "min_agreement = 0.5\nspare = 0.1")), ToyPrereg)
    with pytest.raises(PreregError, match=r"key 'extras': unknown key \(allowed here: classification, protocol, seeds, thresholds\)"):
        load_prereg(write(tmp_path, text + "\n[extras]\nx = 1\n"), ToyPrereg)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PreregError, match="cannot read the preregistration"):
        load_prereg(tmp_path / "toy" / "prereg.toml", ToyPrereg)


def test_classification_shape_is_checked(tmp_path: Path) -> None:
    text = TOY.read_text().replace('passing = "GATE_PASSED"\n', "")
    with pytest.raises(PreregError, match="declare 'passing' or end with an 'otherwise' rule"):
        load_prereg(write(tmp_path, text), ToyPrereg)
    text = TOY.read_text().replace('label = "LOW_ACCURACY"', 'label = "UNPARSEABLE"')
    with pytest.raises(PreregError, match="duplicate rule labels"):
        load_prereg(write(tmp_path, text), ToyPrereg)


# The RES Step 0 rule order, written as the prereg's condition strings, against a direct reading.
RES_TOML = """
[protocol]
name = "res"
title = "t"
registered = 2026-09-13
seed_document = "000"

[thresholds]
accuracy = 0.75
coverage = 0.95

[seeds]
python = 20260913

[classification]
name = "gate"

[[classification.rules]]
label = "GENERATION_RESPONSE_UNPARSEABLE"
any = ["ff.coverage < coverage", "min.coverage < coverage"]

[[classification.rules]]
label = "RESPONSE_INTERFACE_MISMATCH"
all = ["ff.gen >= accuracy", "ff.logit < accuracy"]

[[classification.rules]]
label = "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED"
all = ["ff.logit < accuracy", "ff.gen < accuracy"]
any = ["min.logit >= accuracy", "min.gen >= accuracy"]

[[classification.rules]]
label = "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED"
all = ["min.logit < accuracy", "min.gen < accuracy"]

[[classification.rules]]
label = "RESPONSE_INTERFACE_GATE_PASSED"
passes = true
all = ["ff.logit >= accuracy", "ff.gen >= accuracy", "min.logit >= accuracy", "min.gen >= accuracy"]

[[classification.rules]]
label = "MIXED_GATE_OUTCOME"
otherwise = true
"""


def res_by_hand(m: dict[str, float]) -> str:
    if m["ff.coverage"] < 0.95 or m["min.coverage"] < 0.95:
        return "GENERATION_RESPONSE_UNPARSEABLE"
    if m["ff.gen"] >= 0.75 and m["ff.logit"] < 0.75:
        return "RESPONSE_INTERFACE_MISMATCH"
    if m["ff.logit"] < 0.75 and m["ff.gen"] < 0.75 and (m["min.logit"] >= 0.75 or m["min.gen"] >= 0.75):
        return "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED"
    if m["min.logit"] < 0.75 and m["min.gen"] < 0.75:
        return "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED"
    if min(m["ff.logit"], m["ff.gen"], m["min.logit"], m["min.gen"]) >= 0.75:
        return "RESPONSE_INTERFACE_GATE_PASSED"
    return "MIXED_GATE_OUTCOME"


@pytest.fixture(scope="module")
def res_gate(tmp_path_factory: pytest.TempPathFactory) -> Classification:
    path = write(tmp_path_factory.mktemp("prereg"), RES_TOML, folder="res")
    return classification(load_prereg(path, ToyPrereg))  # same table shape as the toy


accuracies = st.sampled_from([i / 32 for i in range(33)])


@given(st.fixed_dictionaries({
    "ff.coverage": accuracies, "min.coverage": accuracies,
    "ff.logit": accuracies, "ff.gen": accuracies, "min.logit": accuracies, "min.gen": accuracies,
}))
def test_ordered_rules_match_a_direct_reading(res_gate: Classification, metrics: dict[str, float]) -> None:
    gate = res_gate
    outcome = gate.evaluate(metrics)
    assert outcome.label == res_by_hand(metrics)
    fired = [r.label for r in gate.rules if r.fires(metrics)]
    assert fired[0] == outcome.label  # the first rule that fires decides
    assert outcome.passed == (outcome.label == "RESPONSE_INTERFACE_GATE_PASSED")


def test_fired_rule_explains_itself_in_one_line(res_gate: Classification) -> None:
    gate = res_gate
    metrics = {"ff.coverage": 1.0, "min.coverage": 1.0, "ff.logit": 0.5625, "ff.gen": 0.5, "min.logit": 0.875, "min.gen": 0.90625}
    outcome = gate.evaluate(metrics)
    assert outcome.label == "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED"
    assert outcome.reason == "ff.logit 0.5625 < 0.75 and ff.gen 0.5 < 0.75 and (min.logit 0.875 >= 0.75 or min.gen 0.9062 >= 0.75)"


def test_unmeasured_or_undefined_metric_is_an_error(res_gate: Classification) -> None:
    gate = res_gate
    with pytest.raises(RuleError, match="metric 'ff.coverage' was not measured"):
        gate.evaluate({})
    metrics = {"ff.coverage": float("nan"), "min.coverage": 1.0}
    with pytest.raises(RuleError, match="metric 'ff.coverage' is nan; a rule needs a finite number"):
        gate.evaluate(metrics)
