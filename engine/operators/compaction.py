"""When an operator's DuckDB state is compacted: checkpoints when its memory asks for them.

A state connection is an in-memory DuckDB database. DuckDB compresses an in-memory table's
rows, and drops its deleted ones, only when it checkpoints; on its own it checkpoints after a
commit whose changes it estimates above ``checkpoint_threshold`` (16 MB): after every second or
third insert of a stream join's batches of strings, never after those of narrow rows. A
checkpoint compresses every row group that changed since the last one: the new rows of an
append-only table, but every row group that lost a row, which for a Top-N (whose rows leave
from anywhere) is the whole table. In Nexmark q9 at 10M events the join's checkpoints cost
3.6 s of CPU (its inserts 7.6 s against 4.1 s without) and the Top-N's 0.7 s each, a quarter of
the job, while q4's join never checkpointed (its rows stayed uncompressed, 0.6 GB instead of
0.1 GB).

``Compaction`` turns DuckDB's own checkpoints off and checkpoints when the state needs the
memory: after each ``CHECK_BYTES`` of changes it looks at the database's memory, and
checkpoints once it holds ``COMPACT_SHARE`` of the connection's ``memory_limit`` (its share of
managed memory, ``engine.state.memory``) and has at least doubled since the last checkpoint.
State that fits stays as it is written; state that grows is compressed before it spills.
"""
from __future__ import annotations

import re

import duckdb

#: Bytes of changes (Arrow's size of the rows added or deleted) between two looks at the memory.
CHECK_BYTES = 64 << 20
#: The share of its memory limit a state database may fill before it is compacted.
COMPACT_SHARE = 0.5

_UNITS = {"bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15}
_SIZE = re.compile(r"\s*([\d.]+)\s*([a-z]*)\s*$", re.IGNORECASE)


class Compaction:
    """Checkpoints of one state connection (``changed`` after each change of its tables)."""

    def __init__(self) -> None:
        self._changed = 0
        self._compacted = 0  # the bytes the database held after its last checkpoint

    def start(self, con: duckdb.DuckDBPyConnection) -> None:
        """Turn off DuckDB's own checkpoints on a new state connection."""
        con.execute("SET checkpoint_threshold = '1TB'").fetchall()
        self._changed = self._compacted = 0

    def changed(self, con: duckdb.DuckDBPyConnection, nbytes: int) -> None:
        """Rows of ``nbytes`` were added or deleted: checkpoint if the memory asks for it."""
        self._changed += nbytes
        if self._changed < CHECK_BYTES:
            return
        self._changed = 0
        used, limit = database_bytes(con)
        if used >= COMPACT_SHARE * limit and used >= 2 * self._compacted:
            self.checkpoint(con)

    def checkpoint(self, con: duckdb.DuckDBPyConnection) -> None:
        """Checkpoint now."""
        try:
            con.execute("CHECKPOINT").fetchall()
        except duckdb.TransactionException:  # a transaction is open (a result still read): next time
            return
        self._compacted = database_bytes(con)[0]


def database_bytes(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(bytes the database holds, in memory or spilled; its memory limit)."""
    used, limit = con.execute("SELECT sum(memory_usage_bytes + temporary_storage_bytes), "
                              "current_setting('memory_limit') FROM duckdb_memory()").fetchall()[0]
    match = _SIZE.match(limit or "")
    unit = _UNITS.get(match.group(2).lower() or "bytes") if match else None
    return int(used or 0), int(float(match.group(1)) * unit) if unit else 1 << 62
