"""Sinks of updating streams: a DuckDB table maintained by upsert (exactly once, in
checkpoint order), Debezium JSON files, and the print sink's row kinds."""
from __future__ import annotations

import json

import duckdb
import pyarrow as pa

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.registry import create_sink

SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64()), (ROW_KIND, pa.int8())])


def changes(*rows) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"k": k, "n": n, ROW_KIND: kind} for kind, k, n in rows], SCHEMA)


def upsert_sink(db, key=("k",)):
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": "results",
                        "sink.upsert-key": json.dumps(list(key))}, SCHEMA)
    sink.open()
    return sink


def table(db) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT * FROM results ORDER BY k NULLS FIRST").fetchall()


def test_upsert_applies_changes_in_order_and_the_table_has_no_row_kind(tmp_path):
    db = tmp_path / "r.duckdb"
    sink = upsert_sink(db)
    sink.write(changes((INSERT, "a", 1), (INSERT, None, 1), (UPDATE_BEFORE, "a", 1), (UPDATE_AFTER, "a", 2)))
    handle1 = sink.pre_commit(1)
    sink.write(changes((UPDATE_BEFORE, "a", 2), (UPDATE_AFTER, "a", 3), (INSERT, "b", 1), (DELETE, None, 1)))
    handle2 = sink.pre_commit(2)
    assert table(db) == []  # nothing visible before the commit
    sink.commit(1, handle1)
    assert table(db) == [("a", 2), (None, 1)][::-1]
    sink.commit(2, handle2)
    assert table(db) == [("a", 3), ("b", 1)]
    with duckdb.connect(str(db), read_only=True) as con:
        assert [r[0] for r in con.execute("DESCRIBE results").fetchall()] == ["k", "n"]


def test_upsert_recovery_applies_each_checkpoint_once_and_in_order(tmp_path):
    db = tmp_path / "r.duckdb"
    sink = upsert_sink(db)
    sink.write(changes((INSERT, "a", 1)))
    h1 = sink.pre_commit(1)
    sink.write(changes((UPDATE_BEFORE, "a", 1), (UPDATE_AFTER, "a", 2)))
    h2 = sink.pre_commit(2)
    # The job dies before committing; recovery publishes both handles, given in any
    # order: the later checkpoint's change wins.
    upsert_sink(db).recover([h2 + h1])
    assert table(db) == [("a", 2)]
    # A later change, then the old handles published again: they are not applied twice.
    sink = upsert_sink(db)
    sink.write(changes((UPDATE_BEFORE, "a", 2), (UPDATE_AFTER, "a", 7)))
    sink.finish()
    assert table(db) == [("a", 7)]
    upsert_sink(db).recover([h1, h2])
    assert table(db) == [("a", 7)]


def test_global_aggregate_keeps_one_row(tmp_path):
    db = tmp_path / "r.duckdb"
    sink = upsert_sink(db, key=())
    sink.write(changes((INSERT, "x", 1), (UPDATE_BEFORE, "x", 1), (UPDATE_AFTER, "x", 5)))
    sink.finish()
    assert table(db) == [("x", 5)]


def test_debezium_json_files_hold_flink_envelopes(tmp_path):
    sink = create_sink({"connector": "filesystem", "path": str(tmp_path), "format": "debezium-json"}, SCHEMA)
    sink.open()
    sink.write(changes((INSERT, "a", 1), (UPDATE_BEFORE, "a", 1), (UPDATE_AFTER, "a", 2), (DELETE, "a", 2)))
    sink.finish()
    [part] = list(tmp_path.glob("part-*.json"))
    lines = [json.loads(line) for line in part.read_text().splitlines()]
    assert lines == [
        {"before": None, "after": {"k": "a", "n": 1}, "op": "c"},
        {"before": {"k": "a", "n": 1}, "after": None, "op": "d"},
        {"before": None, "after": {"k": "a", "n": 2}, "op": "c"},
        {"before": {"k": "a", "n": 2}, "after": None, "op": "d"},
    ]


def test_print_shows_each_row_kind(capsys):
    sink = create_sink({"connector": "print"}, SCHEMA)
    sink.write(changes((INSERT, "a", 1), (UPDATE_BEFORE, "a", 1), (UPDATE_AFTER, "a", 2), (DELETE, None, 2)))
    assert capsys.readouterr().out.splitlines() == ["+I[a, 1]", "-U[a, 1]", "+U[a, 2]", "-D[null, 2]"]
