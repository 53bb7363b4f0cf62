"""Planned power: the probability of each preregistered outcome at the planned size, under stated true effects.

``python -m benchmarks.core.design PROTOCOL [OPTIONS]`` prints a protocol's
tables of outcome probabilities under named true-effect scenarios at the
sample size its preregistration plans.  The tables are the protocol's own:
the command finds the protocol in :mod:`benchmarks.core.registry`, adds its
options with :meth:`~benchmarks.core.protocol.Protocol.design_arguments` and
prints what :meth:`~benchmarks.core.protocol.Protocol.design_tables` returns
(each protocol's ``design.py`` says what its tables assume).  This module
holds what those tables are built from: exact binomial and multinomial sums,
the distribution of a compiled classification's outcome over independent
metrics, every 2x2 paired table of n pairs, and :class:`Table`.

The command line:

* ``--simulations N`` and ``--seed S`` are every protocol's: the size and
  seed of a seeded simulation, where a protocol's tables are simulated (each
  protocol has its own defaults; tables by exact sums ignore them);
* a protocol's own options are accepted for that protocol only; given for
  another one, they are a usage error naming the protocols that take them;
* ``design_tables`` returns ``(tables, problems)``: the heading is printed,
  then each table (or :class:`Note`) as the iterable yields it, then the
  problems, one line each, with exit status 1.  A lazy iterable may add to
  ``problems`` while it is iterated; they are read after its last table.  A
  :class:`ValueError` (a :class:`~benchmarks.core.protocol.UsageProblem`
  among them) raised by ``design_tables`` or while its tables are computed is
  a usage error: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import registry
from .reachability import outcome_labels
from .rules import Classification

__all__ = ["Note", "Table", "binomial_pmf", "format_probability", "load_interval", "main", "multinomial_pmf",
           "outcome_distribution", "protocol_tables", "tables_of"]

PROG = "python -m benchmarks.core.design"


def binomial_pmf(n: int, p: float) -> list[float]:
    """P[X = k] for k = 0..n, X ~ Binomial(n, p), by lgamma (exact to float rounding)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if p in (0.0, 1.0):
        return [1.0 if k == (0 if p == 0.0 else n) else 0.0 for k in range(n + 1)]
    out = []
    for k in range(n + 1):
        log = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
               + k * math.log(p) + (n - k) * math.log1p(-p))
        out.append(math.exp(log))
    return out


def outcome_distribution(classification: Classification, marginals: Mapping[str, Sequence[tuple[float, float]]],
                         fixed: Mapping[str, float] | None = None) -> dict[str, float]:
    """Exact probability of each label when the metrics in ``marginals`` are independent discrete variables.

    ``marginals`` maps a metric to its (value, probability) pairs; ``fixed``
    holds the other metrics the rules read.  Values that every condition on
    their metric treats alike are pooled first, so the product is over the
    distinguishable cases only.
    """
    fixed = dict(fixed or {})
    conditions = [c for rule in classification.rules for c in rule.all + rule.any]
    pooled: dict[str, list[tuple[float, float]]] = {}
    for metric, values in marginals.items():
        on_metric = [c for c in conditions if c.metric == metric]
        groups: dict[tuple[bool, ...], list[float]] = {}
        for value, probability in values:
            signature = tuple(c.holds({metric: value}) for c in on_metric)
            entry = groups.setdefault(signature, [value, 0.0])
            entry[1] += probability
        pooled[metric] = [(v, p) for v, p in groups.values()]
    out = {label: 0.0 for label in outcome_labels(classification)}
    names = list(pooled)
    for combo in itertools.product(*(pooled[m] for m in names)):
        probability = math.prod(p for _, p in combo)
        if probability == 0.0:
            continue
        values = {**fixed, **{m: v for m, (v, _) in zip(names, combo)}}
        out[classification.evaluate(values).label] += probability
    return out


def tables_of(n: int) -> Iterator[tuple[int, int, int, int]]:
    """Every 2x2 paired table (both, f_only, c_only, neither) with n pairs."""
    for both in range(n + 1):
        for f_only in range(n + 1 - both):
            for c_only in range(n + 1 - both - f_only):
                yield both, f_only, c_only, n - both - f_only - c_only


def multinomial_pmf(cells: Sequence[int], probabilities: Sequence[float]) -> float:
    """P[the counts are ``cells``] for sum(cells) independent draws with the cell ``probabilities``."""
    log = math.lgamma(sum(cells) + 1)
    for k, p in zip(cells, probabilities):
        if p == 0.0:
            if k:
                return 0.0
            continue
        log += k * math.log(p) - math.lgamma(k + 1)
    return math.exp(log)


