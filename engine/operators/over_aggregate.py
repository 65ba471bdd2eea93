"""OverAggregate: aggregates OVER a frame of preceding rows ordered by event time (Flink's OVER).

Config (``OverAggregateConfig``)::

    columns:        (name, ...)           # the input's columns (passed through, in order)
    partition_keys: (column, ...)         # PARTITION BY (empty: one partition)
    time_column:    column                # ORDER BY, a time attribute, ascending
    frame:          OverFrame(kind="rows", preceding=n)       # ROWS BETWEEN n PRECEDING AND CURRENT ROW
                  | OverFrame(kind="range", preceding=µs)     # RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW
                  | OverFrame(kind="unbounded", mode="rows" | "range")  # UNBOUNDED PRECEDING AND CURRENT ROW
    aggregates:     (OverCall(name="_over0", function="count" | "sum" | "min" | "max" | "avg",
                              argument=column or None, result_type=type SQL, label=text), ...)
                    # or a Python aggregate function: OverCall(function=its name, python=PythonAggregateSpec)

Output: the input's columns, then one column per aggregate.

As in Flink, a row is emitted once the watermark passes its time, with the
aggregates over its frame; rows wait in ``pending`` until then, and rows at or
behind the watermark when they arrive are late: dropped and counted. The
output is therefore append-only and in time order per partition. Rows with
equal times are ordered by all their columns, so a ROWS frame never depends on
arrival order; a RANGE frame includes rows with the current row's time (peers).

Per watermark, one DuckDB statement runs the window functions over the
retained ``history`` and the newly complete rows, and emits the new ones.
Aggregates are kept as per-row partials (``accumulators.PARTIALS``: count 1 or
0, sum/min/max the value, avg both) merged by the window function (SUM, MIN,
MAX), and their results are those of every aggregate (``accumulators.FUNCTIONS``):
Flink's result types, AVG of an integer truncated, SUM's overflow an error.
``history`` holds partial sums in DuckDB's SUM type (HUGEINT for integers), so ``history``
keeps only what future frames need: the last n rows per key (ROWS), the rows
of the last interval per key (RANGE), or one row per key holding the merged
partials so far (UNBOUNDED: a running accumulator). Its result equals DuckDB's
own window function over all rows when no row is late.

Python aggregate functions (``engine.udafs``, Flink's ``AggregateFunction``) cannot be window
functions: each keeps one pickled accumulator per partition key in ``over_accumulators`` (key
group, key columns, a BLOB per function), which always holds exactly the key's ``history`` rows
(all its rows, UNBOUNDED). Per watermark, before the built-ins' statement:

1. The complete rows are numbered in the window's order (``over_ready``: ``__id``; identical rows
   apart too, so the built-ins' and the functions' values meet on one row).
2. One statement lists, per key that fires or loses rows, its history then its complete rows in
   that order, each complete row's frame as positions ``lo:hi`` among them (ROWS: the n before;
   RANGE: its peers and the rows within the interval) and how many rows ``_prune`` will drop.
3. ``PythonAggregate.over_frames`` slides the key's accumulator: per frame it retracts the rows
   leaving it, accumulates those entering it (Flink's order; slices to ``accumulate_batch`` /
   ``retract_batch`` where the class has them) and calls ``get_value`` once — RANGE peers share it —
   then retracts the rows about to be pruned. The values go to ``over_values`` (joined to the
   output by ``__id``), the accumulators back to ``over_accumulators``; a key whose bounded frame
   emptied keeps none (it starts again from ``create_accumulator``). A bounded frame needs
   ``retract``; the planner refuses a function without one, and so does ``__init__``.

With ``bad_rows`` ('python.udf.bad-rows.table') a complete row a function's ``accumulate`` raises on
in step 3 goes to the bad-rows table and is deleted from ``pending``, and steps 1-3 run again
(``_slide_ready``; ``bad_aggregate_rows``): the row has no output row of its own and no frame
counts it, built-ins included, as if filtered out before the OVER (its own output would need its
own accumulate; emitting it over the frame of the rows before would be a value no filter gives).
``retract`` raising as a row leaves a frame still fails the job: that row was counted in the
frames before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.accumulators import AggregateCall, Partial
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.bad_aggregate_rows import is_bad_row, keep_python, raising_rows
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.late_rows import BadRows
from weir.engine.operators.duckdb_sql import (create_table_from_arrow, int_literal, query_arrow, quote_ident,
                                              snapshot_tables)
from weir.engine.operators.firings import StreamsFirings
from weir.engine.pandas_import import arrow_array, numpy_values
from weir.engine.state.key_groups import key_groups
from weir.engine.udafs import PythonAggregate, PythonAggregateSpec
from weir.engine.udfs import UdfError, take_failure
from weir.engine.watermarks import USE, row_watermarks, without_arrival
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables

STATE_TABLES = ("pending", "history")
#: With Python aggregate functions: one pickled accumulator per key and function (``__u<i>``).
ACCUMULATORS = "over_accumulators"
#: A firing's complete rows, numbered (``__id``), and the Python aggregates' values of each.
READY, VALUES, DONE = "over_ready", "over_values", "over_done"
ROW_ID = "__id"
TIME = "__t"
INPUT_VIEW = "over_input"
SNAPSHOT_VERSION = 1
FRAME_KINDS = ("rows", "range", "unbounded")
#: How to give a Python aggregate function the retract a bounded OVER frame needs.
RETRACT_HINT = ("define retract(self, acc, *args) (or retract_batch(self, acc, *arrays)), which takes a row back "
                "out of acc as it leaves the frame, or aggregate OVER an UNBOUNDED PRECEDING frame, which needs none")
#: The time of an UNBOUNDED frame's accumulator row: before every real row.
ACCUMULATOR_TIME = MIN_WATERMARK


@dataclass(frozen=True)
class OverFrame(OperatorConfig):
    #: "rows", "range" or "unbounded".
    kind: str
    #: Rows (ROWS) or µs (RANGE) before the current row.
    preceding: int | None = optional()
    #: An UNBOUNDED frame's "rows" or "range".
    mode: str | None = optional()


@dataclass(frozen=True)
class OverCall(OperatorConfig):
    """One aggregate OVER the frame: ``function(argument)`` named ``name``."""

    name: str
    function: str
    argument: str | None = None
    #: The call as the user wrote it, for error messages.
    label: str | None = None
    #: Flink's result type as DuckDB type SQL (SUM, AVG); None: DuckDB's type.
    result_type: str | None = optional()
    #: A Python aggregate function (``engine.udafs``); ``function`` is then its SQL name and
    #: ``argument`` its argument column (a struct a0, a1, ... for several; None for none).
    python: PythonAggregateSpec | None = optional()


@dataclass(frozen=True)
class OverAggregateConfig(OperatorConfig):
    #: The input's columns, passed through in order.
    columns: tuple[str, ...]
    #: ORDER BY: a time attribute, ascending.
    time_column: str
    frame: OverFrame
    aggregates: tuple[OverCall, ...]
    #: PARTITION BY (empty: one partition).
    partition_keys: tuple[str, ...] = ()
    #: With 'python.udf.bad-rows.table': a row a Python aggregate function's ``accumulate`` raises
    #: on goes to the bad-rows table and is left out, as if filtered out before the OVER.
    bad_rows: bool = optional(False)


class OverAggregate(StreamsFirings, StateOperator):
    Config = OverAggregateConfig
    #: State: the frame decides the history kept, the aggregates its partials.
    STATE_CONFIG = ("columns", "partition_keys", "time_column", "frame", "aggregates")
    arrival_watermark = USE
    keyed_by = ("partition_keys",)
    merges_snapshots = True
    drops_late_rows = True

    @classmethod
    def explain(cls, config: OverAggregateConfig) -> list[str]:
        frame = config.frame
        kept = {"rows": f"the last {frame.preceding} rows per key",
                "range": "the rows of the last interval per key",
                "unbounded": "one running accumulator per key"}[frame.kind]
        python = [a.function for a in config.aggregates if a.python is not None]
        accumulators = f"; a pickled accumulator per key of {', '.join(python)}" if python else ""
        return explain_lines(", ".join(config.partition_keys) or "- (one partition)",
                             f"rows waiting for the watermark (sorted by time), and {kept}{accumulators}")

    def __init__(self, config: OverAggregateConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        self.columns: list[str] = list(config.columns)
        self.keys: list[str] = list(config.partition_keys)
        self.time_column: str = config.time_column
        self.frame: OverFrame = config.frame
        self.aggregates: list[OverCall] = list(config.aggregates)
        missing = [c for c in (*self.keys, self.time_column, *(a.argument for a in self.aggregates))
                   if c is not None and c not in self.columns]
        if missing:
            raise EngineError(f"over_aggregate names columns its input does not have: {missing}",
                              hint=f"its columns: {self.columns}", operator_id=oid)
        if self.frame.kind not in FRAME_KINDS:
            raise EngineError(f"unknown OVER frame {self.frame.kind!r}", hint=f"one of: {', '.join(FRAME_KINDS)}",
                              operator_id=oid)
        if self.frame.kind != "unbounded" and int(-1 if self.frame.preceding is None else self.frame.preceding) < 0:
            raise EngineError("an OVER frame needs a non-negative 'preceding'", operator_id=oid)
        #: The built-in aggregates by index (DuckDB window functions over partials), and the
        #: Python aggregate functions by index (accumulators slid over the frames).
        self.calls = {i: AggregateCall.from_config(
            {"name": a.name, "function": a.function, "argument": a.argument, "result_type": a.result_type,
             "label": a.label}, oid) for i, a in enumerate(self.aggregates) if a.python is None}
        self.python = {i: PythonAggregate(a.python, oid) for i, a in enumerate(self.aggregates)
                       if a.python is not None}
        for i, function in self.python.items():
            if self.frame.kind != "unbounded" and not function.spec.retracts:
                raise EngineError(f"the Python aggregate function {function.spec.name} has no retract method, "
                                  "which a bounded OVER frame needs (rows leave the frame)", hint=RETRACT_HINT,
                                  operator_id=oid)
        #: Rows a Python aggregate's accumulate raises on, kept (``bad_rows``; ``_slide_ready``).
        self._bad_rows = BadRows(ctx) if config.bad_rows and self.python else None
        keep_python(list(self.python.values()))
        self.state_tables = STATE_TABLES + ((ACCUMULATORS,) if self.python else ())
        if len(ctx.output_schema) != len(self.columns) + len(self.aggregates):
            raise EngineError(f"over_aggregate's output has {len(ctx.output_schema)} columns, not the input's "
                              f"{len(self.columns)} and {len(self.aggregates)} aggregates", operator_id=oid)
        self.clock = EventTimeClock()
        self._earliest_pending: int | None = None

    # -- names ---------------------------------------------------------------
    def _c(self, name: str) -> str:
        return f"c{self.columns.index(name)}"

    def _partials(self, index: int) -> list[tuple[str, str, Partial]]:
        """(column, per-row SQL, partial kind) of aggregate ``index``'s partials."""
        call = self.calls[index]
        arg = self._c(call.argument) if call.argument else None
        return [(f"p{index}_{p.kind}", p.of_row(arg), p) for p in call.definition.partials()]

    def _all_partials(self) -> list[tuple[str, str, Partial]]:
        return [p for i in self.calls for p in self._partials(i)]

    def _partition(self) -> str:
        return f"PARTITION BY {', '.join(self._c(k) for k in self.keys)} " if self.keys else ""

    # -- lifecycle -----------------------------------------------------------
    def create_state(self) -> None:
        inputs = list(self.ctx.output_schema)[:len(self.columns)]
        base = [pa.field("key_group", pa.int64()), pa.field(TIME, pa.int64()),
                *(f.with_name(f"c{i}") for i, f in enumerate(inputs))]
        oid = self.ctx.operator_id
        create_table_from_arrow(self.con, "pending", pa.schema(base).empty_table(), oid)
        # Partials in the type their merge has (SUM of an INTEGER: HUGEINT), so a running sum never wraps.
        partials = "".join(f", {p.merge_sql(sql, ' OVER ()')} AS {column}" for column, sql, p in self._all_partials())
        self._run(f"CREATE TABLE history AS SELECT *{partials} FROM pending WHERE false")
        if self.python:
            blobs = "".join(f", CAST(NULL AS BLOB) AS __u{i}" for i in self.python)
            self._run(f"CREATE TABLE {ACCUMULATORS} AS SELECT key_group"
                      f"{''.join(f', {self._c(k)}' for k in self.keys)}{blobs} FROM pending WHERE false")

    # -- batches -------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        watermarks = row_watermarks(batch, self.clock.watermark)  # the watermark each row met
        batch = without_arrival(batch)
        if batch.num_columns != len(self.columns):
            raise EngineError(f"the input has {batch.num_columns} columns, over_aggregate expects "
                              f"{len(self.columns)}: {self.columns}", operator_id=self.ctx.operator_id)
        times = self._times(batch)
        keep = pc.is_valid(times)
        nulls = batch.num_rows - (pc.sum(keep).as_py() or 0) if times.null_count else 0
        if nulls:
            self.ctx.count("null_time_rows_dropped", nulls)
        if watermarks is not None:
            late = pc.fill_null(pc.less_equal(times, watermarks), False)
            late_count = pc.sum(late).as_py() or 0
            if late_count:
                self.ctx.count_late(late_count, input_index)
                keep = pc.and_(keep, pc.invert(late))
        groups = key_groups(batch, self.keys, self.ctx.max_parallelism).cast(pa.int64())
        rows = pa.RecordBatch.from_arrays([groups, times, *batch.columns],
                                          names=["key_group", TIME, *(f"c{i}" for i in range(batch.num_columns))])
        if not pc.all(keep).as_py():
            rows = rows.filter(keep)
        if rows.num_rows == 0:
            return []
        earliest = pc.min(rows.column(1)).as_py()
        if self._earliest_pending is None or earliest < self._earliest_pending:
            self._earliest_pending = earliest
        self.con.register(INPUT_VIEW, rows)
        try:
            self._run(f"INSERT INTO pending SELECT * FROM {INPUT_VIEW}")
        finally:
            self.con.unregister(INPUT_VIEW)
        return []

    def _times(self, batch: pa.RecordBatch) -> pa.Array:
        column = batch.column(self.columns.index(self.time_column))
        if not pa.types.is_timestamp(column.type):
            raise EngineError(f"the time column {self.time_column!r} is {column.type}, not a timestamp",
                              operator_id=self.ctx.operator_id)
        if column.type.unit != "us":
            column = column.cast(pa.timestamp("us", column.type.tz))
        return column.view(pa.int64())

    # -- watermarks ----------------------------------------------------------
    def _order(self, descending: bool = False, numbered: bool = False) -> str:
        """Time, then every input column: rows with equal times in an order independent of arrival
        (``numbered``: then a firing's row number, which tells identical rows apart)."""
        direction = " DESC NULLS FIRST" if descending else " ASC NULLS LAST"  # exactly reversed
        return ", ".join([f"{TIME}{direction}", *(f"c{i}{direction}" for i in range(len(self.columns))),
                          *([f"{ROW_ID} ASC NULLS FIRST"] if numbered else [])])

    def _window(self, numbered: bool = False) -> str:
        partition = self._partition()
        kind = self.frame.kind
        if kind == "rows":
            return (f"{partition}ORDER BY {self._order(numbered=numbered)} "
                    f"ROWS BETWEEN {int(self.frame.preceding)} PRECEDING AND CURRENT ROW")
        if kind == "range":
            return (f"{partition}ORDER BY {TIME} "
                    f"RANGE BETWEEN {int(self.frame.preceding)} PRECEDING AND CURRENT ROW")
        if self.frame.mode == "rows":
            return (f"{partition}ORDER BY {self._order(numbered=numbered)} "
                    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW")
        return f"{partition}ORDER BY {TIME} RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"

    def _final(self, index: int) -> str:
        return self.calls[index].result_sql({p.kind: p.merge_sql(column, " OVER w")
                                             for column, _, p in self._partials(index)})

    def process_watermark(self, watermark: int) -> Iterable[pa.RecordBatch]:
        self.open()
        if not self.clock.advance(watermark):
            return []
        if self._earliest_pending is None or self._earliest_pending > watermark:
            return []
        upto = int_literal(watermark)
        inputs = ", ".join(f"c{i}" for i in range(len(self.columns)))
        partials = "".join(f", {sql} AS {c}" for c, sql, _ in self._all_partials())
        ready = f"SELECT key_group, {TIME}, {inputs}{partials} FROM pending WHERE {TIME} <= {upto}"
        numbered = bool(self.python)
        if numbered:  # the Python aggregates first: their values per row number, in a table
            self._slide_ready(ready, watermark)
            ready = f"SELECT key_group, {TIME}, {inputs}{partials} FROM {READY}"
        results = ", ".join(f"a{i}" for i in range(len(self.aggregates)))
        source = f"SELECT * FROM {READY}" if numbered else ready
        if self.calls:
            finals = ", ".join(f"{self._final(i)} AS a{i}" for i in self.calls)
            source = (f"SELECT * FROM (SELECT *, {finals} FROM ("
                      f"SELECT *, false AS __history FROM ({source}) UNION ALL BY NAME "
                      f"SELECT *, true AS __history FROM history) "
                      f"WINDOW w AS ({self._window(numbered)})) WHERE NOT __history")
        if numbered:
            source = f"SELECT * FROM ({source}) JOIN {VALUES} USING ({ROW_ID})"
        sql = f"SELECT {inputs}, {results} FROM ({source}) ORDER BY {self._order(numbered=numbered)}"

        def evict() -> None:  # the rows emitted join the history; pending keeps what is ahead
            self._run(f"INSERT INTO history BY NAME {ready}")
            self._run(f"DELETE FROM pending WHERE {TIME} <= {upto}")
            self._prune(watermark)
            if numbered:
                self._run(f"DROP TABLE IF EXISTS {READY}")
                self._run(f"DROP TABLE IF EXISTS {VALUES}")
            self._earliest_pending = self._run(f"SELECT min({TIME}) FROM pending")[0][0]

        return self.stream_firing(sql, evict)

    # -- Python aggregate functions ---------------------------------------------
    def _number_ready(self, ready: str) -> None:
        order = ", ".join(["key_group", *(self._c(k) for k in self.keys), self._order()])
        self._run(f"CREATE OR REPLACE TABLE {READY} AS SELECT row_number() OVER (ORDER BY {order}) "
                  f"AS {ROW_ID}, * FROM ({ready})")

    def _slide_ready(self, ready: str, watermark: int) -> None:
        """The complete rows (``ready``) numbered into ``READY`` and the Python aggregates slid over
        them (steps 1-3). With ``bad_rows``, should a function's accumulate raise (``_slide_python``
        writes nothing then), the complete rows it raises on (``bad_aggregate_rows.raising_rows``,
        per key in the window's order) are kept, deleted from ``pending`` and both steps run again
        without them: no output row for them, and no frame counts them (built-ins too), as if
        filtered out before the OVER."""
        self._number_ready(ready)
        if self._bad_rows is None:
            self._slide_python(watermark)
            return
        try:
            self._slide_python(watermark)
            return
        except UdfError as error:
            if not is_bad_row(error):
                raise
            first = error
        keys = [self._c(k) for k in self.keys]
        functions = [(f, self._c(self.aggregates[i].argument) if self.aggregates[i].argument else "NULL", None)
                     for i, f in self.python.items()]
        failures = raising_rows(self.con, f"SELECT * FROM {READY}", ["key_group", *keys], keys, functions,
                                self.ctx.operator_id, number=ROW_ID)
        if not failures:
            raise first
        numbers = sorted(failures)
        listed = ", ".join(map(str, numbers))
        names = ", ".join(f"c{i} AS {quote_ident(name)}" for i, name in enumerate(self.columns))
        rows = query_arrow(self.con, f"SELECT {names} FROM {READY} WHERE {ROW_ID} IN ({listed}) ORDER BY {ROW_ID}",
                           self.ctx.operator_id)
        self._bad_rows.keep(rows.combine_chunks().to_batches()[0], [failures[n] for n in numbers])
        same = " AND ".join(f"p.{c} IS NOT DISTINCT FROM b.{c}"
                            for c in ["key_group", TIME, *(f"c{i}" for i in range(len(self.columns)))])
        self._run(f"DELETE FROM pending p USING (SELECT * FROM {READY} WHERE {ROW_ID} IN ({listed})) b WHERE {same}")
        self._number_ready(ready)
        self._slide_python(watermark)

    def _frames_sql(self, watermark: int) -> str:
        """Per key that fires or loses rows: its rows in the window's order (the history's, which
        its accumulators hold, then the firing's) as one list ``__seq`` of each function's argument
        ``u<i>`` and, for a firing row, its ``id`` and its frame as positions ``lo:hi`` among them;
        how many rows it has and how many of them ``_prune`` will drop; its accumulators."""
        keys = ["key_group", *(self._c(k) for k in self.keys)]
        key_list = ", ".join(keys)
        partition = f"PARTITION BY {key_list}"
        inputs = ", ".join(f"c{i}" for i in range(len(self.columns)))
        kind = self.frame.kind
        rows = f"SELECT key_group, {TIME}, {inputs}, {ROW_ID} FROM {READY}"
        if kind != "unbounded":  # a bounded frame retracts the history's rows as they leave it
            rows = (f"SELECT key_group, {TIME}, {inputs}, CAST(NULL AS BIGINT) AS {ROW_ID} FROM history "
                    f"UNION ALL BY NAME {rows}")
        numbered = (f"SELECT *, row_number() OVER ({partition} ORDER BY {self._order(numbered=True)}) AS __n "
                    f"FROM ({rows})")
        peers = f"count(*) OVER ({partition} ORDER BY {TIME} RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
        if kind == "rows":
            high, low = "__n", f"greatest(__n - 1 - {int(self.frame.preceding)}, 0)"
            drop = f"greatest(count(*) - {int(self.frame.preceding)}, 0)"
        elif kind == "range":
            span = (f"count(*) OVER ({partition} ORDER BY {TIME} "
                    f"RANGE BETWEEN {int(self.frame.preceding)} PRECEDING AND CURRENT ROW)")
            high, low = peers, f"{peers} - {span}"
            drop = f"count(*) FILTER (WHERE {TIME} <= {int_literal(watermark - int(self.frame.preceding))})"
        else:
            high, low, drop = ("__n" if self.frame.mode == "rows" else peers), "0", "0"
        fields = "".join(f", 'u{i}': {self._c(self.aggregates[i].argument)}"
                         for i in self.python if self.aggregates[i].argument is not None)
        grouped = (f"SELECT {key_list}, count(*) AS __rows, count({ROW_ID}) AS __ready, {drop} AS __drop, "
                   f"list({{'id': {ROW_ID}, 'lo': __lo, 'hi': __hi{fields}}} ORDER BY __n) AS __seq "
                   f"FROM (SELECT *, {low} AS __lo, {high} AS __hi FROM ({numbered})) GROUP BY {key_list}")
        same = " AND ".join(f"a.{k} IS NOT DISTINCT FROM f.{k}" for k in keys)
        blobs = "".join(f", a.__u{i}" for i in self.python)
        return (f"SELECT f.*{blobs} FROM ({grouped}) f LEFT JOIN {ACCUMULATORS} a ON {same} "
                f"WHERE f.__ready > 0 OR f.__drop > 0 ORDER BY {', '.join(f'f.{k}' for k in keys)}")

    def _slide_python(self, watermark: int) -> None:
        """Slide each Python aggregate's accumulators over the firing's frames (``udafs.over_frames``):
        their values per row go to ``over_values``, the accumulators after to ``over_accumulators``
        (a key whose bounded frame emptied keeps none)."""
        frames = query_arrow(self.con, self._frames_sql(watermark), self.ctx.operator_id)
        seq = frames.column("__seq").combine_chunks()
        rows = seq.flatten()  # every key's rows, key after key: its history's first, then its firing's
        offsets = numpy_values(seq.offsets) - seq.offsets[0].as_py()
        firing = rows.field("id").is_valid()
        counts = numpy_values(frames.column("__rows"))
        ready_counts = numpy_values(frames.column("__ready"))
        ready = np.concatenate([[0], np.cumsum(ready_counts)])
        history = counts - ready_counts
        los = numpy_values(rows.field("lo").filter(firing))
        his = numpy_values(rows.field("hi").filter(firing))
        drops = numpy_values(frames.column("__drop"))
        key_names = [self._c(k) for k in self.keys]
        keys = list(zip(*(frames.column(k).to_pylist() for k in key_names))) if key_names else None
        values, done = {ROW_ID: rows.field("id").filter(firing)}, {}
        for i, function in self.python.items():
            arguments = rows.field(f"u{i}") if self.aggregates[i].argument is not None else None
            try:
                blobs, results = function.over_frames(frames.column(f"__u{i}").to_pylist(), arguments, offsets,
                                                      history, los, his, ready, drops, keys)
            except UdfError as error:
                raise UdfError(error.message, hint=error.hint, operator_id=self.ctx.operator_id) from error
            except Exception as exc:  # the user's method: recorded by udafs with its row and key
                failure = take_failure()
                if failure is None:
                    raise
                raise failure.engine_error(self.ctx.operator_id) from exc
            values[f"a{i}"], done[f"__u{i}"] = results, pa.array(blobs, pa.binary())
        emptied = arrow_array(counts == drops) if self.frame.kind != "unbounded" else pa.repeat(False, len(counts))
        done_table = pa.table({"key_group": frames.column("key_group"),
                               **{k: frames.column(k) for k in key_names}, **done, "__emptied": emptied})
        self.con.register(DONE, done_table)
        try:
            same = " AND ".join(f"a.{k} IS NOT DISTINCT FROM d.{k}" for k in ["key_group", *key_names])
            self._run(f"DELETE FROM {ACCUMULATORS} a USING {DONE} d WHERE {same}")
            self._run(f"INSERT INTO {ACCUMULATORS} BY NAME SELECT * EXCLUDE (__emptied) FROM {DONE} "
                      "WHERE NOT __emptied")
        finally:
            self.con.unregister(DONE)
        self.con.register("over_values_arrow", pa.table(values))
        try:
            self._run(f"CREATE OR REPLACE TABLE {VALUES} AS SELECT * FROM over_values_arrow")
        finally:
            self.con.unregister("over_values_arrow")

    def _prune(self, watermark: int) -> None:
        """Keep only the history a future row's frame can reach."""
        kind = self.frame.kind
        partition = self._partition()
        if kind == "rows":
            keep = int(self.frame.preceding)
            self._run(f"DELETE FROM history WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number() OVER "
                      f"({partition}ORDER BY {self._order(descending=True)}) AS n FROM history) WHERE n > {keep})")
        elif kind == "range":
            self._run(f"DELETE FROM history WHERE {TIME} <= {int_literal(watermark - int(self.frame.preceding))}")
        else:
            self._compact()

    def _compact(self) -> None:
        """UNBOUNDED: one accumulator row per key, its partials merged (none without built-ins:
        the Python aggregates' accumulators hold all)."""
        keys = [self._c(k) for k in self.keys]
        partials = self._all_partials()
        if not partials:
            self._run("DELETE FROM history")
            return
        merged = ", ".join(f"{p.merge_sql(column)} AS {column}" for column, _, p in partials)
        group = f" GROUP BY key_group, {', '.join(keys)}" if keys else " GROUP BY key_group"
        self._run(f"CREATE OR REPLACE TEMP TABLE compacted AS SELECT key_group, "
                  f"{''.join(f'{k}, ' for k in keys)}{merged} FROM history{group}")
        self._run("DELETE FROM history")
        self._run(f"INSERT INTO history BY NAME SELECT {int_literal(ACCUMULATOR_TIME)} AS {TIME}, * FROM compacted")
        self._run("DROP TABLE compacted")

    def close(self) -> None:
        if self._bad_rows is not None:
            self._bad_rows.close()
        super().close()

    def state_rows(self) -> dict[str, int]:
        self.open()
        return {name: self._run(f"SELECT count(*) FROM {name}")[0][0] for name in self.state_tables}

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        self.open()
        return snapshot_tables(self.con, self.state_tables, self.ctx, version=SNAPSHOT_VERSION,
                               watermark=self.clock.watermark)

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="OVER aggregate")

    def restore(self, state: dict[str, Any]) -> None:
        self.open()
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="OVER aggregate",
                              operator_id=self.ctx.operator_id, known=set(self.state_tables))
        for name, table in tables.items():
            self._run(f"DELETE FROM {name}")
            self.con.register("restored_state", table)
            try:
                self._run(f"INSERT INTO {name} BY NAME SELECT * FROM restored_state")
            finally:
                self.con.unregister("restored_state")
        self.clock = EventTimeClock(state["watermark"])
        self._earliest_pending = self._run(f"SELECT min({TIME}) FROM pending")[0][0]
