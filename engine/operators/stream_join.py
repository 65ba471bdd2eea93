"""StreamJoin: a regular join of two streams (Flink's streaming join), state in DuckDB.

Config (``StreamJoinConfig``)::

    join_type:  "inner" | "left" | "right" | "full" | "semi" | "anti"
    null_aware: False                # anti only: NOT IN semantics (a NULL key matches anything)
    left:       StreamJoinSide(schema=<engine.graph.schema_to_json of the input's columns>,
                               keys=(column, ...), names=(output name per column))
    right:      StreamJoinSide(...)
    residual:   SQL or None          # the rest of ON, over the output names of both sides
    changelog:  True                 # whether the output carries _row_kind
    ttl_ms:     {"left": 0, "right": 0}   # state retention per side; 0 keeps rows for ever

Input 0 is the left side, input 1 the right. Either may be an updating
stream (its batches end with ``_row_kind``): +I and +U rows add a row, -U and
-D rows retract one. Every row of either side is kept in DuckDB
(``left_rows``, ``right_rows``: key group, a row id, the number of rows of the
other side it matches, its arrival time, then the input's columns as
``c0, c1, ...``).

Per batch of one side (the delta), with one SQL statement each:

1. the delta is joined with the other side's rows on the keys and the
   residual condition: the pairs, each signed by its delta row (of an INNER
   join, which needs nothing else of them, as row numbers, with the other
   side's columns when all are of fixed width: the rows' columns are gathered
   in Arrow, each matched row of a side with strings read once more);
2. a delta row of a preserved side (LEFT's left, FULL's both) with no match
   is padded with NULLs (SEMI: emitted when it matches, ANTI: when it does
   not); rows of the other side whose match count goes from 0 to more, or
   back, retract or emit their NULL-padded row first or last;
3. the delta is added to its side's rows (retractions delete one equal
   instance each, bag semantics) and the other side's match counts updated.

Output: the left columns, then the right ones (SEMI, ANTI: the left only),
then ``_row_kind`` (+I for an added row, -D for a retracted one) unless the
join is an INNER join of two append-only inputs, whose output is append-only.
The changes of one batch are emitted in the order of the delta's rows; a
batch is the join's mini-batch.

With ``bad_rows`` ('python.udf.bad-rows.table') a pair on which a Python UDF of the residual
raises does not match and goes to the job's bad-rows table (``engine.operators.bad_pairs``).

State retention: with ``ttl_ms`` > 0 a row is dropped ``ttl_ms`` after it
arrived (processing time, Flink's ``table.exec.state.ttl``), without
retracting what it produced.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER
from weir.engine.errors import EngineError
from weir.engine.operators.bad_pairs import BadPairs
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines, without_output_names
from weir.engine.operators.batches import conform, positions
from weir.engine.operators.clock import now_ms
from weir.engine.operators.compaction import Compaction
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.duckdb_sql import (create_table_from_arrow, duckdb_name, int_literal, query_arrow, quote_ident,
                                             snapshot_tables)
from weir.engine.schemas import schema_from_json
from weir.engine.state.key_groups import key_groups
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables
from weir.engine.udfs import UdfError
from weir.engine.pandas_import import scalar

JOIN_TYPES = ("inner", "left", "right", "full", "semi", "anti")
SIDES = ("left", "right")
STATE_TABLES = ("left_rows", "right_rows")
DELTA = "join_delta"
#: An INNER join's pairs as row numbers (``StreamJoin._pairs_output``).
PAIR_IDS = "join_pair_ids"
SNAPSHOT_VERSION = 1
#: The bookkeeping columns of a state table, before the input's columns.
META = ("key_group", "_rid", "_matches", "_t")
#: The row kind of a change, from the sign of the delta row that caused it.
KIND = f"CASE WHEN _sign > 0 THEN {INSERT} ELSE {DELETE} END"






@dataclass(frozen=True)
class StreamJoinSide(OperatorConfig):
    #: The input's columns (``engine.graph.schema_to_json``).
    schema: str
    keys: tuple[str, ...]
    #: The output name of each column; None: the columns' own.
    names: tuple[str, ...] | None = None


@dataclass(frozen=True)
class StreamJoinConfig(OperatorConfig):
    #: "inner", "left", "right", "full", "semi" or "anti".
    join_type: str
    left: StreamJoinSide
    right: StreamJoinSide
    #: ANTI only: NOT IN semantics (a NULL key matches anything).
    null_aware: bool = False
    #: The rest of ON, over the output names of both sides, or None.
    residual: str | None = None
    #: Whether the output carries _row_kind.
    changelog: bool = True
    #: State retention per side ({"left": ms, "right": ms}, or one for both); 0 keeps rows for ever.
    ttl_ms: dict[str, int] | int = 0
    #: A pair a Python UDF of the residual raises on is no match, kept in the job's bad-rows table
    #: (``engine.operators.bad_pairs``; 'python.udf.bad-rows.table').
    bad_rows: bool = optional(False)


class _Side:
    def __init__(self, index: int, config: StreamJoinSide, operator_id: str):
        self.index = index
        self.name = SIDES[index]
        self.table = STATE_TABLES[index]
        try:
            self.schema: pa.Schema = schema_from_json(config.schema)
        except (TypeError, ValueError) as exc:
            raise EngineError(f"stream_join config of the {self.name} side has no schema: {exc}",
                              operator_id=operator_id) from None
        self.keys: list[str] = list(config.keys)
        self.names: list[str] = list(config.names or self.schema.names)
        self.columns: list[str] = list(self.schema.names)
        missing = [k for k in self.keys if k not in self.columns]
        if missing or len(self.names) != len(self.columns):
            raise EngineError(f"stream_join's {self.name} side names keys it does not have: {missing}",
                              hint=f"its columns: {self.columns}", operator_id=operator_id)
        self.next_rid = 0
        #: Whether every column is of fixed width (no strings, binaries, lists): cheap to carry through a join.
        self.fixed_width: bool = all(pa.types.is_primitive(f.type) for f in self.schema)

    def column(self, name: str) -> str:
        return f"c{self.columns.index(name)}"

    def data(self, relation: str = "") -> list[str]:
        """The state columns c0, c1, ..., optionally qualified."""
        return [f"{relation}c{i}" for i in range(len(self.columns))]

    def as_named(self, relation: str) -> list[str]:
        """The side's columns read from ``relation``, under their output names."""
        return [f"{relation}.c{i} AS {quote_ident(n)}" for i, n in enumerate(self.names)]

    def nulls(self) -> list[str]:
        return [f"NULL::{duckdb_name(f.type)} AS {quote_ident(n)}" for f, n in zip(self.schema, self.names)]

    def named(self) -> list[str]:
        return [quote_ident(n) for n in self.names]

    def empty_state(self) -> pa.Table:
        fields = [pa.field("key_group", pa.int32()), pa.field("_rid", pa.int64()),
                  pa.field("_matches", pa.int64()), pa.field("_t", pa.int64())]
        fields += [pa.field(f"c{i}", f.type) for i, f in enumerate(self.schema)]
        return pa.schema(fields).empty_table()


