"""The grading material a CWR run leaves in its run directory, so that a rescorer can re-grade every unit.

``grading.json`` (schema version 1) indexes files written under ``grading/``:

* ``grading/worlds/<name>.json``: every world a unit was graded against (the
  P/R/E item worlds, the F and C targets) and every demonstration's source
  world, each the JSON text of the world mapping the suite built its
  ``worlds.World`` from (declaration order kept, ASCII-escaped);
* ``grading/reference.py``: a byte copy of ``worlds/_reference.py``, the
  standard-library reference interpreter written independently of the checker;
* ``grading/dataflow_reference.py``, when a run has dataflow targets: a byte
  copy of ``worlds/_dataflow_reference.py``, the program interpreter the first
  one hands dataflow worlds to (index key ``program_interpreter``; the
  rescorer loads the two as one package, so its relative import resolves to
  the run's own copy).

The index holds, per file, its sha256; per unit, the world file and the inputs
its expected answer follows from (P: the legal prefix, the probe and the kind;
R: the handbook artifacts; E: the candidate); per pair side, the
target world file and every demonstration (source world file and steps), which
the rescorer's copy baseline reads, for every pair of the run (a reduced pass
measures some of them; the copy gate reads all); and ``pair_subsets``, the
named pair subsets the secondary deficits are reported on (subset name ->
sorted pair ids; see ``pairs.pair_subsets``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import worlds
from benchmarks.core import atomic_write_text, sha256_bytes
from fixtures.cwr import resolve_world

from .pairs import target_ref

GRADING_FILE = "grading.json"
GRADING_DIR = "grading"
GRADING_SCHEMA_VERSION = 1
#: The reference interpreter copied into the run directory.
REFERENCE_SOURCE = Path(worlds.__file__).resolve().parent / "_reference.py"
REFERENCE_FILE = f"{GRADING_DIR}/reference.py"
#: The dataflow program interpreter copied beside it when a run has dataflow targets.
PROGRAM_REFERENCE_SOURCE = Path(worlds.__file__).resolve().parent / "_dataflow_reference.py"
PROGRAM_REFERENCE_FILE = f"{GRADING_DIR}/dataflow_reference.py"


def world_text(raw: Mapping[str, Any]) -> str:
    """The JSON text a world mapping is written as (declaration order kept, one line per key, ASCII only)."""
    text = json.dumps(raw, ensure_ascii=True, indent=1) + "\n"
    if json.loads(text) != raw:
        raise ValueError("a world mapping does not survive JSON; only TOML-like values (str, int, bool, list, "
                         "table) can be written as a grading world")
    return text


def _file_name(ref: str) -> str:
    return f"{GRADING_DIR}/worlds/" + ref.replace(":", "_").replace("/", "_") + ".json"


class _Files:
    """File name -> text, refusing two different texts under one name."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def add(self, ref: str, raw: Mapping[str, Any]) -> str:
        name, text = _file_name(ref), world_text(raw)
        if self.texts.setdefault(name, text) != text:
            raise ValueError(f"two different worlds would be written as {name} (world ref {ref!r}); "
                             "world refs must name one world each")
        return name


def _target_raw(side: Any) -> dict[str, Any]:
    return {k: v for k, v in side.target_raw.items() if k != "examples"}


def _unit_inputs(condition: str, item: Mapping[str, Any]) -> dict[str, Any]:
    if condition == "P":
        return {"kind": item["kind"], "prefix": list(item["prefix"]), "probe": item["probe"]}
    if condition == "R":
        return {"handbook": [{"id": e["id"], "steps": list(e["steps"])} for e in item["handbook"]]}
    return {"candidate": list(item["candidate"])}


def grading_material(units: Sequence[Any], items: Mapping[str, Sequence[Mapping[str, Any]]],
                     pairs: Sequence[Any], subsets: Mapping[str, Sequence[str]] | None = None,
                     control_pairs: Sequence[Any] | None = None) -> tuple[dict[str, str], dict[str, Any]]:
    """(file name -> text of every file under ``grading/``, the ``grading.json`` index) for ``units``."""
    files = _Files()
    by_id = {item["item_id"]: item for rows in items.values() for item in rows}
    pair_by_id = {pair.pair_id: pair for pair in pairs}
    index_units: dict[str, dict[str, Any]] = {}
    index_pairs: dict[str, dict[str, Any]] = {}
    for unit in units:
        if unit.pair_id is None:
            _, raw = resolve_world(unit.world_ref, pairs if control_pairs is None else control_pairs)
            entry = {"world": files.add(unit.world_ref, raw), **_unit_inputs(unit.condition, by_id[unit.item_id])}
        else:
            side = pair_by_id[unit.pair_id].side(unit.condition)
            entry = {"world": files.add(unit.world_ref, _target_raw(side))}
        index_units[unit.item_id] = entry
    for pair in pairs:  # every pair of the run, measured or not: the copy gate reads them all
        for condition in ("F", "C"):
            side = pair.side(condition)
            demos = [{"world": files.add(f"demo:{pair.pair_id}:{condition}:{i}", demo.source_raw),
                      "steps": list(demo.steps)} for i, demo in enumerate(side.demonstrations)]
            index_pairs.setdefault(pair.pair_id, {})[condition] = {
                "unit": f"{condition}:{pair.pair_id}",
                "target": files.add(target_ref(pair, condition), _target_raw(side)),
                "demonstrations": demos}
    texts = dict(files.texts)
    texts[REFERENCE_FILE] = REFERENCE_SOURCE.read_text(encoding="utf-8")
    # the program interpreter goes with the run when some pair's family replays through it
    programs = any(PROGRAM_REFERENCE_SOURCE in worlds.get_family(pair.family).reference_sources for pair in pairs)
    if programs:
        texts[PROGRAM_REFERENCE_FILE] = PROGRAM_REFERENCE_SOURCE.read_text(encoding="utf-8")
    index = {
        "schema_version": GRADING_SCHEMA_VERSION,
        "interpreter": REFERENCE_FILE,
        **({"program_interpreter": PROGRAM_REFERENCE_FILE} if programs else {}),
        "files": {name: sha256_bytes(text.encode("utf-8")) for name, text in sorted(texts.items())},
        "units": index_units,
        "pairs": index_pairs,
        "pair_subsets": {name: sorted(ids) for name, ids in sorted((subsets or {}).items())},
    }
    return texts, index


def write_grading(run_dir: Path, units: Sequence[Any], items: Mapping[str, Sequence[Mapping[str, Any]]],
                  pairs: Sequence[Any], subsets: Mapping[str, Sequence[str]] | None = None,
                  control_pairs: Sequence[Any] | None = None) -> dict[str, Any]:
    """Write every file under ``run_dir/grading/`` and return the index (the caller writes ``grading.json``)."""
    texts, index = grading_material(units, items, pairs, subsets, control_pairs)
    for name, text in texts.items():
        atomic_write_text(run_dir / name, text)
    return index
