"""Imported samples: preregistered decisions over inspect_ai logs and lm-evaluation-harness output."""

from .importers import IMPORTERS, ImportRefused, import_inspect, import_lm_eval, import_log, read_import, write_import
from .protocol import PROTOCOL, ImportedProtocol
from .spec import DecidedSample, ImportedSample

__all__ = ["DecidedSample", "IMPORTERS", "ImportRefused", "ImportedProtocol", "ImportedSample", "PROTOCOL",
           "import_inspect", "import_lm_eval", "import_log", "read_import", "write_import"]
