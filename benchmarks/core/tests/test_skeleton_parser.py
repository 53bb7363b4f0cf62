"""The scaffold's answer parser and its rescorer: never raising, agreeing, linear time on hostile answers."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.core.new import scaffold
from benchmarks.core.selfcheck import check_linear_time


@pytest.fixture(scope="module")
def skeleton(tmp_path_factory: pytest.TempPathFactory):
    """The protocol module and the rescorer of a freshly scaffolded protocol."""
    folder = scaffold("skeleton_parse", into=tmp_path_factory.mktemp("scaffold"))
    loaded = []
    for name in ("protocol", "rescore"):
        spec = importlib.util.spec_from_file_location(f"skeleton_parse_{name}", folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        loaded.append(module)
    yield tuple(loaded)
    for module in loaded:
        sys.modules.pop(module.__name__, None)


_TEXT = st.one_of(
    st.lists(st.sampled_from(["A", "B", "a", "b", "AB", " ", "\n", ".", "ß", "ı", "\ud800", "Z", "@", "["]),
             max_size=16).map("".join),
    st.text(alphabet=st.characters(codec=None, categories=None), max_size=60),
)


def test_the_scaffold_parser_agrees_with_its_rescorer_on_hostile_answers(skeleton) -> None:
    protocol, rescore = skeleton

    @settings(max_examples=300)
    @given(_TEXT)
    def agree(text: str) -> None:
        got = protocol.parse_answer(text)
        assert got in (None, "A", "B") and rescore.letter(text) == got

    agree()


@pytest.mark.parametrize("shape", ["A ", "AB", "\ud800", "a"])
def test_the_scaffold_parsers_take_linear_time(skeleton, shape: str) -> None:
    """64 answers of 1 KB and one of 64 KB take about the same time (best of 3; a quadratic parser: 64 x)."""
    protocol, rescore = skeleton
    for parse in (protocol.parse_answer, rescore.letter):
        check_linear_time(parse, lambda n: shape * (n // len(shape)), f"{parse.__module__} on {shape!r}")
