import pytest


@pytest.mark.completeness
def test_records_written(run, records):
    assert run.path("records.json").is_file()
    assert records["complete"], "the scenario marks this run as technically incomplete"


@pytest.mark.completeness
def test_provenance_complete(run, records):
    provenance = run.load_provenance()
    assert provenance is not None and provenance.missing() == []
