"""Capability ladder: the run machinery (options, fixtures, generated rule and completeness tests) comes from
benchmarks.core; the round-directory mode (test_instrument.py) adds its fixtures from rounds.py."""

from benchmarks.core import install

from .protocol import PROTOCOL
from .rounds import instrument_metrics, pytest_ignore_collect, retune_metrics, round_probes, round_report

__all__ = ["instrument_metrics", "pytest_ignore_collect", "retune_metrics", "round_probes", "round_report"]

install(PROTOCOL, globals())
