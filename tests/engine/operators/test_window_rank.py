"""WindowRank against DuckDB's batch ROW_NUMBER()/RANK()/DENSE_RANK() as the oracle.

Rows tied on ORDER BY rank by arrival, as in Flink: the oracle numbers the
input rows in the order they are fed (``_pos``) and orders ties by it (the
earliest first, or the latest for keep-last deduplication).
"""
from __future__ import annotations

import random
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.registry import build_operator
from weir.engine.operators.window_rank import WindowRank
from weir.engine.state.key_groups import key_groups, range_for_subtask

SECOND = 1_000_000
SIZE = 10 * SECOND
INPUT = pa.schema([
    ("auction", pa.int64()), ("bidder", pa.string()), ("price", pa.int64()),
    ("window_start", pa.timestamp("us")), ("window_end", pa.timestamp("us")),
])


def config(function="row_number", keys=("auction",), order=('"price" DESC NULLS LAST',),
           low=1, high=3, rank_column="rownum", with_rank=True, filter_sql=None,
           ties="earliest_first") -> dict[str, Any]:
    projection = [[n, f'"{n}"'] for n in INPUT.names]
    if with_rank:
        projection.append([rank_column, f'"{rank_column}"'])
    return {"window_start": "window_start", "window_end": "window_end", "partition_keys": list(keys),
            "order_by": list(order), "function": function, "rank_column": rank_column,
            "rank_range": [low, high], "filter": filter_sql, "projection": projection, "ties": ties}


def output_schema(cfg) -> pa.Schema:
    fields = list(INPUT)
    if any(name == cfg["rank_column"] for name, _ in cfg["projection"]):
        fields.append(pa.field(cfg["rank_column"], pa.int64()))
    return pa.schema(fields)


def make_op(cfg, **ctx) -> WindowRank:
    op = WindowRank(cfg, OperatorContext("rank", output_schema(cfg), **ctx))
    op.open()
    return op


def random_rows(rng: random.Random, n: int, windows: int = 4) -> pa.Table:
    starts = [rng.randrange(windows) * SIZE for _ in range(n)]
    return pa.table({
        "auction": [rng.choice([1, 2, 3, None]) for _ in range(n)],
        "bidder": [rng.choice(["a", "b", "c", None]) for _ in range(n)],
        "price": [rng.choice([1, 2, 2, 5, 9, None]) for _ in range(n)],  # many ties
        "window_start": pa.array(starts, pa.int64()).cast(pa.timestamp("us")),
        "window_end": pa.array([s + SIZE for s in starts], pa.int64()).cast(pa.timestamp("us")),
    }, schema=INPUT)


def oracle(rows: pa.Table, cfg) -> list[tuple]:
    """DuckDB's batch query over ``rows`` (in arrival order), ties broken by arrival."""
    partition = ", ".join(['"window_start"', '"window_end"', *(f'"{k}"' for k in cfg["partition_keys"])])
    order = ", ".join(cfg["order_by"])
    if cfg["function"] == "row_number":
        order += ", _pos DESC" if cfg.get("ties") == "latest_first" else ", _pos"
    low, high = cfg["rank_range"]
    rank = f'"{cfg["rank_column"]}"'
    where = f"{rank} BETWEEN {low} AND {high}" + (f" AND ({cfg['filter']})" if cfg.get("filter") else "")
    projection = ", ".join(f"{sql} AS \"{name}\"" for name, sql in cfg["projection"])
    con = duckdb.connect()
    con.register("input", rows.append_column("_pos", pa.array(range(rows.num_rows), pa.int64())))
    sql = (f"SELECT {projection} FROM (SELECT *, {cfg['function']}() OVER (PARTITION BY {partition} "
           f"ORDER BY {order}) AS {rank} FROM input) WHERE {where}")
    return sorted(con.sql(sql).fetchall(), key=repr)


def run(op: WindowRank, steps) -> list[pa.RecordBatch]:
    out = []
    for step in steps:
        out += op.process_watermark(step) if isinstance(step, int) else op.process_batch(step)
    return out


