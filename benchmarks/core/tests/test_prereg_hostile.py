"""Hostile preregistrations of a scaffolded protocol are refused in one usage line, before any work.

Each test writes a ``prereg.toml`` a loader must refuse, runs the protocol's model-run tests in a fresh pytest
process, and asserts exit status 4 with one ``ERROR:`` line naming the file, the key and the problem: no
traceback, no conftest ImportError, no run directory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core.prereg import MAX_NESTING, MAX_RULES, PreregError, load_prereg


@pytest.fixture
def toy(pytester: pytest.Pytester) -> Path:
    """A project holding the scaffolded protocol ``protocols/toy`` (scripted oracle preregistered)."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\naddopts = ["-p", "no:cacheprovider"]\n')
    pytester.makeconftest('pytest_plugins = ["benchmarks.core.plugin"]\n')
    (pytester.path / "protocols").mkdir()
    (pytester.path / "protocols" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.new", "toy", "--into", "protocols"],
                          cwd=pytester.path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return pytester.path / "protocols" / "toy"


def refused(pytester: pytest.Pytester, toy: Path) -> str:
    """Run the toy protocol; assert it stops with one usage line and writes nothing; that line."""
    result = pytester.runpytest_subprocess(str(toy), "-m", "cpu", "-p", "no:randomly",
                                           f"--results-dir={pytester.path / 'results'}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output and "ImportError" not in output, output
    errors = [line for line in result.stderr.lines + result.stdout.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1, output
    assert not (pytester.path / "results").exists()
    return errors[0]


def replace(prereg: Path, old: str, new: str) -> None:
    text = prereg.read_text()
    assert old in text, old
    prereg.write_text(text.replace(old, new, 1))


def test_a_threshold_beyond_float_range(pytester: pytest.Pytester, toy: Path) -> None:
    replace(toy / "prereg.toml", "min_accuracy = 0.75", "min_accuracy = 1" + "0" * 400)
    line = refused(pytester, toy)
    assert "prereg.toml: key 'thresholds.min_accuracy': the number 10000000000000000000... (401 digits) is beyond " \
           "the range of a float" in line, line


def test_an_unknown_key(pytester: pytest.Pytester, toy: Path) -> None:
    replace(toy / "prereg.toml", "min_accuracy = 0.75", "min_accuracy = 0.75\n\n[surprise]\nx = 1")
    line = refused(pytester, toy)
    assert "prereg.toml: key 'surprise': unknown key" in line, line


def test_nesting_past_the_limit(pytester: pytest.Pytester, toy: Path) -> None:
    with (toy / "prereg.toml").open("a") as out:
        out.write("\n[deep]\nv = " + "[" * 5000 + "]" * 5000 + "\n")
    line = refused(pytester, toy)
    assert "prereg.toml: " in line and f"nests them at most {MAX_NESTING} deep" in line, line


def test_nesting_below_what_python_reads_but_past_the_limit(toy: Path) -> None:
    """Nesting is refused before any key is typed (``dict`` is no preregistration form at all)."""
    prereg = toy / "prereg.toml"
    with prereg.open("a") as out:
        out.write("\n[deep]\nv = " + "[" * (MAX_NESTING + 2) + "]" * (MAX_NESTING + 2) + "\n")
    with pytest.raises(PreregError, match=r"key 'deep.v\[0\]\[0\]\[0\]"):
        load_prereg(prereg, dict)


def test_more_rules_than_the_limit(pytester: pytest.Pytester, toy: Path) -> None:
    prereg = toy / "prereg.toml"
    text = prereg.read_text()
    start = text.index("[[classification.rules]]")
    block = text[start:text.index("[[classification.rules]]", start + 1)]
    extra = "".join(block.replace('label = "', f'label = "X{i}_', 1) for i in range(MAX_RULES + 1))
    prereg.write_text(text[:start] + extra + text[start:])
    line = refused(pytester, toy)
    assert f"key 'classification.rules': {MAX_RULES + 1 + text.count('[[classification.rules]]')} rules; a " \
           f"classification holds at most {MAX_RULES}" in line, line


def test_a_rule_on_an_undeclared_threshold(pytester: pytest.Pytester, toy: Path) -> None:
    replace(toy / "prereg.toml", "min_accuracy", "min_accuracy_renamed")
    line = refused(pytester, toy)
    assert "prereg.toml: key " in line, line


def test_a_rule_on_a_metric_the_protocol_does_not_compute(pytester: pytest.Pytester, toy: Path) -> None:
    replace(toy / "prereg.toml", 'all = ["accuracy < min_accuracy"]', 'all = ["acuracy < min_accuracy"]')
    line = refused(pytester, toy)
    assert "prereg.toml: rule LOW_ACCURACY of [classification] reads the metric 'acuracy', which" in line, line
    assert "does not compute; did you mean 'accuracy'?" in line, line
