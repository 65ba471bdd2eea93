"""Typed operator configurations: one frozen dataclass per operator kind, next to its class.

The planner builds an operator's config as its dataclass (``WindowAggregateConfig(keys=...,
window=...)``), so a missing or misspelt field is a ``TypeError`` at plan time; the operator,
its EXPLAIN lines and the exchange read attributes (``config.keys``). A JobGraph stays JSON:
``to_json`` writes the fields in declaration order as a dict (tuples as lists, nested configs
as dicts), and ``from_json`` reads that dict back into the dataclass, by the field types.

A field declared with ``optional()`` is left out of the JSON while it has its default, as the
dict configs before these dataclasses left it out: the JSON of a graph, and so its fingerprint
and the ``state_shape`` its checkpoints record, are what they were.

Arroyo's typed operator configs (``crates/arroyo-planner/src/extension/``) are the model.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Mapping, TypeVar

C = TypeVar("C", bound="OperatorConfig")

_OMIT = "weir.omit_default"


def optional(default: Any = None) -> Any:
    """A field left out of ``to_json`` while it has its (immutable) ``default``."""
    return dataclasses.field(default=default, metadata={_OMIT: True})


@dataclasses.dataclass(frozen=True)
class OperatorConfig:
    """Base of every operator's config dataclass (and of the nested parts of one).

    On construction each field is brought to its declared type (``from_json``): lists become
    tuples and dicts of a nested config its dataclass, so that a config equals its JSON round
    trip. A subclass with its own ``__post_init__`` calls this one first."""

    def __post_init__(self) -> None:
        for name, kind in _hints(type(self)).items():
            object.__setattr__(self, name, from_json(kind, getattr(self, name)))

    def to_json(self) -> dict[str, Any]:
        """The config as JSON-able data: a dict in field order, defaults of ``optional`` fields left out."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata.get(_OMIT) and value == f.default:
                continue
            out[f.name] = to_json(value)
        return out

    @classmethod
    def from_json(cls: type[C], data: Mapping[str, Any]) -> C:
        """The config ``to_json`` wrote (or a dict of the same shape): a ``TypeError`` names an
        unknown or missing field."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__} is read from a dict, not {type(data).__name__}")
        hints = _hints(cls)
        unknown = sorted(set(data) - set(hints))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}; "
                            f"its fields: {', '.join(hints)}")
        return cls(**{name: from_json(hints[name], value) for name, value in data.items()})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    names = [f.name for f in dataclasses.fields(cls)]
    hints = typing.get_type_hints(cls)
    return {name: hints[name] for name in names}


def to_json(value: Any) -> Any:
    """``value`` as JSON-able data: configs as dicts, tuples as lists."""
    if isinstance(value, OperatorConfig):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


def from_json(kind: Any, value: Any) -> Any:
    """JSON data ``value`` as type ``kind`` (a config class, ``tuple[X, ...]``, ``tuple[X, Y]``,
    ``dict[str, X]``, ``X | None``; anything else is taken as it is)."""
    if value is None:
        return None
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return from_json(options[0], value) if len(options) == 1 else value
    if isinstance(kind, type) and issubclass(kind, OperatorConfig):
        return kind.from_json(value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in value)
        if args and len(args) != len(value):
            raise TypeError(f"expected {len(args)} values, got {value!r}")
        return tuple(from_json(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin is dict:
        return {k: from_json(args[1], v) for k, v in value.items()} if args else dict(value)
    return value