def rows_of(batches, schema) -> list[tuple]:
    for b in batches:
        assert b.schema == schema and b.num_rows > 0
    table = pa.Table.from_batches(batches, schema=schema)
    return list(zip(*(c.to_pylist() for c in table.columns))) if table.num_rows else []


def batches_of(table: pa.Table, sizes: list[int]) -> list[pa.RecordBatch]:
    out, offset, i = [], 0, 0
    while offset < table.num_rows:
        n = sizes[i % len(sizes)]
        out.extend(table.slice(offset, n).to_batches())
        offset, i = offset + n, i + 1
    return out


# -- against the oracle ------------------------------------------------------------

@pytest.mark.parametrize("function", ["row_number", "rank", "dense_rank"])
@pytest.mark.parametrize("keys", [(), ("auction",), ("auction", "bidder")])
def test_top_n_equals_batch_query(function, keys):
    rows = random_rows(random.Random(7), 400)
    cfg = config(function, keys)
    op = make_op(cfg)
    out = run(op, [*batches_of(rows, [37]), MAX_WATERMARK])
    assert sorted(rows_of(out, output_schema(cfg)), key=repr) == oracle(rows, cfg)


@pytest.mark.parametrize("direction, keep", [("ASC", "first"), ("DESC", "last")])
def test_deduplication_keeps_the_first_or_last_row_by_time(direction, keep):
    ts = pa.array([3, 1, 2, 1, 5], pa.int64()).cast(pa.timestamp("us"))
    rows = pa.table({"auction": [1, 1, 1, 2, 2], "ts": ts,
                     "window_start": pa.array([0] * 5, pa.int64()).cast(pa.timestamp("us")),
                     "window_end": pa.array([SIZE] * 5, pa.int64()).cast(pa.timestamp("us"))})
    schema = rows.schema
    cfg = {"partition_keys": ["auction"], "order_by": [f'"ts" {direction} NULLS LAST'],
           "function": "row_number", "rank_column": "rownum", "rank_range": [1, 1],
           "projection": [[n, f'"{n}"'] for n in schema.names]}  # no rank column: Flink's no-rank-number output
    op = WindowRank(cfg, OperatorContext("dedup", schema))
    out = pa.Table.from_batches(run(op, [*rows.to_batches(max_chunksize=2), MAX_WATERMARK]))
    want = {"first": [(1, 1), (2, 1)], "last": [(1, 3), (2, 5)]}[keep]
    assert list(zip(out["auction"].to_pylist(), out["ts"].cast(pa.int64()).to_pylist())) == want


def test_rank_range_filter_and_projection():
    rows = random_rows(random.Random(3), 300)
    cfg = config(low=2, high=4, filter_sql='"price" IS NOT NULL')
    cfg["projection"] = [["auction", '"auction"'], ["rownum", '"rownum"'], ["double_price", '"price" * 2']]
    schema = pa.schema([("auction", pa.int64()), ("rownum", pa.int64()), ("double_price", pa.int64())])
    op = WindowRank(cfg, OperatorContext("rank", schema))
    out = run(op, [*batches_of(rows, [50]), MAX_WATERMARK])
    assert sorted(rows_of(out, schema), key=repr) == oracle(rows, cfg)


def test_output_is_ordered_by_window_key_and_rank():
    rows = random_rows(random.Random(11), 200)
    cfg = config()
    out = pa.Table.from_batches(run(make_op(cfg), [rows.to_batches()[0], MAX_WATERMARK]))
    order = list(zip(out["window_end"].cast(pa.int64()).to_pylist(), out["window_start"].cast(pa.int64()).to_pylist(),
                     [(a is None, a) for a in out["auction"].to_pylist()], out["rownum"].to_pylist()))
    assert order == sorted(order)


