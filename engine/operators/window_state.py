"""Keyed window state in DuckDB: partial aggregates per (key, slice), appended batch by batch;
a firing window merges the partials of its slices.

Tables (all carry ``key_group``, the key columns ``__k0..``, ``__slice_start`` and
``__from_end``, the first window end the rows count in — NULL for all the slice's
windows, else the rows met a watermark that had fired the earlier ones):

- ``window_accumulators``: one row per (key, slice) *per batch* with the
  batch's partial aggregates (``__rows`` counts every row, so a window exists
  even when all its FILTERs reject). Appending partials and grouping them when
  the window fires is several times faster than an upsert per batch.
- ``distinct_values_<i>``: the distinct values of a DISTINCT aggregate's
  argument per (key, slice).

Appended rows pile up between firings; when a table has grown past twice its
size after the last compaction (and past ``COMPACT_MIN_ROWS``) it is compacted
by merging its partials, so memory stays proportional to the open windows.
``key_group`` is each key's stable key group (``engine.state.key_groups``),
computed per batch by the operator and handed in as the ``key_group`` column
of the prepared rows, so that snapshots can be split by key group and restored
at another parallelism.
"""
from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from weir.engine.errors import EngineError
from weir.engine.operators.accumulators import Accumulator, DistinctAccumulator
from weir.engine.operators.duckdb_sql import create_table_from_arrow, execute, int_literal, quote_ident, snapshot_table
from weir.engine.operators.windows import WINDOW_TIME_LAG_US, SliceWindows
from weir.engine.state.staged import StagedTable, as_table

ACCUMULATORS = "window_accumulators"
SLICE = "__slice_start"
#: The bounds (µs) of a firing window in ``fired_sql``.
WINDOW_START = "__window_start"
WINDOW_END = "__window_end"
COMPACT_MIN_ROWS = 262_144
#: The first window end a partial counts in; NULL: every window of its slice. Rows that met a
#: watermark which had fired some of their slice's windows (HOP, CUMULATE) count only in the rest.
FROM_END = "__from_end"


@dataclass
class _TableSize:
    rows: int = 0
    rows_after_compaction: int = 0


