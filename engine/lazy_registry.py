"""A mapping from names to things defined in modules that are imported on first lookup.

The connector and operator registries map every name a job can use to its class or spec,
but a job uses a few: importing all of them (Kafka's formats, the filesystem's readers,
fifteen operators) was a third of a small job's start-up (issue 17). A ``LazyRegistry``
holds where each entry is defined, ``"module:attribute"``, and imports that module the first
time the name is looked up. Names are known without importing anything: iteration,
``len`` and ``in`` never import; ``[]`` and ``get`` import the one module that defines the
name, once.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any


class LazyRegistry(MutableMapping):
    """Entries by name: where each is defined (``"module:attribute"``), or, once set or looked
    up, the entry itself."""

    def __init__(self, where: dict[str, str]):
        self._where = dict(where)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._loaded:
            return self._loaded[name]
        module, _, attribute = self._where[name].partition(":")  # KeyError: not a known name
        # __import__, not importlib.import_module: an import by the former shows in -X importtime.
        value = self._loaded[name] = getattr(__import__(module, fromlist=[attribute]), attribute)
        return value

    def __setitem__(self, name: str, value: Any) -> None:
        self._loaded[name] = value
        self._where.pop(name, None)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._where.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._where

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from (name for name in self._where if name not in self._loaded)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._where.keys())

    def load_all(self) -> None:
        """Look every entry up now, importing every module that defines one (a fork server, so
        that no process forked from it imports them again)."""
        for name in list(self._where):
            self[name]

    def is_loaded(self, name: str) -> bool:
        """Whether ``name``'s entry has been looked up (and its module imported)."""
        return name in self._loaded

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self)})"


class LazyModule:
    """A module imported when one of its names is first read. The planner names an operator's
    module so at its top (``stream_join = LazyModule("weir.engine.operators.stream_join")``) and
    reads ``stream_join.StreamJoinConfig`` where it plans that operator: planning a job loads
    the modules of the operators it has (and their dataclasses), not of every one there is.
    Through ``importlib.import_module``, under the import system's lock: the module itself, as
    any other import of it gets it."""

    def __init__(self, name: str):
        self._module_name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "_module_name":  # (not set yet: a copy being made)
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._module_name), attribute)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._module_name!r})"