def test_pruning_keeps_state_near_n_rows_per_window_and_key(monkeypatch):
    monkeypatch.setattr("weir.engine.operators.window_rank.PRUNE_MIN_ROWS", 10)
    rows = random_rows(random.Random(5), 2000)
    cfg = config(high=2)
    op = make_op(cfg)
    run(op, batches_of(rows, [100]))
    groups = 4 * 4  # windows x auctions (with NULL)
    assert op.snapshot()["tables"]["window_rows"].num_rows <= 2 * (groups * 2 + 100)
    out = run(op, [MAX_WATERMARK])
    assert sorted(rows_of(out, output_schema(cfg)), key=repr) == oracle(rows, cfg)


# -- time --------------------------------------------------------------------------

def test_window_fires_when_watermark_reaches_window_end_minus_1ms_and_late_rows_are_dropped():
    rows = random_rows(random.Random(1), 100, windows=1)  # all in [0, 10 s)
    cfg = config()
    op = make_op(cfg)
    assert run(op, [rows.to_batches()[0], SIZE - 1001]) == []
    fired = run(op, [SIZE - 1000])
    assert sorted(rows_of(fired, output_schema(cfg)), key=repr) == oracle(rows, cfg)
    assert run(op, [rows.slice(0, 7).to_batches()[0], MAX_WATERMARK]) == []
    assert op.ctx.metrics["late_rows_dropped"] == 7
    assert op.snapshot()["tables"]["window_rows"].num_rows == 0  # fired windows' state is dropped


def test_null_window_end_is_dropped_and_counted():
    rows = random_rows(random.Random(2), 10)
    rows = rows.set_column(4, "window_end", pa.array([None] * 10, pa.timestamp("us")))
    op = make_op(config())
    assert run(op, [rows.to_batches()[0], MAX_WATERMARK]) == []
    assert op.ctx.metrics["null_time_rows_dropped"] == 10


def test_rows_tied_on_order_by_rank_in_arrival_order():
    """Flink's window Top-N ranks the earlier-arriving of two tied rows first, whatever their
    other columns; as ``RANK`` they share a rank."""
    rows = pa.table({"auction": [1, 1, 1], "bidder": ["z", "a", "m"], "price": [5, 5, 9],
                     "window_start": pa.array([0] * 3, pa.int64()).cast(pa.timestamp("us")),
                     "window_end": pa.array([SIZE] * 3, pa.int64()).cast(pa.timestamp("us"))}, schema=INPUT)
    out = pa.Table.from_batches(run(make_op(config(high=3)), [*rows.to_batches(max_chunksize=1), MAX_WATERMARK]))
    assert list(zip(out["bidder"].to_pylist(), out["rownum"].to_pylist())) == [("m", 1), ("z", 2), ("a", 3)]
    ranked = pa.Table.from_batches(run(make_op(config("rank", high=3)), [rows.to_batches()[0], MAX_WATERMARK]))
    assert sorted(zip(ranked["bidder"].to_pylist(), ranked["rownum"].to_pylist())) == [("a", 2), ("m", 1), ("z", 2)]


@pytest.mark.parametrize("ties, bidder", [("latest_first", "a"), ("earliest_first", "z")])
def test_deduplication_of_rows_with_the_same_time_keeps_the_last_or_first_to_arrive(ties, bidder):
    """Keep-last deduplication (ORDER BY time DESC) keeps the last-arriving of rows with the
    same time, keep-first the first-arriving, as Flink; across a checkpoint and restore too."""
    rows = pa.table({"auction": [1, 1, 1], "bidder": ["b", "z", "a"], "price": [3, 3, 3],
                     "window_start": pa.array([0] * 3, pa.int64()).cast(pa.timestamp("us")),
                     "window_end": pa.array([SIZE] * 3, pa.int64()).cast(pa.timestamp("us"))}, schema=INPUT)
    direction = "DESC" if ties == "latest_first" else "ASC"
    cfg = config(order=(f'"price" {direction} NULLS LAST',), high=1, ties=ties)
    if ties == "earliest_first":
        rows = rows.take([1, 0, 2])
    op = make_op(cfg)
    run(op, rows.slice(0, 2).to_batches())
    restored = make_op(cfg)
    restored.restore(WindowRank.merge_snapshots([op.snapshot()]))
    out = pa.Table.from_batches(run(restored, [*rows.slice(2).to_batches(), MAX_WATERMARK]))
    assert out["bidder"].to_pylist() == [bidder]


