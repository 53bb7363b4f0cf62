"""Small helpers for the hand-written schema validator (rules mirror schema/world.schema.json)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["NAME_PATTERN", "V"]

#: Pattern every name in a world file matches (entities, primitives, params, types).
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$", re.ASCII)

_TYPE_WORDS = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    list: "an array",
    dict: "a table",
}


class V:
    """Validation context: ``err(field, problem)`` raises the file error."""

    def __init__(self, err: Callable[[str, str], None]) -> None:
        self.err = err

    def typed(self, value: Any, kind: type, field: str) -> Any:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            self.err(field, f"must be {_TYPE_WORDS[kind]}, got {type(value).__name__}")
        return value

    def table(
        self, raw: Mapping[str, Any], key: str, field: str, required: bool = True
    ) -> Any:
        if key not in raw:
            if required:
                self.err(field, "is required but missing")
            return None
        return raw[key]

    def only(self, raw: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
        for k in sorted(raw):
            if k not in allowed:
                self.err(
                    _join(prefix, k),
                    f"is not a known field here; allowed: {', '.join(sorted(allowed))}",
                )

    def name(self, value: Any, field: str) -> str:
        self.typed(value, str, field)
        if not NAME_PATTERN.match(value):
            self.err(field, f"{value!r} is not a name; use [A-Za-z_][A-Za-z0-9_]*")
        return value

    def choice(self, raw: Mapping[str, Any], key: str, field: str, options: tuple[str, ...], what: str) -> str:
        """A required string field whose value is one of ``options``."""
        value = self.typed(self.table(raw, key, field), str, field)
        if value not in options:
            self.err(field, f"unknown {what} {value!r}; use one of {', '.join(options)}")
        return value

    def refs(self, raw: Mapping[str, Any], key: str, field: str, declared: Any, what: str) -> list:
        """A required list of names, each one of the ``declared`` ``what``s."""
        names = self.typed(self.table(raw, key, field), list, field)
        for j, name in enumerate(names):
            self.typed(name, str, f"{field}[{j}]")
            if name not in declared:
                self.err(f"{field}[{j}]", f"{name!r} is not a declared {what}")
        return names

    def int_range(self, value: Any, field: str, lo: int, hi: int | None = None) -> int:
        self.typed(value, int, field)
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            self.err(field, f"must be {bound}, got {value}")
        return value


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
