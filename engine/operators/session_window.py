"""SessionWindow: the event-time SESSION window aggregate, open sessions kept in DuckDB.

Config::

    {
      "window": {"kind": "session", "time_column": "ts", "gap": 10000000},
      "keys": [[name, sql], ...],          # the PARTITION BY / GROUP BY keys
      "aggregates": [{"name", "function", "argument", "distinct", "filter"}, ...],
      "having": sql_or_null,
      "projection": [[name, sql], ...]
    }

Semantics follow Flink's merging windows: a row at ``ts`` is the window
``[ts, ts + gap)``; windows of one key that intersect — touching counts, as in
``TimeWindow.intersects`` — merge, so a session is ``[first ts, last ts + gap)``.
A session fires when the watermark reaches ``window_end - 1 ms`` and is then
forgotten: a later row starts a new session.

Per batch (set-based, one pass of SQL each):

1. rows with a NULL time are counted and dropped; the rest become *batch
   sessions* by gaps and islands over the batch alone (per key, sorted by time,
   a new island where the time is more than ``gap`` after the previous one), with
   partial aggregates per island (``accumulators.py``);
2. the open sessions of ``session_accumulators`` that intersect a batch session
   of their key are taken out, and batch sessions and these merged by gaps and
   islands over intervals (a new island where an interval starts after every
   earlier one ended); partials merge as in the window aggregate;
3. a row is late when its merged session has closed under the watermark the
   row met (its arrival watermark, ``engine.watermarks``, or the operator's own
   if larger): such rows are counted and taken out first, and steps 1–2 run
   again without them (only when a row's own window ``[ts, ts + gap)`` has
   closed so); then a merged session closed under the operator's watermark can
   only be made of late rows of this batch: they are counted and dropped (a row
   behind the watermark that reaches an open session joins it instead);
4. the merged sessions go back into the state. DISTINCT aggregates keep their
   distinct values per (key, session start) in ``session_distinct_values_<i>``;
   sessions that merged are renamed to the merged start.

Per watermark: sessions with ``window_end - 1 ms <= watermark`` are finalised,
filtered by HAVING, projected, emitted (ordered by window_end, then keys) and
deleted. The result equals gaps and islands over the rows that were not late,
with a session cut wherever a row arrived after its neighbour's session fired.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.operators.accumulators import Accumulator, AggregateCall, DistinctAccumulator, argument_columns
from weir.engine.operators.base import OperatorContext, StateOperator
from weir.engine.operators.batches import conform, positions
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.duckdb_sql import create_table_from_arrow, int_literal, query_arrow, quote_ident, snapshot_tables
from weir.engine.operators.windows import WINDOW_TIME_LAG_US
from weir.engine.state.key_groups import KEY_GROUP_COLUMN, key_groups
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables
from weir.engine.watermarks import USE, row_watermarks

SESSIONS = "session_accumulators"
START, END = "__session_start", "__session_end"
INPUT_VIEW = "session_input"
SNAPSHOT_VERSION = 1
LAG = WINDOW_TIME_LAG_US
#: Columns of ``batch_rows`` while late rows are sought: each row's watermark and position.
ROW_WATERMARK, ROW_POSITION = "__row_watermark", "__row_position"


class SessionWindow(StateOperator):
    #: State: the gap, keys and accumulators of open sessions.
    STATE_CONFIG = ("window", "keys", "aggregates")
    arrival_watermark = USE

    def __init__(self, config: dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        oid = ctx.operator_id
        for required in ("window", "projection"):
            if not config.get(required):
                raise EngineError(f"session_window config lacks {required!r}", operator_id=oid)
        window = config["window"]
        if str(window.get("kind", "")).lower() != "session":
            raise EngineError(f"session_window needs a session window, got {window.get('kind')!r}",
                              operator_id=oid)
        self.time_column: str = window["time_column"]
        self.gap = int(window.get("gap") or 0)
        if self.gap <= 0:
            raise EngineError(f"session gap must be positive, got {window.get('gap')!r} µs", operator_id=oid)
        self.keys: list[tuple[str, str]] = [tuple(k) for k in config.get("keys") or []]
        self.key_columns = [f"__k{i}" for i in range(len(self.keys))]
        self.calls = [AggregateCall.from_config(a, oid) for a in config.get("aggregates") or []]
        self.accumulators: list[Accumulator] = []
        self.distincts: list[DistinctAccumulator] = []
        for i, call in enumerate(self.calls):
            if call.keeps_distinct_values:
                self._distinct_for(call).calls.append(call)
            else:
                self.accumulators.append(Accumulator(call, i))
        for d in self.distincts:
            d.table = f"session_{d.table}"
        self.having: str | None = config.get("having")
        self.projection: list[tuple[str, str]] = [tuple(p) for p in config["projection"]]
        self.clock = EventTimeClock()
        #: The smallest window_end of an open session (None: no session): saves a query per watermark.
        self._earliest_end: int | None = None
        self._tables: set[str] = set()

    def _distinct_for(self, call: AggregateCall) -> DistinctAccumulator:
        for d in self.distincts:
            if (d.argument, d.filter) == (call.argument, call.filter):
                return d
        d = DistinctAccumulator(call.argument, call.filter, len(self.distincts))
        self.distincts.append(d)
        return d

    # -- lifecycle -----------------------------------------------------------
    # -- SQL pieces ------------------------------------------------------------
    def _keys(self, prefix: str = "") -> str:
        return "".join(f"{prefix}{k}, " for k in self.key_columns)

    def _partition(self, *extra: str) -> str:
        columns = [*extra, *self.key_columns]
        return f"PARTITION BY {', '.join(columns)} " if columns else ""

    def _same_key(self, a: str, b: str) -> list[str]:
        return [f"{a}.{k} IS NOT DISTINCT FROM {b}.{k}" for k in self.key_columns]

    # -- batches -------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        batch = self._with_event_times(batch)
        nulls = batch.column(self.time_column).null_count
        if nulls:
            self.ctx.count("null_time_rows_dropped", nulls)
            if nulls == batch.num_rows:
                return []
        batch = batch.append_column(KEY_GROUP_COLUMN, self._key_groups(batch))
        watermarks = row_watermarks(batch, self.clock.watermark)
        if watermarks is not None and not isinstance(watermarks, int):
            batch = self._without_late_rows(batch, watermarks)
            if batch.num_rows == 0:
                return []
        self._batch_sessions(batch)
        self._merge_into_state()
        return []

    def _batch_sessions(self, batch: pa.RecordBatch, extra: str = "") -> None:
        """Steps 1 (``batch_rows``, ``batch_sessions``); ``extra``: more columns of batch_rows."""
        self.con.register(INPUT_VIEW, batch)
        try:
            self._run(f"CREATE OR REPLACE TEMP TABLE batch_rows AS {self._batch_rows_sql(extra)}")
        finally:
            self.con.unregister(INPUT_VIEW)
        self._run(f"CREATE OR REPLACE TEMP TABLE batch_sessions AS {self._batch_sessions_sql()}")

    def _without_late_rows(self, batch: pa.RecordBatch, watermarks: pa.Array) -> pa.RecordBatch:
        """``batch`` without the rows late under the watermark each met (its arrival watermark, or
        the own one if larger): those whose session — merged with the batch's other rows and the
        open sessions — has closed under it. Counted; the rest is merged as usual."""
        times = batch.column(self.time_column).view(pa.int64())
        maybe = pc.less_equal(pc.add(times, self.gap - LAG), watermarks)  # the row's own window closed
        if not pc.any(pc.fill_null(maybe, False)).as_py():
            return batch
        rows = batch.append_column(ROW_WATERMARK, watermarks).append_column(ROW_POSITION, positions(batch.num_rows))
        self._batch_sessions(rows, f", {ROW_WATERMARK}, {ROW_POSITION}")
        self._merge_candidates()
        on = " AND ".join(self._same_key("r", "c") + ["r.__island = c.__island", "c.__state_row IS NULL"])
        late = query_arrow(self.con, f"SELECT r.{ROW_POSITION} FROM batch_rows r JOIN candidates c ON {on} "
                                     f"WHERE c.__merged_end - {LAG} <= r.{ROW_WATERMARK}", self.ctx.operator_id)
        if late.num_rows == 0:
            return batch
        self.ctx.count_late(late.num_rows)  # counted per source; not kept (no late-rows table for sessions)
        mask = pc.is_in(positions(batch.num_rows), late.column(0).combine_chunks())
        return batch.filter(pc.invert(mask))

    def _with_event_times(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        index = batch.schema.get_field_index(self.time_column)
        if index < 0:
            raise EngineError(f"the session window's time column {self.time_column!r} is not in the input",
                              hint=f"input columns: {batch.schema.names}", operator_id=self.ctx.operator_id)
        column = batch.column(index)
        if not pa.types.is_timestamp(column.type):
            raise EngineError(f"the session window's time column {self.time_column!r} is {column.type}, "
                              "not a timestamp", operator_id=self.ctx.operator_id)
        if column.type.unit != "us":
            column = column.cast(pa.timestamp("us", column.type.tz))
            batch = batch.set_column(index, batch.schema.field(index).with_type(column.type), column)
        return batch

    def _key_groups(self, batch: pa.RecordBatch) -> pa.Int32Array:
        names = batch.schema.names
        columns = [next((n for n in names if sql in (n, quote_ident(n))), None) for _, sql in self.keys]
        if all(c is not None for c in columns):
            return key_groups(batch, columns, self.ctx.max_parallelism)
        select = ", ".join(f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys))
        self.con.register(INPUT_VIEW, batch)
        try:
            keys = query_arrow(self.con, f"SELECT {select} FROM {quote_ident(INPUT_VIEW)}", self.ctx.operator_id)
        finally:
            self.con.unregister(INPUT_VIEW)
        return key_groups(keys, keys.schema.names, self.ctx.max_parallelism)

    def _batch_rows_sql(self, extra: str = "") -> str:
        """The batch's timed rows with keys, time (µs), arguments, filters and their batch island."""
        ts = f"epoch_us({quote_ident(self.time_column)})"
        columns = [f"CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group"]
        columns += [f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys)]
        columns.append(f"{ts} AS __ts")
        columns += argument_columns(self.accumulators, self.distincts)
        prepared = (f"SELECT {', '.join(columns)}{extra} FROM {quote_ident(INPUT_VIEW)} "
                    f"WHERE {quote_ident(self.time_column)} IS NOT NULL")
        order = f"OVER ({self._partition()}ORDER BY __ts)"
        gaps = (f"SELECT *, CASE WHEN __ts - lag(__ts) {order} <= {self.gap} THEN 0 ELSE 1 END AS __new "
                f"FROM ({prepared})")
        return (f"SELECT *, sum(__new) OVER ({self._partition()}ORDER BY __ts ROWS UNBOUNDED PRECEDING) "
                f"AS __island FROM ({gaps})")

    def _batch_sessions_sql(self) -> str:
        partials = ["COUNT(*) AS __rows"]
        for acc in self.accumulators:
            partials += [f"{c.partial_sql} AS {c.name}" for c in acc.columns]
        group = ", ".join([*self.key_columns, "__island"])
        return (f"SELECT any_value(key_group) AS key_group, {group}, min(__ts) AS {START}, "
                f"max(__ts) + {self.gap} AS {END}, {', '.join(partials)} FROM batch_rows GROUP BY {group}")

    def _partial_names(self) -> list[str]:
        return ["__rows", *(c.name for acc in self.accumulators for c in acc.columns)]

    def _merge_into_state(self) -> None:
        """Steps 2–4 of the module docstring."""
        self._merge_candidates()
        closed = f"__merged_end - {LAG} <= {int_literal(self.clock.watermark)}"
        if self.clock.started:
            (late,) = self._run(f"SELECT CAST(coalesce(sum(__rows), 0) AS BIGINT) FROM candidates WHERE {closed}")[0]
            self.ctx.count_late(late)  # counted per source; not kept (no per-row verdict here)
        else:
            closed = "false"
        merges = ["CAST(SUM(__rows) AS BIGINT) AS __rows"]
        merges += [f"{c.merge_sql(c.name)} AS {c.name}" for acc in self.accumulators for c in acc.columns]
        merged = (f"SELECT any_value(key_group) AS key_group, {self._keys()}__merged_start AS {START}, "
                  f"__merged_end AS {END}, {', '.join(merges)} FROM candidates WHERE NOT ({closed}) "
                  f"GROUP BY {self._keys()}__merged, __merged_start, __merged_end")
        if SESSIONS in self._tables:
            self._run(f"DELETE FROM {SESSIONS} WHERE rowid IN (SELECT __state_row FROM touched)")
            self._run(f"INSERT INTO {SESSIONS} {merged}")
        else:
            self._run(f"CREATE TABLE {SESSIONS} AS {merged}")
            self._tables.add(SESSIONS)
        for d in self.distincts:
            self._merge_distinct(d, closed)
        self._earliest_end = self._run(f"SELECT min({END}) FROM {SESSIONS}")[0][0]

    def _merge_candidates(self) -> None:
        """Step 2: ``candidates``, the batch sessions and the open sessions they touch
        (``touched``), each with the merged session it falls in; the state is not changed."""
        names = self._partial_names()
        carried = ", ".join(["key_group", *self.key_columns, START, END, *names])
        if SESSIONS in self._tables:
            touching = " AND ".join(
                self._same_key("s", "b") + [f"s.{START} <= b.{END}", f"b.{START} <= s.{END}"])
            self._run(f"CREATE OR REPLACE TEMP TABLE touched AS SELECT s.rowid AS __state_row, s.* "
                      f"FROM {SESSIONS} s WHERE EXISTS (SELECT 1 FROM batch_sessions b WHERE {touching})")
            state_part = f" UNION ALL SELECT {carried}, NULL, __state_row FROM touched"
        else:
            state_part = ""
        candidates = f"SELECT {carried}, __island, NULL::BIGINT AS __state_row FROM batch_sessions{state_part}"
        window = f"{self._partition()}ORDER BY {START}"
        flagged = (f"SELECT *, CASE WHEN {START} <= max({END}) OVER ({window} ROWS BETWEEN UNBOUNDED PRECEDING "
                   f"AND 1 PRECEDING) THEN 0 ELSE 1 END AS __new FROM ({candidates})")
        grouped = (f"SELECT *, sum(__new) OVER ({window} ROWS UNBOUNDED PRECEDING) AS __merged FROM ({flagged})")
        island = f"OVER ({self._partition('__merged')})"
        self._run(f"CREATE OR REPLACE TEMP TABLE candidates AS SELECT *, min({START}) {island} AS __merged_start, "
                  f"max({END}) {island} AS __merged_end FROM ({grouped})")

    def _merge_distinct(self, d: DistinctAccumulator, closed: str) -> None:
        """Rename the values of merged sessions to the merged start; add the batch's values."""
        if d.table in self._tables:
            on = " AND ".join(self._same_key(d.table, "c") + [f"{d.table}.{START} = c.{START}"])
            self._run(f"UPDATE {d.table} SET {START} = c.__merged_start FROM candidates c "
                      f"WHERE c.__state_row IS NOT NULL AND c.__merged_start <> c.{START} AND {on}")
        where = [f"r.{d.argument_column} IS NOT NULL", f"NOT ({closed.replace('__merged_end', 'c.__merged_end')})"]
        if d.filter_column:
            where.append(f"r.{d.filter_column}")
        on = " AND ".join(self._same_key("r", "c") + ["r.__island = c.__island", "c.__state_row IS NULL"])
        select = (f"SELECT DISTINCT r.key_group, {self._keys('r.')}c.__merged_start AS {START}, "
                  f"r.{d.argument_column} AS value FROM batch_rows r JOIN candidates c ON {on} "
                  f"WHERE {' AND '.join(where)}")
        if d.table in self._tables:
            self._run(f"INSERT INTO {d.table} {select}")
        else:
            self._run(f"CREATE TABLE {d.table} AS {select}")
            self._tables.add(d.table)

    # -- watermarks ----------------------------------------------------------
    def process_watermark(self, watermark: int) -> list[pa.RecordBatch]:
        self.open()
        if not self.clock.advance(watermark):
            return []
        if self._earliest_end is None or self._earliest_end - LAG > watermark:
            return []
        fired = f"{END} - {LAG} <= {int_literal(watermark)}"
        table = query_arrow(self.con, self._emit_sql(fired), self.ctx.operator_id)
        for d in self.distincts:  # before the sessions, which say what fired
            if d.table in self._tables:
                on = " AND ".join(self._same_key("s", d.table) + [f"s.{START} = {d.table}.{START}"])
                self._run(f"DELETE FROM {d.table} WHERE EXISTS (SELECT 1 FROM {SESSIONS} s WHERE s.{fired} AND {on})")
        self._run(f"DELETE FROM {SESSIONS} WHERE {fired}")
        self._earliest_end = self._run(f"SELECT min({END}) FROM {SESSIONS}")[0][0]
        out = conform(table, self.ctx.output_schema, self.ctx.operator_id)
        self.ctx.count("rows_out", table.num_rows)
        return out

    def _emit_sql(self, fired: str) -> str:
        columns = [f"s.__k{i} AS {quote_ident(name)}" for i, (name, _) in enumerate(self.keys)]
        columns += [
            f"make_timestamp(s.{START}) AS window_start",
            f"make_timestamp(s.{END}) AS window_end",
            f"make_timestamp(s.{END} - {LAG}) AS window_time",
        ]
        for acc in self.accumulators:
            columns.append(f"{acc.final_sql([f's.{c.name}' for c in acc.columns])} AS {quote_ident(acc.call.name)}")
        joins = []
        for i, d in enumerate(self.distincts):
            values = ", ".join(f"{d.final_sql(call)} AS __v{j}" for j, call in enumerate(d.calls))
            if d.table in self._tables:
                on = " AND ".join(self._same_key("s", f"d{i}") + [f"s.{START} = d{i}.{START}"])
                joins.append(f"LEFT JOIN (SELECT {self._keys()}{START}, {values} FROM {d.table} "
                             f"GROUP BY ALL) d{i} ON {on}")
                columns += [f"COALESCE(d{i}.__v{j}, {d.empty_value(call)}) AS {quote_ident(call.name)}"
                            for j, call in enumerate(d.calls)]
            else:
                columns += [f"{d.empty_value(call)} AS {quote_ident(call.name)}" for call in d.calls]
        columns += [f"s.{END} AS __order_end", *(f"s.__k{i} AS __order_k{i}" for i in range(len(self.keys)))]
        inner = (f"SELECT {', '.join(columns)} FROM {SESSIONS} s {' '.join(joins)} "
                 f"WHERE s.{fired}")
        projection = ", ".join(f"{sql} AS {quote_ident(name)}" for name, sql in self.projection)
        order = ", ".join(["fired_sessions.__order_end",
                           *(f"fired_sessions.__order_k{i}" for i in range(len(self.keys)))])
        sql = f"SELECT {projection} FROM ({inner}) AS fired_sessions"
        if self.having:
            sql += f" WHERE {self.having}"
        return f"{sql} ORDER BY {order}"

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables": {name: pa.Table}}``; every table
        has a ``key_group`` column and is ordered by it."""
        self.open()
        return snapshot_tables(self.con, sorted(self._tables), self.ctx, version=SNAPSHOT_VERSION,
                               watermark=self.clock.watermark)

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        """Several subtasks' snapshots as one, for restoring at another parallelism."""
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="session window")

    def restore(self, state: dict[str, Any]) -> None:
        """Load a snapshot (or merged snapshots), keeping the key groups this subtask owns."""
        self.open()
        oid = self.ctx.operator_id
        known = {SESSIONS, *(d.table for d in self.distincts)}
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="session window",
                              operator_id=oid, known=known)
        for name in sorted(self._tables):
            self._run(f"DROP TABLE IF EXISTS {name}")
        self._tables.clear()
        for name, table in tables.items():
            create_table_from_arrow(self.con, name, table, oid)
            self._tables.add(name)
        self.clock = EventTimeClock(state["watermark"])
        self._earliest_end = (self._run(f"SELECT min({END}) FROM {SESSIONS}")[0][0]
                              if SESSIONS in self._tables else None)

