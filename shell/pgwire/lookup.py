"""Point lookups without DuckDB: ``SELECT cols FROM view WHERE key = $1`` answered from
an Arrow copy of the view with a hash index on ``key``, built once per committed
snapshot (Materialize's fast-path peeks, RisingWave's point get).

DuckDB spends ~0.7 ms of CPU parsing, planning and scanning for one point
query (0.13 ms for ``SELECT 1``), twice a query's whole budget at 3,000 queries/s
per core; a dictionary lookup and a few ``as_py`` calls take microseconds, on the
event loop (no thread hop).

1. ``shape(sql)`` (cached per statement text) matches exactly one form: a
   list of plain column names or ``*``, one table (optionally ``schema.`` /
   ``catalog.schema.``), ``WHERE column = $n`` or ``= literal``, nothing else.
   Any other statement is DuckDB's.
2. The first lookup of a statement on a snapshot (in a query thread) asks
   DuckDB for the answer's columns (names and types, as it would describe
   them) and, once per table and snapshot, reads the table into Arrow; once
   per key column it builds ``Index``: key -> rows, in table order. A plan is
   kept only when every answered column's type converts from Arrow to the
   same Python value as from DuckDB (``_SAME_VALUES``), the key is an integer
   or VARCHAR column and the table has at most ``MAX_ROWS`` rows; else the
   statement stays DuckDB's (``None`` is kept for it). A table of N rows is
   read only at its N / ``ROWS_PER_LOOKUP``-th lookup on a snapshot (DuckDB
   answers those before), so that rebuilding pays for itself.
3. ``answer`` (the event loop) looks at the file (one ``stat``, as
   ``ResultReader`` does): a snapshot published since makes every plan stale,
   and the next lookup builds again. A parameter DuckDB would cast (a string
   for an integer key, an integer out of the key's range, a bool) goes to
   DuckDB too, so answers never differ; a NULL key matches nothing, as ``=``.
"""
from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from weir.shell.database import _stamp
from weir.shell.pgwire.results import ResultReader

#: Above this many rows a table is not copied into memory for lookups: DuckDB answers.
MAX_ROWS = 2_000_000
#: A table is read into memory on a snapshot once DuckDB has answered one lookup per this many
#: of its rows there (reading and indexing 2,000 rows costs about one DuckDB point query): beside
#: a job that publishes every second, a big table asked now and then is not read every second.
ROWS_PER_LOOKUP = 2000
#: Plans kept per snapshot (one per statement shape), beyond which they are made again.
MAX_PLANS = 4096

