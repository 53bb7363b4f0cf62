"""Pair specs: the file that names a latent base world, two replica seeds and two source variants.

A spec (``worlds/data/pairs/*.toml``) holds ``pair_id``, ``base`` (a world file
next to the spec), ``f_seed`` and ``c_seed`` (replica seeds of the F and C
targets), ``f_source`` and ``c_source`` (overrides of the base for the source
instances the demonstrations solve) and optionally ``f_demo``, ``c_demo`` and
``motif`` (pinned choices, in the base's labels).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import PairConstructionError

__all__ = ["SOURCE_KEYS", "PairSpec", "load_pair_spec"]

#: Keys of the base world a source variant may override.
SOURCE_KEYS = ("initial", "goal", "budget", "constraints")


@dataclass(frozen=True)
class PairSpec:
    """A pair spec as read from its file.

    pair_id: the private base id of the pair.
    base: path of the latent base world file.
    f_seed, c_seed: replica seeds of the F and C targets.
    f_source, c_source: overrides of the base for the two source variants.
    f_demo, c_demo: optional pinned demonstrations (steps in the base's labels);
        when absent the demonstration is chosen by ``build_pair``.
    motif: optional pinned withheld motif, a production edge on the base's
        labels; when absent the builder picks one.
    source: file the spec came from.
    base_raw: the base world mapping itself, when it does not come from a
        file (the seeded generator); ``base`` then only names it.
    labels: the label scheme the replicas' fresh names are drawn by
        (``worlds.LABEL_SCHEMES``; every frozen pair uses ``letters``, the
        renaming diagnostic rebuilds a pair with another).
    """

    pair_id: str
    base: Path
    f_seed: int
    c_seed: int
    f_source: dict
    c_source: dict
    f_demo: tuple[str, ...] | None = None
    c_demo: tuple[str, ...] | None = None
    motif: tuple[str, str, str] | None = None
    source: str = "<spec>"
    base_raw: dict | None = None
    labels: str = "letters"


def load_pair_spec(path: str | Path) -> PairSpec:
    """Read a pair spec file (TOML); errors name the file and the field."""
    p = Path(path)
    src = str(p)
    try:
        raw = tomllib.loads(p.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise PairConstructionError(f"{src}: cannot read the pair spec ({exc})") from None
    except UnicodeDecodeError as exc:
        raise PairConstructionError(f"{src}: not UTF-8 text at byte {exc.start}; save the pair spec as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise PairConstructionError(f"{src}: not valid TOML ({exc})") from None

    def need(key: str, typ: type) -> Any:
        if key not in raw:
            raise PairConstructionError(f"{src}: field {key}: missing; add it")
        if not isinstance(raw[key], typ) or isinstance(raw[key], bool):
            raise PairConstructionError(f"{src}: field {key}: must be {typ.__name__}")
        return raw[key]

    allowed = {"pair_id", "base", "f_seed", "c_seed", "f_source", "c_source", "f_demo", "c_demo", "motif"}
    for k in sorted(set(raw) - allowed):
        raise PairConstructionError(f"{src}: field {k}: unknown; allowed fields are {sorted(allowed)}")
    for side in ("f_source", "c_source"):
        tbl = need(side, dict)
        for k in sorted(set(tbl) - set(SOURCE_KEYS)):
            raise PairConstructionError(
                f"{src}: field {side}.{k}: a source variant may override only {list(SOURCE_KEYS)}"
            )
        if not tbl:
            raise PairConstructionError(f"{src}: field {side}: must change the start or the goal of the base")
    demos = {}
    for side in ("f_demo", "c_demo"):
        if side in raw:
            d = raw[side]
            if not isinstance(d, list) or not d or not all(isinstance(s, str) for s in d):
                raise PairConstructionError(f"{src}: field {side}: must be a non-empty list of step strings")
            demos[side] = tuple(d)
    motif = None
    if "motif" in raw:
        mo = raw["motif"]
        if not (isinstance(mo, list) and len(mo) == 3 and all(isinstance(x, str) for x in mo)):
            raise PairConstructionError(
                f"{src}: field motif: must be [producer, role, consumer], e.g. [\"make_tool\", \"catalyst\", \"use_tool\"]"
            )
        motif = tuple(mo)
    base = p.parent / need("base", str)
    if not base.is_file():
        raise PairConstructionError(f"{src}: field base: {base} is not a file; name a world file next to the spec")
    return PairSpec(
        need("pair_id", str),
        base,
        need("f_seed", int),
        need("c_seed", int),
        raw["f_source"],
        raw["c_source"],
        demos.get("f_demo"),
        demos.get("c_demo"),
        motif,
        src,
    )
