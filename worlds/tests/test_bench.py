"""The enumeration benchmark script runs, and its brute force agrees with the enumerator."""

from __future__ import annotations

import pytest

from worlds import bench_enumeration as bench
from worlds import enumerate_solutions, grounded_steps, world_from_mapping


def test_bench_quick_runs_both_tables(capsys):
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "TW-L03 " in out and "TW-L04" not in out and "brute/enum" in out
    assert "TW-L01-C8" in out and "TW-L02-C8" not in out
    assert "quick run: the 100x target applies to the full run" in out
    assert "skipped (over budget)" not in out


def test_quick_depth8_world_counts_agree():
    """The quick path's depth-8 row: brute force checks all 3 + 3**2 + ... + 3**8 sequences, VALID count = solutions."""
    (row,) = bench.depth8_rows(bench.DEPTH8_STAGES_QUICK)
    assert (row.world_id, row.alphabet, row.cap) == ("TW-L01-C8", 3, 8)
    assert row.brute_seqs == 9840
    assert row.brute_valid == row.solutions == 735
    assert row.brute_s is not None and row.ratio is not None


def test_full_depth8_worlds_are_all_measured_shapes():
    """Every depth-8 world of the full run has cap 8 and a small alphabet (so brute force finishes in minutes)."""
    for n in bench.DEPTH8_STAGES:
        w = world_from_mapping(bench.ladder_world(n, cap=bench.DEPTH8_CAP))
        assert w.budget.max_steps == w.budget.max_cost == 8
        assert 3 <= len(grounded_steps(w)) == 2 * n + 1 <= 7
    assert bench.sequence_count(7, 8) == 6_725_600
    assert bench.DEPTH8_STAGES_QUICK == (1,)


def test_ladder_world_solution_count():
    for n in (1, 2, 3):
        w = world_from_mapping(bench.ladder_world(n))
        sols = enumerate_solutions(w).solutions
        assert len(sols) == bench.brute_force(w)[1] == 2 * n + 2


def test_budget_skip_estimates_instead_of_running(monkeypatch):
    """With a zero budget every world after the first is skipped, and brute force never runs on it."""
    calls = []
    real = bench.brute_force
    monkeypatch.setattr(bench, "brute_force", lambda w: calls.append(w.id) or real(w))
    rows = bench.ladder_rows(3, budget_s=0.0)
    assert calls == ["TW-L01"]
    assert [r.brute_valid for r in rows] == [4, None, None]
    assert rows[1].brute_seqs == bench.sequence_count(5, 3) and rows[1].estimate_s is not None
    assert "skipped (over budget)" in bench.format_row(rows[2])


def test_mismatch_is_an_error(monkeypatch):
    monkeypatch.setattr(bench, "brute_force", lambda w: (bench.sequence_count(3, 2), 0))
    with pytest.raises(bench.BenchmarkMismatch, match="TW-L01: brute force found 0 valid"):
        bench.measure(bench.ladder_world(1))


def test_ladder_world_refuses_bad_shape():
    with pytest.raises(ValueError, match="n >= 1"):
        bench.ladder_world(0)
    with pytest.raises(ValueError, match="step cap >= 3"):
        bench.ladder_world(3, cap=2)


def test_settled_blocks_nest_and_only_the_outermost_unfreezes():
    """Inner blocks keep what the outer one froze (their collections walk only what is new); the last one out
    leaves nothing frozen."""
    import gc

    gc.collect()
    before = gc.get_freeze_count()
    assert before == 0
    settled = [["made before the blocks"]]
    with bench._settled_heap():
        assert gc.get_freeze_count() > 0 and not gc.get_objects(generation=2)
        assert not _walked(settled)
        kept = [[i] for i in range(1000)]  # survivors made inside the outer block
        assert _walked(kept[0])
        with bench._settled_heap():
            assert not _walked(settled) and not _walked(kept[0])
        # the inner block left both frozen (membership, not counts: a frozen object elsewhere may die meanwhile)
        assert not _walked(settled) and not _walked(kept[0])
    assert gc.get_freeze_count() == 0 and _walked(settled) and _walked(kept[0])


def _walked(obj) -> bool:
    """Whether the collector's generations hold ``obj`` (a frozen object is in none of them)."""
    import gc

    return any(o is obj for o in gc.get_objects())
