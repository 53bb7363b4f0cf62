"""The seed's decision rules, transcribed by hand from its text, against the rules compiled from prereg.toml.

The functions below are written from seeds/002_0c89e4dd9e1b3d66.txt alone
(section 2, "Classification Thresholds" and "Combined Verdict"; section 3,
H2 and A2; section 4, "Target: eta^2 > 0.05 (p < 0.05)"), with the seed's
numbers as literals; they read nothing from the prereg or the suite.
Hypothesis draws metric vectors, with the thresholds themselves and their
nearest floating-point neighbours drawn often, and every compiled
classification of the real prereg (``benchmarks.core`` rules, as the
generated rule tests evaluate them) and the stdlib rescorer's rule reader
must give the label the transcription gives.

Where the seed leaves a reading open, the transcription takes the prereg's
reading and says so: the "p" of the eta^2 target is the exact ANOVA p
(the seed's full-rigor path had only the Wilson-Hilferty p_approx), and the
rules read ACTIVE_MANIFOLD, H2 comparing it with BASELINE.
"""

from __future__ import annotations

import importlib.util
import math
import tomllib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.core.rules import RuleError
from benchmarks.pzombie.spec import CLASSIFICATIONS, HERE

_spec = importlib.util.spec_from_file_location("pzombie_rescore_rules", HERE / "rescore.py")
rescore = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rescore)
PREREG_TOML = tomllib.loads((HERE / "prereg.toml").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the seed, transcribed


def seed_three_way(r2: float) -> str | None:
    """Section 2, "Classification Thresholds": the verdict on R^2(TD)."""
    if r2 > 0.7:
        return "P-ZOMBIE"
    if 0.3 <= r2 <= 0.7:
        return "AMBIGUOUS"
    if r2 < 0.3:
        return "ANTI-P-ZOMBIE"
    return None  # no row of the table applies


def seed_combined(eta2: float, r2: float) -> str | None:
    """Section 2, "Combined Verdict" (eval/stats.py::analyze)."""
    if eta2 >= 0.10 and r2 < 0.30:
        return "ANTI_P_ZOMBIE_CONFIRMED"
    if eta2 >= 0.10 and r2 >= 0.30:
        return "ETA2_HIGH_TOKEN_CONTROL_FAIL"
    if eta2 < 0.10:
        return "ETA2_BELOW_THRESHOLD"
    return None


def seed_eta2_target_met(eta2: float, p: float) -> bool:
    """Section 4, eta^2: "Target: eta^2 > 0.05 (p < 0.05)"."""
    return eta2 > 0.05 and p < 0.05


def seed_h2_supported(eta2_subjective: float, eta2_baseline: float) -> bool:
    """Section 3: H2, "subjective extensions produce eta^2 > baseline"; A2, its null, otherwise."""
    return eta2_subjective > eta2_baseline


# --------------------------------------------------------------------------- metric vectors


def near(*values: float) -> list[float]:
    """Each value and its two nearest floating-point neighbours."""
    return [v2 for v in values for v2 in (math.nextafter(v, -math.inf), v, math.nextafter(v, math.inf))]


def unit_floats(*boundaries: float) -> st.SearchStrategy[float]:
    """Floats in [0, 1]: the boundaries and their neighbours half the time, anything else otherwise."""
    edges = [v for v in near(0.0, 1.0, *boundaries) if 0.0 <= v <= 1.0]
    return st.one_of(st.sampled_from(edges), st.floats(0.0, 1.0, allow_nan=False))


R2 = unit_floats(0.3, 0.7, 0.30)
ETA2 = unit_floats(0.05, 0.10)
P = unit_floats(0.05)


def metric_vector(r2: float, eta2: float, p: float, eta2_baseline: float) -> dict[str, float]:
    """The metrics the rules read, named as the protocol names them; the gain is the protocol's difference."""
    return {"active.r_squared_td": r2, "active.eta_squared": eta2, "active.p_exact": p,
            "h2.eta_squared_gain": eta2 - eta2_baseline}


def compiled(key: str, metrics: dict[str, float]) -> str:
    return CLASSIFICATIONS[key].evaluate(metrics).label


def rescorer_reads(key: str, metrics: dict[str, float]) -> str | None:
    return rescore.classify(PREREG_TOML[key], metrics, PREREG_TOML["thresholds"])


def expected_labels(r2: float, eta2: float, p: float, eta2_baseline: float) -> dict[str, str | None]:
    return {
        "token_control": seed_three_way(r2),
        "combined": seed_combined(eta2, r2),
        "eta2_target": "ETA2_TARGET_MET" if seed_eta2_target_met(eta2, p) else "ETA2_TARGET_NOT_MET",
        "h2": "H2_SUPPORTED" if seed_h2_supported(eta2, eta2_baseline) else "A2_NOT_REJECTED",
    }


# --------------------------------------------------------------------------- the checks


def test_the_prereg_compiles_the_four_classifications_the_seed_names() -> None:
    assert list(CLASSIFICATIONS) == ["token_control", "combined", "eta2_target", "h2"]
    assert CLASSIFICATIONS["token_control"].labels == ["P-ZOMBIE", "AMBIGUOUS", "ANTI-P-ZOMBIE"]
    assert CLASSIFICATIONS["combined"].labels == ["ANTI_P_ZOMBIE_CONFIRMED", "ETA2_HIGH_TOKEN_CONTROL_FAIL",
                                                  "ETA2_BELOW_THRESHOLD"]
    assert CLASSIFICATIONS["eta2_target"].labels == ["ETA2_TARGET_MET", "ETA2_TARGET_NOT_MET"]
    assert CLASSIFICATIONS["h2"].labels == ["H2_SUPPORTED", "A2_NOT_REJECTED"]


@given(R2, ETA2, P, ETA2)
@example(0.3, 0.10, 0.05, 0.10)
@example(0.7, 0.1, 0.049999, 0.0)
@example(math.nextafter(0.3, 0.0), math.nextafter(0.1, 0.0), 0.0, math.nextafter(0.1, 0.0))
@example(math.nextafter(0.7, 1.0), 1.0, math.nextafter(0.05, 0.0), 1.0)
@example(0.0, math.nextafter(0.05, 1.0), math.nextafter(0.05, 0.0), 0.05)
def test_compiled_rules_give_the_seeds_labels(r2: float, eta2: float, p: float, eta2_baseline: float) -> None:
    metrics = metric_vector(r2, eta2, p, eta2_baseline)
    expected = expected_labels(r2, eta2, p, eta2_baseline)
    assert None not in expected.values(), "the seed's tables leave this vector without a verdict"
    assert {key: compiled(key, metrics) for key in CLASSIFICATIONS} == expected
    assert {key: rescorer_reads(key, metrics) for key in CLASSIFICATIONS} == expected


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_the_seeds_tables_are_total_and_exclusive(r2: float, eta2: float) -> None:
    """Every R^2 and eta^2 in [0, 1] meets exactly one row of each of the seed's two tables."""
    three_way = [r2 > 0.7, 0.3 <= r2 <= 0.7, r2 < 0.3]
    combined = [eta2 >= 0.10 and r2 < 0.30, eta2 >= 0.10 and r2 >= 0.30, eta2 < 0.10]
    assert three_way.count(True) == 1 and combined.count(True) == 1


@given(ETA2, ETA2)
def test_h2_on_the_difference_is_h2_on_the_two_values(a: float, b: float) -> None:
    """The prereg rules on eta^2(ACTIVE) - eta^2(BASELINE) > 0; the seed compares the two: the same decision for
    every pair of floats (a - b is 0 only when a == b, subnormals included)."""
    assert (a - b > 0.0) == seed_h2_supported(a, b)


#: The seed's section 8 table (SR-61 FINAL V2, ACTIVE_MANIFOLD): scale -> (eta^2, p_approx, R^2(TD -> H), verdict).
SEED_RESULTS = {
    "270M": (0.290, 1.3e-05, 0.051, "ANTI_P_ZOMBIE_CONFIRMED"),
    "1B": (0.174, 2.3e-03, 0.051, "ANTI_P_ZOMBIE_CONFIRMED"),
    "4B": (0.025, 0.584, 0.014, "ETA2_BELOW_THRESHOLD"),
    "E2B": (0.399, 4.8e-08, 0.166, "ANTI_P_ZOMBIE_CONFIRMED"),
}


@pytest.mark.parametrize("scale", list(SEED_RESULTS))
def test_the_seeds_published_rows_get_their_published_verdicts(scale: str) -> None:
    eta2, p, r2, verdict = SEED_RESULTS[scale]
    metrics = metric_vector(r2, eta2, p, 0.0)
    assert seed_combined(eta2, r2) == verdict
    assert compiled("combined", metrics) == verdict
    assert compiled("token_control", metrics) == "ANTI-P-ZOMBIE"  # every published R^2 is below 0.3
    assert compiled("eta2_target", metrics) == ("ETA2_TARGET_MET" if scale != "4B" else "ETA2_TARGET_NOT_MET")


@pytest.mark.parametrize("undefined", [math.nan, None])
@pytest.mark.parametrize("metric", ["active.r_squared_td", "active.eta_squared"])
def test_an_undefined_metric_gets_no_label(metric: str, undefined: float | None) -> None:
    """The seed is silent on undefined statistics (all H equal, constant TD): the compiled rule refuses them and
    the rescorer gives no label, never a default verdict."""
    metrics = metric_vector(0.1, 0.2, 0.01, 0.0)
    metrics[metric] = undefined
    with pytest.raises(RuleError, match=metric.replace(".", r"\.")):
        compiled("combined", metrics)
    assert rescorer_reads("combined", {k: (None if v is None or v != v else v) for k, v in metrics.items()}) is None
