"""Compaction: a state database is checkpointed (compressed) when it fills its share of memory,
not by DuckDB's own estimate of each commit; a join's state compacted on the way keeps its rows."""
from __future__ import annotations

import duckdb
import pyarrow as pa

from weir.engine.operators import compaction
from weir.engine.operators.compaction import Compaction, database_bytes
from tests.engine.operators.test_stream_join import LEFT, RIGHT, batch, make_join


def strings(n: int, start: int = 0) -> pa.Table:
    return pa.table({"i": pa.array(range(start, start + n), pa.int64()),
                     "s": pa.array([f"a fairly long string that compresses well {i % 10}" for i in range(n)])})


def test_duckdb_does_not_checkpoint_on_its_own_and_compaction_does_when_memory_fills(monkeypatch):
    monkeypatch.setattr(compaction, "CHECK_BYTES", 1)
    con = duckdb.connect()
    con.execute("SET memory_limit = '400MB'")
    compacted = Compaction()
    compacted.start(con)
    con.execute("CREATE TABLE t (i BIGINT, s VARCHAR)")
    rows = strings(500_000)
    con.register("rows", rows)
    con.execute("INSERT INTO t SELECT * FROM rows")  # more than DuckDB's 16 MB: it would checkpoint
    written, limit = database_bytes(con)
    assert abs(limit - 400 * 10**6) < 10**6  # '381.4 MiB'
    assert written > 25 * 10**6
    compacted.changed(con, rows.nbytes)
    assert database_bytes(con)[0] == written  # below half the limit: left as it is
    for start in range(500_000, 4_500_000, 500_000):  # 30 MB each, uncompressed
        con.register("rows", strings(500_000, start))
        con.execute("INSERT INTO t SELECT * FROM rows")
        compacted.changed(con, rows.nbytes)
    assert database_bytes(con)[0] < limit / 4  # compressed once past half the limit (240 MB of it)
    assert con.execute("SELECT count(*), count(DISTINCT s) FROM t").fetchall() == [(4_500_000, 10)]


def test_a_join_whose_state_is_compacted_keeps_every_row(monkeypatch):
    monkeypatch.setattr(compaction, "CHECK_BYTES", 1)
    monkeypatch.setattr(compaction, "COMPACT_SHARE", 0.0)  # checkpoint after every batch that doubles it
    join = make_join("inner")
    out = 0
    for step in range(6):
        keys = list(range(step * 1000, step * 1000 + 1000))
        out += sum(b.num_rows for b in join.process_batch(batch(RIGHT, [(k, f"w{k}" * 20) for k in keys]), 1))
        out += sum(b.num_rows for b in join.process_batch(batch(LEFT, [(k, k) for k in keys[::2]]), 0))
    assert out == 3000 and join.state_rows() == 9000
    restored = make_join("inner")
    restored.restore(join.merge_snapshots([join.snapshot()]))
    assert sum(b.num_rows for b in restored.process_batch(batch(LEFT, [(5, 5), (5999, 1)]), 0)) == 2
