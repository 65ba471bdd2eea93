"""TopN: Top-N and deduplication without a window (Flink's Rank), an updating result.

Config (``TopNConfig``)::

    columns:           (input column, ...)      # without _row_kind
    partition_keys:    (column, ...)
    order_by:          ("SQL ASC|DESC NULLS FIRST|LAST", ...)
    function:          "row_number" | "rank" | "dense_rank"
    rank_column:       name
    rank_range:        (low, high)
    filter:            SQL over the ranked rows, or None
    projection:        ((name, SQL over the ranked rows), ...)
    append_only_input: True
    ttl_ms:            0                        # state retention (processing time); 0: for ever
    ties:              "earliest_first" | "latest_first"

State: the rows of every partition in DuckDB (``ranked_rows``: key group, a
row id, the input's columns). The row id ``_rid`` is the row's arrival
sequence at this operator, a counter kept in state. Each batch is the
operator's mini-batch: the partitions it touches are ranked before and after
it is applied, and the difference of the two results is emitted — rows that left first (-D), then
rows that entered (+I), each in arrival order. A row whose rank changed leaves with its old rank and
enters with the new one, so a sink keyed by (partition keys, rank) applies
the changes by upsert. With append-only input a row ranked below N can never
rise again, so it is deleted at once: a partition holds at most N rows (and
their ties); a batch's rows outside the top N among the batch alone are dropped before anything
else (found on the sort keys alone, dropped in Arrow), so never stored nor ranked again. If
besides the rank starts at 1 and is neither projected nor filtered on, a batch reads and compares
only the rows that leave or enter the top (``_moves``).

Ties (rows equal on ``order_by``) are broken by arrival, as in Flink: the
earlier-arriving row ranks first, except for keep-last deduplication (``ties``
= ``latest_first``: ORDER BY a time DESC, rank 1), which keeps the latest of
rows with the same time. Arrival order survives checkpoints and rescaling: a
partition lives in one key group, and a restore renumbers ``_rid`` in
(key group, ``_rid``) order. It is the order in which rows reach this
operator; with one upstream channel (parallelism 1) that is the source's
order, but rows of one partition that come from several upstream subtasks
interleave as they arrive, as in Flink (docs/architecture.md, "Ties").

With ``ttl_ms`` > 0 a row is forgotten that long after it arrived (Flink's
``table.exec.state.ttl``), without retracting it from the result.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER
from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.operators.batches import conform, positions
from weir.engine.operators.clock import now_ms
from weir.engine.operators.compaction import Compaction
from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.duckdb_sql import int_literal, query_arrow, quote_ident, run_arrow, snapshot_tables
from weir.engine.state.key_groups import key_groups
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables

TABLE = "ranked_rows"
DELTA = "top_n_delta"
#: Row ids, or the rows, that leave or enter the top (``TopN._moves``).
MOVED = "top_n_moved"
#: A term of ORDER BY that is a column, as the planner writes them: '"price" DESC NULLS LAST'.
PLAIN_ORDER = re.compile(r'^"((?:[^"]|"")+)"(?: (ASC|DESC))?(?: NULLS (FIRST|LAST))?$', re.IGNORECASE)
#: Types whose values Arrow compares as DuckDB does (``IS NOT DISTINCT FROM``); floats are not
#: (-0.0 and 0.0 differ in a hash).
_EXACT = (pa.types.is_integer, pa.types.is_boolean, pa.types.is_string, pa.types.is_large_string,
          pa.types.is_binary, pa.types.is_large_binary, pa.types.is_timestamp, pa.types.is_date,
          pa.types.is_time, pa.types.is_decimal)
SNAPSHOT_VERSION = 1




@dataclass(frozen=True)
class TopNConfig(OperatorConfig):
    #: The input's columns, without _row_kind.
    columns: tuple[str, ...]
    partition_keys: tuple[str, ...]
    #: "SQL ASC|DESC NULLS FIRST|LAST", per sort key.
    order_by: tuple[str, ...]
    #: "row_number", "rank" or "dense_rank".
    function: str
    rank_column: str
    rank_range: tuple[int, int]
    #: ((name, SQL over the ranked rows), ...).
    projection: tuple[tuple[str, str], ...]
    #: SQL over the ranked rows, or None.
    filter: str | None = None
    append_only_input: bool = True
    #: State retention (processing time); 0: for ever.
    ttl_ms: int = 0
    #: "earliest_first" or "latest_first".
    ties: str = "earliest_first"


class TopN(StateOperator):
    Config = TopNConfig
    #: State: the rows kept per partition: which are kept depends on the order and the ranks.
    STATE_CONFIG = ("columns", "partition_keys", "order_by", "function", "rank_range", "append_only_input")
    keyed_by = ("partition_keys",)
    merges_snapshots = True

    @classmethod
    def explain(cls, config: TopNConfig) -> list[str]:
        if config.append_only_input:
            state = f"the top {config.rank_range[1]} rows (and ties) per partition"
        else:
            state = "every row per partition (an updating input may retract any of them)"
        return explain_lines(", ".join(config.partition_keys) or "- (one ranking of the whole stream)", state)

    def __init__(self, config: TopNConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        self.columns = list(config.columns)
        self.keys = list(config.partition_keys)
        self.order_by = list(config.order_by)
        self.function = config.function
        self.rank_column = config.rank_column
        self.low, self.high = config.rank_range
        self.projection = list(config.projection)
        if self.function not in ("row_number", "rank", "dense_rank"):
            raise EngineError(f"unknown rank function {self.function!r}", operator_id=ctx.operator_id)
        self.filter = config.filter or None
        self.append_only_input = bool(config.append_only_input)
        self.ttl_ms = int(config.ttl_ms or 0)
        self.ties = config.ties or "earliest_first"
        if self.ties not in ("earliest_first", "latest_first"):
            raise EngineError(f"unknown tie order {self.ties!r}", hint="earliest_first or latest_first",
                              operator_id=ctx.operator_id)
        self._last_expiry: int | None = None
        self._compaction = Compaction()
        self._next_rid = 0
        self._created = False
        terms = _order_terms(self.order_by, self.columns)
        #: ORDER BY as (column, descending, NULLS FIRST) per term, where each names a column and
        #: says where NULLs go (as the planner writes them); else None (``_arrow_top``).
        self._arrow_order = terms if terms is not None and None not in (t[2] for t in terms) else None
        #: The columns that rank the rows (``_moves``): the partition keys, the columns of ORDER BY
        #: when each of its terms is a column, and the row id; else every column.
        self._sort_columns = (["key_group", "_rid", "_t", *self.columns] if terms is None
                              else list(dict.fromkeys([*self.keys, *(name for name, _, _ in terms), "_rid"])))
        #: Whether a batch's changes are only rows leaving and entering the top (``_moves``).
        self._moves_only = self.append_only_input and self.low == 1 and not any(
            re.search(rf"\b{re.escape(self.rank_column)}\b", sql, re.IGNORECASE)
            for sql in [*(sql for _, sql in self.projection), self.filter or ""])

    def open(self) -> None:
        """The state connection on one DuckDB thread, as the stream join's (``StreamJoin.open``
        says why): a batch's ranking and moves are too small to share out."""
        if self.con is None:
            self.con = self.ctx.state_connection(max_threads=1)
            self.create_state()

    def create_state(self) -> None:
        self._compaction.start(self.con)

    def close(self) -> None:
        super().close()
        self._created = False

    # -- SQL pieces ---------------------------------------------------------------
    def _quoted(self, names: list[str], relation: str = "") -> str:
        return ", ".join(f"{relation}{quote_ident(n)}" for n in names)

    def _order(self) -> str:
        """The ranking's ORDER BY: row_number breaks ties by arrival (``ties``)."""
        arrival = "_rid DESC" if self.ties == "latest_first" else "_rid"
        return ", ".join([*self.order_by, arrival] if self.function == "row_number" else self.order_by)

    def _ranked(self) -> str:
        """The rows of the touched partitions with their rank, best first."""
        partition = f"PARTITION BY {self._quoted(self.keys)} " if self.keys else ""
        return (f"SELECT *, {self.function}() OVER ({partition}ORDER BY {self._order()}) "
                f"AS {quote_ident(self.rank_column)} FROM {self._stored('touched')}")

    def _stored(self, touched: str) -> str:
        """The stored rows of the partitions whose keys the relation ``touched`` lists (NULL keys
        too); every stored row without partition keys."""
        same = " AND ".join(f"t.{quote_ident(k)} IS NOT DISTINCT FROM s.{quote_ident(k)}" for k in self.keys)
        return f"(SELECT s.* FROM {TABLE} s SEMI JOIN {touched} t ON {same})" if self.keys else TABLE

    def _result(self, ranked: str | None = None) -> str:
        """The touched partitions' part of the result: ranks in range, filtered, projected, after
        each row's ``_rid`` and ``_rank``."""
        rank = quote_ident(self.rank_column)
        where = f"{rank} BETWEEN {int_literal(self.low)} AND {int_literal(self.high)}"
        if self.filter:
            where += f" AND ({self.filter})"
        select = ", ".join(f"{sql} AS {quote_ident(name)}" for name, sql in self.projection)
        return f"SELECT _rid, {rank} AS _rank, {select} FROM {ranked or '(' + self._ranked() + ')'} WHERE {where}"

    # -- batches ------------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        names = batch.schema.names
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise EngineError(f"the input lacks columns {missing}", operator_id=self.ctx.operator_id)
        if ROW_KIND in names:
            kinds = batch.column(names.index(ROW_KIND))
            adds = pc.is_in(kinds, value_set=pa.array([INSERT, UPDATE_AFTER], kinds.type))
            sign = pc.if_else(adds, pa.scalar(1, pa.int8()), pa.scalar(-1, pa.int8()))
        else:
            sign = pa.repeat(pa.scalar(1, pa.int8()), batch.num_rows)
        now = now_ms()
        delta = pa.RecordBatch.from_arrays(
            [key_groups(batch, self.keys, self.ctx.max_parallelism),
             positions(batch.num_rows, self._next_rid),
             pa.repeat(pa.scalar(now, pa.int64()), batch.num_rows),
             *(batch.column(names.index(c)) for c in self.columns), sign],
            names=["key_group", "_rid", "_t", *self.columns, "_sign"])
        first_rid = self._next_rid
        self._next_rid += batch.num_rows
        reduced = self._arrow_top(delta) if self.append_only_input else None
        if reduced is not None:
            delta = reduced
        self.con.register(DELTA, delta)
        try:
            if not self._created:
                self._run(f"CREATE TABLE {TABLE} AS SELECT * EXCLUDE (_sign) FROM {DELTA} LIMIT 0")
                self._created = True
            self._expire(now)
            if self._moves_only:
                out = self._moves(delta, first_rid)
            else:
                if self.append_only_input and reduced is None:
                    delta = self._batch_top(delta)
                self._before_and_after(delta)
                out = query_arrow(self.con, self._changes_sql(), self.ctx.operator_id)
        finally:
            self.con.unregister(DELTA)
        self.ctx.count("rows_out", out.num_rows)
        return conform(out, self.ctx.output_schema, self.ctx.operator_id)

    def _before_and_after(self, delta: pa.RecordBatch) -> None:
        """``top_before`` and ``top_after``: the touched partitions' results before and after the
        batch is applied (``_apply``), ranked in full."""
        if self.keys:
            self._run(f"CREATE OR REPLACE TEMP TABLE touched AS SELECT DISTINCT {self._quoted(self.keys)} FROM {DELTA}")
        self._run(f"CREATE OR REPLACE TEMP TABLE top_before AS {self._result()}")
        self._apply(delta)
        self._run(f"CREATE OR REPLACE TEMP TABLE top_ranked AS {self._ranked()}")
        if self.append_only_input:  # a row below the top N never rises again
            self._run(f"DELETE FROM {TABLE} WHERE _rid IN (SELECT _rid FROM top_ranked "
                      f"WHERE {quote_ident(self.rank_column)} > {int_literal(self.high)})")
        self._run(f"CREATE OR REPLACE TEMP TABLE top_after AS {self._result('top_ranked')}")

    def _moves(self, delta: pa.RecordBatch, first_rid: int) -> pa.Table:
        """The changes of a batch of append-only rows when the rank is kept from 1 and neither
        projected nor filtered on: the result of a partition is then exactly its stored rows (all
        ranked within the top N: a row below never rises again, so it is not kept), and a row's
        values do not depend on its rank. So the changes are the stored rows that the batch's rows
        push out of the top N and the batch's rows that enter it, and only they are read,
        projected and compared; the stored rows become the new top.

        The touched partitions are ranked once, on their row ids and sort keys (``_sort_columns``),
        into Arrow. The rows that leave are deleted and read in one statement (RETURNING); those
        that enter are taken from the batch in Arrow and inserted, so that no statement scans the
        batch's or the state's other columns in full. The changes are put together in Arrow
        (``_moved_changes``)."""
        partition = f"PARTITION BY {self._quoted(self.keys)} " if self.keys else ""
        narrow = self._quoted(self._sort_columns)
        stored = f"SELECT {narrow} FROM {self._stored(f'(SELECT DISTINCT {self._quoted(self.keys)} FROM {DELTA})')}"
        start, high = int_literal(first_rid), int_literal(self.high)
        moves = run_arrow(self.con, f"SELECT _rid FROM (SELECT _rid, {self.function}() OVER ({partition}ORDER BY "
                                    f"{self._order()}) AS _r FROM ({stored} UNION ALL SELECT {narrow} FROM {DELTA})) "
                                    f"WHERE (_rid < {start}) = (_r > {high})", self.ctx.operator_id)
        moves = moves.column(0).combine_chunks()
        new = pc.greater_equal(moves, pa.scalar(first_rid, pa.int64()))
        went, came_rids = moves.filter(pc.invert(new)), moves.filter(new)
        select = ", ".join(f"{sql} AS {quote_ident(name)}" for name, sql in self.projection)
        kept = f", ({self.filter}) AS _kept" if self.filter else ""
        gone = self._deleted(went, f"_rid, {select}{kept}")
        came_rids = came_rids.take(pc.sort_indices(came_rids))  # in arrival order
        came = delta.take(pc.index_in(came_rids, value_set=delta.column(1))).drop_columns(["_sign"])
        self.con.register(MOVED, came)
        try:
            if came.num_rows:
                self._run(f"INSERT INTO {TABLE} SELECT {self._quoted(['key_group', '_rid', '_t', *self.columns])} "
                          f"FROM {MOVED}")
            entered = self._projected(came)
            if entered is None:
                entered = query_arrow(self.con, f"SELECT _rid, {select}{kept} FROM {MOVED}", self.ctx.operator_id)
        finally:
            self.con.unregister(MOVED)
        self._compaction.changed(self.con, came.nbytes + gone.nbytes)
        return self._moved_changes(gone, entered)

    def _deleted(self, rids: pa.Array, returning: str) -> pa.Table:
        """Delete the stored rows of these row ids, and read them as ``returning`` says."""
        self.con.register(MOVED, pa.table({"_rid": rids}))
        try:
            return run_arrow(self.con, f"DELETE FROM {TABLE} WHERE _rid IN (SELECT _rid FROM {MOVED}) "
                                       f"RETURNING {returning}", self.ctx.operator_id)
        finally:
            self.con.unregister(MOVED)

    def _projected(self, rows: pa.RecordBatch) -> pa.Table | None:
        """The projection of rows of the batch (``_rid`` and the output columns) taken in Arrow
        when it selects columns as they are (of their output types) and nothing filters them;
        else None (DuckDB projects them)."""
        if self.filter:
            return None
        schema = self.ctx.output_schema
        names = rows.schema.names
        columns = []
        for (name, sql), field in zip(self.projection, schema):
            column = next((c for c in self.columns if quote_ident(c) == sql), None)
            if column is None or field.name != name or not rows.schema.field(column).type.equals(field.type):
                return None
            columns.append(rows.column(names.index(column)))
        return pa.Table.from_arrays([rows.column(names.index("_rid")), *columns],
                                    names=["_rid", *(name for name, _ in self.projection)])

    def _moved_changes(self, gone: pa.Table, came: pa.Table) -> pa.Table:
        """The changes of the rows that left (``gone``) and entered (``came``): ``_changes_sql``
        of the two, computed in Arrow where no row of one can equal a row of the other (the
        usual case): the rows that left (-D), then those that entered (+I), each in arrival order.
        A left and an entered row that project to equal values cancel out (a row that moved
        within the top, say); only rows equal on every column can, so where an entered row's
        every column is among the left rows' values, DuckDB compares them (``_changes_sql``)."""
        parts = []
        for rows, kind in ((gone, DELETE), (came, INSERT)):
            if "_kept" in rows.column_names:  # the filter, true (not false or NULL)
                rows = rows.filter(pc.fill_null(rows.column("_kept"), False)).drop_columns(["_kept"])
            rows = rows.take(pc.sort_indices(rows.column("_rid"))) if kind == DELETE else rows
            fields = [f for f in self.ctx.output_schema if f.name != ROW_KIND]
            rows = pa.Table.from_arrays([rows.column(0), *(rows.column(i + 1).cast(f.type)
                                                           for i, f in enumerate(fields))],
                                        names=["_rid", *(f.name for f in fields)])
            parts.append((rows, kind))
        (gone, _), (came, _) = parts
        if gone.num_rows and came.num_rows and pc.any(_maybe_equal(came, gone)).as_py():
            self.con.register("top_gone", gone)
            self.con.register("top_came", came)
            try:
                return query_arrow(self.con, self._changes_sql("top_gone", "top_came"), self.ctx.operator_id)
            finally:
                self.con.unregister("top_gone")
                self.con.unregister("top_came")
        out = [rows.drop_columns(["_rid"]).append_column(ROW_KIND, pa.repeat(pa.scalar(kind, pa.int8()), rows.num_rows))
               for rows, kind in parts]
        return pa.concat_tables(out).combine_chunks()

    def _arrow_top(self, delta: pa.RecordBatch) -> pa.RecordBatch | None:
        """``_batch_top`` in Arrow, for ROW_NUMBER: the delta's rows in the top N of their
        partition among the batch alone, in arrival order; None where all are, or where Arrow
        might not order or group the rows as DuckDB does (then ``_batch_top`` asks DuckDB).

        The rows are sorted by partition keys, then by each term of ORDER BY (a column: NULLs
        first or last by a key of their own before it, as DuckDB places them in every direction),
        then by arrival (``ties``: the sort is stable, the delta in arrival order; the latest
        first by row id); the first N of each run of equal partition keys are kept. Only types that Arrow sorts and compares as DuckDB does take part (no floats:
        DuckDB sorts NaN above every number and groups -0.0 with 0.0)."""
        if self.function != "row_number" or self._arrow_order is None:
            return None
        names = delta.schema.names
        columns, sort_keys = {}, []
        for i, key in enumerate(self.keys):
            columns[f"k{i}"] = delta.column(names.index(key))
            sort_keys.append((f"k{i}", "ascending"))
        for i, (name, descending, nulls_first) in enumerate(self._arrow_order):
            column = delta.column(names.index(name))
            if column.null_count:
                columns[f"n{i}"] = pc.is_null(column)
                sort_keys.append((f"n{i}", "descending" if nulls_first else "ascending"))
            columns[f"o{i}"] = column
            sort_keys.append((f"o{i}", "descending" if descending else "ascending"))
        if not all(any(check(c.type) for check in _EXACT) for c in columns.values()):
            return None
        if self.ties == "latest_first":  # else arrival order, the delta's: the sort is stable
            columns["_rid"] = delta.column(1)
            sort_keys.append(("_rid", "descending"))
        table = pa.record_batch(list(columns.values()), names=list(columns))  # Arrays, not chunked ones
        order = pc.sort_indices(table, sort_keys=sort_keys)
        rows = delta.num_rows
        differs = pa.repeat(pa.scalar(False, pa.bool_()), rows - 1)  # from the row before, in sorted order
        for i in range(len(self.keys)):
            key = table.column(f"k{i}").take(order)
            after, before = key.slice(1), key.slice(0, rows - 1)
            distinct = pc.fill_null(pc.not_equal(after, before), True)  # NULL and NULL: not distinct
            distinct = pc.and_not(distinct, pc.and_(pc.is_null(after), pc.is_null(before)))
            differs = pc.or_(differs, distinct)
        # the sorted rows' positions, and where the partition of each starts (a running maximum)
        at = positions(rows)
        starts = pc.cumulative_max(pa.concat_arrays([pa.array([0], pa.int64()),
                                                     pc.if_else(differs, at.slice(1), pa.scalar(0, pa.int64()))]))
        kept = pc.indices_nonzero(pc.less(pc.subtract(at, starts), pa.scalar(self.high, pa.int64())))
        if len(kept) == rows:
            return None
        kept = order.take(kept)
        return delta.take(kept.take(pc.sort_indices(kept)))  # in arrival order

    def _batch_top(self, delta: pa.RecordBatch) -> pa.RecordBatch:
        """The delta's rows in the top N of their partition among the batch's own rows, registered
        as the delta instead of the whole batch. With append-only input a row outside them is
        outside the top N among all rows (they are more, and rank it no better): it is never kept,
        so never stored or ranked. Ranked on the row ids and sort keys alone (the scan reads no
        other column), then taken from the batch in Arrow."""
        partition = f"PARTITION BY {self._quoted(self.keys)} " if self.keys else ""
        kept = query_arrow(self.con, f"SELECT _rid FROM {DELTA} QUALIFY {self.function}() OVER "
                                     f"({partition}ORDER BY {self._order()}) <= {int_literal(self.high)}",
                           self.ctx.operator_id).column(0)
        if len(kept) == delta.num_rows:
            return delta
        delta = delta.filter(pc.is_in(delta.column(1), value_set=kept.combine_chunks()))  # in arrival order
        self.con.unregister(DELTA)
        self.con.register(DELTA, delta)
        return delta

    def _changes_sql(self, gone: str | None = None, came: str | None = None) -> str:
        """The result's changes: rows of ``top_before`` not in ``top_after`` (-D), then rows of
        ``top_after`` not in ``top_before`` (+I), as multisets of projected rows (EXCEPT ALL),
        each part in arrival order (``_rid``). ``gone`` and ``came``, when given, are the rows
        that left and the rows that entered, without ranks (``_moves``): no row is on both sides.

        A row with the same ``_rid`` and rank on both sides projects to the same values: it is
        dropped from both by row id first, which leaves the few rows that changed. Of those, a
        retracted and an inserted row that project to equal values still cancel out (a row that
        only moved to another rank, when the rank is not projected); only rows whose projected
        values hash alike can, and only they are compared column by column and numbered among
        equal rows, so that no statement compares or sorts the wide rows of the whole result."""
        names = [quote_ident(name) for name, _ in self.projection]
        listed = ", ".join(names)
        equal = " AND ".join(f"x.{n} IS NOT DISTINCT FROM y.{n}" for n in names) or "true"
        partition = f"PARTITION BY {listed} " if names else ""

        def changed(side: str, other: str) -> str:
            rows = {"before": gone, "after": came}[side]
            if rows is not None:
                return f"{side}_changed AS MATERIALIZED (SELECT x.*, hash({listed or 0}) AS _h FROM {rows} x)"
            return (f"{side}_changed AS MATERIALIZED (SELECT x.*, hash({listed or 0}) AS _h FROM top_{side} x "
                    f"ANTI JOIN top_{other} y ON x._rid = y._rid AND x._rank = y._rank)")

        def equal_hash(side: str, other: str) -> str:
            """Changed rows of ``side`` that may equal one of ``other``: the same hash."""
            return (f"{side}_equal AS MATERIALIZED (SELECT * FROM {side}_changed "
                    f"WHERE _h IN (SELECT _h FROM {other}_changed))")

        def numbered(side: str) -> str:
            return f"SELECT *, row_number() OVER ({partition}ORDER BY _rid) AS _n FROM {side}_equal"

        def part(side: str, other: str, kind: int, place: int) -> str:
            cancelled = (f"SELECT x._rid FROM ({numbered(side)}) x SEMI JOIN ({numbered(other)}) y "
                         f"ON {equal} AND x._n = y._n")
            return (f"SELECT {listed}, {kind}::TINYINT AS {ROW_KIND}, {place} AS _place, _rid "
                    f"FROM {side}_changed WHERE _rid NOT IN ({cancelled})")

        return (f"WITH {changed('before', 'after')}, {changed('after', 'before')}, "
                f"{equal_hash('before', 'after')}, {equal_hash('after', 'before')} "
                f"SELECT * EXCLUDE (_place, _rid) FROM ({part('before', 'after', DELETE, 0)} UNION ALL "
                f"{part('after', 'before', INSERT, 1)}) ORDER BY _place, _rid")

    def _apply(self, delta: pa.RecordBatch) -> None:
        columns = self._quoted(["key_group", "_rid", "_t", *self.columns])
        added = f"SELECT {columns} FROM {DELTA} WHERE _sign > 0"
        self._run(f"INSERT INTO {TABLE} {added}")
        self._compaction.changed(self.con, delta.nbytes)
        if pc.any(pc.less(delta.column(delta.num_columns - 1), pa.scalar(0, pa.int8()))).as_py():  # delete one equal row each
            data = self._quoted(self.columns)
            same = " AND ".join(f"s.{quote_ident(c)} IS NOT DISTINCT FROM r.{quote_ident(c)}" for c in self.columns)
            self._run(
                f"DELETE FROM {TABLE} WHERE _rid IN (SELECT s._rid FROM "
                f"(SELECT *, row_number() OVER (PARTITION BY {data} ORDER BY _rid) AS _n FROM {TABLE}) s JOIN "
                f"(SELECT *, row_number() OVER (PARTITION BY {data} ORDER BY _rid) AS _n FROM {DELTA} "
                f"WHERE _sign < 0) r ON {same} AND s._n = r._n)")

    def _expire(self, now: int) -> None:
        """Forget rows older than the retention, at most ten times per retention period."""
        if self.ttl_ms <= 0 or (self._last_expiry is not None and now - self._last_expiry < max(self.ttl_ms // 10, 1)):
            return
        self._last_expiry = now
        expired = self._run(f"SELECT count(*) FROM {TABLE} WHERE _t < {int_literal(now - self.ttl_ms)}")[0][0]
        if expired:
            self._run(f"DELETE FROM {TABLE} WHERE _t < {int_literal(now - self.ttl_ms)}")
            self.ctx.count("state_rows_expired", expired)

    def state_rows(self) -> int:
        self.open()
        return self._run(f"SELECT count(*) FROM {TABLE}")[0][0] if self._created else 0

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        self.open()
        return snapshot_tables(self.con, [TABLE] if self._created else [], self.ctx, version=SNAPSHOT_VERSION,
                               watermark=0, order="key_group, _rid")

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="Top-N")

    def restore(self, state: dict[str, Any]) -> None:
        self.open()
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="Top-N",
                              operator_id=self.ctx.operator_id, known={TABLE})
        if self._created:
            self._run(f"DROP TABLE {TABLE}")
            self._created = False
        table = tables.get(TABLE)
        if table is None:
            return
        self.con.register("restored", table)
        try:
            rest = self._quoted(self.columns)
            # row ids of merged subtasks may repeat: number the rows afresh
            self._run(f"CREATE TABLE {TABLE} AS SELECT key_group, "
                      f"(row_number() OVER (ORDER BY key_group, _rid) - 1)::BIGINT AS _rid, _t, {rest} FROM restored")
        finally:
            self.con.unregister("restored")
        self._created = True
        self._next_rid = table.num_rows


