"""Planned-power numbers of ``benchmarks.core.design`` against independent computations (scipy)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from benchmarks.core import Classification, Condition, Rule, design
from benchmarks.core.stats import paired_difference_interval
from benchmarks.cwr.design import CWR_C_VALIDITY, cwr_simulated_tables, cwr_tables
from benchmarks.ladder.design import ladder_tables
from benchmarks.pzombie.design import pzombie_tables
from benchmarks.res.design import res_tables


def _float(cell: str) -> float:
    return float(cell.split()[0])


@pytest.mark.parametrize("n,p", [(32, 0.7), (150, 0.08), (24, 0.0), (24, 1.0), (5, 0.5)])
def test_binomial_pmf_matches_scipy(n, p):
    assert design.binomial_pmf(n, p) == pytest.approx(list(sps.binom.pmf(np.arange(n + 1), n, p)), rel=1e-9, abs=1e-15)


def test_outcome_distribution_equals_the_unpooled_product():
    gate = Classification("toy", (
        Rule("LOW_X", all=(Condition("x", "<", 0.5),)),
        Rule("HIGH_BOTH", all=(Condition("x", ">=", 0.8), Condition("y", ">=", 3))),
    ), "OTHER", {})
    marginals = {"x": [(k / 10, p) for k, p in enumerate(design.binomial_pmf(10, 0.6))],
                 "y": [(float(k), p) for k, p in enumerate(design.binomial_pmf(6, 0.4))]}
    brute = {"LOW_X": 0.0, "HIGH_BOTH": 0.0, "OTHER": 0.0}
    for (x, px), (y, py) in itertools.product(marginals["x"], marginals["y"]):
        brute[gate.evaluate({"x": x, "y": y}).label] += px * py
    assert design.outcome_distribution(gate, marginals) == pytest.approx(brute, abs=1e-12)


def test_res_numbers_match_scipy_binomial():
    single, gate = res_tables()
    labels = gate.header[1:]
    for row_single, row_gate in zip(single.rows, gate.rows):
        p = float(row_single[0])
        q = float(sps.binom.sf(23, 32, p))  # accuracy >= 0.75 of 32 items: at least 24 right
        assert [_float(c) for c in row_single[1:]] == pytest.approx([q, q], abs=1e-4)
        # Closed forms under independence, rule by rule in the preregistered order.
        expected = {
            "GENERATION_RESPONSE_UNPARSEABLE": 0.0,
            "RESPONSE_INTERFACE_MISMATCH": q * (1 - q),
            "FIVE_FACTOR_TASK_CAPABILITY_NOT_ESTABLISHED": (1 - q) ** 2 * (1 - (1 - q) ** 2),
            "MINIMAL_TASK_CAPABILITY_NOT_ESTABLISHED": (1 - q) ** 2 * (1 - q * (1 - q)),
            "RESPONSE_INTERFACE_GATE_PASSED": q ** 4,
        }
        expected["MIXED_GATE_OUTCOME"] = 1 - sum(expected.values())
        got = dict(zip(labels, map(float, row_gate[1:])))
        assert got == pytest.approx(expected, abs=1e-4)
    assert [row[0] for row in single.rows] == ["0.70", "0.75", "0.80", "0.85"]


def test_ladder_numbers_match_scipy_binomial():
    clause_a, clauses_bc = ladder_tables()
    for row_a, row_bc in zip(clause_a.rows, clauses_bc.rows):
        e = float(row_a[0].rstrip("%")) / 100
        # 150 scored units: inside 10-35% means 15 to 52 errors (35% of 150 is 52.5)
        inside = sps.binom.cdf(52, 150, e) - sps.binom.cdf(14, 150, e)
        assert [float(c) for c in row_a[1:]] == pytest.approx(
            [inside, sps.binom.cdf(14, 150, e), sps.binom.sf(52, 150, e)], abs=1e-4)
        tier = sps.binom.sf(1, 30, e)  # a tier at or above 5% of 30 has at least 2 errors
        assert [float(c) for c in row_bc[1:]] == pytest.approx(
            [sps.binom.sf(2, 60, e), tier, sps.binom.sf(2, 5, tier)], abs=1e-4)  # 5% of 60 is 3 errors
    assert [row[0] for row in clause_a.rows] == ["8%", "10%", "12%", "35%", "37%"]


def test_cwr_numbers_match_a_scipy_multinomial_sum():
    n = 12  # the sums are the same at the planned 24 pairs; 12 keeps the two interval sweeps short
    (table,) = cwr_tables((0.0, 0.4), pairs=n)
    labels = table.header[2:]
    assert f"{n} pairs" in table.title
    counts = np.array([(a, b, c, n - a - b - c) for a in range(n + 1) for b in range(n + 1 - a)
                       for c in range(n + 1 - a - b)])
    bounds = [paired_difference_interval(*map(int, row), 0.95) for row in counts]
    supported_mask = np.array([i.low >= 0.20 for i in bounds])
    rejected_mask = np.array([i.high < 0.20 for i in bounds]) & ~supported_mask
    for row in table.rows:
        d, c = float(row[0]), CWR_C_VALIDITY
        f = c + d
        pmf = sps.multinomial.pmf(counts, n, [f * c, f * (1 - c), (1 - f) * c, (1 - f) * (1 - c)])
        assert pmf.sum() == pytest.approx(1.0)
        supported, rejected = pmf[supported_mask].sum(), pmf[rejected_mask].sum()
        got = dict(zip(labels, map(float, row[2:])))
        assert got["RECOMBINATION_DEFICIT_SUPPORTED"] == pytest.approx(supported, abs=1e-4)
        assert got["DEFICIT_OF_DELTA_REJECTED"] == pytest.approx(rejected, abs=1e-4)
        assert got["INCONCLUSIVE"] == pytest.approx(1 - supported - rejected, abs=1e-4)


class _Fixed:
    low, high = 0.5, 0.9


def test_cwr_interval_is_a_parameter():
    (table,) = cwr_tables((0.0,), interval=lambda *cells: _Fixed(), pairs=4)
    got = dict(zip(table.header[2:], map(float, table.rows[0][2:])))
    assert got["RECOMBINATION_DEFICIT_SUPPORTED"] == 1.0
    assert design.load_interval("benchmarks.core.stats:paired_difference_interval") is paired_difference_interval
    with pytest.raises(ValueError, match="module:function"):
        design.load_interval("paired_difference_interval")
    with pytest.raises(ValueError, match="cannot be loaded"):
        design.load_interval("benchmarks.core.stats:no_such_interval")


def test_cwr_simulation_goes_through_the_protocols_metrics():
    # F always valid, C never: every table is (0, 24, 0, 0), a deficit of 1 that any interval supports
    (table,) = cwr_simulated_tables((1.0,), c_validity=0.0, simulations=20, seed=3)
    got = dict(zip(table.header[2:], map(float, table.rows[0][2:])))
    assert got["RECOMBINATION_DEFICIT_SUPPORTED"] == 1.0
    assert "24 pairs" in table.title and "20 simulations per row, seed 3" in table.title
    again = cwr_simulated_tables((0.2,), simulations=30, seed=3)[0].rows
    assert again == cwr_simulated_tables((0.2,), simulations=30, seed=3)[0].rows
    assert sum(map(float, again[0][2:])) == pytest.approx(1.0, abs=5e-4)  # four-decimal rounding


def test_pzombie_simulation_matches_the_noncentral_f_power():
    simulations = 600
    eta_table, token_table = pzombie_tables(etas=(0.0, 0.10), r2s=(0.0,), simulations=simulations, seed=11)
    header = eta_table.header
    df1, df2 = 3, 76
    critical = sps.f.ppf(0.95, df1, df2)  # p < 0.05; it implies eta^2 = 3F / (3F + 76) > 0.05
    confirm_f = 0.10 / 0.90 * df2 / df1  # eta^2 >= 0.10 as an F value
    for row in eta_table.rows:
        eta = float(row[0])
        lam = 80 * eta / (1 - eta)  # sum of n_g (mu_g - mu)^2 / sigma^2 for the layout's offsets
        got = dict(zip(header[1:], map(float, row[1:])))
        target = sps.ncf.sf(critical, df1, df2, lam) if lam else sps.f.sf(critical, df1, df2)
        confirm = sps.ncf.sf(confirm_f, df1, df2, lam) if lam else sps.f.sf(confirm_f, df1, df2)
        tolerance = 4 * math.sqrt(0.25 / simulations)
        assert abs(got["eta2_target: ETA2_TARGET_MET"] - target) < tolerance, (eta, got, target)
        # with token diversity independent of H, R^2 < 0.30 nearly always holds at n = 80
        assert abs(got["combined: ANTI_P_ZOMBIE_CONFIRMED"] - confirm) < tolerance, (eta, got, confirm)
    assert token_table.rows[0][1:] == ("0.0000", "0.0000", "1.0000")
    again = pzombie_tables(etas=(0.0, 0.10), r2s=(0.0,), simulations=simulations, seed=11)
    assert again[0].rows == eta_table.rows


def test_command_line(capsys):
    assert design.main(["ladder"]) == 0
    out = capsys.readouterr().out
    assert "python -m benchmarks.core.design ladder" in out and "| 35% |" in out
    with pytest.raises(SystemExit) as caught:
        design.main(["cwr", "--interval", "nowhere"])
    assert caught.value.code == 2
    assert "not of the form module:function" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        design.main(["pzombie", "--simulations", "0"])
    assert "--simulations must be a positive count" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        design.main(["res", "--simulate"])
    assert "--simulate applies to cwr only" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["ladder", "res"])
def test_readme_holds_the_printed_tables(protocol):
    """The exact tables in the protocol README's "Planned power" section are what the script prints now."""
    from benchmarks.core.rundir import SUITE_ROOT

    readme = (SUITE_ROOT / "benchmarks" / protocol / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Planned power", 1)[1].split("\n## ", 1)[0]
    for table in design.protocol_tables(protocol):
        assert table.markdown() in section, (
            f"benchmarks/{protocol}/README.md: the 'Planned power' table {table.title!r} differs from "
            f"`python -m benchmarks.core.design {protocol}`; paste its output into the section")
