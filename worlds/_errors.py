"""The exception root of the ``worlds`` package."""

from __future__ import annotations

__all__ = [
    "CheckerUsageError",
    "FamilyRegistryError",
    "PairConstructionError",
    "WorldFileError",
    "WorldsError",
]


class WorldsError(Exception):
    """Root of every error raised by ``worlds``.

    The checker and the parser never raise on candidate text; these errors
    signal a bad world file, a registry misuse or a caller passing the wrong
    kind of object.
    """


class WorldFileError(WorldsError):
    """A world file (or world mapping) does not conform to the published schema.

    ``source`` names the file (or ``<mapping>``), ``field`` is the dotted path of
    the offending field (``recipes[2].inputs.ore``), ``problem`` says what is
    wrong and what to write instead.
    """

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: field {field or '<root>'}: {problem}")


class FamilyRegistryError(WorldsError, LookupError):
    """A family name is unknown, or a second family was registered under a taken name."""


class CheckerUsageError(WorldsError, TypeError):
    """``check`` or ``parse_candidate`` was called with the wrong kind of argument."""


class PairConstructionError(WorldsError):
    """A pair spec cannot give a valid fixture; the message names the pair and what to change."""
