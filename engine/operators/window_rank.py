"""WindowRank: window Top-N and window deduplication, state in DuckDB.

Config (``WindowRankConfig``)::

    window_start="window_start", window_end="window_end",
    partition_keys=("auction",),            # besides the window bounds
    order_by=("price DESC NULLS LAST",),    # SQL over the input columns
    function="row_number",                  # or "rank", "dense_rank"
    rank_column="rownum",
    rank_range=(1, 3),                      # the ranks kept, both ends inclusive
    filter=sql or None,                     # over the input columns and rank_column
    projection=((name, sql), ...),          # over the input columns and rank_column
    ties="earliest_first"                   # or "latest_first" (keep-last deduplication)
    late_rows=...                           # optional: ``engine.operators.late_rows``

The input rows carry their window's bounds (from a window aggregate or a
window table function). Rows are buffered per window in the DuckDB table
``window_rows``; when the watermark reaches a window's ``window_end - 1 ms``
its rows are ranked with one set-based query, the kept ranks emitted and the
window's rows deleted. A row arriving after its window fired is late: counted
(``late_rows_dropped``) and dropped, as are rows with a NULL window_end.

Ties: ``ROW_NUMBER`` orders rows that tie on ``order_by`` by arrival, as
Flink does (``tie_break``): each buffered row has ``_arrival``, a counter of
the rows this operator has received, kept in state; the earliest ranks first,
or with ``ties`` = ``latest_first`` (keep-last deduplication, ORDER BY a
time DESC) the latest. A window and its keys live in one key group, so
arrival order within a partition survives restoring at another parallelism;
new rows after a restore count on from the largest restored ``_arrival``.
``RANK`` and ``DENSE_RANK`` give ties the same rank and use the tie-break only
to order the output. Output is ordered by window_end, window_start, partition
keys, rank, tie-break.

Ranks only grow as rows are added, so a row ranked past the upper end of
``rank_range`` can never come back: when the buffered rows have doubled since
the last pruning they are cut to the rows still in range, which keeps the
state at about N rows per window and key. The result equals DuckDB's batch
query ``SELECT <projection> FROM (SELECT *, <function>() OVER (PARTITION BY
window_start, window_end, keys ORDER BY order_by, tie-break) FROM input)
WHERE rank BETWEEN lo AND hi AND <filter>`` over the rows that were not late,
with their arrival position as the last ORDER BY column.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.late_rows import LateRows, LateRowsConfig
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.operators.batches import positions
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.firings import StreamsFirings
from weir.engine.operators.duckdb_sql import (create_table_from_arrow, int_literal, quote_ident,
                                              snapshot_table)
from weir.engine.operators.windows import WINDOW_TIME_LAG_US
from weir.engine.state.key_groups import key_groups
from weir.engine.watermarks import USE, row_watermarks, without_arrival
from weir.engine.state.keyed_tables import KEY_GROUP, merge_snapshots, owned_tables

WINDOW_ROWS = "window_rows"
INPUT_VIEW = "window_rank_input"
RANK_FUNCTIONS = ("row_number", "rank", "dense_rank")
ARRIVAL = "_arrival"
SNAPSHOT_VERSION = 2  # 2: rows carry _arrival
PRUNE_MIN_ROWS = 65_536


@dataclass(frozen=True)
class WindowRankConfig(OperatorConfig):
    #: SQL over the input columns, per sort key.
    order_by: tuple[str, ...]
    rank_column: str
    #: The ranks kept, both ends inclusive.
    rank_range: tuple[int, int]
    #: ((name, SQL over the input columns and rank_column), ...).
    projection: tuple[tuple[str, str], ...]
    window_start: str = "window_start"
    window_end: str = "window_end"
    #: Besides the window bounds.
    partition_keys: tuple[str, ...] = ()
    #: "row_number", "rank" or "dense_rank".
    function: str = "row_number"
    #: SQL over the input columns and rank_column, or None.
    filter: str | None = None
    #: "earliest_first" or "latest_first" (keep-last deduplication).
    ties: str = "earliest_first"
    late_rows: LateRowsConfig | None = optional()


class WindowRank(StreamsFirings, StateOperator):
    Config = WindowRankConfig
    #: State: rows past the rank range are pruned, so the order and the ranks shape what is kept.
    STATE_CONFIG = ("window_start", "window_end", "partition_keys", "order_by", "function", "rank_range")
    arrival_watermark = USE
    keyed_by = ("partition_keys",)
    merges_snapshots = True
    windowed = True
    late_rows_table = True
    drops_late_rows = True

    @classmethod
    def explain(cls, config: WindowRankConfig) -> list[str]:
        per = ", ".join([*config.partition_keys, "window"])
        return explain_lines(", ".join(config.partition_keys) or "- (one ranking per window)",
                             f"rows per ({per}), cut to those that can still rank within {config.rank_range[1]}, "
                             "dropped when the watermark passes window_end")

    def __init__(self, config: WindowRankConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        self.late_rows = LateRows(config.late_rows, ctx)
        oid = ctx.operator_id
        for required in ("order_by", "rank_range", "projection", "rank_column"):
            if not getattr(config, required):
                raise EngineError(f"window_rank config lacks {required!r}", operator_id=oid)
        self.function = str(config.function).lower()
        if self.function not in RANK_FUNCTIONS:
            raise EngineError(f"unknown rank function {self.function!r}",
                              hint=f"known: {', '.join(RANK_FUNCTIONS)}", operator_id=oid)
        self.window_start: str = config.window_start
        self.window_end: str = config.window_end
        self.partition_keys: list[str] = list(config.partition_keys)
        self.order_by: list[str] = list(config.order_by)
        self.rank_column: str = config.rank_column
        low, high = config.rank_range
        self.low, self.high = int(low), int(high)
        self.filter: str | None = config.filter
        self.projection: list[tuple[str, str]] = list(config.projection)
        self.ties = config.ties or "earliest_first"
        if self.ties not in ("earliest_first", "latest_first"):
            raise EngineError(f"unknown tie order {self.ties!r}", hint="earliest_first or latest_first",
                              operator_id=oid)
        self.clock = EventTimeClock()
        #: The arrival sequence of the next row (kept in state as the rows' ``_arrival``).
        self._next_arrival = 0
        self._has_table = False  # window_rows exists
        #: Input column names, known from the first batch or the restored state.
        self.columns: list[str] | None = None
        self._rows = 0
        self._rows_after_pruning = 0
        #: The smallest window_end (µs) buffered, None when no row is; saves a query per watermark.
        self._earliest_end: int | None = None

    # -- lifecycle -----------------------------------------------------------
    def close(self) -> None:
        self.late_rows.close()
        super().close()

    # -- batches -------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        watermarks = row_watermarks(batch, self.clock.watermark)  # the watermark each row met
        batch = without_arrival(batch)
        self._check_columns(batch.schema)
        ends = self._window_ends(batch)
        keep = pc.is_valid(ends)
        nulls = batch.num_rows - pc.sum(keep).as_py() if ends.null_count else 0
        if nulls:
            self.ctx.count("null_time_rows_dropped", nulls)
        if watermarks is not None:
            open_ = pc.greater(pc.subtract(ends, WINDOW_TIME_LAG_US), watermarks)
            self.late_rows.drop(batch, pc.and_(keep, pc.invert(open_)), watermarks)
            keep = pc.and_(keep, open_)
        if nulls or watermarks is not None:
            batch, ends = batch.filter(keep), ends.filter(keep)
            if batch.num_rows == 0:
                return []
        earliest = pc.min(ends).as_py()
        if self._earliest_end is None or earliest < self._earliest_end:
            self._earliest_end = earliest
        groups = key_groups(batch, [self.window_start, self.window_end, *self.partition_keys],
                            self.ctx.max_parallelism)
        batch = batch.append_column(KEY_GROUP, groups).append_column(
            ARRIVAL, positions(batch.num_rows, self._next_arrival))
        self._next_arrival += batch.num_rows
        self.con.register(INPUT_VIEW, batch)
        try:
            if self._has_table:
                (inserted,) = self._run(f"INSERT INTO {WINDOW_ROWS} BY NAME SELECT * FROM {INPUT_VIEW}")[0]
            else:
                self._run(f"CREATE TABLE {WINDOW_ROWS} AS SELECT * FROM {INPUT_VIEW}")
                self._has_table, inserted = True, batch.num_rows
        finally:
            self.con.unregister(INPUT_VIEW)
        self._rows += inserted
        if self._rows - self._rows_after_pruning > max(self._rows_after_pruning, PRUNE_MIN_ROWS):
            self._prune()
        return []

    def _check_columns(self, schema: pa.Schema) -> None:
        if self.columns is not None:
            return
        names = schema.names
        for reserved in (KEY_GROUP, ARRIVAL):
            if reserved in names:
                raise EngineError(f"the input has a column named {reserved!r}, which window state reserves",
                                  hint=f"rename it in the query (AS {reserved}_)",
                                  operator_id=self.ctx.operator_id)
        for column in (self.window_start, self.window_end, *self.partition_keys):
            if column not in names:
                raise EngineError(f"the partition column {column!r} is not in the input",
                                  hint=f"input columns: {names}", operator_id=self.ctx.operator_id)
        self.columns = names

    def _window_ends(self, batch: pa.RecordBatch) -> pa.Array:
        """window_end of every row as µs (int64)."""
        column = batch.column(batch.schema.get_field_index(self.window_end))
        if not pa.types.is_timestamp(column.type):
            raise EngineError(f"the window bound {self.window_end!r} is {column.type}, not a timestamp",
                              operator_id=self.ctx.operator_id)
        if column.type.unit != "us":
            column = column.cast(pa.timestamp("us", column.type.tz))
        return column.view(pa.int64())

    # -- ranking -------------------------------------------------------------
    def _tie_break(self) -> list[str]:
        return [f"{ARRIVAL} DESC" if self.ties == "latest_first" else ARRIVAL]

    def _rank_sql(self) -> str:
        """``<function>() OVER (PARTITION BY window, keys ORDER BY ...)``."""
        partition = ", ".join(quote_ident(c) for c in (self.window_start, self.window_end, *self.partition_keys))
        order = list(self.order_by)
        if self.function == "row_number":
            order += self._tie_break()
        return f"{self.function}() OVER (PARTITION BY {partition} ORDER BY {', '.join(order)})"

    def _prune(self) -> None:
        """Keep only rows that can still rank within the upper bound."""
        pruned = f"{WINDOW_ROWS}__pruned"
        self._run(f"CREATE TABLE {pruned} AS SELECT * FROM {WINDOW_ROWS} "
                  f"QUALIFY {self._rank_sql()} <= {int_literal(self.high)} ORDER BY {KEY_GROUP}")
        self._run(f"DROP TABLE {WINDOW_ROWS}")
        self._run(f"ALTER TABLE {pruned} RENAME TO {WINDOW_ROWS}")
        (self._rows,) = self._run(f"SELECT count(*) FROM {WINDOW_ROWS}")[0]
        self._rows_after_pruning = self._rows

    def _fired(self, end_bound: int) -> str:
        """The rows of windows with window_end <= ``end_bound`` (µs)."""
        return f"epoch_us({quote_ident(self.window_end)}) <= {int_literal(end_bound)}"

    def _emit_sql(self, end_bound: int) -> str:
        columns = ", ".join(quote_ident(c) for c in self.columns)
        ranked = (f"SELECT {columns}, {ARRIVAL}, {self._rank_sql()} AS {quote_ident(self.rank_column)} "
                  f"FROM {WINDOW_ROWS} WHERE {self._fired(end_bound)}")
        rank = quote_ident(self.rank_column)
        where = f"{rank} BETWEEN {int_literal(self.low)} AND {int_literal(self.high)}"
        if self.filter:
            where += f" AND ({self.filter})"
        order = [quote_ident(c) for c in (self.window_end, self.window_start, *self.partition_keys)]
        order += [rank, *self._tie_break()]
        projection = ", ".join(f"{sql} AS {quote_ident(name)}" for name, sql in self.projection)
        return (f"SELECT {projection} FROM ({ranked}) AS ranked WHERE {where} "
                f"ORDER BY {', '.join('ranked.' + o for o in order)}")

    # -- watermarks ----------------------------------------------------------
    def process_watermark(self, watermark: int) -> Iterable[pa.RecordBatch]:
        """The kept ranks of every window the watermark completes, streamed out in bounded
        batches (``engine.operators.firings``); the windows' rows are deleted once read."""
        self.open()
        if not self.clock.advance(watermark):
            return []
        end_bound = min(watermark, 2**63 - 1 - WINDOW_TIME_LAG_US) + WINDOW_TIME_LAG_US
        if self._earliest_end is None or self._earliest_end > end_bound:
            return []
        return self.stream_firing(self._emit_sql(end_bound), lambda: self._evict(end_bound))

    def _evict(self, end_bound: int) -> None:
        """Delete the rows of the windows that fired (window_end <= ``end_bound``), once ranked and emitted."""
        (deleted,) = self._run(f"DELETE FROM {WINDOW_ROWS} WHERE {self._fired(end_bound)}")[0]
        self._rows -= deleted
        self._rows_after_pruning = min(self._rows_after_pruning, self._rows)
        self._earliest_end = self._run(f"SELECT min(epoch_us({quote_ident(self.window_end)})) FROM {WINDOW_ROWS}")[0][0]

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables": {"window_rows": pa.Table}}``;
        the table has a ``key_group`` column and is ordered by it."""
        self.open()
        tables = {}
        if self._has_table:
            tables[WINDOW_ROWS] = snapshot_table(
                self.con, f"SELECT * FROM {WINDOW_ROWS} ORDER BY {KEY_GROUP}", self.ctx, WINDOW_ROWS)
        return {
            "version": SNAPSHOT_VERSION,
            "watermark": self.clock.watermark,
            "max_parallelism": self.ctx.max_parallelism,
            "tables": tables,
        }

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        """Several subtasks' snapshots as one, for restoring at another parallelism."""
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="window rank")

    def restore(self, state: dict[str, Any]) -> None:
        """Load a snapshot (or merged snapshots), keeping the key groups this subtask owns."""
        self.open()
        oid = self.ctx.operator_id
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="window rank",
                              operator_id=oid, known={WINDOW_ROWS})
        self._run(f"DROP TABLE IF EXISTS {WINDOW_ROWS}")
        self._has_table = False
        self.clock = EventTimeClock(state["watermark"])
        self._rows = self._rows_after_pruning = 0
        self._earliest_end = None
        self._next_arrival = 0
        table = tables.get(WINDOW_ROWS)
        if table is None:
            return
        self.columns = [c for c in table.schema.names if c not in (KEY_GROUP, ARRIVAL)]
        create_table_from_arrow(self.con, WINDOW_ROWS, table, oid)
        self._has_table = True
        self._rows = self._rows_after_pruning = table.num_rows
        self._earliest_end, last = self._run(
            f"SELECT min(epoch_us({quote_ident(self.window_end)})), max({ARRIVAL}) FROM {WINDOW_ROWS}")[0]
        self._next_arrival = 0 if last is None else last + 1

