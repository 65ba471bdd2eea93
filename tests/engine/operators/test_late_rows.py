"""Late rows at the operator: counted in total and per source table, and — with config
``late_rows`` — handed out with the source's columns, the operator and the watermark; a row
expanded per grouping set is counted and kept once."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.operators.window_join import WindowJoinConfig, WindowJoinSide
from weir.engine.graph import LATE_ROWS_PORT, Edge, JobGraph, OperatorNode
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_aggregate import WindowAggregate
from window_harness import SECOND, timestamps

SCHEMA = pa.schema([("k", pa.string()), ("window_start", pa.timestamp("us")), ("n", pa.int64())])
PROJECTION = [["ts", '"ts"'], ["k", '"k"'], ["v", "CAST(NULL AS BIGINT)"]]


def config(**extra):
    return {
        "window": {"kind": "tumble", "time_column": "ts", "size": 10 * SECOND, "offset": 0},
        "keys": [["k", '"k"']],
        "aggregates": [{"name": "n", "function": "count", "argument": None}],
        "having": None,
        "projection": [["k", '"k"'], ["window_start", "window_start"], ["n", '"n"']],
        **extra,
    }


def events(times, keys, **columns) -> pa.RecordBatch:
    return pa.record_batch({"ts": timestamps(times), "k": pa.array(keys, pa.string()), **columns})


def operator(cfg) -> WindowAggregate:
    op = WindowAggregate(cfg, OperatorContext("counts.window_aggregate", SCHEMA, input_sources=["events"]))
    op.open()
    return op


def test_late_rows_are_counted_per_source_and_kept_with_their_watermark():
    op = operator(config(late_rows={"0": PROJECTION}))
    op.process_batch(events([1 * SECOND, 12 * SECOND], ["a", "b"]))
    op.process_watermark(10 * SECOND)  # fires [0 s, 10 s)
    op.process_batch(events([2 * SECOND, 11 * SECOND, 3 * SECOND], ["c", "d", None]))
    assert op.ctx.metrics["late_rows_dropped"] == 2
    assert op.ctx.late_by_source["events"] == 2
    (kept,) = op.ctx.late_output
    assert kept.schema.names == ["ts", "k", "v", "weir_operator", "weir_watermark"]
    assert kept.column("k").to_pylist() == ["c", None]
    assert kept.column("ts").cast(pa.int64()).to_pylist() == [2 * SECOND, 3 * SECOND]
    assert kept.column("v").null_count == 2
    assert set(kept.column("weir_operator").to_pylist()) == {"counts.window_aggregate"}
    assert kept.column("weir_watermark").cast(pa.int64()).to_pylist() == [10 * SECOND] * 2
    op.close()


def test_without_the_option_late_rows_are_only_counted():
    op = operator(config())
    op.process_watermark(10 * SECOND)
    op.process_batch(events([1 * SECOND], ["a"]))
    assert op.ctx.late_by_source["events"] == 1
    assert op.ctx.late_output == []


def test_a_row_copied_per_grouping_set_is_counted_and_kept_once():
    cfg = config(late_rows={"0": PROJECTION}, grouping_sets={"column": "_e", "count": 3},
                 keys=[["k", '"_key0"'], ["_e", '"_e"']])
    op = operator(cfg)
    op.process_watermark(10 * SECOND)
    rows = events([1 * SECOND] * 3 + [15 * SECOND] * 3, ["a"] * 6,
                  _key0=pa.array(["a", "a", None, "a", "a", None]), _e=pa.array([0, 1, 2, 0, 1, 2], pa.int64()))
    op.process_batch(rows)
    assert op.ctx.metrics["late_rows_dropped"] == 1
    (kept,) = op.ctx.late_output
    assert kept.num_rows == 1 and kept.column("k").to_pylist() == ["a"]
    out = op.process_watermark(20 * SECOND)
    assert pc.sum(pa.concat_tables([pa.Table.from_batches([b]) for b in out]).column("n")).as_py() == 3


def test_source_tables_follow_the_graph_and_late_edges_round_trip():
    graph = JobGraph("g")
    schema = pa.schema([("x", pa.int64())])
    graph.add(OperatorNode("a.source", "source", {"table": "a"}, schema))
    graph.add(OperatorNode("b.source", "source", {"table": "b"}, schema))
    side = WindowJoinSide(columns=["x"], keys=["x"], window_start="x", window_end="x")
    join = WindowJoinConfig(join_type="inner", left=side, right=side)
    graph.add(OperatorNode("j", "window_join", join, schema, [Edge("a.source"), Edge("b.source")]))
    graph.add(OperatorNode("late.sink", "sink", {}, schema, [Edge("j", "forward", (), LATE_ROWS_PORT)]))
    assert graph.source_tables("j") == ("a", "b")
    assert graph.source_tables("a.source") == ("a",)
    again = JobGraph.from_json(graph.to_json())
    assert again.node("late.sink").inputs[0].port == LATE_ROWS_PORT
    assert again.node("j").inputs[0].port == 0
    assert again.fingerprint() == graph.fingerprint()