#: DuckDB column types whose values ``pyarrow`` gives back as the same Python objects as
#: DuckDB's fetch does (tests/shell/test_serve_lookup.py compares the two on the wire).
_SAME_VALUES = {"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE", "VARCHAR", "DATE", "TIMESTAMP", "BLOB"}
_DECIMAL = re.compile(r"DECIMAL\(\d+,\d+\)$")
#: Key types, with the range of integer keys (a Python int out of range goes to DuckDB).
_INTEGER_RANGE = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64}
_UNSIGNED_RANGE = {"UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32, "UBIGINT": 64}

_NAME = r'(?:[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")'
_SHAPE = re.compile(
    rf"\s*select\s+(?P<columns>\*|{_NAME}(?:\s*,\s*{_NAME})*)\s+from\s+(?P<table>{_NAME}(?:\s*\.\s*{_NAME}){{0,2}})"
    rf"\s+where\s+(?P<key>{_NAME})\s*=\s*(?:\$(?P<param>[1-9][0-9]*)|(?P<number>-?[0-9]{{1,18}})|"
    r"'(?P<text>(?:[^']|'')*)')\s*;?\s*", re.I | re.S)
_PART = re.compile(_NAME)


@dataclass(frozen=True)
class Shape:
    """A point lookup's parts, names as written (unquoted ones lower-cased, as DuckDB folds them)."""
    columns: tuple[str, ...] | None  # None: *
    table: tuple[str, ...]  # [catalog, [schema,]] table
    key: str
    param: int | None  # the parameter's number ($1 is 1), or None for a literal
    literal: Any = None

    @property
    def template(self) -> "Shape":
        """The shape without its literal: what a plan is kept by (``WHERE k = 5`` and ``= 6`` share one)."""
        return Shape(self.columns, self.table, self.key, self.param, None if self.literal is None else
                     type(self.literal))


def _name(part: str) -> str:
    return part[1:-1].replace('""', '"') if part.startswith('"') else part.lower()


@functools.lru_cache(maxsize=4096)
def shape(sql: str) -> Shape | None:
    match = _SHAPE.fullmatch(sql)
    if match is None:
        return None
    columns = None if match["columns"] == "*" else tuple(_name(p) for p in _PART.findall(match["columns"]))
    table = tuple(_name(p) for p in _PART.findall(match["table"]))
    literal = int(match["number"]) if match["number"] is not None else \
        match["text"].replace("''", "'") if match["text"] is not None else None
    return Shape(columns, table, _name(match["key"]), int(match["param"]) if match["param"] else None, literal)


class Index:
    """The rows of each key of one column, in table order (NULL keys left out: ``=`` never matches them)."""

    def __init__(self, keys: pa.ChunkedArray):
        order = pc.array_sort_indices(keys, null_placement="at_end")  # stable: equal keys in table order
        present = len(keys) - keys.null_count
        self.order = order.slice(0, present)
        ordered = keys.take(self.order).to_pylist()
        self.last = dict(zip(ordered, range(present)))
        # Unique keys (the usual case) need one dictionary; repeated ones the first position too.
        self.first = None if len(self.last) == present else dict(zip(reversed(ordered), range(present - 1, -1, -1)))

    def rows(self, key: Any) -> list[int]:
        last = self.last.get(key)
        if last is None:
            return []
        first = last if self.first is None else self.first[key]
        return self.order.slice(first, last - first + 1).to_pylist()


@dataclass
class Plan:
    columns: list[tuple[str, str]]  # (name, DuckDB type) as DuckDB describes the answer
    values: list[pa.ChunkedArray]  # the table's columns the answer shows, in its order
    index: Index
    key_type: str

    def accepts(self, key: Any) -> bool:
        """Whether ``key`` compares with the key column as DuckDB would, without a cast."""
        if self.key_type == "VARCHAR":
            return type(key) is str
        if type(key) is not int:
            return False
        bits = _INTEGER_RANGE.get(self.key_type)
        if bits is not None:
            return -(1 << (bits - 1)) <= key < (1 << (bits - 1))
        return 0 <= key < (1 << _UNSIGNED_RANGE[self.key_type])

    def rows(self, key: Any) -> list[tuple]:
        if key is None:
            return []
        found = self.index.rows(key)
        if not found:
            return []
        if len(found) == 1:
            return [tuple(column[found[0]].as_py() for column in self.values)]
        return list(zip(*(column.take(found).to_pylist() for column in self.values)))


@dataclass
class _Snapshot:
    stamp: tuple | None
    plans: dict[Shape, Plan | None] = field(default_factory=dict)  # by ``Shape.template``
    tables: dict[str, tuple[pa.Table, dict[str, str]]] = field(default_factory=dict)
    indexes: dict[tuple[str, str], Index] = field(default_factory=dict)
    #: Shapes DuckDB answers until asked [so many times, of so many needed] (``ROWS_PER_LOOKUP``).
    waiting: dict[Shape, list[int]] = field(default_factory=dict)


#: ``answer``'s reply when the statement's plan is to be built first (``prepare``).
UNPREPARED = object()


class PointLookups:
    def __init__(self, reader: ResultReader):
        self.reader = reader
        self._snapshot = _Snapshot(None)
        self._lock = threading.Lock()
        #: How many statements were answered here (tests and the benchmark read it).
        self.answered = 0

    def answer(self, sql: str, found: Shape, params: list[Any]) -> tuple[list, list[tuple]] | None | object:
        """(columns, rows) of a point lookup answered here; None: DuckDB answers it;
        ``UNPREPARED``: call ``prepare`` first (in a query thread)."""
        snapshot = self._snapshot
        if snapshot.stamp is None or snapshot.stamp != _stamp(self.reader.latest.path):
            return UNPREPARED
        plan = snapshot.plans.get(found.template, UNPREPARED)
        if plan is UNPREPARED:
            waiting = snapshot.waiting.get(found.template)
            if waiting is None or waiting[0] + 1 >= waiting[1]:
                return UNPREPARED
            waiting[0] += 1
            return None  # DuckDB, until the table has been asked enough to be worth reading
        if plan is None:
            return None
        if found.param is None:
            key = found.literal
        elif found.param <= len(params):
            key = params[found.param - 1]
        else:
            return None  # DuckDB says what is missing
        if key is not None and not plan.accepts(key):
            return None
        self.answered += 1
        return plan.columns, plan.rows(key)

    def prepare(self, sql: str, found: Shape, params: list[Any]) -> None:
        """Build the statement's plan on the latest snapshot (a query thread)."""
        with self._lock, self.reader.stamped() as (stamp, cursor):
            snapshot = self._snapshot
            if snapshot.stamp != stamp:
                snapshot = self._snapshot = _Snapshot(stamp)
            if found.template not in snapshot.plans:
                if found.template not in snapshot.waiting:
                    needed = self._lookups_to_read(snapshot, cursor, found.table)
                    if needed > 1:
                        snapshot.waiting[found.template] = [0, needed]
                        return
                if len(snapshot.plans) >= MAX_PLANS:
                    snapshot.plans.clear()
                    snapshot.waiting.clear()
                try:
                    plan = self._plan(snapshot, cursor, sql, found, params)
                except (duckdb.Error, pa.ArrowException):
                    plan = None  # DuckDB answers (and says what is wrong), or Arrow cannot hold it
                snapshot.plans[found.template] = plan

    def _plan(self, snapshot: _Snapshot, cursor: duckdb.DuckDBPyConnection, sql: str, found: Shape,
              params: list[Any]) -> Plan | None:
        table = self._table(snapshot, cursor, found.table)
        if table is None:
            return None
        data, names = table
        key = names.get(found.key.lower())
        wanted = [f.name for f in data.schema] if found.columns is None else \
            [names.get(c.lower()) for c in found.columns]
        if key is None or None in wanted:
            return None
        probe = [None] * max(found.param or 0, len(params))
        cursor.execute(sql, probe or None)  # as asked (a subquery would rename repeated columns)
        columns = [(d[0], str(d[1])) for d in cursor.description]
        cursor.fetchall()
        key_type = _duck_type(cursor, found.table, key)
        if key_type not in _INTEGER_RANGE and key_type not in _UNSIGNED_RANGE and key_type != "VARCHAR":
            return None
        if len(columns) != len(wanted) or not all(t in _SAME_VALUES or _DECIMAL.match(t) for _, t in columns):
            return None
        index = snapshot.indexes.get((found.table[-1].lower(), key))
        if index is None:
            index = snapshot.indexes[(found.table[-1].lower(), key)] = Index(data.column(key))
        return Plan(columns, [data.column(c) for c in wanted], index, key_type)

    @staticmethod
    def _lookups_to_read(snapshot: _Snapshot, cursor: duckdb.DuckDBPyConnection, path: tuple[str, ...]) -> int:
        """How many lookups of a table DuckDB answers on a snapshot before the table is read:
        one per ``ROWS_PER_LOOKUP`` rows (0 once read, or for what is no result table)."""
        key = _table_name(cursor, path)
        if key is None or key in snapshot.tables:
            return 0
        return cursor.execute(f"SELECT count(*) FROM {_quote(key)}").fetchall()[0][0] // ROWS_PER_LOOKUP

    @staticmethod
    def _table(snapshot: _Snapshot, cursor: duckdb.DuckDBPyConnection,
               path: tuple[str, ...]) -> tuple[pa.Table, dict[str, str]] | None:
        """The table of the snapshot's default catalog named by ``path``, read into Arrow once,
        and its columns by lower-cased name; None for anything else (a view, a catalog table)."""
        key = _table_name(cursor, path)
        if key is None:
            return None
        if key not in snapshot.tables:
            count = cursor.execute(f"SELECT count(*) FROM {_quote(key)}").fetchall()[0][0]
            if count > MAX_ROWS:
                return None
            data = cursor.sql(f"SELECT * FROM {_quote(key)}").to_arrow_table().combine_chunks()
            snapshot.tables[key] = (data, {f.name.lower(): f.name for f in data.schema})
        return snapshot.tables[key]


def _table_name(cursor: duckdb.DuckDBPyConnection, path: tuple[str, ...]) -> str | None:
    """The name of the result table ``path`` names, as the database spells it; None for anything else."""
    if len(path) > 1 and path[-2].lower() != "main":
        return None  # another schema, or a catalog's name (``weir.t``): DuckDB resolves those
    rows = cursor.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND lower(table_name) = lower(?) AND NOT temporary "
        "AND (? IS NULL OR lower(database_name) = lower(?))",
        [path[-1], path[0] if len(path) == 3 else None, path[0] if len(path) == 3 else None]).fetchall()
    return rows[0][0] if len(rows) == 1 else None


def _duck_type(cursor: duckdb.DuckDBPyConnection, table: tuple[str, ...], column: str) -> str:
    cursor.execute(f"SELECT {_quote(column)} FROM {_quote_path(table)} LIMIT 0")
    found = str(cursor.description[0][1])
    cursor.fetchall()
    return found


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_path(path: tuple[str, ...]) -> str:
    return ".".join(_quote(p) for p in path)
