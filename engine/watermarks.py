"""Watermark generation per source split, combined by minimum.

A split's watermark is the largest value the table's WATERMARK expression
has taken over the rows of that split (Flink's semantics); the source's
watermark is the minimum over its unfinished splits, and it only moves forward.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from engine.messages import MAX_WATERMARK, MIN_WATERMARK
from engine.sql_eval import INPUT


class WatermarkGenerator:
    """Evaluates a watermark expression (DuckDB SQL, a TIMESTAMP) over batches.

    The common form ``column - INTERVAL ...`` (bounded out-of-orderness) arrives
    as ``bounded``: (column, delay in µs), and is computed with one pyarrow max."""

    def __init__(self, expression_sql: str, bounded: tuple[str, int] | None = None):
        self._query = f"SELECT epoch_us(max(CAST(({expression_sql}) AS TIMESTAMP))) FROM {INPUT}"
        self._bounded = bounded
        self._con = duckdb.connect(":memory:") if bounded is None else None

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
