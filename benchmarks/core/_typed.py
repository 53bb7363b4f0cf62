"""Strict conversion of plain data (parsed TOML or JSON) into frozen dataclasses.

One validator serves preregistration files and ledger records: unknown keys
and missing required keys are errors, every value is checked against the
field's annotation, and the error names the dotted key that was wrong.

Supported annotations: ``bool``, ``int``, ``float`` (an int is accepted and
widened), ``str``, ``datetime.date``, ``datetime.datetime``, ``None``,
``Optional``/unions, ``Literal[...]``, ``list[T]``, ``tuple[T, ...]``,
``dict[str, T]`` and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import types
import typing
from typing import Any, Literal, Union

from .errors import PreregbenchError


class TypedDataError(PreregbenchError, ValueError):
    """A value did not match its declared type; ``key`` is the dotted path to it."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"{key or '<top level>'}: {problem}")


def _join(prefix: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def _shown(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (a 400-digit number or a long string stays one readable line)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10 ** 50 else f"{str(value)[:20]}... ({len(str(value))} digits)"
    return text if len(text) <= 60 else f"{text[:50]}... ({len(text)} characters)"


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if tp is None or tp is type(None):
        if value is not None:
            raise TypedDataError(key, f"expected null, got {value!r}")
        return None
    if origin in (Union, types.UnionType):
        errors = []
        for option in args:
            try:
                return _convert(option, value, key)
            except TypedDataError as exc:
                errors.append(exc.problem)
        names = " or ".join(_type_name(a) for a in args)
        raise TypedDataError(key, f"expected {names}, got {value!r}")
    if origin is Literal:
        if value not in args or type(value) is not type(args[args.index(value)]):
            raise TypedDataError(key, f"expected one of {', '.join(repr(a) for a in args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise TypedDataError(key, f"expected an array, got {type(value).__name__} {value!r}")
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise TypedDataError(key, f"expected an array of {len(args)} items, got {len(value)}")
            return tuple(_convert(a, v, _join(key, i)) for i, (a, v) in enumerate(zip(args, value)))
        item_type = args[0] if args else Any
        items = [_convert(item_type, v, _join(key, i)) for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise TypedDataError(key, f"expected a table, got {type(value).__name__} {value!r}")
        value_type = args[1] if args else Any
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypedDataError(key, f"table keys must be strings, got {k!r}")
            out[k] = _convert(value_type, v, _join(key, k))
        return out
    if tp is bool:
        if not isinstance(value, bool):
            raise TypedDataError(key, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypedDataError(key, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypedDataError(key, f"expected a number, got {_shown(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise TypedDataError(key, f"the number {_shown(value)} is beyond the range of a float (about 1.8e308); "
                                 "give a smaller one") from None
        if not math.isfinite(number):
            raise TypedDataError(key, f"expected a finite number, got {value!r}")
        return number
    if tp is str:
        if not isinstance(value, str):
            raise TypedDataError(key, f"expected a string, got {value!r}")
        return value
    if tp is _dt.datetime:
        if isinstance(value, str):
            try:
                return _dt.datetime.fromisoformat(value)
            except ValueError as exc:
                raise TypedDataError(key, f"expected an ISO 8601 date-time, got {value!r}") from exc
        if not isinstance(value, _dt.datetime):
            raise TypedDataError(key, f"expected a date-time, got {value!r}")
        return value
    if tp is _dt.date:
        if isinstance(value, str):
            try:
                return _dt.date.fromisoformat(value)
            except ValueError as exc:
                raise TypedDataError(key, f"expected an ISO 8601 date, got {value!r}") from exc
        if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date):
            raise TypedDataError(key, f"expected a date, got {value!r}")
        return value
    raise TypeError(f"unsupported annotation {tp!r} at {key!r}")


def from_dict(cls: type, data: Any, key: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``, rejecting unknown and missing keys."""
    if not isinstance(data, dict):
        raise TypedDataError(key, f"expected a table, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        allowed = ", ".join(sorted(fields)) or "none"
        raise TypedDataError(_join(key, unknown[0]), f"unknown key (allowed here: {allowed})")
    kwargs = {}
    for name, field in fields.items():
        if name not in data:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise TypedDataError(_join(key, name), "missing required key")
            continue
        kwargs[name] = _convert(hints[name], data[name], _join(key, name))
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise TypedDataError(key, str(exc)) from exc
