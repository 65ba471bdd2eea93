"""When an operator's DuckDB state is compacted: checkpoints on a schedule of its own.

A state connection is an in-memory DuckDB database. DuckDB compresses an in-memory table's
rows, and drops its deleted ones, only when it checkpoints; on its own it checkpoints after a
commit whose changes it estimates above ``checkpoint_threshold`` (16 MB), which for a stream of
inserts of one batch each is every second or third batch, or never, depending on how large the
batches are. A checkpoint compresses the row groups that changed since the last one: the new
rows of an append-only table, but every row group that lost a row, which for a Top-N (whose
rows leave from anywhere) is the whole table. Checkpointing every few batches made DuckDB's
checkpoints a quarter of Nexmark q9's time at 10M events (the stream join's inserts: 7.6 s of
CPU, 4.1 s without checkpoints; the Top-N's table rewritten at each, 0.7 s), while never
checkpointing keeps the rows uncompressed (the join's: 1.35 GB instead of 0.3 GB).

``Compaction`` turns DuckDB's own checkpoints off and checkpoints once the rows added to (or
deleted from) the state since the last one reach ``CHECKPOINT_BYTES`` of Arrow data, or the
size of the state itself when the operator can say it (``size``): the rows are compressed as
before, and a table rewritten whole at each checkpoint is rewritten once per its own size of
changes, not per 16 MB.
"""
from __future__ import annotations

from typing import Callable

import duckdb

#: Bytes of rows (Arrow's size) added to an operator's state between two of its checkpoints.
CHECKPOINT_BYTES = 64 << 20


class Compaction:
    """Checkpoints of one state connection.

    ``size``, when given, estimates the bytes of the state after a checkpoint: the next one
    waits for that many bytes of changes, if more than ``CHECKPOINT_BYTES``."""

    def __init__(self, size: Callable[[], int] | None = None) -> None:
        self._size = size
        self._changed = 0
        self._due = CHECKPOINT_BYTES

    def start(self, con: duckdb.DuckDBPyConnection) -> None:
        """Turn off DuckDB's own checkpoints on a new state connection."""
        con.execute("SET checkpoint_threshold = '1TB'")
        self._changed, self._due = 0, CHECKPOINT_BYTES

    def changed(self, con: duckdb.DuckDBPyConnection, nbytes: int) -> None:
        """Rows of ``nbytes`` were added or deleted: checkpoint once enough have been."""
        self._changed += nbytes
        if self._changed >= self._due:
            self.checkpoint(con)

    def checkpoint(self, con: duckdb.DuckDBPyConnection) -> None:
        """Checkpoint now (after a restore has added its rows, say)."""
        try:
            con.execute("CHECKPOINT")
        except duckdb.TransactionException:  # a transaction is open (a result still read): next time
            return
        self._changed = 0
        self._due = max(CHECKPOINT_BYTES, self._size() if self._size else 0)
