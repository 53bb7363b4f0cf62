"""The enumeration benchmark script runs, and its brute force agrees with the enumerator."""

from __future__ import annotations

from worlds import bench_enumeration as bench
from worlds import enumerate_solutions, world_from_mapping


def test_bench_runs_on_small_worlds(capsys):
    assert bench.main(max_n=3) == 0
    out = capsys.readouterr().out
    assert "TW-L03" in out and "brute/enum" in out


def test_ladder_world_solution_count():
    for n in (1, 2, 3):
        w = world_from_mapping(bench.ladder_world(n))
        sols = enumerate_solutions(w).solutions
        assert len(sols) == bench.brute_force(w)[1] == 2 * n + 2
