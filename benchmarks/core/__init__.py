"""Machinery shared by every protocol: preregistrations, rules, runs, ledgers, provenance, statistics.

Protocols import from here, never from one another.
"""

from . import registry, stats
from ._canonical import (
    FileReadError,
    FileWriteError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    canonical_json,
    read_json_file,
    sha256_bytes,
    sha256_file,
    sha256_json,
)
from .frozen import fixture_hashes, prereg_hashes
from .ledger import (
    Ledger,
    LedgerCorruptError,
    LedgerDuplicateError,
    LedgerError,
    LedgerTornError,
    LedgerTornTailWarning,
    LedgerUnsafeError,
    LedgerWriteError,
    TornTail,
    read_ledger,
)
from ._generated import install, preregistration_checked
from .errors import PreregbenchError
from .protocol import AnswerKey, ModelChoice, Option, Protocol, ResumeRefused, UsageProblem, finite
from .run import ProtocolRun, RunTuning
from .prereg import ClassificationSpec, ModelSpec, Prereg, PreregError, ProtocolHeader, RuleSpec, classification, load_prereg
from .provenance import Provenance, ProvenanceError, check_revision, read_provenance
from .rules import Classification, Condition, Outcome, Rule, RuleError
from .rundir import Run, RunDirError

__all__ = [
    "AnswerKey",
    "Classification",
    "ClassificationSpec",
    "Condition",
    "FileReadError",
    "FileWriteError",
    "Ledger",
    "LedgerCorruptError",
    "LedgerDuplicateError",
    "LedgerError",
    "LedgerTornError",
    "LedgerTornTailWarning",
    "LedgerUnsafeError",
    "LedgerWriteError",
    "ModelChoice",
    "Option",
    "Outcome",
    "PreregbenchError",
    "Prereg",
    "PreregError",
    "Protocol",
    "ProtocolRun",
    "Provenance",
    "ProvenanceError",
    "ModelSpec",
    "ProtocolHeader",
    "ResumeRefused",
    "Rule",
    "RuleError",
    "RuleSpec",
    "Run",
    "RunDirError",
    "RunTuning",
    "TornTail",
    "UsageProblem",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "canonical_json",
    "check_revision",
    "classification",
    "finite",
    "fixture_hashes",
    "install",
    "load_prereg",
    "prereg_hashes",
    "preregistration_checked",
    "read_json_file",
    "read_ledger",
    "read_provenance",
    "registry",
    "sha256_bytes",
    "sha256_file",
    "sha256_json",
    "stats",
]
