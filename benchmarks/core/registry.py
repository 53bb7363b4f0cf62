"""Where protocols are found: the suite's own, those installed packages register, and a folder named on purpose.

A protocol is a :class:`~benchmarks.core.protocol.Protocol` instance.  The
registry knows it by name from two sources:

* the suite's own protocols (``res``, ``pzombie``, ``cwr``, ``ladder`` and its ``campaign`` arm, ``imported``),
  declared below as ``module:attribute`` targets;
* the entry-point group ``preregbench.protocols`` of every installed
  distribution, so that a protocol can live in a researcher's own package::

      [project.entry-points."preregbench.protocols"]
      myproto = "mypackage.myproto.protocol:PROTOCOL"

A name given twice with two different targets is refused (:class:`RegistryError`),
as an unknown name is, with the names that are close and the names there are.
Nothing is imported until a protocol is asked for by name.

:func:`load_folder` loads the protocol of a folder holding ``prereg.toml``
and ``protocol.py`` (a scaffolded protocol inside a checkout).  Only callers
that were handed that folder by the user use it; ``preregbench verify`` uses
it only for a folder of the repository it was told to trust, never for a path
read out of a run directory.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import re
import sys
from pathlib import Path
from typing import Any

from .errors import PreregbenchError
from .protocol import Protocol

ENTRY_POINT_GROUP = "preregbench.protocols"

#: The suite's own protocols: name -> ``module:attribute``.
BUILTIN: dict[str, str] = {
    "campaign": "benchmarks.ladder.campaign.protocol:PROTOCOL",
    "cwr": "benchmarks.cwr.protocol:PROTOCOL",
    "imported": "benchmarks.imported.protocol:PROTOCOL",
    "ladder": "benchmarks.ladder.protocol:PROTOCOL",
    "pzombie": "benchmarks.pzombie.protocol:PROTOCOL",
    "res": "benchmarks.res.protocol:PROTOCOL",
}

#: What a protocol name may be: a Python identifier in lower case, as the folder and the package are named.
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")


class RegistryError(PreregbenchError, LookupError):
    """A protocol cannot be found or loaded; the message is one line saying what to do."""


def valid_name(name: Any) -> bool:
    return isinstance(name, str) and NAME.match(name) is not None


def _entry_points() -> dict[str, str]:
    found: dict[str, str] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if point.name in found and found[point.name] != point.value:
            raise RegistryError(f"protocol {point.name!r} is registered twice ({found[point.name]} and {point.value}) "
                                f"in the entry-point group {ENTRY_POINT_GROUP!r}; uninstall one of the packages")
        found[point.name] = point.value
    return found


def targets() -> dict[str, str]:
    """Name -> ``module:attribute`` of every known protocol, sorted by name."""
    known = dict(BUILTIN)
    for name, target in _entry_points().items():
        if not valid_name(name):
            raise RegistryError(f"the entry point {name!r} of group {ENTRY_POINT_GROUP!r} is not a protocol name "
                                "(lower-case letters, digits and _, starting with a letter); rename it")
        if name in known and known[name] != target:
            raise RegistryError(f"protocol {name!r} is registered twice ({known[name]} and {target}); "
                                "a protocol name is unique: rename the installed one")
        known[name] = target
    return dict(sorted(known.items()))


def names() -> list[str]:
    return list(targets())


def unknown_message(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    return f"no protocol {name!r}; {hint}available: {', '.join(known) or 'none'}"


def _resolve(target: str, name: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryError(f"protocol {name!r} ({target}) cannot be imported: {exc}") from None
    found = getattr(module, attribute or "PROTOCOL", None)
    if not isinstance(found, Protocol):
        raise RegistryError(f"protocol {name!r}: {target} is not a Protocol instance")
    if found.name != name:
        raise RegistryError(f"protocol {name!r}: {target} is the protocol {found.name!r} (its folder's name); "
                            "register it under that name")
    return found


def get(name: str) -> Any:
    """The protocol registered as ``name``; :class:`RegistryError` (one line, with did-you-mean) otherwise."""
    known = targets()
    if not valid_name(name) or name not in known:
        raise RegistryError(unknown_message(name, list(known)))
    return _resolve(known[name], name)


def find(name: str) -> Any | None:
    """The protocol registered as ``name``, None when there is none or it cannot be loaded here."""
    try:
        return get(name)
    except RegistryError:
        return None


def load_folder(folder: Path) -> Any:
    """The protocol defined by ``folder/protocol.py`` (a package folder holding ``prereg.toml``).

    The folder is imported as the package it is part of (the chain of folders
    holding ``__init__.py`` above it), its top-most parent put on ``sys.path``.
    """
    folder = Path(folder).resolve()
    if not (folder / "prereg.toml").is_file() or not (folder / "protocol.py").is_file():
        raise RegistryError(f"{folder}: not a protocol folder (it needs prereg.toml and protocol.py)")
    parts = [folder.name]
    top = folder
    while (top.parent / "__init__.py").is_file():
        top = top.parent
        parts.insert(0, top.name)
    if not all(part.isidentifier() for part in parts):
        raise RegistryError(f"{folder}: {'.'.join(parts)} is not an importable package name")
    root = str(top.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(".".join(parts) + ".protocol")
    except ImportError as exc:
        raise RegistryError(f"{folder}/protocol.py cannot be imported: {exc}") from None
    found = getattr(module, "PROTOCOL", None)
    if not isinstance(found, Protocol):
        raise RegistryError(f"{folder}/protocol.py defines no PROTOCOL instance")
    return found


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "NAME", "RegistryError", "find", "get", "load_folder", "names", "targets",
           "unknown_message", "valid_name"]
