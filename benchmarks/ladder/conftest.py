"""Capability ladder: the run machinery (options, fixtures, generated rule and completeness tests) comes from
benchmarks.core; the round-directory mode (test_instrument.py) adds its fixtures from rounds.py."""

from benchmarks.core import install, preregistration_checked

with preregistration_checked(globals()):  # a refused prereg is one usage line, exit status 4
    from .protocol import PROTOCOL
    from .rounds import instrument_metrics, pytest_ignore_collect, retune_metrics, round_probes, round_report

    install(PROTOCOL, globals())

__all__ = ["instrument_metrics", "pytest_ignore_collect", "retune_metrics", "round_probes", "round_report"]
