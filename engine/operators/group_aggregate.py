"""GroupAggregate: GROUP BY without a window, an updating result kept in DuckDB.

Config (``GroupAggregateConfig``)::

    keys:              ((name, sql), ...)   # () for a global aggregate (one group)
    aggregates:        (AggregateCall(name, function, argument, distinct, filter), ...)
    having:            sql or None
    projection:        ((name, sql), ...)
    append_only_input: bool                 # MIN/MAX keep a running value, no multiset

``keys``, aggregate arguments and filters are SQL over the input columns;
``having`` and ``projection`` are SQL over the key names and the aggregate
names. The output is a changelog (``engine.changelog``): the projected
columns and ``_row_kind``. Applied in order to an empty table, it leaves
DuckDB's batch query ``SELECT <projection> FROM input GROUP BY keys HAVING
<having>`` over the input's net rows.

The input may be append-only or itself a changelog: a row whose ``_row_kind``
is -U or -D retracts (subtracts) what an earlier +I/+U added.

State, per key (with its key group):

- ``group_accumulators``: the net row count ``__rows`` and, per COUNT, SUM and
  AVG, counts and sums that a retraction subtracts from;
- ``group_values_<j>``: for DISTINCT aggregates, and MIN/MAX over an input
  that retracts, a multiset of the argument's values (value -> count), so
  that retracting the minimum reveals the next one. Over append-only input
  MIN and MAX keep a running value in ``group_accumulators``.
- per Python aggregate function (``engine.udafs``), a pickled accumulator ``__u<i>`` in
  ``group_accumulators``: a batch's rows of a key, signed and in arrival order, are folded into it
  in one call (``accumulate`` the +I/+U rows, ``retract`` the -U/-D rows).

Per batch (the operator's mini-batch; Flink emits per record or per
mini-batch), set-based in DuckDB:

1. the batch's rows become signed deltas per key (and per key and value);
2. one scan of the state reads the keys the batch touches: each key's state
   before (``old``) and merged with its deltas (``new``) in one temporary table,
   ``merged_accumulators`` (straight from the input's rows, in the statement of
   step 1, when nothing else reads the deltas);
3. the state rows of those keys are replaced by the merged ones whose row count
   is still positive: keys whose count drops to 0 are removed;
4. one query reads the results of the old and the new state (a multiset's old
   results are read before it changes) and, per key, after HAVING: in both old
   and new -> ``-U`` old, ``+U`` new (nothing when the projected rows are equal);
   only new -> ``+I``; only old -> ``-D``.

Each step is one statement: a DuckDB statement costs a millisecond or more
whatever its size, and the second aggregate of Nexmark q4 sees ten keys a batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.errors import EngineError
from weir.engine.operators.accumulators import AggregateCall
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.operators.batches import conform
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.late_rows import BadRows
from weir.engine.operators.duckdb_sql import create_table_from_arrow, query_arrow, quote_ident, run_arrow, snapshot_tables
from weir.engine.pandas_import import arrow_array, numpy_values
from weir.engine.state.key_groups import KEY_GROUP_COLUMN, key_groups
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables
from weir.engine.udafs import key_sql
from weir.engine.udfs import UdfError
from weir.engine.watermarks import ARRIVAL_WATERMARK, without_arrival

INPUT_VIEW = "group_input"
#: The input rows' arrival order, appended to a batch with Python aggregate functions.
SEQUENCE = "__weir_sequence"
ACCUMULATORS = "group_accumulators"
#: With the bad-rows setting over an updating input: the additions (+I/+U rows) a Python aggregate
#: raised on and that were left out, as (key_group, r: the row's columns as a struct, __count), so
#: that the retraction (-U/-D) of each, whenever it comes, is left out too. Checkpointed state.
LEFT_OUT = "left_out_additions"
SNAPSHOT_VERSION = 1
#: The batch's keys with their merged state columns and, prefixed ``OLD``, their state before it.
MERGED = "merged_accumulators"
OLD = "__old"
#: The state column of aggregate i's signed partial of each kind: ``__c<i>``, ``__s<i>``, ``__m<i>``.
_STATE_COLUMN = {"count": "__c{i}", "sum": "__s{i}", "min": "__m{i}", "max": "__m{i}"}


RETRACT_HINT = ("define retract(self, acc, *args) (or retract_batch(self, acc, *arrays)), which takes a row "
                "back out of acc, or aggregate an append-only input")


class _ValueSet:
    """A multiset of an argument's values per key: MIN, MAX and DISTINCT aggregates
    over the same argument and filter share it."""

    def __init__(self, argument: str, filter: str | None, index: int):
        self.argument, self.filter = argument, filter
        self.table = f"group_values_{index}"
        self.column = f"__d{index}"
        self.filter_column = f"__df{index}" if filter is not None else None


@dataclass(frozen=True)
class GroupAggregateConfig(OperatorConfig):
    #: (output name, SQL over the key names and the aggregate names).
    projection: tuple[tuple[str, str], ...]
    #: (output name, SQL over the input), per key; none: one global group.
    keys: tuple[tuple[str, str], ...] = ()
    aggregates: tuple[AggregateCall, ...] = ()
    #: SQL over the key names and the aggregate names, or None.
    having: str | None = None
    #: Set by the planner when the input never retracts: MIN and MAX then keep a running
    #: value (as Flink's MaxAggFunction) instead of a multiset (MaxWithRetractAggFunction).
    append_only_input: bool = False
    #: With 'python.udf.bad-rows.table': a row a Python aggregate function's ``accumulate`` raises
    #: on (over an append-only input) goes to the bad-rows table, as if it never arrived.
    bad_rows: bool = optional(False)


class GroupAggregate(StateOperator):
    Config = GroupAggregateConfig
    #: State: keys and accumulators (HAVING and the projection are applied to them when read).
    STATE_CONFIG = ("keys", "aggregates", "append_only_input")
    keyed_by = ("keys",)
    merges_snapshots = True

    @classmethod
    def explain(cls, config: GroupAggregateConfig) -> list[str]:
        per = ", ".join(name for name, _ in config.keys) or "the one group"
        retracting = not config.append_only_input
        multisets = any((a.function in ("min", "max") and retracting) or
                        (a.distinct and a.function not in ("min", "max")) for a in config.aggregates)
        return explain_lines(
            ", ".join(name for name, _ in config.keys) or "- (one global group)",
            f"accumulators per ({per})"
            + (" and value counts for DISTINCT (and MIN/MAX of a retracting input)" if multisets else "")
            + "; a key is dropped when its row count falls to 0")

    def __init__(self, config: GroupAggregateConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        if not config.projection:
            raise EngineError("group_aggregate config lacks 'projection'", operator_id=oid)
        self.keys: list[tuple[str, str]] = list(config.keys)
        self.calls = [AggregateCall.from_config(a, oid) for a in config.aggregates]
        self.having: str | None = config.having
        self.projection: list[tuple[str, str]] = list(config.projection)
        self.value_sets: list[_ValueSet] = []
        self._value_set_of: dict[str, _ValueSet] = {}
        self.append_only_input = bool(config.append_only_input)
        for call in self.calls:
            if call.function in ("min", "max"):
                if not self.append_only_input:
                    self._value_set_of[call.name] = self._value_set(call)
            elif call.distinct:
                self._value_set_of[call.name] = self._value_set(call)
        #: Python aggregate functions by call name (``engine.udafs``): one pickled accumulator per key.
        self.python = {c.name: c.requires_python(oid) for c in self.calls if c.python is not None}
        for call in self.calls:
            if call.python is not None and not self.append_only_input and not call.python.retracts:
                raise EngineError(f"the Python aggregate function {call.python.name} has no retract method, "
                                  "and its input is an updating stream", hint=RETRACT_HINT, operator_id=oid)
        #: Bad rows (``bad_rows``): a change row (+I, -U, +U or -D) a Python aggregate's accumulate
        #: or retract raises on is left out of every aggregate of the query, as if it never arrived.
        self._bad_rows = BadRows(ctx) if config.bad_rows and self.python else None
        for function in self.python.values():
            function.keeps_rows = ("accumulate", "retract")
        # A global aggregate has one group: the constant key 0.
        self.key_sql = [sql for _, sql in self.keys] or ["0"]
        self.key_columns = [f"__k{i}" for i in range(len(self.key_sql))]
        #: The state tables this operator created (``_create_once``) on its connection; forgotten on
        #: rollback and restore.
        self._created: set[str] = set()

    def _value_set(self, call: AggregateCall) -> _ValueSet:
        for v in self.value_sets:
            if (v.argument, v.filter) == (call.argument, call.filter):
                return v
        v = _ValueSet(call.argument, call.filter, len(self.value_sets))
        self.value_sets.append(v)
        return v

    # -- lifecycle -----------------------------------------------------------
    def create_state(self) -> None:
        self._created.clear()  # a fresh connection: its state tables come with the first batch
        for function in self.python.values():  # their DuckDB functions (engine.udafs)
            function.register(self.con)

    def _tables(self) -> list[str]:
        return [ACCUMULATORS, *(v.table for v in self.value_sets), *([LEFT_OUT] if self._bad_rows is not None else [])]

    def _exists(self, table: str) -> bool:
        return bool(self.con.execute(
            "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary", [table]).fetchall())

    # -- SQL pieces ------------------------------------------------------------
    def _match(self, left: str, right: str) -> str:
        return " AND ".join(f"{left}.{k} IS NOT DISTINCT FROM {right}.{k}" for k in self.key_columns)

    def _accumulator_columns(self) -> list[tuple[str, str, str]]:
        """(state column, delta SQL over the prepared rows, how state and delta merge:
        'sum', 'min' or 'max') of the plain accumulators."""
        columns = [("__rows", "SUM(__sign)", "sum")]
        for i, call in enumerate(self.calls):
            if call.name in self._value_set_of:
                continue
            if call.name in self.python:  # the batch's signed rows of each key, in arrival order
                numbered = ", 'q': __seq" if self._bad_rows is not None else ""  # a raising row's number
                rows = f"list({{'s': __sign, 'v': __a{i}{numbered}}} ORDER BY __seq)"
                rows += f" FILTER (WHERE __f{i})" if call.filter is not None else ""
                columns.append((f"__u{i}", rows, f"python:{self.python[call.name].apply_fn}"))
                continue
            cond = [f"__f{i}"] if call.filter is not None else []
            if call.argument is not None:
                cond.append(f"__a{i} IS NOT NULL")
            where = " AND ".join(cond) or None
            columns += [(_STATE_COLUMN[p.kind].format(i=i), p.of_signed(f"__a{i}", "__sign", where), p.combine)
                        for p in call.definition.signed_partials()]
        return columns

    def _prepared_sql(self, signed: bool) -> str:
        sign = f"CASE WHEN {quote_ident(ROW_KIND)} IN ({UPDATE_BEFORE}, {DELETE}) THEN -1 ELSE 1 END" \
            if signed else "1"
        columns = [f"CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group"]
        columns += [f"({sql}) AS {k}" for sql, k in zip(self.key_sql, self.key_columns)]
        columns.append(f"{sign} AS __sign")
        if self.python:
            columns.append(f"{quote_ident(SEQUENCE)} AS __seq")
        for i, call in enumerate(self.calls):
            if call.name in self._value_set_of:
                continue
            if call.argument is not None:
                columns.append(f"({call.argument}) AS __a{i}")
            if call.filter is not None:
                columns.append(f"({call.filter}) AS __f{i}")
        for v in self.value_sets:
            columns.append(f"({v.argument}) AS {v.column}")
            if v.filter_column:
                columns.append(f"({v.filter}) AS {v.filter_column}")
        return f"SELECT {', '.join(columns)} FROM {quote_ident(INPUT_VIEW)}"

    def _results_sql(self, accumulators: str) -> str:
        """Keys and aggregate values of the keys in ``accumulators`` (the batch's keys that
        have state: ``old_state`` before the merge, ``merged`` after it)."""
        keys = ", ".join(f"a.{k}" for k in self.key_columns)
        joins, values = [], {}
        for j, v in enumerate(self.value_sets):
            alias = f"m{j}"
            inner = ", ".join(f"v.{k}" for k in self.key_columns)
            # each value appears once (with its count): the partials of the values are the DISTINCT ones
            needed = {p.kind: p for c in self.calls if self._value_set_of.get(c.name) is v
                      for p in c.definition.partials()}
            functions = ", ".join(f"{p.of_values('v.value')} AS __{kind}" for kind, p in sorted(needed.items()))
            joins.append(
                f"LEFT JOIN (SELECT {inner}, {functions} FROM {v.table} AS v "
                f"SEMI JOIN batch_deltas AS d ON {self._match('v', 'd')} GROUP BY ALL) AS {alias} "
                f"ON {self._match('a', alias)}")
            values[v.table] = alias
        aggregates = []
        for i, call in enumerate(self.calls):
            v = self._value_set_of.get(call.name)
            if call.name in self.python:
                keys_of = key_sql([f"a.{k}" for k in self.key_columns])  # a failing get_value names its key
                value_fn = self.python[call.name].keyed_value_fn
                aggregates.append(f"{value_fn}(a.__u{i}{keys_of}) AS {quote_ident(call.name)}")
                continue
            if v is not None:  # the partials of the multiset's (distinct) values
                merged = {p.kind: p.or_nothing(f"{values[v.table]}.__{p.kind}") for p in call.definition.partials()}
            else:  # the signed partials kept in state
                merged = {p.kind: "a." + _STATE_COLUMN[p.kind].format(i=i) for p in call.definition.signed_partials()}
            aggregates.append(f"{call.result_sql(merged)} AS {quote_ident(call.name)}")
        return f"SELECT {', '.join([keys, *aggregates])} FROM {accumulators} AS a {' '.join(joins)}"

    def _projected_sql(self, accumulators: str) -> str:
        """The results of the batch's keys, projected: the keys, the output columns
        ``__p<i>`` and HAVING as ``__keep``."""
        named = [f"{k} AS {quote_ident(name)}" for k, (name, _) in zip(self.key_columns, self.keys)]
        columns = [*self.key_columns]
        columns += [f"({sql}) AS __p{i}" for i, (_, sql) in enumerate(self.projection)]
        columns.append(f"COALESCE(({self.having}), FALSE) AS __keep" if self.having else "TRUE AS __keep")
        return f"SELECT {', '.join(columns)} FROM (SELECT {', '.join(['*', *named])} FROM ({self._results_sql(accumulators)}))"

    def _merge_values(self, v: _ValueSet) -> None:
        """Merge the batch's value counts into the multiset ``v`` (by key and value); a value whose
        count is no longer positive goes."""
        keys = [*self.key_columns, "value"]
        match = " AND ".join(f"s.{k} IS NOT DISTINCT FROM d.{k}" for k in keys)
        self._run(f"CREATE OR REPLACE TEMP TABLE merged AS SELECT d.key_group, "
                  f"{', '.join('d.' + k for k in keys)}, COALESCE(s.__count, 0) + COALESCE(d.__count, 0) AS __count "
                  f"FROM batch_{v.table} AS d LEFT JOIN {v.table} AS s ON {match}")
        self._run(f"DELETE FROM {v.table} AS s USING batch_{v.table} AS d WHERE {match}")
        self._run(f"INSERT INTO {v.table} SELECT * FROM merged WHERE __count > 0")

    # -- batches -------------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        signed = ROW_KIND in batch.schema.names
        if signed and self.append_only_input:
            raise EngineError("group_aggregate was planned for append-only input but got a changelog",
                              hint="plan it with 'append_only_input' false", operator_id=self.ctx.operator_id)
        batch = batch.append_column(KEY_GROUP_COLUMN, self._key_groups(batch))
        if signed and self._bad_rows is not None:
            batch = self._without_retractions_of_left_out(batch)
            if batch.num_rows == 0:
                return []
        if self.python:
            batch = batch.append_column(SEQUENCE, arrow_array(np.arange(batch.num_rows, dtype=np.int64)))
        out = self._apply(batch, signed) if self._bad_rows is None else self._apply_keeping_bad_rows(batch, signed)
        self.ctx.count("rows_out", sum(b.num_rows for b in out))
        return out

    def _apply_keeping_bad_rows(self, batch: pa.RecordBatch, signed: bool) -> list[pa.RecordBatch]:
        """``_apply`` in a transaction. When a Python aggregate's ``accumulate`` or ``retract`` raised,
        the batch is rolled back and run once more, in another, with each failing group's rows of
        the method that raised folded in one at a time (``PythonAggregate.catching``) to learn
        which rows raise; rolled back again (the built-in aggregates counted them), those rows go
        to the bad-rows table and the batch without them is applied: every aggregate of the query
        is as if those change rows never arrived. Over an updating input that holds for each change
        row by itself: a +I left out whose -D arrives later is retracted then (and listed too,
        should retract raise on it). A failure of ``merge`` or ``get_value`` (an accumulator, no
        input row to list) still fails the job."""
        try:
            return self._transaction(batch, signed)
        except UdfError as error:
            if error.failure is None or error.failure.raised is not None:
                raise
            first = error
        for function in self.python.values():
            function.catching = {}
        try:
            self._transaction(batch, signed, commit=False)
        finally:
            failures = {}
            for function in self.python.values():  # a row two functions raise on: the first one's failure
                for number, failure in function.catching.items():
                    failures.setdefault(number, failure)
            for function in self.python.values():
                function.catching = None
        if not failures:
            raise first
        cancelled = self._pair_left_out(batch, failures) if signed else []
        numbers = sorted(failures)
        bad = pa.array(numbers, pa.int64())
        self._bad_rows.keep(without_arrival(batch.take(bad)).drop_columns([KEY_GROUP_COLUMN, SEQUENCE]),
                            [failures[n] for n in numbers])
        dropped = pa.array(sorted([*numbers, *cancelled]), pa.int64())
        kept = batch.filter(pc.invert(pc.is_in(batch[SEQUENCE], value_set=dropped)))
        return self._transaction(kept, signed) if kept.num_rows else []

    # -- left-out additions and their retractions (bad rows over an updating input) ------------
    def _row_struct(self, batch: pa.RecordBatch) -> str:
        """A change row's own columns as one struct (not its kind, key group or arrival number)."""
        skip = {ROW_KIND, KEY_GROUP_COLUMN, SEQUENCE, ARRIVAL_WATERMARK}
        names = [n for n in batch.schema.names if n not in skip]
        return "{" + ", ".join(f"'c{i}': {quote_ident(n)}" for i, n in enumerate(names)) + "}"

    def _without_retractions_of_left_out(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` without the -U/-D rows that retract an addition left out by an earlier batch
        (``LEFT_OUT``), each cancelling one, in arrival order; those additions are forgotten."""
        if not self._exists(LEFT_OUT):
            return batch
        numbered = batch.append_column("__weir_at", arrow_array(np.arange(batch.num_rows, dtype=np.int64)))
        self.con.register(INPUT_VIEW, numbered)
        try:
            self._run("CREATE OR REPLACE TEMP TABLE cancelled AS SELECT x.pos, x.key_group, x.r FROM ("
                      f"SELECT __weir_at AS pos, CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group, "
                      f"{self._row_struct(batch)} AS r, row_number() OVER (PARTITION BY "
                      f"{quote_ident(KEY_GROUP_COLUMN)}, {self._row_struct(batch)} ORDER BY __weir_at) AS n "
                      f"FROM {quote_ident(INPUT_VIEW)} WHERE {quote_ident(ROW_KIND)} IN ({UPDATE_BEFORE}, {DELETE})"
                      f") AS x JOIN {LEFT_OUT} AS l ON x.key_group = l.key_group AND x.r IS NOT DISTINCT FROM l.r "
                      "WHERE x.n <= l.__count")
        finally:
            self.con.unregister(INPUT_VIEW)
        at = query_arrow(self.con, "SELECT pos FROM cancelled", self.ctx.operator_id).column(0)
        if not len(at):
            return batch
        self._run(f"CREATE OR REPLACE TABLE {LEFT_OUT} AS SELECT l.key_group, l.r, "
                  "CAST(l.__count - COALESCE(c.n, 0) AS BIGINT) AS __count "
                  f"FROM {LEFT_OUT} AS l LEFT JOIN (SELECT key_group, r, count(*) AS n FROM cancelled GROUP BY ALL) "
                  "AS c ON l.key_group = c.key_group AND l.r IS NOT DISTINCT FROM c.r "
                  "WHERE l.__count > COALESCE(c.n, 0)")
        return batch.filter(pc.invert(pc.is_in(arrow_array(np.arange(batch.num_rows, dtype=np.int64)), value_set=at)))

    def _pair_left_out(self, batch: pa.RecordBatch, failures: dict) -> list[int]:
        """The additions among ``failures`` (arrival numbers), each paired with the first later -U/-D
        of the same row in ``batch`` not yet paired: the numbers of those retractions, which are left
        out too (and not listed, should they be among ``failures``); the additions left unpaired
        are kept in ``LEFT_OUT`` for the retractions of later batches."""
        kinds = numpy_values(batch[ROW_KIND])
        adds = [n for n in sorted(failures) if kinds[n] in (INSERT, UPDATE_AFTER)]
        if not adds:
            return []
        self.con.register(INPUT_VIEW, batch)
        try:
            struct, seq, kind = self._row_struct(batch), quote_ident(SEQUENCE), quote_ident(ROW_KIND)
            self._run(f"CREATE OR REPLACE TEMP TABLE numbered AS SELECT {seq} AS q, "
                      f"CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group, {struct} AS r, "
                      f"{kind} IN ({UPDATE_BEFORE}, {DELETE}) AS retracts FROM {quote_ident(INPUT_VIEW)}")
        finally:
            self.con.unregister(INPUT_VIEW)
        listed = ", ".join(map(str, adds))
        pairs = query_arrow(self.con, "SELECT a.q AS a, d.q AS d FROM numbered AS a JOIN numbered AS d "
                            "ON a.key_group = d.key_group AND a.r IS NOT DISTINCT FROM d.r AND d.q > a.q "
                            f"WHERE a.q IN ({listed}) AND d.retracts ORDER BY d.q, a.q",
                            self.ctx.operator_id).to_pylist()
        paired: dict[int, int] = {}  # addition -> its retraction; only the few bad additions' rows
        taken: set[int] = set()
        for pair in pairs:
            if pair["d"] not in taken and pair["a"] not in paired:
                paired[pair["a"]] = pair["d"]
                taken.add(pair["d"])
        for d in taken:
            failures.pop(d, None)
        held = [a for a in adds if a not in paired]
        if held:
            self._run(f"CREATE TABLE IF NOT EXISTS {LEFT_OUT} AS SELECT key_group, r, CAST(1 AS BIGINT) AS __count "
                      "FROM numbered LIMIT 0")
            self._run(f"CREATE OR REPLACE TABLE {LEFT_OUT} AS SELECT key_group, r, CAST(sum(__count) AS BIGINT) "
                      f"AS __count FROM (SELECT * FROM {LEFT_OUT} UNION ALL SELECT key_group, r, count(*) FROM "
                      f"numbered WHERE q IN ({', '.join(map(str, held))}) GROUP BY ALL) GROUP BY ALL")
        return sorted(taken)

    def _transaction(self, batch: pa.RecordBatch, signed: bool, *, commit: bool = True) -> list[pa.RecordBatch]:
        self.con.begin()
        try:
            out = self._apply(batch, signed)
        except BaseException:
            self._rollback()
            raise
        if commit:
            self.con.commit()
        else:
            self._rollback()
        return out

    def _rollback(self) -> None:
        self.con.rollback()
        self._created.clear()  # a table created in the transaction is gone

    def _apply(self, batch: pa.RecordBatch, signed: bool) -> list[pa.RecordBatch]:
        """Steps 1-4 over ``batch`` (its key groups and, with Python aggregates, arrival numbers
        appended): the state updated, the changes returned."""
        keys = ", ".join(self.key_columns)
        accumulators = self._accumulator_columns()
        columns = [name for name, _, _ in accumulators]
        # The deltas are merged straight from the input's rows, unless read again (the multisets'
        # results) or merged by Python functions, which may raise: the input is then let go first.
        apart = bool(self.value_sets or self.python)
        self.con.register(INPUT_VIEW, batch)
        try:
            if self.value_sets:  # the prepared rows are read again for each multiset
                self._run(f"CREATE OR REPLACE TEMP TABLE batch_rows AS {self._prepared_sql(signed)}")
            rows = "batch_rows" if self.value_sets else f"({self._prepared_sql(signed)})"
            deltas = (f"SELECT key_group, {keys}, " + ", ".join(f"{sql} AS {name}" for name, sql, _ in accumulators)
                      + f" FROM {rows} GROUP BY key_group, {keys}")
            if apart:
                self._run(f"CREATE OR REPLACE TEMP TABLE batch_deltas AS {deltas}")
                deltas = "batch_deltas"
            else:
                self._merge_accumulators(f"({deltas})", accumulators)
        finally:
            self.con.unregister(INPUT_VIEW)
        if apart:
            self._merge_accumulators(deltas, accumulators)
        for v in self.value_sets:
            where = f"{v.column} IS NOT NULL" + (f" AND {v.filter_column}" if v.filter_column else "")
            self._run(f"CREATE OR REPLACE TEMP TABLE batch_{v.table} AS SELECT key_group, {keys}, "
                      f"{v.column} AS value, CAST(SUM(__sign) AS BIGINT) AS __count FROM batch_rows "
                      f"WHERE {where} GROUP BY key_group, {keys}, value")
            self._create_once(v.table, f"SELECT * FROM batch_{v.table} LIMIT 0")
        old_state = (f"(SELECT {keys}, {', '.join(f'{OLD}{c} AS {c}' for c in columns)} FROM {MERGED} "
                     f"WHERE {OLD}__rows IS NOT NULL)")
        old_results = f"({self._projected_sql(old_state)})"
        if self.value_sets:  # read before their multisets change
            self._run(f"CREATE OR REPLACE TEMP TABLE old_results AS {self._projected_sql(old_state)}")
            old_results = "old_results"
        for v in self.value_sets:
            self._merge_values(v)
        self._run(f"DELETE FROM {ACCUMULATORS} AS s USING {MERGED} AS d "
                  f"WHERE d.{OLD}__rows IS NOT NULL AND {self._match('s', 'd')}")
        self._run(f"INSERT INTO {ACCUMULATORS} SELECT key_group, {keys}, {', '.join(columns)} FROM {MERGED} "
                  "WHERE __rows > 0")
        new_results = f"({self._projected_sql(f'(SELECT * FROM {MERGED} WHERE __rows > 0)')})"
        # one batch, as the input was one: a DB-API result comes in chunks, and each would be a batch
        changes = run_arrow(self.con, self._changes_sql(old_results, new_results), self.ctx.operator_id)
        return conform(changes.combine_chunks(), self.ctx.output_schema, self.ctx.operator_id)

    def _create_once(self, table: str, select: str) -> None:
        """Create the state table ``table`` as ``select`` (no rows), unless this operator has."""
        if table not in self._created:
            self._run(f"CREATE TABLE IF NOT EXISTS {table} AS {select}")
            self._created.add(table)

    def _merge_accumulators(self, deltas: str, accumulators: list[tuple[str, str, str]]) -> None:
        """The temporary table ``MERGED``: per key of ``deltas``, its key group and keys, the
        state columns merged with the deltas (``_accumulator_columns``: 'sum', 'min', 'max' or
        'python:<fn>'), and the state columns as they were, prefixed ``OLD`` (NULL for a key
        without state). Creates the state table on first use."""
        # Python aggregates' state columns hold pickled accumulators (the deltas: lists of rows)
        blobs = ", ".join(f"CAST(NULL AS BLOB) AS {name}" for name, _, how in accumulators if how.startswith("python:"))
        self._create_once(ACCUMULATORS, f"SELECT * {f'REPLACE ({blobs}) ' if blobs else ''}FROM {deltas} LIMIT 0")
        columns = [(name, how) for name, _, how in accumulators]
        keys = ", ".join(f"d.{k}" for k in self.key_columns)
        merge = {"sum": "COALESCE(s.{c}, 0) + COALESCE(d.{c}, 0)", "min": "LEAST(s.{c}, d.{c})",
                 "max": "GREATEST(s.{c}, d.{c})"}
        keys_of = key_sql([f"d.{k}" for k in self.key_columns])  # a failing row's error names its key
        merged = [(f"{how.split(':', 1)[1]}(s.{c}, d.{c}{keys_of})" if how.startswith("python:")
                   else merge[how].format(c=c)) + f" AS {c}" for c, how in columns]
        old = [f"s.{c} AS {OLD}{c}" for c, _ in columns]
        self._run(f"CREATE OR REPLACE TEMP TABLE {MERGED} AS SELECT d.key_group, {keys}, {', '.join(merged)}, "
                  f"{', '.join(old)} FROM {deltas} AS d LEFT JOIN {ACCUMULATORS} AS s ON {self._match('s', 'd')}")

    def _changes_sql(self, old_results: str, new_results: str) -> str:
        """Step 4: per key of the old and new results, the old row (ord 0: -U, or -D when the key
        is gone) and the new one (ord 1: +U, or +I for a new key), unless both are kept and equal."""
        n = len(self.projection)
        keys = ", ".join(f"COALESCE(o.{k}, n.{k}) AS {k}" for k in self.key_columns)
        same = " AND ".join(f"o.__p{i} IS NOT DISTINCT FROM n.__p{i}" for i in range(n))
        changes = (f"SELECT {keys}, " + ", ".join(f"o.__p{i}, n.__p{i} AS __q{i}" for i in range(n))
                   + ", COALESCE(o.__keep, FALSE) AS o_in, COALESCE(n.__keep, FALSE) AS n_in, "
                   + f"({same}) AS same FROM {old_results} AS o FULL JOIN {new_results} AS n ON {self._match('o', 'n')}")
        values = ", ".join(f"CASE WHEN t.ord = 0 THEN c.__p{i} ELSE c.__q{i} END" for i in range(n))
        kind = (f"CASE WHEN t.ord = 0 THEN (CASE WHEN c.n_in THEN {UPDATE_BEFORE} ELSE {DELETE} END) "
                f"ELSE (CASE WHEN c.o_in THEN {UPDATE_AFTER} ELSE {INSERT} END) END")
        emitted = ("CASE WHEN t.ord = 0 THEN c.o_in AND NOT (c.n_in AND c.same) "
                   "ELSE c.n_in AND NOT (c.o_in AND c.same) END")
        return (f"SELECT {values}, CAST({kind} AS TINYINT) FROM ({changes}) AS c, (VALUES (0), (1)) AS t(ord) "
                f"WHERE {emitted} ORDER BY {', '.join(f'c.{k}' for k in self.key_columns)}, t.ord")

    def _key_groups(self, batch: pa.RecordBatch) -> pa.Int32Array:
        """The stable key group of every row's key, as the exchange computes it (a global
        aggregate's one group hashes no columns). Keys are column references (the planner
        computes key expressions before the exchange); an expression is evaluated first."""
        names = batch.schema.names
        columns = [next((n for n in names if sql in (quote_ident(n), n)), None) for _, sql in self.keys]
        if all(c is not None for c in columns):
            return key_groups(batch, columns, self.ctx.max_parallelism)
        select = ", ".join(f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys))
        self.con.register(INPUT_VIEW, batch)
        try:
            keys = query_arrow(self.con, f"SELECT {select} FROM {quote_ident(INPUT_VIEW)}", self.ctx.operator_id)
        finally:
            self.con.unregister(INPUT_VIEW)
        return key_groups(keys, keys.schema.names, self.ctx.max_parallelism)

    def close(self) -> None:
        if self._bad_rows is not None:
            self._bad_rows.close()
        super().close()

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables": {name: pa.Table}}``;
        every table has a ``key_group`` column and is ordered by it."""
        self.open()
        return snapshot_tables(self.con, [n for n in self._tables() if self._exists(n)], self.ctx,
                               version=SNAPSHOT_VERSION, watermark=0)

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="group aggregate")

    def restore(self, state: dict[str, Any]) -> None:
        self.open()
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="group aggregate",
                              operator_id=self.ctx.operator_id, known=set(self._tables()))
        for name in self._tables():
            self._run(f"DROP TABLE IF EXISTS {name}")
        self._created.clear()
        for name, table in tables.items():
            create_table_from_arrow(self.con, name, table, self.ctx.operator_id)
