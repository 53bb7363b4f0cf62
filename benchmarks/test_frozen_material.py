"""Drift guard: the hashes of every preregistration and fixture set are frozen in snapshots/.

Editing a threshold, a seed or a generator turns this red, naming the file or
the fixture set; re-freezing is a deliberate `pytest --snapshot-update`,
recorded in the protocol README's changelog.
"""

from benchmarks.core import fixture_hashes, prereg_hashes
from benchmarks.core.rundir import SUITE_ROOT
from fixtures import FIXTURE_SETS


def test_preregistrations_are_frozen(snapshot):
    assert prereg_hashes(SUITE_ROOT) == snapshot


def test_fixture_sets_are_frozen(snapshot):
    assert fixture_hashes(FIXTURE_SETS) == snapshot
