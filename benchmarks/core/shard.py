"""Shards: one run's units split over several sessions that ``preregbench merge`` joins into the run.

``--shard K/N`` makes a session measure only the units of shard K of N.  The
split is a pure function of the protocol's name and the run's own batching:
the run's units are cut into the batches an unsharded run measures
(``Protocol.batches``), and each batch goes whole to the shard that a stable
hash of (protocol, the key of its first unit) names.  A unit is therefore
measured with the same batch, padding and order as in the unsharded run, and
at batch size 1 the hash is that of the unit itself.  Every process computes
the same split, whatever the host, the Python hash seed or the number of
shards already done.

A shard is a run directory of its own.  Its identity (every ledger line, the
provenance) carries ``"shard": "K/N"``, so a shard resumes only as the same
shard, and its rule tests decide nothing (they skip: ``shard K/N: decided
after merge``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from .errors import PreregbenchError

if TYPE_CHECKING:  # annotations only
    from .protocol import Protocol

#: The most shards one run may be split into.
MAX_SHARDS = 4096

_SPEC = re.compile(r"\A([0-9]{1,6})/([0-9]{1,6})\Z")


class ShardError(PreregbenchError, ValueError):
    """A shard specification or split that cannot be used; the message says what to give instead."""


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, flag: str = "--shard") -> Shard:
    """``"K/N"`` as a :class:`Shard`, or a one-line :class:`ShardError` saying what a valid one looks like."""
    match = _SPEC.match(str(text).strip()) if isinstance(text, str) else None
    if match is None:
        shown = text if isinstance(text, str) and len(text) <= 40 else f"{str(text)[:40]}..."
        raise ShardError(f"{flag} {shown!r} is not a shard; give K/N with 1 <= K <= N, for example {flag} 2/4")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise ShardError(f"{flag} {text}: the number of shards must be 1 to {MAX_SHARDS}, got {count}")
    if not 1 <= index <= count:
        raise ShardError(f"{flag} {text}: the shard index must be 1 to {count}, got {index}")
    return Shard(index, count)


def shard_of(protocol: str, key: str, count: int) -> int:
    """The shard (1-based, of ``count``) a batch whose first unit has ``key`` belongs to."""
    digest = hashlib.sha256(f"{protocol}\n{key}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def batches_of(protocol: "Protocol", run: Any, units: Sequence[Any]) -> list[list[Any]]:
    """The batches an unsharded run measures ``units`` in (the protocol's own batching)."""
    return [list(batch) for batch in protocol.batches(run, list(units))]


def split(protocol: "Protocol", run: Any, units: Sequence[Any], count: int) -> dict[int, list[Any]]:
    """Shard index -> its units, in the order an unsharded run measures them.

    Refused (:class:`ShardError`) when the protocol's batching of a shard's units would not give back the batches
    the unsharded run measures them in (batching that depends on more than the units' order): such a protocol
    cannot be sharded without changing what a unit is measured with.
    """
    out: dict[int, list[Any]] = {k: [] for k in range(1, count + 1)}
    chosen: dict[int, list[list[Any]]] = {k: [] for k in range(1, count + 1)}
    for batch in batches_of(protocol, run, units):
        if not batch:
            continue
        k = shard_of(protocol.name, protocol.unit_key(batch[0]), count)
        chosen[k].append(batch)
        out[k].extend(batch)
    for k, batches in chosen.items():
        if batches and batches_of(protocol, run, out[k]) != batches:
            raise ShardError(f"{protocol.label} cannot be sharded: its batching of shard {k}/{count}'s units differs "
                             "from the unsharded run's, so a unit would be measured with another batch; run it "
                             "without --shard")
    return out


def canonical_order(protocol: "Protocol", run: Any, units: Sequence[Any]) -> list[str]:
    """The unit keys in the order an unsharded run records them (its batches, one after another)."""
    return [protocol.unit_key(u) for batch in batches_of(protocol, run, units) for u in batch]


__all__ = ["MAX_SHARDS", "Shard", "ShardError", "batches_of", "canonical_order", "parse_shard", "shard_of", "split"]
