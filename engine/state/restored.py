"""A state table being restored from checkpoint files: read in bounded batches, owned key groups only.

A checkpoint holds each subtask's state tables as Parquet files sorted by key group
(``engine.checkpoint.state_files``). Restoring subtask i of p needs the rows of the key
groups it owns, from every old subtask's file whose key groups overlap them. A
``RestoredTable`` names those files and the key groups wanted, and reads nothing until it
is scanned:

1. ``select`` narrows the key groups (``keyed_tables.select_key_groups``), ``concat`` joins the
   files of several old subtasks (``keyed_tables.merge_tables``, rescaling), in key-group order.
2. An operator hands it to DuckDB like an Arrow table (``con.register``): DuckDB pulls it
   through the Arrow C stream interface (``__arrow_c_stream__``), one batch of at most
   ``RESTORE_BATCH_ROWS`` rows at a time, straight into the state table, which spills as
   any DuckDB table does.
3. ``batches`` skips every row group whose key-group statistics lie outside the wanted
   key groups (the files are sorted by key group, so a subtask's share is a few contiguous
   row groups) and filters the rest, so the Arrow held outside DuckDB is one batch, not the
   snapshot. ``scanned`` counts the rows decoded, for tests and the bench.

A file may be on another filesystem (a checkpoint in ``s3://...``: ``Part.filesystem``, a
``pyarrow.fs`` filesystem): it is then read through it, as ranges of the object — the
footer, then the row groups wanted — never downloaded whole.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

KEY_GROUP = "key_group"
#: Rows per batch read from a checkpoint file while restoring.
RESTORE_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class Part:
    """One checkpoint file of a state table: its path and smallest and largest key group, and
    the ``pyarrow.fs`` filesystem the path is on (None: this machine's)."""

    path: str
    key_groups: tuple[int, int] | None
    filesystem: Any = None


class Reads:
    """Rows decoded from checkpoint files, counted for a table and every table made from it."""

    def __init__(self) -> None:
        self.rows = 0
        self.shared_with: Reads | None = None

    def add(self, rows: int) -> None:
        self.rows += rows
        if self.shared_with is not None:
            self.shared_with.add(rows)


class RestoredTable:
    """State table rows in checkpoint files, restricted to key groups, read when scanned."""

    def __init__(self, parts: Iterable[Part], schema: pa.Schema, key_groups: tuple[range, ...] = (),
                 reads: "Reads | None" = None):
        self.parts = tuple(parts)
        self.schema = schema
        #: Every range a row's key group must be in (none: all rows).
        self.key_groups = tuple(key_groups)
        self._rows: int | None = None
        #: What was read, shared with the tables narrowed or merged from this one.
        self.reads = reads or Reads()

    @property
    def scanned(self) -> int:
        """Rows decoded from the files so far (every scan of this table and those made from it)."""
        return self.reads.rows

    # -- what the operators see of a table ------------------------------------------------
    @property
    def column_names(self) -> list[str]:
        return self.schema.names

    @property
    def num_rows(self) -> int:
        """The rows in the wanted key groups (counted once, by a pass over the key-group column)."""
        if self._rows is None:
            self._rows = sum(b.num_rows for b in self._scan([KEY_GROUP]))
        return self._rows

    def __arrow_c_stream__(self, requested_schema=None):
        """The rows as an Arrow stream, batch by batch (how DuckDB's ``register`` reads it)."""
        return self.reader().__arrow_c_stream__(requested_schema)

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.batches())

    def batches(self) -> Iterator[pa.RecordBatch]:
        rows = 0
        for batch in self._scan(None):
            rows += batch.num_rows
            yield batch
        self._rows = rows

    def read(self) -> pa.Table:
        """The rows whole, as Arrow (only for what cannot stream: an old snapshot's format)."""
        return pa.Table.from_batches(list(self.batches()), self.schema)

    # -- narrowing and merging -------------------------------------------------------------
    def select(self, key_groups: range) -> "RestoredTable":
        """Only the rows whose key group is also in ``key_groups``."""
        parts = [p for p in self.parts if _overlaps(p.key_groups, (*self.key_groups, key_groups))]
        return RestoredTable(parts, self.schema, (*self.key_groups, key_groups), self.reads)

    @staticmethod
    def concat(tables: list["RestoredTable"]) -> "RestoredTable":
        """The rows of every table, in key-group order (each file is sorted by key group; the
        files are taken in order of their first key group, ties in the order given, as the
        stable sort of ``merge_tables`` orders rows from Arrow tables)."""
        filters = {t.key_groups for t in tables}
        if len(filters) != 1:
            raise ValueError("restored tables to merge must be cut to the same key groups")
        schema = pa.unify_schemas([t.schema for t in tables], promote_options="default")
        parts = [p for t in tables for p in t.parts]
        parts.sort(key=lambda p: p.key_groups[0] if p.key_groups else -1)
        reads = Reads()
        for table in tables:
            table.reads.shared_with = reads
        return RestoredTable(parts, schema, filters.pop(), reads)

    @property
    def bounds(self) -> tuple[int, int] | None:
        """The smallest and largest key group in the files (before the key-group filter)."""
        bounds = [p.key_groups for p in self.parts if p.key_groups]
        return (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else None

    # -- reading ----------------------------------------------------------------------------
    def _scan(self, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        for part in self.parts:
            with pq.ParquetFile(part.path, filesystem=part.filesystem) as file:
                index = file.schema_arrow.get_field_index(KEY_GROUP)
                groups = [i for i in range(file.num_row_groups) if self._wanted(file.metadata.row_group(i), index)]
                if not groups:
                    continue
                for batch in file.iter_batches(batch_size=RESTORE_BATCH_ROWS, row_groups=groups, columns=columns,
                                               use_threads=False):
                    self.reads.add(batch.num_rows)
                    batch = self._filter(batch)
                    if batch.num_rows:
                        yield batch if columns is not None else _conform(batch, self.schema)

    def _wanted(self, row_group, index: int) -> bool:
        stats = row_group.column(index).statistics if index >= 0 else None
        if stats is None or not stats.has_min_max:
            return True
        return _overlaps((stats.min, stats.max), self.key_groups)

    def _filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self.key_groups:
            return batch
        groups = batch.column(KEY_GROUP)
        bounds = pc.min_max(groups)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if all(all(g in r for g in (low, high)) and r.step == 1 for r in self.key_groups):
            return batch
        keep = None
        for r in self.key_groups:
            if r.step == 1:
                mask = pc.and_(pc.greater_equal(groups, r.start), pc.less(groups, r.stop))
            else:
                mask = pc.is_in(groups, pa.array(list(r), groups.type))
            keep = mask if keep is None else pc.and_(keep, mask)
        return batch.filter(keep)


def _overlaps(bounds: tuple[int, int] | None, ranges: tuple[range, ...]) -> bool:
    """Whether some key group in [first, last] may be in every one of ``ranges``."""
    if bounds is None:
        return False
    first, last = bounds
    for r in ranges:
        if len(r) == 0:
            return False
        if r.step == 1:
            first, last = max(first, r.start), min(last, r.stop - 1)
            if first > last:
                return False
        elif not any(first <= g <= last for g in r):
            return False
    return True


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns and types (files of several subtasks may differ as
    ``pa.concat_tables(promote_options="default")`` allows: a column missing or of a narrower type)."""
    if batch.schema == schema:
        return batch
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        column = batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, field.type)
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