def _maybe_equal(rows: pa.Table, others: pa.Table) -> pa.Array:
    """Per row of ``rows``: whether it may equal a row of ``others`` (same columns after ``_rid``):
    each of its values of a type compared exactly is among the others' values of that column
    (NULL among NULLs)."""
    maybe = pa.repeat(pa.scalar(True, pa.bool_()), rows.num_rows)
    for i in range(1, rows.num_columns):
        column, values = rows.column(i), others.column(i)
        if any(check(column.type) for check in _EXACT):
            maybe = pc.and_(maybe, pc.is_in(column, value_set=values.combine_chunks(), skip_nulls=False))
            if not pc.any(maybe).as_py():
                break
    return maybe


def _order_terms(order_by: list[str], columns: list[str]) -> list[tuple[str, bool, bool | None]] | None:
    """ORDER BY's terms as (column, descending, NULLS FIRST: None where not written) when each is
    one of ``columns``; else None."""
    terms = []
    for sql in order_by:
        match = PLAIN_ORDER.match(sql.strip())
        name = match.group(1).replace('""', '"') if match else None
        if name not in columns:
            return None
        nulls = match.group(3)
        terms.append((name, (match.group(2) or "ASC").upper() == "DESC", None if nulls is None else nulls.upper() == "FIRST"))
    return terms