# -- properties: batch sizes, watermarks and restore points --------------------------

@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), sizes=st.lists(st.integers(1, 60), min_size=1, max_size=4),
       function=st.sampled_from(["row_number", "rank", "dense_rank"]), restore_at=st.integers(0, 40),
       high=st.integers(1, 4))
def test_batch_sizes_watermarks_and_restore_points_do_not_change_the_result(seed, sizes, function, restore_at, high):
    rng = random.Random(seed)
    rows = random_rows(rng, 250, windows=6)
    # Rows arrive roughly in window order, so watermarks fire some windows along the way.
    rows = rows.take(pa.array(sorted(range(rows.num_rows), key=lambda i: (
        rows["window_start"][i].value + rng.randrange(2 * SIZE)))))
    cfg = config(function, high=high)
    steps, watermark, kept = [], None, []
    for batch in batches_of(rows, sizes):
        ends = batch.column(4).cast(pa.int64()).to_pylist()
        kept.extend(watermark is None or e - 1000 > watermark for e in ends)
        steps.append(batch)
        watermark = max(watermark or 0, max(ends) - 2 * SIZE)
        steps.append(watermark)
    steps.append(MAX_WATERMARK)
    op = make_op(cfg)
    cut = min(restore_at, len(steps))
    out = run(op, steps[:cut])
    snapshot = op.snapshot()
    op.close()
    restored = make_op(cfg)
    restored.restore(WindowRank.merge_snapshots([snapshot]))
    out += run(restored, steps[cut:])
    expected = oracle(rows.filter(pa.array(kept)), cfg)
    assert sorted(rows_of(out, output_schema(cfg)), key=repr) == expected
    assert restored.ctx.metrics.get("late_rows_dropped", 0) + op.ctx.metrics.get("late_rows_dropped", 0) \
        == kept.count(False)


def test_restore_at_another_parallelism_keeps_each_subtasks_key_groups():
    rows = random_rows(random.Random(9), 300)
    cfg = config()
    keys = ["window_start", "window_end", "auction"]
    # Two subtasks each see their key groups' rows, then snapshot; three subtasks restore.
    snapshots = []
    for subtask in range(2):
        op = make_op(cfg, subtask_index=subtask, parallelism=2)
        owned = range_for_subtask(subtask, 2, 128)
        groups = key_groups(rows, keys, 128).to_pylist()
        run(op, rows.filter(pa.array([g in owned for g in groups])).to_batches())
        snapshots.append(op.snapshot())
    merged = WindowRank.merge_snapshots(snapshots)
    out = []
    for subtask in range(3):
        op = make_op(cfg, subtask_index=subtask, parallelism=3)
        op.restore(merged)
        out += run(op, [MAX_WATERMARK])
    assert sorted(rows_of(out, output_schema(cfg)), key=repr) == oracle(rows, cfg)


# -- configuration and state errors ------------------------------------------------

def test_registered_as_window_rank():
    cfg = config()
    op = build_operator("window_rank", cfg, OperatorContext("rank", output_schema(cfg)))
    assert isinstance(op, WindowRank)


def test_unknown_rank_function_is_refused():
    with pytest.raises(EngineError, match="unknown rank function"):
        make_op(config(function="ntile"))


def test_snapshot_of_another_version_is_refused():
    op = make_op(config())
    with pytest.raises(EngineError, match="version"):
        op.restore({"version": 99, "watermark": 0, "tables": {}})


def test_snapshot_of_another_max_parallelism_is_refused():
    op = make_op(config())
    run(op, [random_rows(random.Random(4), 10).to_batches()[0]])
    snap = op.snapshot()
    with pytest.raises(EngineError, match="max parallelism"):
        make_op(config(), max_parallelism=64).restore(snap)
