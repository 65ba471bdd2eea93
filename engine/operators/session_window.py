"""SessionWindow: the event-time SESSION window aggregate, open sessions kept in DuckDB.

Config (``SessionWindowConfig``)::

    window:     SessionWindowSpec(kind="session", time_column="ts", gap=10000000)
    keys:       ((name, sql), ...)       # the PARTITION BY / GROUP BY keys
    aggregates: (AggregateCall(name, function, argument, distinct, filter), ...)
    having:     sql or None
    projection: ((name, sql), ...)

Semantics follow Flink's merging windows: a row at ``ts`` is the window
``[ts, ts + gap)``; windows of one key that intersect — touching counts, as in
``TimeWindow.intersects`` — merge, so a session is ``[first ts, last ts + gap)``.
A session fires when the watermark reaches ``window_end - 1 ms`` and is then
forgotten: a later row starts a new session.

Lateness is decided as Flink decides it, row after row, whatever the batching:
a row meets the sessions open at its arrival — those its earlier rows made, not
yet closed under the row's watermark (its arrival watermark,
``engine.watermarks``) — joins those it touches, and is late (dropped and
counted) when it touches none and its own window ``[ts, ts + gap)`` has closed.
So rows wait in ``session_pending`` (prepared: keys, time, arguments, their
watermark ``__w`` and arrival number ``__seq``) until the operator's watermark
passes their own, and then go in the order (``__w``, ``__seq``): within a split
the arrival order, across splits an order no interleaving changes (the
watermark ``w`` means every split is past ``w``, so no row with ``__w < w`` is
still to come).

Per watermark ``w``, set-based:

1. the pending rows with ``__w < w`` are cut into *segments* at each row that is
   behind its watermark (``ts - 1 ms <= __w``: only such a row can touch a closed
   session) and has an earlier row of its key in the segment; within a segment
   no row can meet a session that closed since the segment began, so batch
   semantics are exact (one segment when no row is behind: the usual case);
2. per segment: late rows (own window closed, touching no state session open
   under their watermark) are counted and dropped; the rest become *batch
   sessions* by gaps and islands (per key, sorted by time, a new island where
   the time is more than ``gap`` after the previous one), with partial
   aggregates per island (``accumulators.py``; in numpy, each island a run of
   the sorted rows, where ``island_partials`` makes every partial);
3. the open sessions of ``session_accumulators`` that a segment row touches
   while they are open under its watermark are taken out, and batch sessions
   and these merged by gaps and islands over intervals (a new island where an
   interval starts after every earlier one ended); partials merge as in the
   window aggregate; the merged sessions go back into the state. DISTINCT
   aggregates keep their distinct values per (key, session start) in
   ``session_distinct_values_<i>``; sessions that merged are renamed to the
   merged start;
4. then sessions with ``window_end - 1 ms <= w`` are finalised, filtered by
   HAVING, projected, emitted (ordered by window_end, then keys; streamed out in
   bounded batches, ``engine.operators.firings``) and deleted.

The result equals gaps and islands over the rows that were not late,
with a session cut wherever a row arrived after its neighbour's session fired.

With ``bad_rows`` ('python.udf.bad-rows.table') the pending rows carry their input row as JSON
(``ROW_JSON``); should a Python aggregate function's ``accumulate`` raise as a segment's batch
sessions are made (step 2), the segment's rows it raises on (``bad_aggregate_rows``) go to the
bad-rows table and the segment's islands are found again without them: a bad row bridges no
sessions. A late row is dropped (counted late) before it meets ``accumulate``, never listed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.pandas_import import arrow_array, numpy_values, scalar
from weir.engine.operators.accumulators import (Accumulator, AggregateCall, DistinctAccumulator, PythonAccumulator,
                                                    accumulator, argument_columns, argument_sources,
                                                    register_python)
from weir.engine.operators.bad_aggregate_rows import is_bad_row, keep_python, python_arguments, raising_rows
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.late_rows import BadRows
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.batches import positions
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.firings import StreamsFirings, small_firing_rows
from weir.engine.operators.island_partials import island_partials
from weir.engine.operators.islands import comparable, island_numbers, key_time_order, merged_intervals
from weir.engine.operators.duckdb_sql import (create_table_from_arrow, int_literal, query_arrow, quote_ident,
                                              snapshot_tables, string_literal)
from weir.engine.operators.windows import WINDOW_TIME_LAG_US, event_times
from weir.engine.state.key_groups import KEY_GROUP_COLUMN, key_groups
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables
from weir.engine.udfs import UdfError
from weir.engine.watermarks import ARRIVAL_WATERMARK, USE, row_watermarks

SESSIONS = "session_accumulators"
PENDING = "session_pending"
START, END = "__session_start", "__session_end"
INPUT_VIEW = "session_input"
#: Views of pending rows held in Arrow: all of them (to write them to ``session_pending``), the ready ones.
HELD_VIEW, READY_VIEW = "session_held", "session_ready"
ISLANDS_VIEW = "session_islands"
#: Segments of up to this many rows have their islands found in Arrow (``_make_batch_rows``): the
#: keys and times of such a segment are read out of DuckDB's managed memory; a larger one (a
#: bounded input whose watermark never moved) stays in DuckDB, which spills.
ARROW_ISLAND_ROWS = 4_000_000
SNAPSHOT_VERSION = 1
LAG = WINDOW_TIME_LAG_US
#: Columns of ``session_pending``: each row's watermark and arrival number; of ``ready``: its position.
ROW_WATERMARK, ROW_SEQUENCE, ROW_POSITION = "__w", "__seq", "__pos"
#: With ``bad_rows``: each pending row's input row, as JSON (its bad row, should accumulate raise on it).
ROW_JSON = "__row"


def _input_column(sql: str, names: list[str]) -> str | None:
    """The input column of ``names`` that ``sql`` is (its name, quoted or not), or None."""
    return next((n for n in names if sql in (n, quote_ident(n))), None)


def _kept_as_is(kind: pa.DataType) -> bool:
    """Whether DuckDB returns a column of this Arrow type as it came (a type of its own, read
    and written unchanged): integers, float32 and float64, booleans and strings."""
    return (pa.types.is_integer(kind) or kind in (pa.float32(), pa.float64()) or pa.types.is_boolean(kind)
            or kind == pa.string())


@dataclass(frozen=True)
class SessionWindowSpec(OperatorConfig):
    """A SESSION window: rows of a key closer than ``gap`` µs in ``time_column`` share a session."""

    time_column: str
    gap: int
    kind: str = "session"


@dataclass(frozen=True)
class SessionWindowConfig(OperatorConfig):
    window: SessionWindowSpec
    #: (output name, SQL over the keys, the window bounds and the aggregate names).
    projection: tuple[tuple[str, str], ...]
    #: (output name, SQL over the input): the PARTITION BY / GROUP BY keys.
    keys: tuple[tuple[str, str], ...] = ()
    aggregates: tuple[AggregateCall, ...] = ()
    #: SQL over the keys, the window bounds and the aggregate names, or None.
    having: str | None = None
    #: With 'python.udf.bad-rows.table': a row a Python aggregate function's ``accumulate`` raises
    #: on goes to the bad-rows table, left out of every aggregate (``bad_aggregate_rows``).
    bad_rows: bool = optional(False)


class SessionWindow(StreamsFirings, StateOperator):
    Config = SessionWindowConfig
    #: State: the gap, keys and accumulators of open sessions.
    STATE_CONFIG = ("window", "keys", "aggregates")
    arrival_watermark = USE
    keyed_by = ("keys",)
    merges_snapshots = True
    windowed = True
    #: Its verdict is per merged session, not per row: late rows are counted, never kept.
    late_rows_table = False
    drops_late_rows = True

    @classmethod
    def input_expressions(cls, config: SessionWindowConfig) -> list[str] | None:
        """Keys, aggregate arguments and filters, and the time column (a source reads only those,
        and only they cross an exchange); with a bad-rows table and a Python aggregate, every
        column (a bad row is kept as it came)."""
        if config.bad_rows and any(a.python is not None for a in config.aggregates):
            return None
        texts = [sql for _, sql in config.keys]
        texts += [text or "" for a in config.aggregates for text in (a.argument, a.filter)]
        return texts + [config.window.time_column]

    @classmethod
    def explain(cls, config: SessionWindowConfig) -> list[str]:
        return explain_lines(
            ", ".join(name for name, _ in config.keys) or "- (one global sequence of sessions)",
            "open sessions per key with partial accumulators, merged when a row bridges them, "
            "dropped when the watermark passes their end")

    def __init__(self, config: SessionWindowConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        if not config.projection:
            raise EngineError("session_window config lacks 'projection'", operator_id=oid)
        window = config.window
        if str(window.kind).lower() != "session":
            raise EngineError(f"session_window needs a session window, got {window.kind!r}",
                              operator_id=oid)
        self.time_column: str = window.time_column
        self.gap = int(window.gap or 0)
        if self.gap <= 0:
            raise EngineError(f"session gap must be positive, got {window.gap!r} µs", operator_id=oid)
        self.keys: list[tuple[str, str]] = list(config.keys)
        self.key_columns = [f"__k{i}" for i in range(len(self.keys))]
        self.calls = [AggregateCall.from_config(a, oid) for a in config.aggregates]
        self.accumulators: list[Accumulator | PythonAccumulator] = []
        self.distincts: list[DistinctAccumulator] = []
        for i, call in enumerate(self.calls):
            if call.keeps_distinct_values:
                self._distinct_for(call).calls.append(call)
            else:
                self.accumulators.append(accumulator(call, i, oid, [f"__k{j}" for j in range(len(self.keys))]))
        for d in self.distincts:
            d.table = f"session_{d.table}"
        self.having: str | None = config.having
        self.projection: list[tuple[str, str]] = list(config.projection)
        #: Rows a Python aggregate's accumulate raises on, kept (``bad_rows``; ``_batch_sessions``):
        #: the pending rows then carry their input row as JSON (``ROW_JSON``) to list them by.
        self._bad_rows = BadRows(ctx) if config.bad_rows and python_arguments(self.accumulators) else None
        keep_python([f for f, _, _ in python_arguments(self.accumulators)])
        self.clock = EventTimeClock()
        #: The smallest window_end of an open session (None: no session): saves a query per watermark;
        #: and how many sessions are open (a firing of at most ``small_firing_rows()`` is read at once).
        self._earliest_end: int | None = None
        self._open_sessions = 0
        #: The smallest watermark of a pending row (None: none pending), and the next arrival number.
        self._earliest_pending: int | None = None
        self._sequence = 0
        self._tables: set[str] = set()
        #: Pending rows in Arrow, in arrival order (``_hold``); whether ``session_pending`` holds any.
        self._held: list[pa.Table] = []
        self._in_table = False
        #: Temp tables the SQL path made that an Arrow table may be registered in place of.
        self._temp_tables: set[str] = set()

    def create_state(self) -> None:
        register_python(self.con, self.accumulators)  # Python aggregate functions (engine.udafs)

    def close(self) -> None:
        if self._bad_rows is not None:
            self._bad_rows.close()
        super().close()

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
        """The batch's timed rows wait in ``session_pending`` with their watermark (module docstring)."""
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        batch, times = event_times(batch, self.time_column, self.ctx.operator_id, "session window")
        nulls = batch.column(self.time_column).null_count
        if nulls:
            self.ctx.count("null_time_rows_dropped", nulls)
            if nulls == batch.num_rows:
                return []
        batch = batch.append_column(KEY_GROUP_COLUMN, self._key_groups(batch))
        watermarks = row_watermarks(batch, self.clock.watermark)
        if watermarks is None or isinstance(watermarks, int):
            watermarks = pa.nulls(batch.num_rows, pa.int64()).fill_null(
                MIN_WATERMARK if watermarks is None else watermarks)
        rows = self._prepared_arrow(batch, times, watermarks)
        if rows is None:
            batch = batch.append_column(ROW_WATERMARK, watermarks).append_column(ROW_POSITION, positions(batch.num_rows))
            self.con.register(INPUT_VIEW, batch)
            try:
                rows = query_arrow(self.con, self._prepared_sql(batch.schema.names), self.ctx.operator_id)
            finally:
                self.con.unregister(INPUT_VIEW)
        self._hold(rows)
        earliest = pc.min(pc.filter(watermarks, pc.is_valid(batch.column(self.time_column)))).as_py()
        if self._earliest_pending is None or earliest < self._earliest_pending:
            self._earliest_pending = earliest
        self._sequence += batch.num_rows
        return []

    def _prepared_sql(self, names: list[str]) -> str:
        """The input's timed rows as ``session_pending`` keeps them: keys, time (µs), arguments,
        filters, watermark and arrival number."""
        columns = [f"CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group"]
        columns += [f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys)]
        columns.append(f"epoch_us({quote_ident(self.time_column)}) AS __ts")
        columns += argument_columns(self.accumulators, self.distincts)
        columns.append(f"CAST({ROW_WATERMARK} AS BIGINT) AS {ROW_WATERMARK}")
        columns.append(f"CAST({self._sequence} + {ROW_POSITION} AS BIGINT) AS {ROW_SEQUENCE}")
        if self._bad_rows is not None:
            internal = {KEY_GROUP_COLUMN, ROW_WATERMARK, ROW_POSITION, ARRIVAL_WATERMARK}
            row = ", ".join(f"{string_literal(n)}: {quote_ident(n)}" for n in names if n not in internal)
            columns.append(f"CAST(to_json({{{row}}}) AS VARCHAR) AS {ROW_JSON}")
        return (f"SELECT {', '.join(columns)} FROM {quote_ident(INPUT_VIEW)} "
                f"WHERE {quote_ident(self.time_column)} IS NOT NULL")

    def _prepared_arrow(self, batch: pa.RecordBatch, times: pa.Array, watermarks: pa.Array) -> pa.Table | None:
        """``_prepared_sql``'s rows made in Arrow, where every key, argument and filter is a column
        of the input of a type DuckDB returns as it came (``_kept_as_is``): no statement to plan
        and run per batch (Nexmark q11: ~7 ms of 65,536 rows). None otherwise, and with ``bad_rows``."""
        if self._bad_rows is not None:
            return None
        names = batch.schema.names
        keys = [_input_column(sql, names) for _, sql in self.keys]
        arguments = argument_sources(self.accumulators, self.distincts)
        argument_inputs = [_input_column(sql, names) for _, sql in arguments]
        if not all(n is not None and _kept_as_is(batch.schema.field(n).type) for n in [*keys, *argument_inputs]):
            return None
        columns = [batch.column(KEY_GROUP_COLUMN).cast(pa.int64()), *(batch.column(n) for n in keys), times,
                   *(batch.column(n) for n in argument_inputs), watermarks, positions(batch.num_rows, self._sequence)]
        rows = pa.table(columns, names=["key_group", *self.key_columns, "__ts", *(c for c, _ in arguments),
                                        ROW_WATERMARK, ROW_SEQUENCE])
        return rows.filter(pc.is_valid(times)) if times.null_count else rows

    def _hold(self, rows: pa.Table) -> None:
        """Pending rows wait in Arrow (``_held``), or in ``session_pending`` while that holds any:
        with ``bad_rows``, past ``ARROW_ISLAND_ROWS`` (DuckDB spills), and from a checkpoint
        (``snapshot``) or a restore until the rows there are taken."""
        held = sum(t.num_rows for t in self._held)
        if self._in_table or self._bad_rows is not None or held + rows.num_rows > ARROW_ISLAND_ROWS:
            self._held.append(rows)
            self._flush_held()
        else:
            self._held.append(rows)

    def _flush_held(self) -> None:
        """The rows held in Arrow into ``session_pending``."""
        if not self._held:
            return
        held, self._held = pa.concat_tables(self._held, promote_options="permissive"), []
        self.con.register(HELD_VIEW, held)
        try:
            if PENDING in self._tables:
                self._run(f"INSERT INTO {PENDING} BY NAME SELECT * FROM {HELD_VIEW}")
            else:
                self._run(f"CREATE TABLE {PENDING} AS SELECT * FROM {HELD_VIEW}")
                self._tables.add(PENDING)
        finally:
            self.con.unregister(HELD_VIEW)
        self._in_table = True

    def _process_pending(self, watermark: int) -> None:
        """Steps 1–3 of the module docstring for the pending rows whose watermark is below
        ``watermark``: held in Arrow, they are taken there, and when none is behind its watermark
        (the usual case) sorted and numbered there too (``_arrow_segment``)."""
        if self._in_table:
            self._process_table(watermark)
            return
        if not self._held:
            return
        held = pa.concat_tables(self._held, promote_options="permissive")
        is_ready = pc.less(held.column(ROW_WATERMARK), scalar(watermark))
        ready, rest = held.filter(is_ready), held.filter(pc.invert(is_ready))
        self._held = [rest] if rest.num_rows else []
        self._earliest_pending = pc.min(rest.column(ROW_WATERMARK)).as_py() if rest.num_rows else None
        if not ready.num_rows:
            return
        behind = pc.less_equal(pc.subtract(ready.column("__ts"), scalar(LAG)), ready.column(ROW_WATERMARK))
        if not pc.any(behind).as_py() and self._arrow_segment(ready.append_column("__behind", behind)):
            return
        self.con.register(READY_VIEW, ready)
        try:
            self._segments(f"FROM {READY_VIEW}")
        finally:
            self.con.unregister(READY_VIEW)

    def _process_table(self, watermark: int) -> None:
        """``_process_pending`` for rows in ``session_pending``; the rows left there go back to
        Arrow when they may."""
        upto = int_literal(watermark)
        self._segments(f"FROM {PENDING} WHERE {ROW_WATERMARK} < {upto}")
        self._run(f"DELETE FROM {PENDING} WHERE {ROW_WATERMARK} < {upto}")
        (rest, self._earliest_pending), = self._run(f"SELECT count(*), min({ROW_WATERMARK}) FROM {PENDING}")
        if self._bad_rows is None and rest <= ARROW_ISLAND_ROWS:
            if rest:
                self._held = [query_arrow(self.con, f"SELECT * FROM {PENDING} ORDER BY {ROW_SEQUENCE}",
                                          self.ctx.operator_id)]
                self._run(f"DELETE FROM {PENDING}")
            self._in_table = False

    def _segments(self, ready: str) -> None:
        """Steps 1–3 for the rows of ``ready`` (a FROM clause, every row ready)."""
        behind = f"__ts - {LAG} <= {ROW_WATERMARK}"
        (rows, behind_rows), = self._run(f"SELECT count(*), count(*) FILTER (WHERE {behind}) {ready}")
        if not behind_rows:  # no row can meet a closed session: one segment, in no particular order
            if rows:
                self._run(f"CREATE OR REPLACE TEMP TABLE segment AS SELECT *, {behind} AS __behind {ready} "
                          f"ORDER BY {self._island_order()}")
                self._segment(None)
            return
        self._run(f"CREATE OR REPLACE TEMP TABLE ready AS SELECT *, {behind} AS __behind, "
                  f"row_number() OVER (ORDER BY {ROW_WATERMARK}, {ROW_SEQUENCE}) AS {ROW_POSITION} {ready}")
        (start, last), = self._run(f"SELECT min({ROW_POSITION}), max({ROW_POSITION}) FROM ready")
        self._run(f"CREATE OR REPLACE TEMP TABLE ready AS SELECT *, lag({ROW_POSITION}) OVER "
                  f"({self._partition()}ORDER BY {ROW_POSITION}) AS __previous FROM ready")
        while start <= last:
            (cut,), = self._run(f"SELECT min({ROW_POSITION}) FROM ready WHERE {ROW_POSITION} > {start} "
                                f"AND __behind AND __previous >= {start}")
            end = last + 1 if cut is None else cut
            self._segment(f"{ROW_POSITION} >= {start} AND {ROW_POSITION} < {end}")
            start = end

    def _arrow_segment(self, ready: pa.Table) -> bool:
        """Steps 2–3 for ``ready`` rows none of which is behind its watermark (one segment, no row late):
        sorted by keys and time and their islands numbered in Arrow, then read by DuckDB in
        place, as ``batch_rows``; False (nothing done) for keys Arrow does not sort or compare."""
        rows = self._sorted_by_key(ready, "__ts")
        if rows is None:
            return False
        numbers = island_numbers([rows.column(k).chunk(0) for k in self.key_columns],
                                 rows.column("__ts").chunk(0), self.gap)
        rows = rows.append_column("__island", numbers)
        # No row is late: a row not behind its watermark (ts - 1 ms > w) has its own window open.
        sessions = self._arrow_batch_sessions(rows)
        # The rows are read by SQL only to group them or to add their DISTINCT values.
        views = {"batch_rows": rows} if sessions is None or self.distincts else {}
        if sessions is not None:
            views["batch_sessions"] = sessions
        for name, table in views.items():
            self._register(name, table)
        try:
            if sessions is None:
                self._batch_sessions()
            self._merge_into_state(behind=False)
        finally:
            for name in views:
                self.con.unregister(name)
        return True

    def _arrow_batch_sessions(self, rows: pa.Table) -> pa.Table | None:
        """``_batch_sessions_sql`` of ``rows`` (sorted by keys and time, their islands numbered, none
        behind its watermark) in numpy, each island a run of rows (``island_partials``); None
        where a partial is not made there, or a session's end would leave int64."""
        islands = numpy_values(rows.column("__island"))
        firsts = np.flatnonzero(np.diff(islands, prepend=0))
        sizes = np.diff(np.append(firsts, len(islands)))
        partials = island_partials(rows, firsts, sizes, self.accumulators)
        times = numpy_values(rows.column("__ts"))
        if partials is None or int(times.max()) + self.gap >= 1 << 63:
            return None
        index = arrow_array(firsts)
        columns = [rows.column("key_group").take(index), *(rows.column(k).take(index) for k in self.key_columns),
                   arrow_array(islands[firsts]), arrow_array(times[firsts]),
                   arrow_array(times[firsts + sizes - 1] + self.gap), arrow_array(np.zeros(len(firsts), bool)),
                   arrow_array(sizes), *partials]
        names = ["key_group", *self.key_columns, "__island", START, END, "__has_behind", *self._partial_names()]
        return pa.table(columns, names=names)

    def _segment(self, where: str | None) -> None:
        """Steps 2–3 for the ready rows ``where`` holds (None: the ``segment`` table holds them
        already): late rows out, the rest merged into the state."""
        if where is not None:
            self._run(f"CREATE OR REPLACE TEMP TABLE segment AS SELECT * FROM ready WHERE {where} "
                      f"ORDER BY {self._island_order()}")
        closed, has_open = self._late_test()
        (late,), = self._run(f"SELECT count(*) FROM segment r WHERE {closed} AND NOT {has_open}")
        if late:
            self.ctx.count_late(late)  # counted per source; not kept (no late-rows table for sessions)
            self._run(f"DELETE FROM segment r WHERE {closed} AND NOT {has_open}")
        rows = self._make_batch_rows()
        if rows and self._batch_sessions():
            self._merge_into_state()

    def _late_test(self) -> tuple[str, str]:
        """The conditions on a ready row ``r``: its own window has closed; it touches a session
        open under its watermark. A row late is one with the first and not the second."""
        closed = f"r.__ts + {self.gap - LAG} <= r.{ROW_WATERMARK}"
        if SESSIONS not in self._tables:
            return closed, "false"
        open_touch = " AND ".join(self._same_key("s", "r") + self._touches("s", "r"))
        return closed, f"EXISTS (SELECT 1 FROM {SESSIONS} s WHERE {open_touch})"

    def _batch_sessions(self) -> bool:
        """``batch_sessions`` of ``batch_rows``; whether there are any. With ``bad_rows``, should a
        Python aggregate's accumulate raise (nothing is written then), the rows that raise
        (``bad_aggregate_rows``) are kept, left out of ``segment`` and ``batch_rows`` (its islands
        found again without them) and the batch sessions made once more."""
        sql = f"CREATE OR REPLACE TEMP TABLE batch_sessions AS {self._batch_sessions_sql()}"
        self._temp_tables.add("batch_sessions")
        if self._bad_rows is None:
            self._run(sql)
            return True
        try:
            self._run(sql)
            return True
        except UdfError as error:
            if not is_bad_row(error):
                raise
            first = error
        failures = raising_rows(self.con, "SELECT * FROM batch_rows", [*self.key_columns, "__island"],
                                self.key_columns, python_arguments(self.accumulators), self.ctx.operator_id,
                                number=ROW_SEQUENCE)
        if not failures:
            raise first
        numbers = sorted(failures)
        listed = ", ".join(map(str, numbers))
        texts = [t for t, in self._run(f"SELECT {ROW_JSON} FROM segment WHERE {ROW_SEQUENCE} IN ({listed}) "
                                        f"ORDER BY {ROW_SEQUENCE}")]
        self._bad_rows.keep_json(texts, [failures[n] for n in numbers])
        self._run(f"DELETE FROM segment WHERE {ROW_SEQUENCE} IN ({listed})")
        rows = self._make_batch_rows()
        if rows:
            self._run(sql)
        return bool(rows)

    def _touches(self, s: str, r: str) -> list[str]:
        """Conditions: row ``r``'s window touches session ``s`` while it is open under the row's watermark."""
        return [f"{s}.{START} <= {r}.__ts + {self.gap}", f"{r}.__ts <= {s}.{END}",
                f"{s}.{END} - {LAG} > {r}.{ROW_WATERMARK}"]

    def _key_groups(self, batch: pa.RecordBatch) -> pa.Int32Array:
        names = batch.schema.names
        columns = [_input_column(sql, names) for _, sql in self.keys]
        if all(c is not None for c in columns):
            return key_groups(batch, columns, self.ctx.max_parallelism)
        select = ", ".join(f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys))
        self.con.register(INPUT_VIEW, batch)
        try:
            keys = query_arrow(self.con, f"SELECT {select} FROM {quote_ident(INPUT_VIEW)}", self.ctx.operator_id)
        finally:
            self.con.unregister(INPUT_VIEW)
        return key_groups(keys, keys.schema.names, self.ctx.max_parallelism)

    def _island_order(self) -> str:
        return ", ".join([*self.key_columns, "__ts"])

    def _make_batch_rows(self) -> int:
        """``batch_rows``: the rows of ``segment`` with their batch island (``__island``, unique per
        key); how many. ``segment`` was written sorted by keys and time, and the connection keeps
        insertion order, so its rows scan in that order: up to ``ARROW_ISLAND_ROWS`` rows with keys
        Arrow compares, their keys and times are read and numbered in Arrow (``islands``: no sort,
        where SQL's two window functions sort twice) and the numbers joined on by position; else,
        or above, SQL finds them."""
        (rows,), = self._run("SELECT count(*) FROM segment")
        if 0 < rows <= ARROW_ISLAND_ROWS:
            read = query_arrow(self.con, f"SELECT {self._island_order()} FROM segment", self.ctx.operator_id)
            keys = [read.column(k).combine_chunks() for k in self.key_columns]
            if all(comparable(k.type) for k in keys):
                numbers = island_numbers(keys, read.column("__ts").combine_chunks(), self.gap)
                self.con.register(ISLANDS_VIEW, pa.table({"__island": numbers}))
                try:
                    self._temp_tables.add("batch_rows")
                    self._run(f"CREATE OR REPLACE TEMP TABLE batch_rows AS SELECT * FROM segment "
                              f"POSITIONAL JOIN {ISLANDS_VIEW}")
                finally:
                    self.con.unregister(ISLANDS_VIEW)
                return rows
        self._temp_tables.add("batch_rows")
        self._run(f"CREATE OR REPLACE TEMP TABLE batch_rows AS {self._batch_rows_sql('segment')}")
        return rows

    def _batch_rows_sql(self, table: str) -> str:
        """The rows of ``table`` (prepared, as ``session_pending`` holds them) with their batch island."""
        order = f"OVER ({self._partition()}ORDER BY __ts)"
        gaps = (f"SELECT *, CASE WHEN __ts - lag(__ts) {order} <= {self.gap} THEN 0 ELSE 1 END AS __new "
                f"FROM {table}")
        return (f"SELECT *, sum(__new) OVER ({self._partition()}ORDER BY __ts ROWS UNBOUNDED PRECEDING) "
                f"AS __island FROM ({gaps})")

    def _batch_sessions_sql(self) -> str:
        partials = ["COUNT(*) AS __rows"]
        for acc in self.accumulators:
            partials += [f"{c.partial_sql} AS {c.name}" for c in acc.columns]
        group = ", ".join([*self.key_columns, "__island"])
        return (f"SELECT any_value(key_group) AS key_group, {group}, min(__ts) AS {START}, "
                f"max(__ts) + {self.gap} AS {END}, bool_or(__behind) AS __has_behind, {', '.join(partials)} "
                f"FROM batch_rows GROUP BY {group}")

    def _partial_names(self) -> list[str]:
        return ["__rows", *(c.name for acc in self.accumulators for c in acc.columns)]

    def _merge_into_state(self, behind: bool = True) -> None:
        """Step 3 of the module docstring; ``behind``: whether a row of ``batch_rows`` may be behind
        its watermark."""
        candidates = self._merge_candidates(behind)
        merges = ["CAST(SUM(__rows) AS BIGINT) AS __rows"]
        merges += [f"{c.merge_sql(c.name)} AS {c.name}" for acc in self.accumulators for c in acc.columns]
        merged = (f"SELECT any_value(key_group) AS key_group, {self._keys()}__merged_start AS {START}, "
                  f"__merged_end AS {END}, {', '.join(merges)} FROM candidates "
                  f"GROUP BY {self._keys()}__merged, __merged_start, __merged_end")
        try:
            if SESSIONS in self._tables:
                self._run(f"DELETE FROM {SESSIONS} WHERE rowid IN (SELECT __state_row FROM touched)")
                self._run(f"INSERT INTO {SESSIONS} {merged}")
            else:
                self._run(f"CREATE TABLE {SESSIONS} AS {merged}")
                self._tables.add(SESSIONS)
            for d in self.distincts:
                self._merge_distinct(d)
        finally:
            if candidates is not None:
                self.con.unregister("candidates")
        if candidates is None or not self._counted_from(candidates):
            self._count_sessions()

    def _counted_from(self, candidates: pa.Table) -> bool:
        """``_earliest_end`` and ``_open_sessions`` after a merge, read off its ``candidates`` (the
        merged sessions replace the touched ones) unless a touched session was the one ending
        first (then only the state knows the next); whether they were."""
        ends = pc.filter(candidates.column(END), pc.is_valid(candidates.column("__state_row")))
        if len(ends) and (self._earliest_end is None or pc.min(ends).as_py() <= self._earliest_end):
            return False
        earliest = int(numpy_values(candidates.column("__merged_end")).min())
        self._earliest_end = earliest if self._earliest_end is None else min(self._earliest_end, earliest)
        self._open_sessions += int(numpy_values(candidates.column("__merged"))[-1]) - len(ends)
        return True

    def _merge_candidates(self, behind_rows: bool) -> pa.Table | None:
        """Step 2: ``candidates``, the batch sessions and the open sessions they touch
        (``touched``), each with the merged session it falls in; the state is not changed.
        The Arrow table registered as ``candidates`` (``_arrow_candidates``), or None (a temp table)."""
        names = self._partial_names()
        carried = ", ".join(["key_group", *self.key_columns, START, END, *names])
        if SESSIONS in self._tables:
            # A batch session without rows behind their watermark touches only open sessions; one
            # with such rows is checked row by row, each against its own watermark.
            island = " AND ".join(self._same_key("s", "b") + [f"s.{START} <= b.{END}", f"b.{START} <= s.{END}"])
            if behind_rows:
                row = " AND ".join(self._same_key("s", "r") + self._touches("s", "r"))
                behind = " AND ".join(self._same_key("r", "b") + ["r.__island = b.__island", "b.__has_behind"])
                touched = (f"WHERE EXISTS (SELECT 1 FROM batch_sessions b WHERE NOT b.__has_behind AND {island}) "
                           f"OR EXISTS (SELECT 1 FROM batch_rows r JOIN batch_sessions b ON {behind} WHERE {row})")
            else:  # a semi join, which DuckDB runs in half the time of the EXISTS (q11: 6.5 -> 2.7 ms)
                touched = f"SEMI JOIN batch_sessions b ON {island}"
            self._run(f"CREATE OR REPLACE TEMP TABLE touched AS SELECT s.rowid AS __state_row, s.* "
                      f"FROM {SESSIONS} s {touched}")
            state_part = f" UNION ALL SELECT {carried}, NULL, __state_row FROM touched"
        else:
            state_part = ""
        candidates = f"SELECT {carried}, __island, NULL::BIGINT AS __state_row FROM batch_sessions{state_part}"
        table = self._arrow_candidates(candidates)
        if table is not None:
            return table
        window = f"{self._partition()}ORDER BY {START}"
        flagged = (f"SELECT *, CASE WHEN {START} <= max({END}) OVER ({window} ROWS BETWEEN UNBOUNDED PRECEDING "
                   f"AND 1 PRECEDING) THEN 0 ELSE 1 END AS __new FROM ({candidates})")
        grouped = (f"SELECT *, sum(__new) OVER ({window} ROWS UNBOUNDED PRECEDING) AS __merged FROM ({flagged})")
        island = f"OVER ({self._partition('__merged')})"
        self._temp_tables.add("candidates")
        self._run(f"CREATE OR REPLACE TEMP TABLE candidates AS SELECT *, min({START}) {island} AS __merged_start, "
                  f"max({END}) {island} AS __merged_end FROM ({grouped})")
        return None

    def _arrow_candidates(self, candidates: str) -> pa.Table | None:
        """``candidates`` merged by gaps and islands over intervals in Arrow (``merged_intervals``:
        one sort, where SQL's three window functions partition and sort three times), registered
        as ``candidates`` and returned; None (nothing done) for keys Arrow does not sort or compare,
        or times too far apart to rank in one int64."""
        table = query_arrow(self.con, candidates, self.ctx.operator_id)
        table = self._sorted_by_key(table, START) if table.num_rows else None
        if table is None:
            return None
        merged = merged_intervals([table.column(k).chunk(0) for k in self.key_columns],
                                  table.column(START).chunk(0), table.column(END).chunk(0))
        if merged is None:
            return None
        for name, values in zip(("__merged", "__merged_start", "__merged_end"), merged):
            table = table.append_column(name, arrow_array(values))
        self._register("candidates", table)
        return table

    def _sorted_by_key(self, table: pa.Table, time: str) -> pa.Table | None:
        """``table`` sorted by the keys, then ``time``, in one chunk; None for keys Arrow does not
        compare or sort (the SQL paths take those)."""
        if not all(comparable(table.column(k).type) for k in self.key_columns):
            return None
        try:
            return table.take(key_time_order(table, self.key_columns, time)).combine_chunks()
        except pa.ArrowNotImplementedError:
            return None

    def _register(self, name: str, table: pa.Table) -> None:
        """``table`` registered with the connection as ``name``, in place of the temp table of
        that name the SQL path may have made."""
        if name in self._temp_tables:
            self._run(f"DROP TABLE {name}")
            self._temp_tables.discard(name)
        self.con.register(name, table)

    def _merge_distinct(self, d: DistinctAccumulator) -> None:
        """Rename the values of merged sessions to the merged start; add the batch's values."""
        if d.table in self._tables:
            on = " AND ".join(self._same_key(d.table, "c") + [f"{d.table}.{START} = c.{START}"])
            self._run(f"UPDATE {d.table} SET {START} = c.__merged_start FROM candidates c "
                      f"WHERE c.__state_row IS NOT NULL AND c.__merged_start <> c.{START} AND {on}")
        where = [f"r.{d.argument_column} IS NOT NULL"]
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
    def process_watermark(self, watermark: int) -> Iterable[pa.RecordBatch]:
        """Steps 1–4 of the module docstring; the fired sessions stream out in bounded batches
        (``engine.operators.firings``) and are deleted once read."""
        self.open()
        if not self.clock.advance(watermark):
            return []
        if self._earliest_pending is not None and self._earliest_pending < watermark:
            self._process_pending(watermark)
        if self._earliest_end is None or self._earliest_end - LAG > watermark:
            return []
        fired = f"{END} - {LAG} <= {int_literal(watermark)}"
        return self.stream_firing(self._emit_sql(fired), lambda: self._evict(fired),
                                  small=self._open_sessions <= small_firing_rows())

    def _count_sessions(self) -> None:
        """``_earliest_end`` and ``_open_sessions`` of ``session_accumulators`` as it is."""
        self._earliest_end, self._open_sessions = (
            self._run(f"SELECT min({END}), count(*) FROM {SESSIONS}")[0] if SESSIONS in self._tables else (None, 0))

    def _evict(self, fired: str) -> None:
        """Delete the sessions ``fired`` selects, once their rows were emitted."""
        for d in self.distincts:  # before the sessions, which say what fired
            if d.table in self._tables:
                on = " AND ".join(self._same_key("s", d.table) + [f"s.{START} = {d.table}.{START}"])
                self._run(f"DELETE FROM {d.table} WHERE EXISTS (SELECT 1 FROM {SESSIONS} s WHERE s.{fired} AND {on})")
        self._run(f"DELETE FROM {SESSIONS} WHERE {fired}")
        self._count_sessions()

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
        self._flush_held()
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
        known = {SESSIONS, PENDING, *(d.table for d in self.distincts)}
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="session window",
                              operator_id=oid, known=known)
        for name in sorted(self._tables):
            self._run(f"DROP TABLE IF EXISTS {name}")
        self._tables.clear()
        for name, table in tables.items():
            create_table_from_arrow(self.con, name, table, oid)
            self._tables.add(name)
        if PENDING in tables:  # taken with the bad-rows setting and restored without it, or the other way
            has_rows = ROW_JSON in tables[PENDING].schema.names
            if self._bad_rows is not None and not has_rows:
                self._run(f"ALTER TABLE {PENDING} ADD COLUMN {ROW_JSON} VARCHAR")
            elif self._bad_rows is None and has_rows:
                self._run(f"ALTER TABLE {PENDING} DROP COLUMN {ROW_JSON}")
        self.clock = EventTimeClock(state["watermark"])
        self._count_sessions()
        self._earliest_pending, self._sequence = (
            self._run(f"SELECT min({ROW_WATERMARK}), coalesce(max({ROW_SEQUENCE}) + 1, 0) FROM {PENDING}")[0]
            if PENDING in self._tables else (None, 0))
        self._held, self._in_table = [], self._earliest_pending is not None

