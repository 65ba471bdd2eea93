"""IntervalJoin: Flink's interval join of two append-only inputs, state in DuckDB.

Config (``IntervalJoinConfig``)::

    join_type: "inner" | "left" | "right" | "full"
    lower, lower_strict: lo, False   # r.time - l.time >= lo  (> lo when strict), µs
    upper, upper_strict: hi, False   # r.time - l.time <= hi  (< hi when strict), µs
    left:  IntervalJoinSide(columns=(name, ...), keys=(column, ...), time=column)
    right: IntervalJoinSide(...the same for the right input)

Input 0 is the left side, input 1 the right; keys are equal on both sides
(hash edges put equal keys in the same key group). A left row at time ``lt``
joins the right rows of its key with ``lt + lo <= rt <= lt + hi``:
``b.ts BETWEEN a.ts - INTERVAL '1' HOUR AND a.ts + INTERVAL '10' MINUTE`` is
``lo = -1 h, hi = 10 min``.

Every pair is joined once, when the later of its two rows arrives. Per batch
of one side, one DuckDB statement joins the batch with the other side's
buffered rows (and, for an outer side, emits its rows that matched nothing and
can match nothing later, padded with NULLs); buffered rows of the other side
that matched are marked; the batch's rows that a future row of the other side
can still match are buffered. A future row of the other side has a time above
the watermark ``w`` (the minimum of both inputs'), so a left row is kept while
``lt + hi > w`` and a right row while ``rt - lo > w``. When the watermark passes
that bound the row is deleted — emitted first with NULLs when its side is
outer and it never matched, as in Flink. State therefore holds about
``hi`` (left) and ``-lo`` (right) of event time per input.

As in Flink, a row arriving behind the watermark is still joined with what is
buffered (and padded at once if it cannot be kept); nothing is dropped.
Emitted rows may be up to ``max(hi, -lo, 0)`` older than the watermark, so the
operator holds its output watermark back by that much (``output_watermark``).

The result equals DuckDB's batch join over all rows when no row is late::

    SELECT * FROM left l <type> JOIN right r
    ON l.k = r.k AND r.time BETWEEN l.time + lo AND l.time + hi
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.operators.batches import conform
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.duckdb_sql import create_table_from_arrow, int_literal, query_arrow, snapshot_tables
from weir.engine.operators.firings import StreamsFirings
from weir.engine.state.key_groups import key_groups
from weir.engine.watermarks import USE, row_watermarks, without_arrival
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables

JOIN_TYPES = ("inner", "left", "right", "full")
SIDES = ("left", "right")
#: The state table of each input: rows a future row of the other input may still match.
STATE_TABLES = ("left_rows", "right_rows")
TIME = "__t"
MATCHED = "__matched"
INPUT_VIEW = "join_input"
SNAPSHOT_VERSION = 1
ALIASES = ("l", "r")


@dataclass(frozen=True)
class IntervalJoinSide(OperatorConfig):
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    #: The side's time attribute.
    time: str


@dataclass(frozen=True)
class IntervalJoinConfig(OperatorConfig):
    #: "inner", "left", "right" or "full".
    join_type: str
    #: r.time - l.time >= lower (> when strict) and <= upper (< when strict), µs.
    lower: int
    upper: int
    left: IntervalJoinSide
    right: IntervalJoinSide
    lower_strict: bool = False
    upper_strict: bool = False


class _Side:
    def __init__(self, index: int, config: IntervalJoinSide, operator_id: str):
        self.index = index
        self.name = SIDES[index]
        self.table = STATE_TABLES[index]
        self.columns: list[str] = list(config.columns)
        self.keys: list[str] = list(config.keys)
        self.time: str = config.time
        missing = [c for c in (*self.keys, self.time) if c not in self.columns]
        if missing:
            raise EngineError(f"interval_join's {self.name} side names columns it does not have: {missing}",
                              hint=f"its columns: {self.columns}", operator_id=operator_id)

    def column(self, name: str) -> str:
        """The state column for input column ``name`` (c0, c1, ...: input names may clash)."""
        return f"c{self.columns.index(name)}"


class IntervalJoin(StreamsFirings, StateOperator):
    Config = IntervalJoinConfig
    #: State: the bounds decide how long each side's rows are buffered.
    STATE_CONFIG = ("join_type", "lower", "lower_strict", "upper", "upper_strict", "left", "right")
    arrival_watermark = USE
    keyed_by = ("left.keys", "right.keys")
    merges_snapshots = True
    holds_watermark_back = True

    @classmethod
    def explain(cls, config: IntervalJoinConfig) -> list[str]:
        left, right = config.left.keys, config.right.keys
        return explain_lines(
            f"{', '.join(left)} | {', '.join(right)}" if left else "- (one group)",
            "rows of each input per key, dropped when the watermark passes the last time a row "
            "of the other input could match them")

    def __init__(self, config: IntervalJoinConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        self.join_type = str(config.join_type).lower()
        if self.join_type not in JOIN_TYPES:
            raise EngineError(f"unknown interval join type {config.join_type!r}",
                              hint=f"one of: {', '.join(JOIN_TYPES)}", operator_id=oid)
        self.lower, self.upper = int(config.lower), int(config.upper)
        self.lower_strict = bool(config.lower_strict)
        self.upper_strict = bool(config.upper_strict)
        if self.lower > self.upper:
            raise EngineError(f"interval_join bounds are empty: {self.lower} > {self.upper}", operator_id=oid)
        self.sides = [_Side(i, getattr(config, name), oid) for i, name in enumerate(SIDES)]
        if len(self.sides[0].keys) != len(self.sides[1].keys):
            raise EngineError("interval_join needs as many keys on the left as on the right", operator_id=oid)
        widths = [len(s.columns) for s in self.sides]
        if sum(widths) != len(ctx.output_schema):
            raise EngineError(f"interval_join's output has {len(ctx.output_schema)} columns, its inputs "
                              f"{widths[0]} + {widths[1]}", operator_id=oid)
        #: Which sides keep their unmatched rows (padded with NULLs).
        self.outer = [self.join_type in ("left", "full"), self.join_type in ("right", "full")]
        self.clock = EventTimeClock()

    # -- lifecycle -----------------------------------------------------------
    def create_state(self) -> None:
        fields = list(self.ctx.output_schema)
        start = 0
        for side in self.sides:
            own = fields[start:start + len(side.columns)]
            start += len(side.columns)
            schema = pa.schema([pa.field("key_group", pa.int64()), pa.field(TIME, pa.int64()),
                                pa.field(MATCHED, pa.bool_()),
                                *(f.with_name(f"c{i}") for i, f in enumerate(own))])
            create_table_from_arrow(self.con, side.table, schema.empty_table(), self.ctx.operator_id)

    def output_watermark(self, watermark: int) -> int:
        """Rows emitted at watermark ``w`` are no older than ``w - max(hi, -lo, 0)``."""
        if watermark >= MAX_WATERMARK or watermark <= MIN_WATERMARK:
            return watermark
        return watermark - max(self.upper, -self.lower, 0)

    # -- SQL pieces ----------------------------------------------------------
    def _condition(self, left: str, right: str) -> str:
        """``left`` and ``right`` (aliases of a left and a right row set) match."""
        lo_op = ">" if self.lower_strict else ">="
        hi_op = "<" if self.upper_strict else "<="
        diff = f"({right}.{TIME} - {left}.{TIME})"
        parts = [f"{diff} {lo_op} {int_literal(self.lower)}", f"{diff} {hi_op} {int_literal(self.upper)}"]
        l_side, r_side = self.sides
        for lk, rk in zip(l_side.keys, r_side.keys):
            parts.insert(0, f"{left}.{l_side.column(lk)} = {right}.{r_side.column(rk)}")
        return " AND ".join(parts)

    def _keep_after(self, side: _Side) -> int:
        """Rows of ``side`` with a time above this can still match a future row of the other side."""
        w = self.clock.watermark
        return w - self.upper if side.index == 0 else w + self.lower

    def _select(self, side: _Side, alias: str | None) -> list[str]:
        """The side's output columns from ``alias``, or NULLs when ``alias`` is None (padding)."""
        return [f"{alias}.c{i}" if alias else "NULL" for i in range(len(side.columns))]

    def _padded(self, side: _Side, alias: str) -> str:
        own = self._select(side, alias)
        other = self._select(self.sides[1 - side.index], None)
        return ", ".join(own + other if side.index == 0 else other + own)

    # -- batches -------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        if input_index not in (0, 1):
            raise EngineError(f"interval_join has two inputs, got a batch on input {input_index}",
                              operator_id=self.ctx.operator_id)
        side = self.sides[input_index]
        other = self.sides[1 - input_index]
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        watermarks = row_watermarks(batch, self.clock.watermark)  # the watermark each row met
        batch = without_arrival(batch)
        if batch.num_columns != len(side.columns):
            raise EngineError(f"the {side.name} input has {batch.num_columns} columns, the join expects "
                              f"{len(side.columns)}: {side.columns}", operator_id=self.ctx.operator_id)
        times = self._times(batch, side)
        if watermarks is not None:
            late = pc.sum(pc.fill_null(pc.less_equal(times, watermarks), False)).as_py() or 0
            if late:
                self.ctx.count("late_rows_joined", late)
        groups = key_groups(batch, side.keys, self.ctx.max_parallelism).cast(pa.int64())
        rows = pa.RecordBatch.from_arrays(
            [groups, times, pa.nulls(batch.num_rows, pa.bool_()), *batch.columns],
            names=["key_group", TIME, MATCHED, *(f"c{i}" for i in range(batch.num_columns))])
        i, o = ALIASES[side.index], ALIASES[other.index]
        condition = self._condition("l", "r")
        keep = int_literal(self._keep_after(side))
        self.con.register(INPUT_VIEW, rows)
        try:
            both = ", ".join(self._select(self.sides[0], "l") + self._select(self.sides[1], "r"))
            sql = f"SELECT {both} FROM {INPUT_VIEW} {i} JOIN {other.table} {o} ON {condition}"
            if self.outer[side.index]:
                sql += (f" UNION ALL SELECT {self._padded(side, i)} FROM {INPUT_VIEW} {i} "
                        f"WHERE NOT coalesce({i}.{TIME} > {keep}, false) "
                        f"AND NOT EXISTS (SELECT 1 FROM {other.table} {o} WHERE {condition})")
            table = query_arrow(self.con, sql, self.ctx.operator_id)
            if self.outer[other.index]:
                self._run(f"UPDATE {other.table} {o} SET {MATCHED} = true WHERE NOT {o}.{MATCHED} "
                          f"AND EXISTS (SELECT 1 FROM {INPUT_VIEW} {i} WHERE {condition})")
            matched = (f"EXISTS (SELECT 1 FROM {other.table} {o} WHERE {condition})"
                       if self.outer[side.index] else "false")
            columns = ", ".join(f"{i}.c{n}" for n in range(len(side.columns)))
            self._run(f"INSERT INTO {side.table} SELECT {i}.key_group, {i}.{TIME}, {matched}, {columns} "
                      f"FROM {INPUT_VIEW} {i} WHERE {i}.{TIME} > {keep}")
        finally:
            self.con.unregister(INPUT_VIEW)
        self.ctx.count("rows_out", table.num_rows)
        return conform(table, self.ctx.output_schema, self.ctx.operator_id)

    def _times(self, batch: pa.RecordBatch, side: _Side) -> pa.Array:
        """The batch's time column in µs since the epoch (int64)."""
        column = batch.column(side.columns.index(side.time))
        if not pa.types.is_timestamp(column.type):
            raise EngineError(f"the {side.name} input's time column {side.time!r} is {column.type}, "
                              "not a timestamp", operator_id=self.ctx.operator_id)
        if column.type.unit != "us":
            column = column.cast(pa.timestamp("us", column.type.tz))
        return column.view(pa.int64())

    # -- watermarks ----------------------------------------------------------
    def process_watermark(self, watermark: int) -> Iterable[pa.RecordBatch]:
        """Delete the rows no future row can match; an outer side's that never matched are
        emitted first, padded with NULLs, streamed out in bounded batches (``StreamsFirings``)."""
        self.open()
        if not self.clock.advance(watermark):
            return []
        keeps = {side.index: int_literal(self._keep_after(side)) for side in self.sides}

        def evict() -> None:
            for side in self.sides:
                self._run(f"DELETE FROM {side.table} WHERE {TIME} <= {keeps[side.index]}")

        padded = [f"SELECT {side.index} AS __side, {self._padded(side, ALIASES[side.index])} FROM {side.table} "
                  f"{ALIASES[side.index]} WHERE {ALIASES[side.index]}.{TIME} <= {keeps[side.index]} "
                  f"AND NOT {ALIASES[side.index]}.{MATCHED}"
                  for side in self.sides if self.outer[side.index]]
        if not padded:
            evict()
            return []
        if len(padded) == 1:
            return self.stream_firing(f"SELECT * EXCLUDE (__side) FROM ({padded[0]})", evict)
        return self.stream_firing(f"SELECT * EXCLUDE (__side) FROM ({' UNION ALL '.join(padded)}) "
                                  f"ORDER BY __side", evict)

    def state_rows(self) -> dict[str, int]:
        """Rows buffered per input (for tests and metrics)."""
        self.open()
        return {side.name: self._run(f"SELECT count(*) FROM {side.table}")[0][0] for side in self.sides}

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables": {name: pa.Table}}``;
        every table has a ``key_group`` column and is ordered by it."""
        self.open()
        return snapshot_tables(self.con, STATE_TABLES, self.ctx, version=SNAPSHOT_VERSION,
                               watermark=self.clock.watermark)

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="interval join")

    def restore(self, state: dict[str, Any]) -> None:
        self.open()
        oid = self.ctx.operator_id
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="interval join",
                              operator_id=oid, known=set(STATE_TABLES))
        for name in STATE_TABLES:
            if name in tables:
                self._run(f"DELETE FROM {name}")
                self.con.register("restored_state", tables[name])
                try:
                    self._run(f"INSERT INTO {name} SELECT * FROM restored_state")
                finally:
                    self.con.unregister("restored_state")
        self.clock = EventTimeClock(state["watermark"])
