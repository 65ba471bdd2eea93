"""WindowJoin: Flink's window join of two windowed inputs, state in DuckDB.

Config (``WindowJoinConfig``)::

    join_type:  "inner" | "left" | "right" | "full" | "semi" | "anti"
    null_aware: False   # anti only: NOT IN semantics (a NULL key matches anything)
    condition:  None    # inner only: SQL over the output columns a joined row must satisfy
    left:       WindowJoinSide(columns=(name, ...), keys=(column, ...),
                               window_start=column, window_end=column)
    right:      WindowJoinSide(...the same for the right input)
    late_rows:  (optional: ``engine.operators.late_rows``)

Input 0 is the left side, input 1 the right. Both carry the window bounds of
one window definition (TUMBLE today; any assigner whose rows have
``window_start`` and ``window_end`` works, since rows arrive with their
window already assigned). Keys are column names: the planner computes key
expressions before the exchange, which hashes both sides by their keys into
the same key groups.

Per batch: rows with a NULL ``window_end`` and late rows (their window already
fired: ``window_end - 1 ms <= watermark``) are counted (``late_rows_dropped``
and per side ``late_rows_dropped_left``/``_right``) and dropped; the rest are
held in Arrow as they came, with their ``window_end`` in µs
(``engine.operators.held_rows``: no DuckDB statement per batch). Past
``HELD_BYTES`` held, the held rows move into the state tables ``left_rows``
and ``right_rows`` with their key group (DuckDB spills them); a restored
snapshot is there too. Per watermark (the minimum of both inputs'): the rows of
every window with ``window_end - 1 ms <= watermark`` — held ones registered as a
view, and those of the tables — are joined by one DuckDB statement with the
join type's semantics and emitted — the left columns, then the right ones
(NULLs for a missing outer side); SEMI and ANTI emit each left row once, left
columns only — and the window's rows are dropped (an emptied table with them).
An inner join's ``condition`` (Flink's non-equi join condition, e.g. Nexmark q5's
``num >= maxn``) filters the joined rows in the same statement, so that only
those leave DuckDB. A firing whose rows are all held is joined in Arrow instead where
that is exact and bounded (``arrow_join``), its condition too where it compares two
columns (``arrow_join.ColumnComparison``: q5's, one statement per window saved).
A snapshot holds each side's rows, held and in its table, as one table by key
group (the format does not depend on where the rows were).

The result equals DuckDB's batch join over the rows that were not late::

    SELECT * FROM left l <type> JOIN right r
    ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k ...
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
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.firings import StreamsFirings, small_firing_rows
from weir.engine.operators.held_rows import HeldRows
from weir.engine.operators.arrow_join import ColumnComparison, equi_join
from weir.engine.operators import duckdb_sql
from weir.engine.operators.duckdb_sql import create_table_from_arrow, int_literal, quote_ident, snapshot_table
from weir.engine.operators.windows import WINDOW_TIME_LAG_US
from weir.engine.pandas_import import scalar
from weir.engine.state.key_groups import key_groups
from weir.engine.watermarks import USE, row_watermarks, without_arrival
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables

JOIN_TYPES = ("inner", "left", "right", "full", "semi", "anti")
SIDES = ("left", "right")
#: The state table of each input: its rows by key group and window, until the window fires.
STATE_TABLES = ("left_rows", "right_rows")
WINDOW_END = "__window_end"
#: The view of a side's held rows being moved into its table or snapshotted (those of the
#: windows firing: ``_Side.fired``).
HELD_VIEW = "join_held"
#: Past this many bytes of rows held in Arrow (both sides), they move into the state tables,
#: where DuckDB keeps them within its memory share and spills.
HELD_BYTES = 64 << 20
SNAPSHOT_VERSION = 1
#: A firing is joined in Arrow (``arrow_join``) where it cannot make more rows than this many
#: output batches (``duckdb_sql.OUTPUT_BATCH_ROWS``): as many as a streamed firing holds at most.
ARROW_JOIN_BATCHES = 2
#: The firing's order column, where a condition filters the joined rows.
ORDER = "__weir_order"
MAX_BIGINT = 2**63 - 1


@dataclass(frozen=True)
class WindowJoinSide(OperatorConfig):
    #: The input's column names, in order.
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    #: The input's columns holding its window's bounds.
    window_start: str
    window_end: str


@dataclass(frozen=True)
class WindowJoinConfig(OperatorConfig):
    #: "inner", "left", "right", "full", "semi" or "anti".
    join_type: str
    left: WindowJoinSide
    right: WindowJoinSide
    #: ANTI only: NOT IN semantics (a NULL key matches anything).
    null_aware: bool = False
    late_rows: LateRowsConfig | None = optional()
    #: INNER only: SQL over the output columns (named as in the output schema) that a joined row
    #: must satisfy, or None.
    condition: str | None = optional()


class _Side:
    """One input's configuration: where its keys and window bounds are."""

    def __init__(self, name: str, config: WindowJoinSide, operator_id: str):
        self.name = name
        self.table = STATE_TABLES[SIDES.index(name)]
        #: The view of its held rows of the windows firing, while the firing's join runs.
        self.fired = f"{self.table}_fired"
        #: The input's column names, in order.
        self.columns: list[str] = list(config.columns)
        self.keys: list[str] = list(config.keys)
        self.window_start: str = config.window_start
        self.window_end: str = config.window_end
        missing = [c for c in (*self.keys, self.window_start, self.window_end) if c not in self.columns]
        if missing:
            raise EngineError(f"window_join's {name} side names columns it does not have: {missing}",
                              hint=f"its columns: {self.columns}", operator_id=operator_id)

    def column(self, name: str) -> str:
        """The state table's column for input column ``name`` (c0, c1, ...: input names may clash)."""
        return f"c{self.columns.index(name)}"