class WindowState:
    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        operator_id: str,
        key_count: int,
        accumulators: list[Accumulator],
        distincts: list[DistinctAccumulator],
        max_parallelism: int,
    ):
        self.con = con
        self.operator_id = operator_id
        self.keys = [f"__k{i}" for i in range(key_count)]
        self.accumulators = accumulators
        self.distincts = distincts
        self.max_parallelism = max_parallelism
        self.sizes: dict[str, _TableSize] = {}
        self._reader: duckdb.DuckDBPyConnection | None = None

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A second connection to the state database, for streaming a result out while ``con``
        stays free (an unread result blocks its connection)."""
        if self._reader is None:
            self._reader = self.con.cursor()
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.con.close()

    # -- helpers -----------------------------------------------------------
    def _run(self, sql: str) -> list[tuple]:
        return execute(self.con, sql, self.operator_id)

    run = _run

    def rows(self) -> int:
        """Rows in the accumulator table now (partials not yet compacted included)."""
        size = self.sizes.get(ACCUMULATORS)
        return size.rows if size else 0

    def _group_columns(self) -> str:
        return ", ".join([*self.keys, SLICE, FROM_END])

    def _tables(self) -> list[str]:
        return [ACCUMULATORS, *(d.table for d in self.distincts)]

    def _append(self, table: str, select_sql: str) -> None:
        if table in self.sizes:
            (inserted,) = self._run(f"INSERT INTO {table} {select_sql}")[0]
        else:
            self._run(f"CREATE TABLE {table} AS {select_sql}")
            (inserted,) = self._run(f"SELECT count(*) FROM {table}")[0]
            self.sizes[table] = _TableSize()
        size = self.sizes[table]
        size.rows += inserted
        if size.rows - size.rows_after_compaction > max(size.rows_after_compaction, COMPACT_MIN_ROWS):
            self._compact(table)

    # -- merging a batch ---------------------------------------------------
    def partials_sql(self, prepared_sql: str, *, key_group: bool = True, from_end: bool = True) -> str:
        """One batch's partial aggregates per (key, slice), in the columns of
        ``window_accumulators`` (without ``key_group`` unless ``key_group``). Without
        ``from_end`` every row's ``FROM_END`` is NULL: the rows are not grouped by it."""
        partials = ["COUNT(*) AS __rows"]
        for acc in self.accumulators:
            partials += [f"{c.partial_sql} AS {c.name}" for c in acc.columns]
        # The key group is a function of the keys: any_value is exact, and cheaper than grouping.
        group_key = "any_value(key_group) AS key_group, " if key_group else ""
        group = self._group_columns() if from_end else ", ".join([*self.keys, SLICE])
        columns = self._group_columns() if from_end else f"{group}, NULL::BIGINT AS {FROM_END}"
        return (f"SELECT {group_key}{columns}, {', '.join(partials)} "
                f"FROM ({prepared_sql}) GROUP BY {group}")

    def append(self, prepared_sql: str, *, from_end: bool = True) -> None:
        """Add one batch's rows; ``prepared_sql`` selects ``key_group`` (BIGINT), the keys,
        slice, ``FROM_END`` (all NULL unless ``from_end``), arguments and filters."""
        group = f"key_group, {self._group_columns()}"
        self._append(ACCUMULATORS, self.partials_sql(prepared_sql, from_end=from_end))
        for d in self.distincts:
            where = f"{d.argument_column} IS NOT NULL"
            if d.filter_column:
                where += f" AND {d.filter_column}"
            self._append(
                d.table,
                f"SELECT DISTINCT {group}, {d.argument_column} AS value "
                f"FROM ({prepared_sql}) WHERE {where}",
            )

    def append_partials(self, partials_sql: str) -> None:
        """Add partial aggregates another subtask computed (``partials_sql`` selects the
        columns of ``window_accumulators``, ``key_group`` first): the global phase of a
        two-phase aggregate."""
        self._append(ACCUMULATORS, partials_sql)

    def _merge_select(self, table: str) -> str:
        """Partials of ``table`` merged into one row per (key, slice), same columns."""
        group = f"key_group, {self._group_columns()}"
        if table == ACCUMULATORS:
            merged = ["CAST(SUM(__rows) AS BIGINT)"]
            for acc in self.accumulators:
                merged += [c.merge_sql(c.name) for c in acc.columns]
            return f"SELECT {group}, {', '.join(merged)} FROM {table} GROUP BY {group}"
        return f"SELECT DISTINCT {group}, value FROM {table}"

    def _compact(self, table: str) -> None:
        tmp = f"{table}__compacted"
        self._run(f"CREATE TABLE {tmp} AS SELECT * FROM {table} LIMIT 0")
        (rows,) = self._run(f"INSERT INTO {tmp} {self._merge_select(table)}")[0]
        self._run(f"DROP TABLE {table}")
        self._run(f"ALTER TABLE {tmp} RENAME TO {table}")
        self.sizes[table] = _TableSize(rows, rows)

    # -- firing ------------------------------------------------------------
    def earliest_slice(self) -> int | None:
        if ACCUMULATORS not in self.sizes:
            return None
        return self._run(f"SELECT min({SLICE}) FROM {ACCUMULATORS}")[0][0]

    def fired_sql(self, windows: SliceWindows, upto: int, watermark: int, fired_before: int,
                  held_partials_sql: str | None = None) -> str:
        """One row per (key, window) for the windows that fire: those made of slices starting
        at or before ``upto`` with ``fired_before < window_end - 1 ms <= watermark``. Columns:
        ``__k*``, ``__window_start``, ``__window_end`` (µs) and every aggregate's final value
        under its name. A window's slices are merged here, per key. ``held_partials_sql``
        (``partials_sql`` of rows not appended) counts as if appended: no distinct aggregates."""
        group = [*self.keys, WINDOW_START, WINDOW_END]
        finals = []
        for acc in self.accumulators:
            value = acc.final_sql([c.merge_sql(c.name) for c in acc.columns])
            finals.append(f"{value} AS {quote_ident(acc.call.name)}")
        accumulators = self._with_held(held_partials_sql)
        ctes = [
            f"fired_accumulators AS ({self._windows_select(accumulators, windows, upto, watermark, fired_before, finals)})"
        ]
        columns = [f"a.{c}" for c in group]
        columns += [f"a.{quote_ident(acc.call.name)}" for acc in self.accumulators]
        joins = []
        for i, d in enumerate(self.distincts):
            values = [f"{d.final_sql(call)} AS __v{j}" for j, call in enumerate(d.calls)]
            select = self._windows_select(d.table, windows, upto, watermark, fired_before, values)
            ctes.append(f"fired_distinct_{i} AS ({select})")
            on = " AND ".join(
                [f"a.{k} IS NOT DISTINCT FROM d{i}.{k}" for k in self.keys]
                + [f"a.{c} = d{i}.{c}" for c in (WINDOW_START, WINDOW_END)]
            )
            joins.append(f"LEFT JOIN fired_distinct_{i} d{i} ON {on}")
            columns += [
                f"COALESCE(d{i}.__v{j}, {d.empty_value(call)}) AS {quote_ident(call.name)}"
                for j, call in enumerate(d.calls)
            ]
        return (
            f"WITH {', '.join(ctes)} SELECT {', '.join(columns)} "
            f"FROM fired_accumulators a {' '.join(joins)}"
        )

    def _with_held(self, held_partials_sql: str | None) -> str:
        """The accumulator table as a FROM item, with the held partials (if any) added to it."""
        if held_partials_sql is None:
            return ACCUMULATORS
        if ACCUMULATORS not in self.sizes:
            return f"({held_partials_sql}) AS {ACCUMULATORS}"
        return f"(SELECT * FROM {ACCUMULATORS} UNION ALL BY NAME ({held_partials_sql})) AS {ACCUMULATORS}"

    def _windows_select(
        self, table: str, windows: SliceWindows, upto: int, watermark: int, fired_before: int,
        values: list[str],
    ) -> str:
        """``values`` aggregated per key and firing window over the slices of ``table``."""
        lag = WINDOW_TIME_LAG_US
        where = [
            f"{SLICE} <= {int_literal(upto)}",
            f"{windows.end} - {lag} <= {int_literal(watermark)}",
            f"{windows.end} - {lag} > {int_literal(fired_before)}",
            f"({FROM_END} IS NULL OR {windows.end} >= {FROM_END})",
        ]
        if windows.where:
            where.append(windows.where)
        source = table + (f", {windows.source}" if windows.source else "")
        group = ", ".join([*self.keys, WINDOW_START, WINDOW_END])
        return (
            f"SELECT {''.join(k + ', ' for k in self.keys)}{windows.start} AS {WINDOW_START}, "
            f"{windows.end} AS {WINDOW_END}{''.join(', ' + v for v in values)} "
            f"FROM {source} WHERE {' AND '.join(where)} GROUP BY {group}"
        )

    def evict(self, upto: int) -> None:
        """Delete every slice starting at or before ``upto`` (after all its windows fired)."""
        for table in self._tables():
            if table not in self.sizes:
                continue
            (deleted,) = self._run(f"DELETE FROM {table} WHERE {SLICE} <= {int_literal(upto)}")[0]
            size = self.sizes[table]
            size.rows -= deleted
            size.rows_after_compaction = min(size.rows_after_compaction, size.rows)

    # -- snapshot / restore ------------------------------------------------
    def snapshot(self, ctx) -> dict[str, "pa.Table | StagedTable"]:
        """A copy of every state table, rows ordered by key group (a large one staged as a
        Parquet file: ``duckdb_sql.snapshot_table``)."""
        return {
            table: snapshot_table(self.con, f"SELECT * FROM {table} ORDER BY key_group", ctx, table)
            for table in self._tables()
            if table in self.sizes
        }

    def restore(self, tables: dict[str, pa.Table]) -> None:
        for table in self._tables():
            self._run(f"DROP TABLE IF EXISTS {table}")
        self.sizes.clear()
        for table, data in tables.items():
            if table not in self._tables():
                raise EngineError(
                    f"the snapshot holds state table {table!r}, which this operator does not have",
                    hint="the window's aggregates changed since the snapshot was taken",
                    operator_id=self.operator_id,
                )
            if FROM_END not in data.column_names:  # a snapshot from before rows kept a first window
                data = as_table(data)  # (read whole, to add the column; a current one streams)
                data = data.add_column(data.schema.get_field_index(SLICE) + 1, pa.field(FROM_END, pa.int64()),
                                       pa.nulls(data.num_rows, pa.int64()))
            create_table_from_arrow(self.con, table, data, self.operator_id)
            self.sizes[table] = _TableSize(data.num_rows, data.num_rows)
