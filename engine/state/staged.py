"""State tables too large to hold as Arrow in a snapshot: written to Parquet as they are read.

A keyed operator's snapshot holds its state tables (``engine.state.keyed_tables``). A small
table is an Arrow table, encoded later by the checkpoint writer, off the job's thread. A large
one would need the whole table outside DuckDB's limited memory, so it is streamed out of DuckDB
in bounded batches into a Parquet file instead, at snapshot time, under the job's state
directory (``<spill dir>/snapshots/<operator>/``): a ``StagedTable`` names that file, and the
checkpoint writer (``engine.checkpoint.state_files``) moves it into the checkpoint. A worker on
another node than the driver (Ray) first uploads it into the checkpoint storage itself
(``engine.checkpoint.staging``). The file
holds what the Arrow table would: the same columns and types (DuckDB's Arrow conversion, not
its Parquet writer, which writes a HUGEINT as a DOUBLE), rows sorted by key group, zstd.

A staged file that no checkpoint took (the checkpoint failed) is deleted when the operator opens
its state again (``clear_staging``).
"""
from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from weir.engine.state.restored import RestoredTable

#: The folder of staged snapshot files inside a spill directory.
STAGING = "snapshots"
KEY_GROUP = "key_group"
COMPRESSION = "zstd"


@dataclass(frozen=True)
class StagedTable:
    """A snapshot's state table in a Parquet file: ``rows`` rows sorted by key group, whose
    smallest and largest key group are ``key_groups`` (None when there are no rows)."""

    path: str
    rows: int
    key_groups: tuple[int, int] | None
    #: Set once a worker on another node has uploaded the file into the checkpoint storage
    #: (``engine.checkpoint.staging``): ``path`` is then there (a URI or a shared directory's path).
    sha256: str | None = None
    bytes: int | None = None

    @property
    def num_rows(self) -> int:
        return self.rows

    def read(self) -> pa.Table:
        from weir.engine.checkpoint.location import RemotePath, is_uri, parse_location

        place = parse_location(self.path) if is_uri(self.path) else self.path
        if isinstance(place, RemotePath):
            return pq.read_table(place.path, filesystem=place.filesystem)
        return pq.read_table(place)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def staging_directory(spill_dir: str | Path, operator_id: str) -> Path:
    return Path(spill_dir) / STAGING / _safe(operator_id)


def clear_staging(spill_dir: str | Path | None, operator_id: str) -> None:
    """Delete what an earlier run of ``operator_id`` staged and no checkpoint took."""
    if spill_dir:
        shutil.rmtree(staging_directory(spill_dir, operator_id), ignore_errors=True)


def stage_table(staging: Path, operator_id: str, name: str, schema: pa.Schema,
                batches: Iterable[pa.RecordBatch]) -> StagedTable:
    """Write ``batches`` (sorted by key group) to a new Parquet file under ``staging``, one
    batch in memory at a time."""
    directory = staging / _safe(operator_id)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_safe(name)}-{uuid.uuid4().hex}.parquet"
    rows, first, last = 0, None, None
    with pq.ParquetWriter(path, schema, compression=COMPRESSION) as writer:
        for batch in batches:
            if not batch.num_rows:
                continue
            groups = batch.column(KEY_GROUP)
            bounds = pc.min_max(groups)
            first = bounds["min"].as_py() if first is None else min(first, bounds["min"].as_py())
            last = bounds["max"].as_py() if last is None else max(last, bounds["max"].as_py())
            writer.write_batch(batch)
            rows += batch.num_rows
    return StagedTable(str(path), rows, None if first is None else (first, last))


def as_table(table) -> pa.Table:
    """A snapshot's table as Arrow (a staged one read back whole: only where a snapshot is
    restored in the same process without a checkpoint in between, as tests do; a
    ``RestoredTable`` read whole: only for what cannot stream, an old snapshot's format)."""
    return table.read() if isinstance(table, (StagedTable, RestoredTable)) else table