class StreamJoin(StateOperator):
    Config = StreamJoinConfig
    #: State: each side's rows (columns and keys) and their match counts; output names do not count.
    STATE_CONFIG = ("join_type", "null_aware", "left", "right")
    keyed_by = ("left.keys", "right.keys")
    merges_snapshots = True

    @classmethod
    def explain(cls, config: StreamJoinConfig) -> list[str]:
        ttl = config.ttl_ms if isinstance(config.ttl_ms, dict) else dict.fromkeys(SIDES, config.ttl_ms)
        ttl = {side: ms for side, ms in ttl.items() if ms}
        kept = ("; " + ", ".join(f"{side} rows dropped {ms} ms after they arrived" for side, ms in ttl.items())
                if ttl else ", for ever (set 'table.exec.state.ttl' to bound it)")
        return explain_lines(f"{', '.join(config.left.keys)} | {', '.join(config.right.keys)}",
                             f"every row of both inputs by key{kept}")

    @classmethod
    def state_shape(cls, config: StreamJoinConfig | dict[str, Any]) -> dict[str, Any]:
        return without_output_names(super().state_shape(config))

    def __init__(self, config: StreamJoinConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        self.join_type = str(config.join_type).lower()
        if self.join_type not in JOIN_TYPES:
            raise EngineError(f"unknown join type {config.join_type!r}",
                              hint=f"one of: {', '.join(JOIN_TYPES)}", operator_id=oid)
        self.null_aware = bool(config.null_aware) and self.join_type == "anti"
        self.sides = [_Side(i, getattr(config, name), oid) for i, name in enumerate(SIDES)]
        if len(self.sides[0].keys) != len(self.sides[1].keys):
            raise EngineError("stream_join needs as many keys on the left as on the right", operator_id=oid)
        self.residual: str | None = config.residual or None
        self.changelog = bool(config.changelog)
        ttl = config.ttl_ms or 0
        self.ttl_ms = [int(ttl.get(s, 0) if isinstance(ttl, dict) else ttl) for s in SIDES]
        self._last_expiry: int | None = None
        self._compaction = Compaction()
        self._bad_pairs = BadPairs(ctx, [n for s in self.sides for n in s.names]) \
            if config.bad_rows and self.residual else None

    def preserved(self, side: _Side) -> bool:
        """Whether the side's rows appear without a partner (NULL-padded, or alone for SEMI/ANTI)."""
        if self.join_type in ("semi", "anti"):
            return side.index == 0
        return self.join_type == "full" or self.join_type == side.name

    @property
    def left_only(self) -> bool:
        return self.join_type in ("semi", "anti")

    # -- lifecycle --------------------------------------------------------------------
    def open(self) -> None:
        """The state connection on one DuckDB thread: its statements (a batch's pairs, its insert)
        are too small to share out, and a second thread cost more CPU than it saved wall time
        while the source's read-ahead thread wants the other core (Nexmark q9 at 10M events on two
        cores: engine 19.2 and 16.6 s against 24.5 and 19.8 s on two threads; q4 not slower)."""
        if self.con is None:
            self.con = self.ctx.state_connection(max_threads=1)
            self.create_state()

    def create_state(self) -> None:
        self._compaction.start(self.con)
        for side in self.sides:
            create_table_from_arrow(self.con, side.table, side.empty_state(), self.ctx.operator_id)

    # -- batches ------------------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        if input_index not in (0, 1):
            raise EngineError(f"stream_join has two inputs, got a batch on input {input_index}",
                              operator_id=self.ctx.operator_id)
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        side, other = self.sides[input_index], self.sides[1 - input_index]
        now = now_ms()
        self._expire(now)
        delta = self._delta(batch, side)
        self.con.register(DELTA, delta)
        try:
            if self._counts_matches(side, other):
                self._pairs(side, other)
                out = query_arrow(self.con, self._output_sql(side, other), self.ctx.operator_id)
            else:  # the pairs are the whole output: no table of them
                out = self._pairs_output(side, other, delta)
            self._update_state(side, other, delta, now)
        finally:
            self.con.unregister(DELTA)
        if not self.changelog:
            out = out.drop_columns([ROW_KIND])
        self.ctx.count("rows_out", out.num_rows)
        return conform(out, self.ctx.output_schema, self.ctx.operator_id)

    def _delta(self, batch: pa.RecordBatch, side: _Side) -> pa.RecordBatch:
        """The batch as signed rows: _ord, _sign, key_group, c0, c1, ..."""
        names = batch.schema.names
        missing = [c for c in side.columns if c not in names]
        if missing:
            raise EngineError(f"the {side.name} input lacks columns {missing}", operator_id=self.ctx.operator_id)
        if ROW_KIND in names:
            kinds = batch.column(names.index(ROW_KIND))
            adds = pc.is_in(kinds, value_set=pa.array([INSERT, UPDATE_AFTER], kinds.type))
            sign = pc.if_else(adds, pa.scalar(1, pa.int8()), pa.scalar(-1, pa.int8()))
        else:
            sign = pa.repeat(pa.scalar(1, pa.int8()), batch.num_rows)
        groups = key_groups(batch, side.keys, self.ctx.max_parallelism)
        order = positions(batch.num_rows)
        data = [batch.column(names.index(c)) for c in side.columns]
        return pa.RecordBatch.from_arrays([order, sign, groups, *data],
                                          names=["_ord", "_sign", "key_group", *side.data()])

    def _counts_matches(self, side: _Side, other: _Side) -> bool:
        """Whether the batch needs its pairs as a table: to find rows without a partner (a
        preserved side, SEMI, ANTI), or to catch a residual's failing pairs (``bad_rows``)."""
        return (self.left_only or self.preserved(side) or self.preserved(other)
                or self._bad_pairs is not None)

    def _pairs_output(self, side: _Side, other: _Side, delta: pa.RecordBatch) -> pa.Table:
        """An INNER join's changes: its pairs, in the order of the delta's rows (``_output_sql``
        without NULL-padded rows).

        DuckDB finds the pairs as row numbers (the delta's ``_ord``, the other side's ``_rid``),
        sorted and gathered in Arrow. The other side's columns come with them when they are all
        of fixed width; otherwise each matched row of the other side is read once more, by row id,
        so that neither the join nor its sort carries the rows' strings."""
        carried = ", ".join(other.named()) if other.fixed_width else ""
        pairs = query_arrow(self.con, f"SELECT _ord, _orid{', ' + carried if carried else ''} "
                                      f"FROM ({self._pairs_sql(side, other)})", self.ctx.operator_id)
        pairs = pairs.take(pc.sort_indices(pairs, [("_ord", "ascending"), ("_orid", "ascending")]))
        ords = pairs.column("_ord")
        if carried:
            gathered = {other.index: pairs.columns[2:]}
        else:
            gathered = {other.index: self._other_rows(other, pairs)}
        gathered[side.index] = [delta.column(c).take(ords) for c in side.data()]
        kinds = pc.if_else(pc.greater(delta.column("_sign").take(ords), scalar(0)), pa.scalar(INSERT, pa.int8()),
                           pa.scalar(DELETE, pa.int8()))
        left, right = self.sides  # an INNER join: both sides' columns
        return pa.Table.from_arrays([*gathered[0], *gathered[1], kinds], names=[*left.names, *right.names, ROW_KIND])

    def _other_rows(self, other: _Side, pairs: pa.Table) -> list[pa.ChunkedArray]:
        """The other side's columns of each pair (``_orid``), each matched row read once."""
        self.con.register(PAIR_IDS, pairs.select(["_orid"]))
        try:
            matched = query_arrow(self.con, f"SELECT o._rid, {', '.join(other.as_named('o'))} FROM {other.table} o "
                                            f"WHERE o._rid IN (SELECT _orid FROM {PAIR_IDS})", self.ctx.operator_id)
        finally:
            self.con.unregister(PAIR_IDS)
        at = pc.index_in(pairs.column("_orid"), value_set=matched.column(0).combine_chunks())
        return [matched.column(i + 1).take(at) for i in range(len(other.names))]

    def _pairs(self, side: _Side, other: _Side) -> None:
        """The temp table ``pairs`` (``_pairs_sql``); with bad rows kept, a pair a UDF raised on is none."""
        try:
            self._run(f"CREATE OR REPLACE TEMP TABLE pairs AS {self._pairs_sql(side, other)}")
            return
        except UdfError as error:
            if self._bad_pairs is None:
                raise
            self._bad_pairs.raised(error)
        candidates = query_arrow(self.con, self._candidates_sql(side, other), self.ctx.operator_id)
        self.con.register("caught_pairs", self._bad_pairs.matches(self.con, candidates, self.residual))
        try:
            self._run("CREATE OR REPLACE TEMP TABLE pairs AS SELECT * FROM caught_pairs")
        finally:
            self.con.unregister("caught_pairs")

    def _pairs_sql(self, side: _Side, other: _Side) -> str:
        """Every (delta row, other-side row) pair that matches: keys equal and the residual true.
        Columns: _ord, _sign, _orid, _omatches, then both sides' columns under their output names."""
        candidates = self._candidates_sql(side, other)
        if self.residual is None:
            return candidates
        return f"SELECT * FROM ({candidates}) WHERE ({self.residual})"

    def _candidates_sql(self, side: _Side, other: _Side) -> str:
        """The pairs whose keys are equal (``_pairs_sql`` before the residual)."""
        keys = []
        for sk, ok in zip(side.keys, other.keys):
            a, b = f"d.{side.column(sk)}", f"o.{other.column(ok)}"
            keys.append(f"({a} = {b} OR {a} IS NULL OR {b} IS NULL)" if self.null_aware else f"{a} = {b}")
        columns = ", ".join(side.as_named("d") + other.as_named("o"))
        return (f"SELECT d._ord, d._sign, o._rid AS _orid, o._matches AS _omatches, {columns} "
                f"FROM {DELTA} d JOIN {other.table} o ON {' AND '.join(keys) or 'true'}")

    def _output(self, left: list[str], right: list[str]) -> str:
        return ", ".join(left if self.left_only else left + right)

    def _output_sql(self, side: _Side, other: _Side) -> str:
        """The changes this delta causes, in order: NULL-padded rows retracted, then the pairs and
        padded delta rows by delta order, then NULL-padded rows emitted."""
        left, right = self.sides

        def columns(named_side: list[str], nulls_side: list[str]) -> str:
            return self._output(*((named_side, nulls_side) if side.index == 0 else (nulls_side, named_side)))

        parts = []
        if not self.left_only:  # the pairs
            parts.append(f"SELECT 1 AS _phase, _ord AS _o1, _orid AS _o2, {KIND} AS _k, "
                         f"{self._output(left.named(), right.named())} FROM pairs")
        if self.preserved(side):  # delta rows alone: unmatched (SEMI: matched)
            exists = "EXISTS" if self.join_type == "semi" else "NOT EXISTS"
            parts.append(f"SELECT 1 AS _phase, d._ord AS _o1, -1 AS _o2, {KIND} AS _k, "
                         f"{columns(side.as_named('d'), other.nulls())} FROM {DELTA} d "
                         f"WHERE {exists} (SELECT 1 FROM pairs p WHERE p._ord = d._ord)")
        if self.preserved(other):  # other-side rows whose match count crosses zero
            counts = "SELECT _orid, any_value(_omatches) AS before, sum(_sign) AS change FROM pairs GROUP BY _orid"
            semi = self.join_type == "semi"
            row = (self._output(other.as_named("o"), side.nulls()) if other.index == 0
                   else self._output(side.nulls(), other.as_named("o")))
            for phase, condition, emitted in (
                    (0, "t.before <= 0 AND t.before + t.change > 0", INSERT if semi else DELETE),
                    (2, "t.before > 0 AND t.before + t.change <= 0", DELETE if semi else INSERT)):
                parts.append(f"SELECT {phase} AS _phase, 0 AS _o1, o._rid AS _o2, {emitted} AS _k, {row} "
                             f"FROM ({counts}) t JOIN {other.table} o ON o._rid = t._orid WHERE {condition}")
        union = " UNION ALL ".join(parts)
        return (f"SELECT * EXCLUDE (_phase, _o1, _o2, _k), _k::TINYINT AS {ROW_KIND} "
                f"FROM ({union}) ORDER BY _phase, _o1, _o2")

    def _update_state(self, side: _Side, other: _Side, delta: pa.RecordBatch, now: int) -> None:
        if self.preserved(other):  # the other side's match counts
            self._run(f"UPDATE {other.table} SET _matches = greatest(_matches + t.change, 0) "
                      f"FROM (SELECT _orid, sum(_sign) AS change FROM pairs GROUP BY _orid) t "
                      f"WHERE {other.table}._rid = t._orid")
        data = side.data()
        qualified = "".join(f", d.{c}" for c in data)
        start = side.next_rid
        retracts = pc.any(pc.less(delta.column(1), scalar(0))).as_py()
        added = " WHERE d._sign > 0" if retracts else ""  # (a filter costs an append-only batch ~10%)
        if self.preserved(side):  # its rows need to know how many rows they match
            self._run(f"INSERT INTO {side.table} SELECT d.key_group, {int_literal(start)} + d._ord, "
                      f"coalesce(m.n, 0), {int_literal(now)}{qualified} FROM {DELTA} d "
                      f"LEFT JOIN (SELECT _ord, count(*) AS n FROM pairs GROUP BY _ord) m USING (_ord){added}")
        else:
            self._run(f"INSERT INTO {side.table} SELECT d.key_group, {int_literal(start)} + d._ord, 0, "
                      f"{int_literal(now)}{qualified} FROM {DELTA} d{added}")
        side.next_rid = start + delta.num_rows
        self._compaction.changed(self.con, delta.nbytes)
        if retracts:  # retractions delete one equal instance each
            listed = ", ".join(data)
            partition = f"PARTITION BY {listed}" if data else ""
            same = " AND ".join(f"s.{c} IS NOT DISTINCT FROM r.{c}" for c in data) or "true"
            self._run(
                f"DELETE FROM {side.table} WHERE _rid IN (SELECT s._rid FROM "
                f"(SELECT *, row_number() OVER ({partition} ORDER BY _rid) AS n FROM {side.table} "
                f"WHERE key_group IN (SELECT key_group FROM {DELTA} WHERE _sign < 0)) s JOIN "
                f"(SELECT *, row_number() OVER ({partition} ORDER BY _ord) AS n FROM {DELTA} WHERE _sign < 0) r "
                f"ON {same} AND s.n = r.n)")

    def _expire(self, now: int) -> None:
        """Drop rows older than their side's retention, at most ten times per retention period."""
        shortest = min((t for t in self.ttl_ms if t > 0), default=0)
        if not shortest:
            return
        if self._last_expiry is not None and now - self._last_expiry < max(shortest // 10, 1):
            return
        self._last_expiry = now
        for side, ttl in zip(self.sides, self.ttl_ms):
            if ttl <= 0:
                continue
            cutoff = int_literal(now - ttl)
            expired = self._run(f"SELECT count(*) FROM {side.table} WHERE _t < {cutoff}")[0][0]
            if expired:
                self._run(f"DELETE FROM {side.table} WHERE _t < {cutoff}")
                self.ctx.count("state_rows_expired", expired)

    def close(self) -> None:
        if self._bad_pairs is not None:
            self._bad_pairs.close()
        super().close()

    def state_rows(self) -> int:
        """Rows held by both sides (for tests and benchmarks of state size)."""
        self.open()
        return sum(self._run(f"SELECT count(*) FROM {s.table}")[0][0] for s in self.sides)

    # -- checkpoints ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables"}``, tables ordered by key group."""
        self.open()
        return snapshot_tables(self.con, STATE_TABLES, self.ctx, version=SNAPSHOT_VERSION, watermark=0,
                               order="key_group, _rid")

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="join")

    def restore(self, state: dict[str, Any]) -> None:
        self.open()
        oid = self.ctx.operator_id
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="join", operator_id=oid,
                              known=set(STATE_TABLES))
        for side in self.sides:
            self._run(f"DELETE FROM {side.table}")
            table = tables.get(side.table)
            side.next_rid = 0 if table is None else table.num_rows
            if not side.next_rid:
                continue
            # the row ids of merged subtasks may repeat: number the rows afresh
            self.con.register("restored_rows", table)
            try:
                rest = "".join(f", {c}" for c in side.data())
                self._run(f"INSERT INTO {side.table} SELECT key_group, row_number() OVER (ORDER BY key_group, _rid) - 1, "
                          f"_matches, _t{rest} FROM restored_rows")
            finally:
                self.con.unregister("restored_rows")
