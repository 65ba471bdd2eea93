"""Watermark generation per source split, combined by minimum; every row's arrival watermark.

A split's watermark is the largest value the table's WATERMARK expression
has taken over the rows of that split (Flink's semantics); the source's
watermark is the minimum over its unfinished splits, and it only moves forward.

Lateness is decided per row, as in Flink, where the watermark moves after
every record: a row's *arrival watermark* is its split's watermark as of the
row, the largest WATERMARK value over the rows before it in the split (the
batch before it included), computed for a whole batch at once as a cumulative
maximum (``arrival_watermarks``). It travels with the row in the transport
column ``ARRIVAL_WATERMARK`` (int64 µs), appended to every source batch of a
table with a WATERMARK. An operator declares what it does with the column
(``Operator.arrival_watermark``): ``"use"`` (it judges lateness with
``row_watermarks``: per row, the larger of the arrival watermark and its own),
``"pass"`` (it hands the column on with the rows: calc, union), or neither, in
which case the runtime strips it first (``for_operator``) — so sinks and
every other operator never see it.

The rule is deterministic whatever the batch size, parallelism or timing: the
value depends only on the row's split, and an operator's own watermark — a
minimum over splits whose watermark the rows before reached — is never above
it. The combined watermark (the minimum over splits) still fires windows.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.pandas_import import scalar
from weir.engine.sql_eval import INPUT
from weir.engine.udfs import register_functions


#: The transport column holding each row's arrival watermark (int64 µs); see the module docstring.
ARRIVAL_WATERMARK = "__arrival_watermark"
ARRIVAL_FIELD = pa.field(ARRIVAL_WATERMARK, pa.int64())
#: What an operator does with ``ARRIVAL_WATERMARK`` (``Operator.arrival_watermark``).
USE, PASS = "use", "pass"


def arrival_watermarks(candidates: pa.Array, before: int) -> tuple[pa.Array, int]:
    """Each row's arrival watermark — the largest of ``before`` (the split's watermark before
    the batch) and the candidates of the rows before it — and the split's watermark after the
    batch. ``candidates`` are int64 µs, NULL where the WATERMARK expression is NULL."""
    if len(candidates) == 0:
        return pa.array([], pa.int64()), before
    filled = pc.fill_null(candidates, MIN_WATERMARK)
    running = pc.max_element_wise(pc.cumulative_max(filled), scalar(before))
    shifted = pa.concat_arrays([pa.array([before], pa.int64()), running.slice(0, len(running) - 1)])
    return shifted, running[len(running) - 1].as_py()


def has_arrival(batch: pa.RecordBatch) -> bool:
    return batch.schema.get_field_index(ARRIVAL_WATERMARK) >= 0


def without_arrival(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without its ``ARRIVAL_WATERMARK`` column (the same batch if it has none)."""
    index = batch.schema.get_field_index(ARRIVAL_WATERMARK)
    return batch if index < 0 else batch.remove_column(index)


