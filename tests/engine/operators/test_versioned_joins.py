"""Lookup and event-time temporal joins driven directly.

The temporal join against DuckDB's ASOF JOIN over all rows, whatever the batches,
watermarks and restore points; the lookup join against a DuckDB file that changes
between batches.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.graph import schema_to_json
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.lookup_join import LookupJoin
from weir.engine.operators.temporal_join import TemporalJoin

TS = pa.timestamp("us")
ORDERS = pa.schema([("id", pa.int64()), ("cur", pa.string()), ("ts", TS)])
RATES = pa.schema([("cur", pa.string()), ("rate", pa.int64()), ("ts", TS)])
SECOND = 1_000_000


def temporal(join_type: str) -> TemporalJoin:
    config = {"join_type": join_type,
              "left": {"schema": schema_to_json(ORDERS), "keys": ["cur"], "time": "ts", "names": ["id", "cur", "ts"]},
              "right": {"schema": schema_to_json(RATES), "keys": ["cur"], "time": "ts",
                        "names": ["cur0", "rate", "ts0"]}}
    out = pa.schema([*ORDERS, pa.field("cur0", pa.string()), pa.field("rate", pa.int64()), pa.field("ts0", TS)])
    op = TemporalJoin(config, OperatorContext("tj", out, max_parallelism=8))
    op.open()
    return op


def rows(schema, data):
    return pa.record_batch([pa.array([r[i] for r in data], f.type) for i, f in enumerate(schema)], schema=schema)


@st.composite
def streams(draw):
    n = draw(st.integers(1, 25))
    orders = [(i, draw(st.sampled_from(["a", "b", "c"])), i * SECOND) for i in range(n)]
    rates = sorted(((draw(st.sampled_from(["a", "b"])), draw(st.integers(1, 9)), draw(st.integers(0, n)) * SECOND)
                    for _ in range(draw(st.integers(0, 10)))), key=lambda r: r[2])
    return orders, rates


@settings(max_examples=40, deadline=None)
@given(streams(), st.integers(1, 6), st.sampled_from(["inner", "left"]), st.integers(0, 20))
def test_temporal_join_equals_asof_join(data, chunk, join_type, restore_at):
    orders, rates = data
    op = temporal(join_type)
    out = []
    # versions arrive ahead of the orders (the watermark is the minimum of both inputs)
    op.process_batch(rows(RATES, rates), 1) if rates else None
    for step, start in enumerate(range(0, len(orders), chunk)):
        part = orders[start:start + chunk]
        op.process_batch(rows(ORDERS, part), 0)
        out += op.process_watermark(part[-1][2] - SECOND)
        if step == restore_at:
            snap = op.snapshot()
            op = temporal(join_type)
            op.restore(TemporalJoin.merge_snapshots([snap]))
    out += op.process_watermark(MAX_WATERMARK)
    got = sorted(tuple(r.values()) for b in out for r in b.to_pylist())
    con = duckdb.connect()
    con.register("o", pa.Table.from_batches([rows(ORDERS, orders)]))
    con.register("r", pa.Table.from_batches([rows(RATES, rates)]) if rates else RATES.empty_table())
    asof = "ASOF LEFT JOIN" if join_type == "left" else "ASOF JOIN"
    want = sorted(con.sql(f"SELECT o.*, r.* FROM o {asof} r ON o.cur = r.cur AND o.ts >= r.ts").fetchall())
    assert [(a, b, c, d, e) for a, b, c, d, e, _ in got] == [(a, b, c, d, e) for a, b, c, d, e, _ in want]
    assert op.ctx.metrics.get("late_rows_dropped", 0) == 0


def test_temporal_join_keeps_only_the_versions_later_rows_can_see():
    op = temporal("inner")
    op.process_batch(rows(RATES, [("a", i, i * SECOND) for i in range(10)]), 1)
    op.process_watermark(5 * SECOND)
    [(count,)] = op.con.execute("SELECT count(*) FROM versions").fetchall()
    assert count == 5  # the version at 5 s (still valid) and those at 6..9 s


def test_a_late_order_is_dropped_and_counted():
    op = temporal("left")
    op.process_watermark(10 * SECOND)
    op.process_batch(rows(ORDERS, [(1, "a", 3 * SECOND)]), 0)
    assert op.process_watermark(MAX_WATERMARK) == []
    assert op.ctx.metrics["late_rows_dropped"] == 1


def lookup(path, join_type="left"):
    dims = pa.schema([("id", pa.int64()), ("name", pa.string())])
    config = {"join_type": join_type, "keys": ["k"], "names": ["k"],
              "lookup": {"table": "dims", "options": {"connector": "duckdb", "path": str(path)},
                         "schema": schema_to_json(dims), "keys": ["id"], "names": ["id", "name"]}}
    out = pa.schema([("k", pa.int64()), ("id", pa.int64()), ("name", pa.string())])
    return LookupJoin(config, OperatorContext("lj", out))


def test_lookup_join_sees_the_table_as_it_is_when_the_batch_arrives(tmp_path):
    path = tmp_path / "dims.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE dims AS SELECT 1::BIGINT AS id, 'one' AS name")
    op = lookup(path)
    keys = pa.record_batch([pa.array([1, 2, 1], pa.int64())], names=["k"])
    first = op.process_batch(keys)[0].to_pylist()
    assert [r["name"] for r in first] == ["one", None, "one"]
    with duckdb.connect(str(path)) as con:  # the file is not held open between batches
        con.execute("INSERT INTO dims VALUES (2, 'two')")
    second = op.process_batch(keys)[0].to_pylist()
    assert [r["name"] for r in second] == ["one", "two", "one"]


def test_lookup_join_names_a_missing_file(tmp_path):
    op = lookup(tmp_path / "missing" / "dims.duckdb")
    with pytest.raises(EngineError, match="cannot open the lookup table `dims`"):
        op.process_batch(pa.record_batch([pa.array([1], pa.int64())], names=["k"]))
