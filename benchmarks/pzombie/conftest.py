"""P-Zombie: options, session fixtures and the generated rule and completeness tests come from benchmarks.core."""

from benchmarks.core import install

from .protocol import PROTOCOL

install(PROTOCOL, globals())
