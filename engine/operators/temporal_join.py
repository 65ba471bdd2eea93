"""TemporalJoin: each row joined with the version of a versioned table valid at its event time.

Flink's event-time temporal join (``JOIN rates FOR SYSTEM_TIME AS OF o.order_time``).
Config (``TemporalJoinConfig``)::

    join_type: "inner" | "left"
    left:      TemporalJoinSide(schema=<schema_to_json>, keys=(...), time=column, names=(...))
    right:     TemporalJoinSide(...the same for the versioned table: each row is a new version of its key)

Input 0 is the stream, input 1 the versioned table (append-only: every row is
the version of its key from its time on). Left rows wait in ``left_rows``
until the watermark (the minimum of both inputs') passes their time; right
rows are kept in ``versions``. A watermark W emits every waiting row with time
<= W, joined (DuckDB's ``ASOF JOIN``) with the latest version of its key whose
time is at most the row's — none for an INNER join drops the row, a LEFT
join pads it with NULLs — ordered by time; then deletes those rows and every
version older than the latest one at or before W, which no later row can see.
A left row whose time is already behind the watermark when it arrives is late:
counted and dropped. Output: the left columns, then the right ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.schemas import schema_from_json
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines, without_output_names
from weir.engine.operators.batches import conform
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.duckdb_sql import create_table_from_arrow, int_literal, query_arrow, quote_ident, snapshot_tables
from weir.engine.state.key_groups import key_groups
from weir.engine.watermarks import USE, row_watermarks
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables

TABLES = ("left_rows", "versions")
INPUT = "temporal_input"
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class TemporalJoinSide(OperatorConfig):
    #: The input's columns (``engine.graph.schema_to_json``).
    schema: str
    keys: tuple[str, ...]
    #: The side's time attribute.
    time: str
    #: The output name of each column; None: the columns' own.
    names: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TemporalJoinConfig(OperatorConfig):
    #: "inner" or "left".
    join_type: str
    left: TemporalJoinSide
    #: The versioned table: each row is a new version of its key.
    right: TemporalJoinSide


class _Side:
    def __init__(self, index: int, config: TemporalJoinSide, operator_id: str):
        self.table = TABLES[index]
        self.schema = schema_from_json(config.schema)
        self.keys = list(config.keys)
        self.time = config.time
        self.names = list(config.names or self.schema.names)
        self.columns = self.schema.names

    def data(self, relation: str) -> list[str]:
        return [f"{relation}.c{i}" for i in range(len(self.columns))]

    def key(self, relation: str) -> list[str]:
        return [f"{relation}.c{self.columns.index(k)}" for k in self.keys]

    def empty(self) -> pa.Table:
        fields = [pa.field("key_group", pa.int32()), pa.field("_ts", pa.int64())]
        return pa.schema(fields + [pa.field(f"c{i}", f.type) for i, f in enumerate(self.schema)]).empty_table()


class TemporalJoin(StateOperator):
    Config = TemporalJoinConfig
    #: State: the waiting rows and the versions, by key and time; output names do not count.
    STATE_CONFIG = ("join_type", "left", "right")

    @classmethod
    def state_shape(cls, config: TemporalJoinConfig | dict[str, Any]) -> dict[str, Any]:
        return without_output_names(super().state_shape(config))
    arrival_watermark = USE
    keyed_by = ("left.keys", "right.keys")
    merges_snapshots = True
    drops_late_rows = True

    @classmethod
    def explain(cls, config: TemporalJoinConfig) -> list[str]:
        return explain_lines(f"{', '.join(config.left.keys)} | {', '.join(config.right.keys)}",
                             "rows waiting for the watermark to pass their time, and per key the versions they "
                             "may still join: older versions dropped as the watermark passes")

    def __init__(self, config: TemporalJoinConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        self.join_type = config.join_type
        if self.join_type not in ("inner", "left"):
            raise EngineError(f"an event-time temporal join is INNER or LEFT, not {self.join_type!r}",
                              operator_id=ctx.operator_id)
        self.sides = [_Side(i, getattr(config, name), ctx.operator_id) for i, name in enumerate(("left", "right"))]
        self.clock = EventTimeClock()

    def create_state(self) -> None:
        for side in self.sides:
            create_table_from_arrow(self.con, side.table, side.empty(), self.ctx.operator_id)

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        side = self.sides[input_index]
        times = batch.column(batch.schema.get_field_index(side.time))
        times = times.cast(pa.timestamp("us")).view(pa.int64()) if pa.types.is_timestamp(times.type) else times
        keep = pc.is_valid(times)
        watermarks = row_watermarks(batch, self.clock.watermark) if input_index == 0 else None
        if watermarks is not None:  # a stream row behind the watermark it met is late
            late = pc.fill_null(pc.less_equal(times, watermarks), False)
            late_count = pc.sum(late).as_py() or 0
            if late_count:
                self.ctx.count_late(late_count, input_index)
                keep = pc.and_(keep, pc.invert(late))
        rows = pa.RecordBatch.from_arrays(
            [key_groups(batch, side.keys, self.ctx.max_parallelism), times,
             *(batch.column(batch.schema.get_field_index(c)) for c in side.columns)],
            names=["key_group", "_ts", *(f"c{i}" for i in range(len(side.columns)))])
        if not pc.all(keep).as_py():
            rows = rows.filter(keep)
        if rows.num_rows:
            self.con.register(INPUT, rows)
            try:
                self._run(f"INSERT INTO {side.table} SELECT * FROM {INPUT}")
            finally:
                self.con.unregister(INPUT)
        return []

    def process_watermark(self, watermark: int) -> list[pa.RecordBatch]:
        self.open()
        if not self.clock.advance(watermark):
            return []
        left, right = self.sides
        w = int_literal(watermark)
        keys = " AND ".join(f"{a} = {b}" for a, b in zip(left.key("l"), right.key("r")))
        columns = ", ".join([*(f"{c} AS {quote_ident(n)}" for c, n in zip(left.data("l"), left.names)),
                             *(f"{c} AS {quote_ident(n)}" for c, n in zip(right.data("r"), right.names))])
        asof = "ASOF LEFT JOIN" if self.join_type == "left" else "ASOF JOIN"
        out = query_arrow(self.con, (
            f"SELECT {columns} FROM (SELECT * FROM left_rows WHERE _ts <= {w}) l {asof} versions r "
            f"ON {keys} AND l._ts >= r._ts ORDER BY l._ts"), self.ctx.operator_id)
        self._run(f"DELETE FROM left_rows WHERE _ts <= {w}")
        key_match = " AND ".join(f"{a} IS NOT DISTINCT FROM {b}" for a, b in zip(right.key("o"), right.key("v")))
        self._run(f"DELETE FROM versions v WHERE v._ts <= {w} AND EXISTS (SELECT 1 FROM versions o "
                  f"WHERE {key_match} AND o._ts <= {w} AND o._ts > v._ts)")
        self.ctx.count("rows_out", out.num_rows)
        return conform(out, self.ctx.output_schema, self.ctx.operator_id)

    def snapshot(self) -> dict[str, Any]:
        self.open()
        return snapshot_tables(self.con, TABLES, self.ctx, version=SNAPSHOT_VERSION, watermark=self.clock.watermark,
                               order="key_group, _ts")

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="temporal join")

    def restore(self, state: dict[str, Any]) -> None:
        self.open()
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="temporal join",
                              operator_id=self.ctx.operator_id, known=set(TABLES))
        for name in TABLES:
            self._run(f"DELETE FROM {name}")
            if name in tables and tables[name].num_rows:
                self.con.register("restored", tables[name])
                try:
                    self._run(f"INSERT INTO {name} SELECT * FROM restored")
                finally:
                    self.con.unregister("restored")
        self.clock = EventTimeClock(state["watermark"])