class WindowJoin(StreamsFirings, StateOperator):
    Config = WindowJoinConfig
    #: State: each side's buffered rows and their keys.
    STATE_CONFIG = ("join_type", "left", "right")
    arrival_watermark = USE
    keyed_by = ("left.keys", "right.keys")
    merges_snapshots = True
    windowed = True
    late_rows_table = True
    drops_late_rows = True

    @classmethod
    def explain(cls, config: WindowJoinConfig) -> list[str]:
        left, right = config.left.keys, config.right.keys
        return explain_lines(f"{', '.join(left)} | {', '.join(right)}" if left else "- (one group per window)",
                             "rows of each input per (key, window), dropped when the watermark passes window_end")

    def __init__(self, config: WindowJoinConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        self.late_rows = LateRows(config.late_rows, ctx)
        oid = ctx.operator_id
        self.join_type = str(config.join_type).lower()
        if self.join_type not in JOIN_TYPES:
            raise EngineError(f"unknown window join type {config.join_type!r}",
                              hint=f"one of: {', '.join(JOIN_TYPES)}", operator_id=oid)
        self.null_aware = bool(config.null_aware) and self.join_type == "anti"
        self.condition = config.condition
        if self.condition and self.join_type != "inner":
            raise EngineError(f"a {self.join_type} window join cannot filter its joined rows by a condition",
                              hint="only an inner join's condition can; filter after the join",
                              operator_id=oid)
        #: The condition where Arrow can filter by it (``arrow_join.ColumnComparison``), else None.
        self._comparison = ColumnComparison.parse(self.condition)
        self.sides = [_Side(name, getattr(config, name), oid) for name in SIDES]
        if len(self.sides[0].keys) != len(self.sides[1].keys):
            raise EngineError("window_join needs as many keys on the left as on the right",
                              operator_id=oid)
        self.clock = EventTimeClock()
        #: Each side's rows held in Arrow (``held_rows``), until they fire or grow past ``HELD_BYTES``.
        self._held = [HeldRows(), HeldRows()]
        #: The state tables that exist (holding rows moved out of Arrow or restored); the earliest
        #: window_end held anywhere (None: no state).
        self._created: set[str] = set()
        self._earliest_end: int | None = None

    # -- lifecycle -----------------------------------------------------------
    def close(self) -> None:
        self.late_rows.close()
        super().close()

    # -- batches -------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        if input_index not in (0, 1):
            raise EngineError(f"window_join has two inputs, got a batch on input {input_index}",
                              operator_id=self.ctx.operator_id)
        side = self.sides[input_index]
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        watermarks = row_watermarks(batch, self.clock.watermark)  # the watermark each row met
        batch = without_arrival(batch)
        if batch.num_columns != len(side.columns):
            raise EngineError(f"the {side.name} input has {batch.num_columns} columns, the join "
                              f"expects {len(side.columns)}: {side.columns}", operator_id=self.ctx.operator_id)
        ends = self._window_ends(batch, side)
        keep = pc.is_valid(ends)
        nulls = batch.num_rows - pc.sum(keep).as_py() if ends.null_count else 0
        if nulls:
            self.ctx.count("null_time_rows_dropped", nulls)
        if watermarks is not None:
            met = scalar(watermarks) if isinstance(watermarks, int) else watermarks  # typed: no pandas import
            late = pc.fill_null(pc.less_equal(pc.subtract(ends, scalar(WINDOW_TIME_LAG_US)), met), scalar(False))
            late_count = self.late_rows.drop(batch, late, watermarks, input_index)
            if late_count:
                self.ctx.count(f"late_rows_dropped_{side.name}", late_count)
                keep = pc.and_(keep, pc.invert(late))
        rows = pa.RecordBatch.from_arrays(
            [ends, *batch.columns], names=[WINDOW_END, *(f"c{i}" for i in range(batch.num_columns))])
        if not pc.all(keep).as_py():
            rows = rows.filter(keep)
        if rows.num_rows == 0:
            return []
        earliest = self._held[input_index].add(rows)  # (not a scan of every batch held)
        if self._earliest_end is None or earliest < self._earliest_end:
            self._earliest_end = earliest
        if sum(h.nbytes for h in self._held) > HELD_BYTES:
            for s in self.sides:
                self._move_to_table(s)
        return []

    def _with_key_groups(self, side: _Side, batches: list[pa.RecordBatch]) -> pa.Table:
        """Held rows as the state table keeps them: their key group first."""
        table = pa.Table.from_batches(batches, self._held[self.sides.index(side)].schema)
        groups = key_groups(table, [side.column(k) for k in side.keys], self.ctx.max_parallelism)
        return table.add_column(0, "key_group", groups.cast(pa.int64()))

    def _move_to_table(self, side: _Side) -> None:
        """The side's held rows into its state table (one statement), where DuckDB spills them."""
        held = self._held[self.sides.index(side)]
        if not held:
            return
        self.con.register(HELD_VIEW, self._with_key_groups(side, held.take()))
        try:
            if side.table in self._created:
                self._run(f"INSERT INTO {side.table} SELECT * FROM {HELD_VIEW}")
            else:
                self._run(f"CREATE TABLE {side.table} AS SELECT * FROM {HELD_VIEW}")
                self._created.add(side.table)
        finally:
            self.con.unregister(HELD_VIEW)

    def _window_ends(self, batch: pa.RecordBatch, side: _Side) -> pa.Array:
        """The batch's window_end column in µs since the epoch (int64)."""
        index = batch.schema.get_field_index(side.window_end)
        if index < 0:
            raise EngineError(
                f"the {side.name} input has no window_end column {side.window_end!r}",
                hint=f"its columns: {batch.schema.names}", operator_id=self.ctx.operator_id,
            )
        column = batch.column(index)
        if not pa.types.is_timestamp(column.type):
            raise EngineError(f"the {side.name} input's {side.window_end!r} is {column.type}, "
                              "not a timestamp", operator_id=self.ctx.operator_id)
        if column.type.unit != "us":
            column = column.cast(pa.timestamp("us", column.type.tz))
        return column.view(pa.int64())

    # -- watermarks ----------------------------------------------------------
    def process_watermark(self, watermark: int) -> Iterable[pa.RecordBatch]:
        """The joined rows of every window the watermark completes, streamed out in bounded
        batches (``engine.operators.firings``); the windows' rows are deleted once read."""
        self.open()
        if not self.clock.advance(watermark):
            return []
        upto = min(watermark + WINDOW_TIME_LAG_US, MAX_BIGINT)
        if self._earliest_end is None or self._earliest_end > upto:
            return []
        views, rests = {}, []
        for side, held in zip(self.sides, self._held):
            fired, rest = held.split(upto)
            rests.append(rest)
            if fired:
                views[side.fired] = pa.Table.from_batches(fired, held.schema)
        joined = self._join_in_arrow(views)
        if joined is not None:
            return self.fired_table(joined, lambda: self._evict(upto, rests))
        return self.stream_firing(self._join_sql(upto, views), lambda: self._evict(upto, rests), views,
                                  small=self._small_firing(views))

    def _small_firing(self, views: dict[str, pa.Table]) -> bool:
        """Whether the firing's join makes at most ``small_firing_rows()`` rows, by its held rows
        (every fired row held: none in the tables), so that it is read at once."""
        if self._created:
            return False
        left, right = (views[s.fired].num_rows if s.fired in views else 0 for s in self.sides)
        return (left + 1) * (right + 1) <= small_firing_rows()

    def _join_in_arrow(self, views: dict[str, pa.Table]) -> pa.Table | None:
        """The firing joined in Arrow (``arrow_join``), ordered by window_end, where every fired
        row is held and the join is a plain one, its condition (if any) a comparison of two columns;
        None for the SQL join."""
        if (self.condition and self._comparison is None) or self.null_aware or self._created:
            return None
        tables, keys = [], []
        for side, held, prefix in zip(self.sides, self._held, "lr"):
            if held.schema is None:
                return None
            table = views.get(side.fired) or held.schema.empty_table()
            tables.append(table.rename_columns([f"{prefix}_end", *(f"{prefix}{i}" for i in range(len(side.columns)))]))
            keys.append([f"{prefix}_end", *(f"{prefix}{side.columns.index(c)}" for c in (side.window_start, *side.keys))])
        joined = equi_join(tables[0], tables[1], keys[0], keys[1], self.join_type,
                           ARROW_JOIN_BATCHES * duckdb_sql.OUTPUT_BATCH_ROWS)
        if joined is None:
            return None
        if self._comparison is not None:  # (an inner join's: its columns are named as the output's)
            names = [f"l{i}" for i in range(len(self.sides[0].columns))]
            names += [f"r{i}" for i in range(len(self.sides[1].columns))]
            keep = self._comparison.mask(joined, dict(zip(self.ctx.output_schema.names, names)))
            if keep is None:
                return None
            joined = joined.filter(keep)
        ends = joined.column("l_end") if self.join_type in ("semi", "anti") else \
            pc.coalesce(joined.column("l_end"), joined.column("r_end"))
        if joined.num_rows > 1:
            joined = joined.take(pc.sort_indices(ends))
        return joined.drop_columns([n for n in ("l_end", "r_end") if n in joined.schema.names])

    def _evict(self, upto: int, rests: list) -> None:
        """Drop the rows of the windows that fired (``window_end <= upto``), once joined and
        emitted: the held ones (``rests`` is what stays held) and those of the tables."""
        for held, rest in zip(self._held, rests):
            held.keep(rest)
        for name in sorted(self._created):
            self._run(f"DELETE FROM {name} WHERE {WINDOW_END} <= {int_literal(upto)}")
        self._earliest_end = self._state_earliest_end()

    def _fired_rows(self, side: _Side, upto: int, views: dict[str, pa.Table]) -> str:
        """The side's rows of fired windows (window_end, then its columns): of its table, and
        held (the view ``side.fired``); a side that has neither has none."""
        columns = ", ".join([WINDOW_END, *(f"c{i}" for i in range(len(side.columns)))])
        parts = []
        if side.table in self._created:
            parts.append(f"SELECT {columns} FROM {side.table} WHERE {WINDOW_END} <= {int_literal(upto)}")
        if side.fired in views:
            parts.append(f"SELECT {columns} FROM {side.fired}")
        if parts:
            return " UNION ALL ".join(parts)
        nulls = "".join(f", NULL AS c{i}" for i in range(len(side.columns)))
        return f"SELECT NULL::BIGINT AS {WINDOW_END}{nulls} WHERE false"

    def _equalities(self) -> str:
        """``l`` and ``r`` are in the same window and their keys are equal."""
        left, right = self.sides
        parts = [f"l.{WINDOW_END} = r.{WINDOW_END}",
                 f"l.{left.column(left.window_start)} = r.{right.column(right.window_start)}"]
        for lk, rk in zip(left.keys, right.keys):
            lc, rc = f"l.{left.column(lk)}", f"r.{right.column(rk)}"
            parts.append(f"({lc} = {rc} OR {lc} IS NULL OR {rc} IS NULL)"
                         if self.null_aware else f"{lc} = {rc}")
        return " AND ".join(parts)

    def _join_sql(self, upto: int, views: dict[str, pa.Table]) -> str:
        left, right = self.sides
        ctes = f"WITH l AS ({self._fired_rows(left, upto, views)}), r AS ({self._fired_rows(right, upto, views)}) "
        left_columns = [f"l.c{i}" for i in range(len(left.columns))]
        if self.join_type in ("semi", "anti"):
            exists = "EXISTS" if self.join_type == "semi" else "NOT EXISTS"
            return (f"{ctes}SELECT {', '.join(left_columns)} FROM l "
                    f"WHERE {exists} (SELECT 1 FROM r WHERE {self._equalities()}) ORDER BY l.{WINDOW_END}")
        right_columns = [f"r.c{i}" for i in range(len(right.columns))]
        order = f"coalesce(l.{WINDOW_END}, r.{WINDOW_END})"
        if self.condition:  # over the output's names, which the columns take first
            names = self.ctx.output_schema.names
            columns = [f"{c} AS {quote_ident(n)}" for c, n in zip(left_columns + right_columns, names)]
            return (f"{ctes}SELECT * EXCLUDE ({ORDER}) FROM (SELECT {', '.join(columns)}, {order} AS {ORDER} "
                    f"FROM l JOIN r ON {self._equalities()}) AS joined WHERE {self.condition} ORDER BY {ORDER}")
        return (
            f"{ctes}SELECT {', '.join(left_columns + right_columns)} "
            f"FROM l {self.join_type.upper()} JOIN r ON {self._equalities()} "
            f"ORDER BY {order}"
        )

    def _state_earliest_end(self) -> int | None:
        """The earliest window_end held or in a table; a table left empty is dropped."""
        ends = [held.earliest_end() for held in self._held]
        for name in sorted(self._created):
            end, = self._run(f"SELECT min({WINDOW_END}) FROM {name}")[0]
            if end is None:
                self._run(f"DROP TABLE {name}")
                self._created.discard(name)
            ends.append(end)
        ends = [e for e in ends if e is not None]
        return min(ends) if ends else None

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables": {name: pa.Table}}``;
        every table has a ``key_group`` column and is ordered by it."""
        self.open()
        tables = {side.table: self._snapshot_side(side) for side, held in zip(self.sides, self._held)
                  if side.table in self._created or held.schema is not None}
        return {
            "version": SNAPSHOT_VERSION,
            "watermark": self.clock.watermark,
            "max_parallelism": self.ctx.max_parallelism,
            "tables": tables,
        }

    def _snapshot_side(self, side: _Side) -> Any:
        """The side's rows, held and in its table, as its state table, ordered by key group."""
        held = self._held[self.sides.index(side)]
        if side.table in self._created and not held:
            return snapshot_table(self.con, f"SELECT * FROM {side.table} ORDER BY key_group", self.ctx, side.table)
        rows = f"SELECT * FROM {side.table} UNION ALL " if side.table in self._created else ""
        self.con.register(HELD_VIEW, self._with_key_groups(side, held.batches()))
        try:
            return snapshot_table(self.con, f"{rows}SELECT * FROM {HELD_VIEW} ORDER BY key_group",
                                  self.ctx, side.table)
        finally:
            self.con.unregister(HELD_VIEW)

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        """Several subtasks' snapshots as one, for restoring at another parallelism."""
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="window join")

    def restore(self, state: dict[str, Any]) -> None:
        """Load a snapshot (or merged snapshots), keeping the key groups this subtask owns."""
        self.open()
        oid = self.ctx.operator_id
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="window join",
                              operator_id=oid, known=set(STATE_TABLES))
        for name in sorted(self._created):
            self._run(f"DROP TABLE {name}")
        self._created.clear()
        self._held = [HeldRows(), HeldRows()]
        for name, table in tables.items():
            create_table_from_arrow(self.con, name, table, oid)
            self._created.add(name)
        self.clock = EventTimeClock(state["watermark"])
        self._earliest_end = self._state_earliest_end()

