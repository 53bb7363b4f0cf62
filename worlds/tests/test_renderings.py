"""The two handbook renderings (prose, tables) say the same world; the label schemes draw the same replicas under
other names."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections import Counter
from typing import Any

import pytest

import worlds

#: The words of a handbook: names (letters, digits, underscores) and numerals.
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


def _field_names(node: Any) -> set[str]:
    """The field names the world schema declares (``duration``, ``kind``, ...)."""
    if isinstance(node, dict):
        own = set(node["properties"]) if isinstance(node.get("properties"), dict) else set()
        return own.union(*map(_field_names, node.values())) if node else own
    if isinstance(node, list):
        return set().union(*map(_field_names, node)) if node else set()
    return set()


FIELDS = _field_names(json.loads(worlds.SCHEMA_PATH.read_text(encoding="utf-8")))


def _values(node: Any) -> set[str]:
    """Every name and number a world mapping holds (keys included: tables such as ``tokens`` are keyed by name)."""
    if isinstance(node, dict):
        return {str(k) for k in node} | set().union(*map(_values, node.values())) if node else set()
    if isinstance(node, list):
        return set().union(*map(_values, node)) if node else set()
    return {str(node)}


def _targets() -> list[Any]:
    sides = [p.side(c) for p in worlds.build_showcase_pairs() for c in ("F", "C")]
    for family, tier in (("dataflow", "T1"), ("dataflow", "T3"), ("token_workshop", "T2")):
        pair = worlds.generate_pairs(family, 5, 1, tier).pairs[0]
        sides += [pair.f, pair.c]
    return sides


TARGETS = _targets()


@pytest.mark.parametrize("side", TARGETS, ids=lambda s: f"{s.target.family}-{s.target.id}")
def test_the_tables_say_every_name_and_number_the_prose_says(side: Any) -> None:
    """Each number of the world occurs as often in one rendering as in the other (so no value is dropped or
    doubled), each of its names occurs in both (a table names a case's inputs once, in its header), and the two
    differ (the tables are tables)."""
    prose = worlds.render_world(side.target_raw)
    tables = worlds.render_world(side.target_raw, "tables")
    facts = _values({k: v for k, v in side.target_raw.items() if k not in ("title", "family", "schema_version")})
    facts -= FIELDS

    def count(text: str) -> Counter:
        return Counter(t for t in _TOKEN.findall(text) if t in facts)

    numbers = lambda c: {t: n for t, n in c.items() if t.isdigit()}  # noqa: E731
    assert numbers(count(prose)) == numbers(count(tables)) and set(count(prose)) == set(count(tables))
    assert tables != prose and "\n|---|" in tables and "\n|---|" not in prose
    for line in tables.splitlines():  # every table row has its header's number of cells
        if line.startswith("|"):
            assert line.count("|") == len(_header_above(tables, line)), line


def _header_above(text: str, row: str) -> list[str]:
    lines = text.splitlines()
    i = lines.index(row)
    while i > 0 and lines[i - 1].startswith("|"):
        i -= 1
    return [c for c in lines[i].split("|")][1:]


@pytest.mark.parametrize("side", TARGETS[:2] + TARGETS[-6:-4], ids=lambda s: s.target.family)
def test_a_prompt_in_tables_differs_only_in_its_handbook(side: Any) -> None:
    prose = side.prompt_text
    tables = worlds.render_prompt(side.target_raw, side.demonstrations, side.primitive_examples, "tables")
    assert prose == worlds.render_prompt(side.target_raw, side.demonstrations, side.primitive_examples)
    handbook = worlds.render_world(side.target_raw).rstrip("\n")
    assert handbook in prose
    assert tables == prose.replace(handbook, worlds.render_world(side.target_raw, "tables").rstrip("\n"))


def test_an_unknown_rendering_is_refused_in_one_line() -> None:
    side = TARGETS[0]
    with pytest.raises(worlds.WorldsError, match=r"^handbook rendering 'json' is unknown; the renderings are prose, "
                                                r"tables$"):
        worlds.render_world(side.target_raw, "json")
    with pytest.raises(worlds.WorldsError, match=r"^handbook rendering 'json' is unknown"):
        worlds.render_prompt(side.target_raw, side.demonstrations, side.primitive_examples, "json")


@pytest.mark.parametrize("family", ["token_workshop", "schedule", "dataflow"])
def test_a_label_scheme_changes_the_names_and_nothing_else(family: str) -> None:
    """The same seed under ``syllables`` gives the replica of ``letters`` with other names: same id, same
    declaration order, the two replicas isomorphic under their label maps."""
    pair = next(p for p in [*worlds.build_showcase_pairs(), worlds.generate_pairs("dataflow", 5, 1, "T1").pairs[0]]
                if p.family == family)
    base = dataclasses.replace(pair.spec, labels="letters")
    other = dataclasses.replace(pair.spec, labels="syllables")
    assert worlds.build_pair(base)[0].f.prompt_text == pair.f.prompt_text  # the default scheme is the frozen one
    rebuilt = worlds.build_pair(other)[0]
    for condition in ("F", "C"):
        old, new = pair.side(condition), rebuilt.side(condition)
        assert new.target.id == old.target.id and list(new.target_raw) == list(old.target_raw)
        worlds.get_family(family).isomorphism(old.replica, new.replica)
        names = set(new.replica.entities.values()) | set(new.replica.primitives.values())
        assert names and all(re.fullmatch(r"(?:[bdfgklmnprstvz][aeiou]){3}", n) for n in names), names
        assert names.isdisjoint(set(old.replica.entities.values()) | set(old.replica.primitives.values()))


def test_names_avoid_the_other_side_and_the_draws_stay_those_of_letters() -> None:
    """``avoid`` moves a name of the scheme that the other side holds; the generator the replica goes on to draw
    its id and order from is where the letters scheme leaves it."""
    from worlds._pairs import fresh_names

    letters_rng, plain_rng, dodged_rng = random.Random(7), random.Random(7), random.Random(7)
    letters = fresh_names(letters_rng, 5, set())
    plain = fresh_names(plain_rng, 5, set(), labels="syllables")
    dodged = fresh_names(dodged_rng, 5, set(), labels="syllables", avoid={plain[2]})
    assert len(set(letters)) == len(set(plain)) == len(set(dodged)) == 5 and not set(letters) & set(plain)
    assert dodged[:2] == plain[:2] and plain[2] not in dodged
    assert letters_rng.random() == plain_rng.random() == dodged_rng.random()
    taken = {"bababa"}
    assert "bababa" not in fresh_names(random.Random(7), 50, taken, labels="syllables") and len(taken) == 51
