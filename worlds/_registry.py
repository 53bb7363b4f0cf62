"""Registry of world families: refuses duplicates, answers unknown names with close matches."""

from __future__ import annotations

import difflib

from ._errors import FamilyRegistryError
from ._model import Family

__all__ = ["family_names", "get_family", "register_family", "registered_families", "unregister_family"]

_FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Register ``family`` under ``family.name``; a taken name is refused."""
    name = getattr(family, "name", None)
    if not isinstance(name, str) or not name:
        raise FamilyRegistryError("a family must have a non-empty str attribute 'name'")
    if name in _FAMILIES:
        raise FamilyRegistryError(
            f"a world family named {name!r} is already registered; choose another name "
            f"(registered: {', '.join(sorted(_FAMILIES))})"
        )
    _FAMILIES[name] = family
    return family


def get_family(name: str) -> Family:
    """The family registered as ``name``; an unknown name raises with close matches."""
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        pass
    close = difflib.get_close_matches(str(name), sorted(_FAMILIES), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    raise FamilyRegistryError(
        f"unknown world family {name!r}; {hint}available: {', '.join(sorted(_FAMILIES))}"
    )


def family_names() -> tuple[str, ...]:
    """Registered family names, sorted."""
    return tuple(sorted(_FAMILIES))


def registered_families() -> tuple[Family, ...]:
    """Registered families, in the order they were registered."""
    return tuple(_FAMILIES.values())


def unregister_family(name: str) -> Family:
    """Remove the family registered as ``name`` and return it (a test's own family, once the test is done)."""
    family = get_family(name)
    del _FAMILIES[name]
    return family
