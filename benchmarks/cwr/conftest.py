"""Fiction-CWR: the run machinery (options, fixtures, generated rule and completeness tests) comes from benchmarks.core."""

from benchmarks.core import install

from .protocol import PROTOCOL

install(PROTOCOL, globals())
