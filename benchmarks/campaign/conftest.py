"""Capability ladder campaign: the run machinery comes from benchmarks.core; the protocol from
benchmarks.ladder.campaign (the campaign reuses the probe's generator states, prompts, parser and gate)."""

from benchmarks.core import install, preregistration_checked

with preregistration_checked(globals()):  # a refused prereg is one usage line, exit status 4
    from benchmarks.ladder.campaign.protocol import PROTOCOL

    install(PROTOCOL, globals())