def for_operator(operator, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` as ``operator`` takes it: with ``ARRIVAL_WATERMARK`` only for an operator that
    uses or passes it (its class attribute ``arrival_watermark``). The runtime calls this where
    it hands a batch to an operator."""
    return batch if operator.arrival_watermark in (USE, PASS) else without_arrival(batch)


def row_watermarks(batch: pa.RecordBatch, watermark: int) -> pa.Array | int | None:
    """The watermark each row of ``batch`` is judged late against: the larger of its arrival
    watermark and the operator's own ``watermark`` (an int64 array), just ``watermark`` for a
    batch without arrival watermarks, or None when no row can be late (neither has started)."""
    index = batch.schema.get_field_index(ARRIVAL_WATERMARK)
    if index < 0:
        return watermark if watermark > MIN_WATERMARK else None
    arrival = batch.column(index)
    return pc.max_element_wise(arrival, scalar(watermark)) if watermark > MIN_WATERMARK else arrival


def highest_watermark(batch: pa.RecordBatch, watermark: int) -> int | None:
    """The largest of ``row_watermarks(batch, watermark)``, without building it per row."""
    index = batch.schema.get_field_index(ARRIVAL_WATERMARK)
    if index < 0:
        return watermark if watermark > MIN_WATERMARK else None
    return max(pc.max(batch.column(index)).as_py(), watermark)


class WatermarkGenerator:
    """Evaluates a watermark expression (DuckDB SQL, a TIMESTAMP) over batches.

    The common form ``column - INTERVAL ...`` (bounded out-of-orderness) arrives
    as ``bounded``: (column, delay in µs), and is computed with one pyarrow max."""

    def __init__(self, expression_sql: str, bounded: tuple[str, int] | None = None):
        self._query = f"SELECT epoch_us(max(CAST(({expression_sql}) AS TIMESTAMP))) FROM {INPUT}"
        self._per_row = f"SELECT epoch_us(CAST(({expression_sql}) AS TIMESTAMP)) AS candidate FROM {INPUT}"
        self._bounded = bounded
        self._con = duckdb.connect(":memory:") if bounded is None else None
        if self._con is not None:
            register_functions(self._con)  # a WATERMARK expression may call a Python UDF

    def max_of(self, batch: pa.RecordBatch) -> int | None:
        """The largest watermark candidate in ``batch`` (µs), or None if all are NULL."""
        if self._bounded is not None:
            column, delay = self._bounded
            largest = pc.max(batch.column(column)).cast(pa.timestamp("us")).value
            return None if largest is None else largest - delay
        self._con.register(INPUT, batch)
        try:
            (value,) = self._con.sql(self._query).fetchall()[0]
        finally:
            self._con.unregister(INPUT)
        return value

    def candidates(self, batch: pa.RecordBatch) -> pa.Array:
        """The WATERMARK expression of every row of ``batch`` (int64 µs, NULL where it is NULL)."""
        if self._bounded is not None:
            column, delay = self._bounded
            times = batch.column(column).cast(pa.timestamp("us")).view(pa.int64())
            return pc.subtract(times, scalar(delay))
        self._con.register(INPUT, batch)
        try:
            result = self._con.sql(self._per_row).to_arrow_table()
        finally:
            self._con.unregister(INPUT)
        return result.column(0).combine_chunks().cast(pa.int64())


class SplitWatermarks:
    """Tracks one watermark per split and their minimum over the splits being read.

    Splits come in chains (``Source.chain``) read one after another: only the first
    unfinished split of each chain holds the watermark back; the later ones are
    pending. A split that is every split of its own chain is read from the start."""

    def __init__(self, splits: list[str], chains: list[list[str]] | None = None):
        self._by_split = {s: MIN_WATERMARK for s in splits}
        self._chains = chains if chains is not None else [[s] for s in splits]
        self._finished: set[str] = set()
        self._idle: set[str] = set()
        self.current = MIN_WATERMARK

    def state(self) -> dict:
        return {"split_watermarks": dict(self._by_split), "finished_splits": sorted(self._finished)}

    def restore(self, state: dict) -> None:
        for split, mark in state.get("split_watermarks", {}).items():
            if split in self._by_split:
                self._by_split[split] = int(mark)
        self._finished = {s for s in state.get("finished_splits", []) if s in self._by_split}
        active = [self._by_split[s] for s in self._heads()]
        self.current = min(active) if active else MAX_WATERMARK

    def add(self, split: str) -> None:
        """A split found while the source runs: a chain of its own, from MIN_WATERMARK (it holds
        the watermark until it has rows or goes idle, as a new split does in Flink)."""
        self._by_split[split] = MIN_WATERMARK
        self._chains.append([split])

    def of(self, split: str) -> int:
        """``split``'s watermark so far (MIN_WATERMARK before its first row)."""
        return self._by_split[split]

    def observe(self, split: str, candidate: int | None) -> int | None:
        """Record a split's new candidate; return the combined watermark if it advanced."""
        if candidate is not None and candidate > self._by_split[split]:
            self._by_split[split] = candidate
        self._idle.discard(split)
        return self._advance()

    def idle(self, split: str) -> int | None:
        """``split`` had no rows for the idle timeout: it stops holding the watermark back
        until it has rows again (``observe`` makes it active)."""
        self._idle.add(split)
        return self._advance()

    def finish(self, split: str) -> int | None:
        self._finished.add(split)
        return self._advance()

    def _heads(self) -> list[str]:
        """The split each chain is reading: its first unfinished one."""
        heads = []
        for chain in self._chains:
            head = next((s for s in chain if s not in self._finished), None)
            if head is not None:
                heads.append(head)
        return heads

    def _advance(self) -> int | None:
        heads = self._heads()
        active = [self._by_split[s] for s in heads if s not in self._idle]
        if not active and heads:
            return None  # every split being read is idle: the watermark waits
        combined = min(active) if active else MAX_WATERMARK
        if combined > self.current:
            self.current = combined
            return combined
        return None
