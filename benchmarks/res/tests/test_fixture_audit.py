"""The heuristic audit of both fixture variants, frozen: what a shallow single-cue strategy would score."""

import pytest

from fixtures.res import RES_VARIANTS, best_heuristic, build_res_fixtures, heuristic_audit


@pytest.mark.parametrize("variant", RES_VARIANTS)
def test_heuristic_audit_is_frozen(variant, snapshot):
    assert heuristic_audit(build_res_fixtures(variant)) == snapshot


def test_known_weaknesses_of_the_preregistered_rows():
    audit = heuristic_audit(build_res_fixtures("preregistered"))
    assert audit["five_factor"]["executor first-listed factor SUPPORTS -> A"] == 0.9375
    assert audit["minimal_owner_indexed"]["always the block code"] == 0.75
    best = best_heuristic(audit)
    assert best["five_factor"][1] == 1.0  # world fact never supports in a low profile: one factor decides every row