def load_interval(spec: str) -> Callable[..., Any]:
    """``module:function`` -> the function; it takes (both, f_only, c_only, neither, confidence) and returns an
    object with ``low`` and ``high``."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"--interval {spec!r} is not of the form module:function "
                         "(e.g. benchmarks.core.stats:paired_difference_interval)")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--interval {spec!r} cannot be loaded ({exc}); give an importable module:function") from None


def format_probability(value: float) -> str:
    """A probability as the tables print it: four decimals."""
    return f"{value:.4f}"


@dataclass(frozen=True)
class Table:
    """One printed table: a title, the model behind it, a header row and the rows."""

    title: str
    model: str  # what the probabilities assume, in one or two sentences
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", self.model, "",
                 "| " + " | ".join(self.header) + " |", "|" + "|".join(" --- " for _ in self.header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass(frozen=True)
class Note:
    """A paragraph printed among the tables (e.g. that a frozen design holds)."""

    text: str

    def markdown(self) -> str:
        return self.text


# --------------------------------------------------------------------------- command line


def _base_parser(names: Sequence[str]) -> argparse.ArgumentParser:
    """A parser of the command; ``names`` are the protocols its positional argument accepts."""
    parser = argparse.ArgumentParser(prog=PROG,
                                     description="Planned power: outcome probabilities at the preregistered size.")
    parser.add_argument("protocol", choices=names)
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    """The options every protocol takes."""
    parser.add_argument("--simulations", type=int, default=None,
                        help="simulated data sets per row (or per cell) of a protocol whose tables are simulated "
                             "(default: the protocol's)")
    parser.add_argument("--seed", type=int, default=None, help="their seed (default: the protocol's)")


def _named_protocol(argv: Sequence[str]) -> str | None:
    """The protocol the command line names when it is read with the common options only, else None."""
    peek = _Quiet(add_help=False)
    peek.add_argument("protocol", nargs="?")
    peek.add_argument("--simulations")
    peek.add_argument("--seed")
    try:
        found, _ = peek.parse_known_args(list(argv))
    except ValueError:
        return None
    return found.protocol


class _Quiet(argparse.ArgumentParser):
    """A parser whose errors are exceptions, for a first look at the command line."""

    def error(self, message: str) -> Any:
        raise ValueError(message)


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


_COMMON_FLAGS = ("-h", "--help", "--simulations", "--seed")
#: argparse actions that take no value (so no metavar).
_VALUELESS = ("store_true", "store_false", "store_const", "append_const", "count", "help", "version",
              argparse.BooleanOptionalAction)


class _Kept:
    """What a protocol's ``design_arguments`` is handed for its own parser: every call goes to the parser, and
    the option strings added are kept."""

    def __init__(self, parser: Any, flags: set[str]):
        self._parser, self._flags = parser, flags

    def add_argument(self, *flags: str, **kwargs: Any) -> Any:
        self._flags.update(flags)
        return self._parser.add_argument(*flags, **kwargs)

    def add_argument_group(self, *args: Any, **kwargs: Any) -> "_Kept":
        return _Kept(self._parser.add_argument_group(*args, **kwargs), self._flags)

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> "_Kept":
        return _Kept(self._parser.add_mutually_exclusive_group(*args, **kwargs), self._flags)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


class _Owned:
    """What a protocol's ``design_arguments`` is handed when every protocol's options share one parser.

    Each option goes in without a default (so the parse tells which options were given), under a name of
    its own, with its owner and its argument group recorded; an option another protocol already declared
    gains an owner instead of a second entry.
    """

    def __init__(self, root: argparse.ArgumentParser, owner: str, book: dict[str, Any], *, parser: Any = None,
                 group: tuple[str, str] | None = None):
        self._root, self._owner, self._book, self._group = root, owner, book, group
        self._parser = parser if parser is not None else root.add_argument_group(f"{owner} options")

    def add_argument(self, *flags: str, **kwargs: Any) -> None:
        book = self._book
        if any(f in book["flags"] for f in flags):
            for dest in {book["flags"][f] for f in flags if book["flags"].get(f) is not None}:
                book["owners"][dest].add(self._owner)
            return
        dest = f"given_{len(book['owners'])}"
        default = kwargs.pop("default", None)
        kwargs.pop("required", None)
        if "help" in kwargs and kwargs["help"]:
            kwargs["help"] = kwargs["help"].replace("%(default)s", str(default))
        shown = next((f for f in flags if f.startswith("--")), flags[0])
        if kwargs.get("action") not in _VALUELESS:
            kwargs.setdefault("metavar", (kwargs.get("dest") or shown.lstrip("-")).replace("-", "_").upper())
        self._parser.add_argument(*flags, dest=dest, default=argparse.SUPPRESS,
                                  **{k: v for k, v in kwargs.items() if k != "dest"})
        book["owners"][dest] = {self._owner}
        book["shown"][dest] = shown
        book["group"][dest] = self._group
        for flag in flags:
            book["flags"][flag] = dest

    def add_argument_group(self, title: str | None = None, description: str | None = None) -> "_Owned":
        group = self._root.add_argument_group(f"{self._owner}: {title}" if title else f"{self._owner} options",
                                              description)
        return _Owned(self._root, self._owner, self._book, parser=group, group=(self._owner, title or ""))

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> "_Owned":
        group = self._root.add_mutually_exclusive_group(*args, **kwargs)
        return _Owned(self._root, self._owner, self._book, parser=group, group=self._group)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._root, name)


def _foreign_option(chosen: str, given: Mapping[str, Any], book: Mapping[str, Any]) -> str | None:
    """The usage problem of the first option given that ``chosen`` does not take, or None."""
    for dest in book["owners"]:
        if dest not in given or chosen in book["owners"][dest]:
            continue
        owners = _join(sorted(book["owners"][dest]))
        group = book["group"][dest]
        members = [book["shown"][d] for d in book["owners"] if group is not None and book["group"][d] == group]
        if len(members) > 1:
            return f"{_join(members)} apply to {owners} only"
        return f"{book['shown'][dest]} applies to {owners} only"
    return None


def _check_common(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.simulations is not None and args.simulations <= 0:
        parser.error(f"--simulations must be a positive count, got {args.simulations}")


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _spelled_out(argv: Sequence[str], flags: set[str]) -> bool:
    """Whether every option on the command line is one of ``flags`` written in full (no abbreviation)."""
    for token in argv:
        if token == "--":
            return True
        if token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token):
            if token.split("=", 1)[0] not in flags:
                return False
    return True


def _parse(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, Any, argparse.Namespace]:
    """The parser of the protocol named, that protocol and the parsed arguments; a usage error exits with 2.

    A command line of the named protocol's options, each written in full, is read with that protocol's
    parser alone.  Any other is read first with every registered protocol's options, which tells an option
    of another protocol from an unknown one and resolves an abbreviation against every option there is.
    """
    argv = list(argv)
    names = registry.names()

    def chosen_parser(name: str) -> tuple[argparse.ArgumentParser, Any, set[str]]:
        parser = _base_parser(names)
        _add_common(parser)
        try:
            protocol = registry.get(name)
        except registry.RegistryError as exc:
            parser.error(str(exc))
        flags = set(_COMMON_FLAGS)
        protocol.design_arguments(_Kept(parser, flags))
        return parser, protocol, flags

    name = _named_protocol(argv)
    if name in names:
        parser, protocol, flags = chosen_parser(name)
        if _spelled_out(argv, flags):
            args = parser.parse_args(argv)
            _check_common(parser, args)
            return parser, protocol, args
    every = _base_parser(names)
    book: dict[str, Any] = {"owners": {}, "shown": {}, "group": {}, "flags": dict.fromkeys(_COMMON_FLAGS)}
    for other in names:
        found = registry.find(other)
        if found is not None:
            found.design_arguments(_Owned(every, other, book))
    _add_common(every)
    given = every.parse_args(argv)
    _check_common(every, given)
    problem = _foreign_option(given.protocol, vars(given), book)
    if problem:
        every.error(problem)
    parser, protocol, _ = chosen_parser(given.protocol)
    args = parser.parse_args(argv)
    _check_common(parser, args)
    return parser, protocol, args


def protocol_tables(protocol: str, argv: Sequence[str] = ()) -> list[Any]:
    """The tables (and notes) ``python -m benchmarks.core.design PROTOCOL ARGV...`` prints."""
    _, chosen, args = _parse([protocol, *argv])
    tables, _ = chosen.design_tables(args)
    return list(tables)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, protocol, args = _parse(argv)
    try:
        tables, problems = protocol.design_tables(args)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"Planned power, {args.protocol}: `{PROG} {' '.join(argv)}`", flush=True)
    try:
        for table in tables:
            print()
            print(table.markdown())
    except ValueError as exc:
        parser.error(str(exc))
    problems = list(problems)
    if problems:
        print()
        for problem in problems:
            print(problem)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
