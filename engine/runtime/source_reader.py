"""Reads a source's splits round-robin and derives its watermark.

Reading one batch from each chain of splits in turn keeps the splits' event
times close together, so that the minimum of their watermarks advances
steadily; the splits of one chain (the row groups of a parquet file) are read
one after another. In a parallel job subtask i of N reads the splits that
``Source.owner(split, N)`` gives to i, those listed at the start and those
discovered later alike; offsets are per split (a checkpoint records no
assignment), so a checkpoint restores at any parallelism: each split's offset
goes to whichever subtask owns it now.

A source with a WATERMARK appends to every batch each row's arrival
watermark (``engine.watermarks.ARRIVAL_WATERMARK``): the running maximum over
the rows before it in its split, which continues from the split watermark a
checkpoint recorded. It restarts at each split, also within a chain: the
splits of one chain may be read by different workers, so carrying it over
would make lateness depend on the parallelism.

An unbounded source with a ``discovery_interval`` is re-listed at that interval while it
runs; a split not listed before is read by its owner from ``Source.discovered_offset``. The reader remembers its offsets
at each barrier and hands them to ``Source.checkpoint_complete`` when that checkpoint
completes (Kafka commits them to its consumer group, for information).

A bounded source whose batch boundaries are arbitrary (``Source.arbitrary_batches``: files, not
a Python source, whose batches are the user's) has its consecutive batches (of one split or
several) merged into one of up to ``merge_bytes`` ('weir.source.merge-bytes'), so that operators pay their per-batch costs (a
DuckDB statement each) once per merged batch. Only a batch none of whose rows is at or behind
the watermark the merged ones would have advanced to joins them: no row of it could be late or
meet a fired window whether it came after that watermark or with the batches before it, so
what is late, and every result, stays the same (``MergedSteps``).
"""
from __future__ import annotations

import time
import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.connectors.base import Source
from weir.engine.messages import MAX_WATERMARK, Watermark
from weir.engine.operators.base import OperatorKind, explain_lines
from weir.engine.operators.config import OperatorConfig
from weir.engine.runtime.read_ahead import ReadAhead
from weir.engine.watermarks import ARRIVAL_FIELD, SplitWatermarks, WatermarkGenerator, arrival_watermarks


@dataclass(frozen=True)
class SourceConfig(OperatorConfig):
    """A source node: the table it reads and how its watermark is computed."""

    #: The declared table's name ("" in a graph built by hand: the node's id stands for it).
    table: str = ""
    #: The table's WITH (...) options ('connector', ...).
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The WATERMARK expression as DuckDB SQL over the physical columns, or None.
    watermark: str | None = None
    #: (column, delay µs) when the watermark is a bounded delay on a physical column (computed
    #: without SQL); None otherwise.
    watermark_bounded: tuple[str, int] | None = None
    #: Rows per batch ('weir.source.batch-size').
    batch_size: int = 65536
    #: The job-wide 'table.exec.source.idle-timeout', or None (never idle).
    idle_timeout: str | None = None
    #: Bytes up to which consecutive batches of a bounded source are merged ('weir.source.merge-bytes'; 0: never).
    merge_bytes: int = 8 << 20


class MergedSteps:
    """The batches of consecutive steps being merged, and the watermark they advanced to."""

    def __init__(self, limit: int, time_column: str | None):
        self.limit, self.time_column = limit, time_column
        self.batches: list[pa.RecordBatch] = []
        self.watermark: int | None = None
        self.nbytes = 0

    def admits(self, batch: pa.RecordBatch, watermark: int) -> bool:
        """Whether ``batch`` (as read, before its step is taken) may join: room is left, and
        every row's time is after ``watermark``, the one the merged steps advanced the source
        to (so no row of it is late, or in a window fired, under either watermark)."""
        if not self.batches:
            return True
        if self.nbytes + batch.nbytes > self.limit:
            return False
        if self.time_column is None or self.watermark is None:
            return True  # no watermark has come between them
        times = batch.column(self.time_column)
        if pa.types.is_timestamp(times.type) and times.type.unit != "us":
            times = times.cast(pa.timestamp("us", times.type.tz))
        earliest = pc.min(times.view(pa.int64()) if pa.types.is_timestamp(times.type) else times).as_py()
        return earliest is None or earliest > watermark

    def add(self, batch: pa.RecordBatch | None, watermark: int | None) -> None:
        if batch is not None:
            self.batches.append(batch)
            self.nbytes += batch.nbytes
        if watermark is not None:
            self.watermark = watermark

    def take(self) -> tuple[pa.RecordBatch | None, Watermark | None] | None:
        """The merged step (None if nothing is pending), emptying it."""
        if not self.batches and self.watermark is None:
            return None
        batches, watermark = self.batches, self.watermark
        self.batches, self.watermark, self.nbytes = [], None, 0
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches) if batches else None
        return batch, Watermark(watermark) if watermark is not None else None


