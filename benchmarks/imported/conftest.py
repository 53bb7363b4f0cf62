"""Imported samples: options, fixtures and the generated rule and completeness tests come from benchmarks.core."""

from benchmarks.core import install, preregistration_checked

with preregistration_checked(globals()):  # a refused prereg is one usage line, exit status 4
    from .protocol import PROTOCOL

    install(PROTOCOL, globals())
