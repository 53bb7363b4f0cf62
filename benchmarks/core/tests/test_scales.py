"""``--scale all`` (benchmarks/core/scales.py): the arguments each scale gets, the group's status, group.json.

The groups themselves run in benchmarks/pzombie/tests/test_scales.py (P-Zombie is the protocol with scales).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.core.scales import (
    GROUP_FILE,
    OWNED_OPTIONS,
    GroupResult,
    ScaleGroupError,
    ScaleOutcome,
    option_value,
    read_group,
    scale_args,
    without_owned,
)

#: Arguments that are none of the owned options, nor start like one.
plain = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-=0123456789./ ", min_size=0, max_size=12).filter(
    lambda a: a not in OWNED_OPTIONS and not any(a.startswith(f + "=") for f in OWNED_OPTIONS))


@given(st.lists(plain, max_size=8), st.lists(st.tuples(st.sampled_from(OWNED_OPTIONS), plain,
                                                       st.booleans()), max_size=4), st.data())
def test_every_owned_option_goes_and_every_other_argument_stays_in_order(args: list[str], owned: list, data) -> None:
    chunks = [[a] for a in args]
    for flag, value, joined in owned:  # an owned option goes between two arguments, never inside another option
        at = data.draw(st.integers(0, len(chunks)))
        chunks.insert(at, [f"{flag}={value}"] if joined else [flag, value])
    assert without_owned([a for chunk in chunks for a in chunk]) == args


def test_a_scale_gets_its_scale_results_folder_and_run_id_last(tmp_path: Path) -> None:
    base = without_owned(["-m", "cpu", "--scale", "all", "--run-id=G", "--results-dir", "r", "--model", "m"])
    args = scale_args(base, tmp_path, "1B")
    assert args == ["-m", "cpu", "--model", "m", "--scale", "1B", "--results-dir", str(tmp_path), "--run-id", "1B"]
    assert option_value(args, "--scale") == "1B" and option_value(args, "--run-id") == "1B"
    assert option_value(["--shard=1/2"], "--shard") == "1/2" and option_value(["--shard"], "--shard") is None


@pytest.mark.parametrize("statuses, problem, expected", [
    ((0, 0, 0, 0), "", 0),
    ((0, 1, 1, 0), "", 1),
    ((0, 2, 1, 0), "", 2),
    ((0, 1, 4, None), "scale 4B stopped on a usage error", 4),
    ((0, 0, None, None), "interrupted", 2),
    ((0, 0, 0, 0), "the cross-scale report was not written", 2),
])
def test_the_group_status_is_its_worst_scale(tmp_path: Path, statuses: tuple, problem: str, expected: int) -> None:
    outcomes = tuple(ScaleOutcome(f"s{i}", tmp_path / f"s{i}", s) for i, s in enumerate(statuses))
    assert GroupResult("p", "G", tmp_path, outcomes, (), problem).status == expected


@pytest.mark.parametrize("content, why", [
    (b"", "JSON"),
    (b"[]", "not the group.json of a scale group"),
    (json.dumps({"kind": "scale-group", "protocol": "p", "scales": ["1B", "/etc"]}).encode(), "each a run id"),
    (json.dumps({"kind": "scale-group", "protocol": "../p", "scales": ["1B"]}).encode(), "not the group.json"),
    (json.dumps({"kind": "scale-group", "protocol": "p", "scales": "1B"}).encode(), "not the group.json"),
])
def test_a_damaged_group_file_is_refused_in_one_line(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / GROUP_FILE).write_bytes(content)
    with pytest.raises(ScaleGroupError) as caught:
        read_group(tmp_path)
    assert why in str(caught.value) and "\n" not in str(caught.value)


def test_a_group_file_behind_a_link_is_not_read(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"kind": "scale-group", "protocol": "p", "scales": ["1B"]}))
    folder = tmp_path / "G"
    folder.mkdir()
    (folder / GROUP_FILE).symlink_to(real)
    with pytest.raises(ScaleGroupError, match="symbolic link"):
        read_group(folder)
    assert read_group(tmp_path) is None  # no group.json: no group