class SourceReader(OperatorKind):
    """The kind "source": the runtime reads it; its state is a read offset per split."""

    Config = SourceConfig
    reads_source = True

    @classmethod
    def explain(cls, config: SourceConfig) -> list[str]:
        return explain_lines("-", "read offset per split")

    def __init__(self, source: Source, watermark_sql: str | None, offsets: dict[str, Any] | None = None,
                 bounded: tuple[str, int] | None = None, idle_timeout: float | None = None,
                 subtask: int = 0, parallelism: int = 1, merge_bytes: int = 0):
        self.source = source
        #: Consecutive batches merged up to this many bytes (a bounded source only: see the module docstring).
        self.merge_bytes = merge_bytes if source.bounded and source.arbitrary_batches else 0
        #: The column the watermark is a bounded delay on; None: no watermark, or computed by SQL.
        self._time_column = bounded[0] if bounded else None
        listed = source.splits()
        self.splits = [s for s in listed if source.owner(s, parallelism) == subtask]
        self.subtask, self.parallelism = subtask, parallelism
        #: Every split listed so far (all subtasks'), so a re-listing knows which are new.
        self._known = set(listed)
        interval = None if source.bounded else source.discovery_interval
        self._next_discovery = time.monotonic() + interval if interval else None
        #: Checkpoint id -> this reader's split offsets at its barrier, until it completes.
        self._checkpointed: dict[int, dict[str, Any]] = {}
        self.chains: dict[str, list[str]] = {}
        for split in self.splits:
            self.chains.setdefault(source.chain(split), []).append(split)
        self.offsets: dict[str, Any] = dict(offsets or {})
        self._generator = WatermarkGenerator(watermark_sql, bounded) if watermark_sql else None
        self.watermarks = SplitWatermarks(self.splits, list(self.chains.values()))
        self.rows_read = 0
        #: Seconds without rows after which a split stops holding the watermark back.
        self.idle_timeout = idle_timeout
        self._last_rows: dict[str, float] = {}

    def _maybe_idle(self, split: str) -> int | None:
        if self.idle_timeout is None:
            return None
        last = self._last_rows.setdefault(split, time.monotonic())
        if time.monotonic() - last >= self.idle_timeout:
            return self.watermarks.idle(split)
        return None

    def position(self) -> dict[str, Any]:
        """Where the source is, for a checkpoint: split offsets and split watermarks, and with
        discovery the splits listed so far (so a restore knows which ones appeared since)."""
        offsets = {split: self.source.snapshot_offset(split, o) for split, o in self.offsets.items()}
        position = {"offsets": offsets, **self.watermarks.state()}
        if self._next_discovery is not None:
            position["listed"] = sorted(self._known)
        return position

    def checkpointed(self, checkpoint_id: int) -> None:
        """The barrier of ``checkpoint_id`` passed this reader: remember its offsets."""
        self._checkpointed[checkpoint_id] = dict(self.offsets)

    def checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` (and every earlier one) is complete: tell the source."""
        done = [n for n in self._checkpointed if n <= checkpoint_id]
        if done:
            offsets = self._checkpointed[max(done)]
            for n in done:
                del self._checkpointed[n]
            self.source.checkpoint_complete(offsets)

    def _discover(self, chains: dict[str, list[str]]) -> None:
        """At the discovery interval, re-list the source's splits; a new one that this subtask
        owns (``Source.owner``) is read from ``Source.discovered_offset`` from now on, and is
        part of the checkpoints' offsets from now on (so a restore lists and resumes it)."""
        if self._next_discovery is None or time.monotonic() < self._next_discovery:
            return
        self._next_discovery = time.monotonic() + self.source.discovery_interval
        for split in self.source.splits():
            if split in self._known:
                continue
            self._known.add(split)
            if self.source.owner(split, self.parallelism) != self.subtask:
                continue
            self.splits.append(split)
            key = self.source.chain(split)
            self.chains.setdefault(key, []).append(split)
            chains.setdefault(key, []).append(split)
            self.watermarks.add(split)
            start = self.source.discovered_offset(split)
            if start is not None:
                self.offsets[split] = start

    def restore(self, position: dict[str, Any]) -> None:
        """Resume from a checkpoint's ``position()``; splits it does not name start afresh."""
        self.offsets = {s: o for s, o in position.get("offsets", {}).items() if s in self.splits}
        if self._next_discovery is not None and "listed" in position:
            listed = set(position["listed"])  # a split that appeared after the checkpoint: as if discovered
            for split in self.splits:
                if split not in listed and split not in self.offsets:
                    start = self.source.discovered_offset(split)
                    if start is not None:
                        self.offsets[split] = start
        self.watermarks.restore(position)

    def _with_arrival(self, batch: pa.RecordBatch, split: str) -> tuple[pa.RecordBatch, int]:
        """``batch`` with its rows' arrival watermarks, and the split's watermark after it."""
        arrival, after = arrival_watermarks(self._generator.candidates(batch), self.watermarks.of(split))
        return batch.append_column(ARRIVAL_FIELD, arrival), after

    def _reads(self, chains: dict[str, list[str]]) -> Iterator[tuple[str | None, tuple | None]]:
        """The reads of the round-robin, in order: (split, (batch, offset)) for a batch, (split,
        None) where a split ends, (None, None) while a subtask waits for a split to appear. Its
        order depends on the splits alone (not on watermarks), so it may run ahead of them."""
        readers: dict[str, Iterator] = {}
        while chains or self._next_discovery is not None:
            self._discover(chains)
            if not chains:  # a subtask with no split yet, waiting for one to appear
                time.sleep(0.05)
                yield None, None
                continue
            for key in list(chains):
                split = chains[key][0]
                if split not in readers:
                    readers[split] = iter(self.source.read(split, self.offsets.get(split)))
                step = next(readers[split], None)
                if step is None:
                    del readers[split]
                    chains[key].pop(0)
                    if not chains[key]:
                        del chains[key]
                yield split, step

    def __iter__(self) -> Iterator[tuple[pa.RecordBatch | None, Watermark | None]]:
        """Steps of (batch, the watermark it advanced to): the batch goes first, then
        the watermark, and only then may a barrier cut the stream — so a checkpoint's
        offsets and split watermarks always describe the same rows.
        The last step carries MAX_WATERMARK.

        A bounded source whose batches are arbitrary (files) is read a few batches ahead in a
        thread (``ReadAhead``): the next ones decode while the job works on these. The steps,
        offsets and watermarks are the same; a split's reading starts from its offset once the
        split before it in its chain is done, which no checkpoint or restore can change meanwhile."""
        reads: Iterator = self._reads({key: list(splits) for key, splits in self.chains.items()})
        if self.source.bounded and self.source.arbitrary_batches:
            reads = ReadAhead(reads, name=f"weir-read-{self.subtask}")
        try:
            yield from self._steps(reads)
        finally:
            if isinstance(reads, ReadAhead):
                reads.close()

    def _steps(self, reads: Iterator[tuple[str | None, tuple | None]]
               ) -> Iterator[tuple[pa.RecordBatch | None, Watermark | None]]:
        # Without a bounded-delay watermark only a source with no watermark at all merges.
        merging = self.merge_bytes > 0 and (self._generator is None or self._time_column is not None)
        pending = MergedSteps(self.merge_bytes, self._time_column)
        for split, step in reads:
            if split is None:
                yield None, None
                continue
            if step is None:
                batch, advanced = None, self.watermarks.finish(split)
            else:
                if merging and step[0].num_rows and not pending.admits(step[0], self.watermarks.current):
                    yield pending.take()  # before this step is taken: its barrier excludes it
                batch, self.offsets[split] = step
                if batch.num_rows == 0:  # nothing new (an unbounded source): still a boundary,
                    advanced = self._maybe_idle(split)  # where the job checkpoints and stops
                    yield None, Watermark(advanced) if advanced is not None and self._generator else None
                    continue
                self._last_rows[split] = time.monotonic()
                self.rows_read += batch.num_rows
                candidate = None
                if self._generator is not None:
                    batch, candidate = self._with_arrival(batch, split)
                advanced = self.watermarks.observe(split, candidate)
            if advanced is None or advanced == MAX_WATERMARK or not self._generator:
                advanced = None
            if merging:
                pending.add(batch, advanced)
            elif batch is not None or advanced is not None:
                yield batch, Watermark(advanced) if advanced is not None else None
        if merging and (last := pending.take()) is not None:
            yield last
        self.watermarks.current = MAX_WATERMARK
        yield None, Watermark(MAX_WATERMARK)
