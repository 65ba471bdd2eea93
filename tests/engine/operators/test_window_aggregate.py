"""WindowAggregate driven directly: window bounds, firing, lateness, state, snapshots."""
from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators import duckdb_sql, window_state
from window_harness import (
    SECOND,
    assert_same_rows,
    drive,
    drive_to_end,
    make_window_op,
    timestamps,
    to_rows,
    tumble_oracle,
)

EPOCH = dt.datetime(1970, 1, 1)


def at(us: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=us)


def bids(times, auction=None, price=None, bidder=None) -> pa.RecordBatch:
    n = len(times)
    return pa.record_batch({
        "auction": pa.array(auction if auction is not None else [1] * n, pa.int64()),
        "price": pa.array(price if price is not None else [10] * n, pa.int64()),
        "bidder": pa.array(bidder if bidder is not None else list(range(n)), pa.int64()),
        "date_time": timestamps(times),
    })


def count_config(size=10 * SECOND, offset=0, keys=(("auction", "auction"),)):
    return {
        "window": {"kind": "tumble", "time_column": "date_time", "size": size, "offset": offset},
        "keys": [list(k) for k in keys],
        "aggregates": [{"name": "n", "function": "count", "argument": None}],
        "having": None,
        "projection": [[name, name] for name, _ in keys]
        + [["window_start", "window_start"], ["window_end", "window_end"],
           ["window_time", "window_time"], ["n", "n"]],
    }


def count_schema(keys=("auction",)):
    return pa.schema(
        [(k, pa.int64()) for k in keys]
        + [("window_start", pa.timestamp("us")), ("window_end", pa.timestamp("us")),
           ("window_time", pa.timestamp("us")), ("n", pa.int64())]
    )


def windows_of(config, schema, times):
    op = make_window_op(config, schema)
    rows = to_rows(drive_to_end(op, [bids(times)]), schema)
    return [(r["window_start"], r["window_end"], r["n"]) for r in rows]


# -- window bounds ---------------------------------------------------------

def test_windows_are_aligned_to_the_epoch_and_end_exclusive():
    got = windows_of(count_config(), count_schema(), [0, 9_999_999, 10 * SECOND, 25 * SECOND])
    assert got == [
        (at(0), at(10 * SECOND), 2),
        (at(10 * SECOND), at(20 * SECOND), 1),
        (at(20 * SECOND), at(30 * SECOND), 1),
    ]


def test_offset_shifts_the_alignment():
    got = windows_of(count_config(offset=2 * SECOND), count_schema(), [SECOND, 2 * SECOND, 11_999_999])
    assert got == [(at(-8 * SECOND), at(2 * SECOND), 1), (at(2 * SECOND), at(12 * SECOND), 2)]


def test_negative_timestamps_use_a_floor_not_a_truncation():
    got = windows_of(count_config(), count_schema(), [-1, -10 * SECOND, -10 * SECOND - 1, 0])
    assert got == [
        (at(-20 * SECOND), at(-10 * SECOND), 1),
        (at(-10 * SECOND), at(0), 2),
        (at(0), at(10 * SECOND), 1),
    ]


def test_window_time_is_one_millisecond_before_window_end():
    op = make_window_op(count_config(), count_schema())
    rows = to_rows(drive_to_end(op, [bids([3 * SECOND])]), count_schema())
    assert rows[0]["window_time"] == at(10 * SECOND - 1000)


def test_sizes_that_do_not_divide_a_day_still_align_to_the_epoch():
    day_2000 = 946_684_800 * SECOND
    got = windows_of(count_config(size=7 * SECOND), count_schema(), [day_2000])
    start = day_2000 - day_2000 % (7 * SECOND)
    assert got == [(at(start), at(start + 7 * SECOND), 1)]


# -- firing ----------------------------------------------------------------

def test_a_window_fires_exactly_when_the_watermark_reaches_window_end_minus_1ms():
    op = make_window_op(count_config(), count_schema())
    assert drive(op, [bids([SECOND, 12 * SECOND]), 10 * SECOND - 1001]) == []
    fired = to_rows(op.process_watermark(10 * SECOND - 1000), count_schema())
    assert [(r["window_start"], r["n"]) for r in fired] == [(at(0), 1)]
    assert op.process_watermark(10 * SECOND) == []  # already fired, never again
    assert op.process_watermark(5 * SECOND) == []  # a watermark never goes back
    fired = to_rows(op.process_watermark(MAX_WATERMARK), count_schema())
    assert [(r["window_start"], r["n"]) for r in fired] == [(at(10 * SECOND), 1)]
    assert op.finish() == []


def test_fired_windows_come_ordered_by_window_end_then_keys():
    op = make_window_op(count_config(), count_schema())
    batch = bids([25 * SECOND, 5 * SECOND, 15 * SECOND, 5 * SECOND, 5 * SECOND],
                 auction=[1, 3, 2, None, 1])
    rows = to_rows(drive_to_end(op, [batch]), count_schema())
    assert [(r["window_start"], r["auction"]) for r in rows] == [
        (at(0), 1), (at(0), 3), (at(0), None), (at(10 * SECOND), 2), (at(20 * SECOND), 1),
    ]


@pytest.mark.parametrize("key_type, keys", [
    (pa.string(), ["b", "a", "B", "é", "", None, "ab", "a", "z"]),
    (pa.float64(), [1.5, float("nan"), -2.0, None, float("inf"), 0.0, -0.5, 1.5, 3.0]),
    (pa.int32(), [3, -1, None, 7, 0, 3, 2, -5, 1]),
])
def test_fired_windows_are_in_duckdbs_order_of_their_keys(key_type, keys):
    """A small firing is sorted in Arrow where the keys' type sorts there as in DuckDB (strings:
    by bytes; NULLs last), else by DuckDB's ORDER BY (floats: NaN): DuckDB's order either way."""
    schema = pa.schema([("k", key_type), ("window_start", pa.timestamp("us")),
                        ("window_end", pa.timestamp("us")), ("window_time", pa.timestamp("us")), ("n", pa.int64())])
    op = make_window_op(count_config(keys=(("k", "k"),)), schema)
    times = [5 * SECOND, 5 * SECOND, 15 * SECOND, 5 * SECOND, 15 * SECOND, 5 * SECOND, 5 * SECOND, 15 * SECOND, 5 * SECOND]
    batch = pa.record_batch({"k": pa.array(keys, key_type), "date_time": timestamps(times)})
    rows = to_rows(drive(op, [batch, MAX_WATERMARK]), schema)
    con = duckdb.connect()
    con.register("b", pa.table({"k": pa.array(keys, key_type), "t": pa.array(times, pa.int64())}))
    expected = con.execute("SELECT k, count(*) FROM b GROUP BY t // 10000000, k ORDER BY t // 10000000, k").fetchall()
    assert [(repr(r["k"]), r["n"]) for r in rows] == [(repr(k), n) for k, n in expected]


def test_state_of_fired_windows_is_deleted():
    op = make_window_op(count_config(), count_schema())
    drive(op, [bids([SECOND, 2 * SECOND, 15 * SECOND]), 10 * SECOND])
    tables = op.snapshot()["tables"]
    assert tables["window_accumulators"].column("__slice_start").to_pylist() == [10 * SECOND]


# -- dropped rows ------------------------------------------------------------

def test_late_rows_are_dropped_and_counted():
    op = make_window_op(count_config(), count_schema())
    drive(op, [bids([SECOND]), 10 * SECOND - 1000])  # [0, 10 s) fired
    # 5 s and 9.999999 s belong to the fired window: late; 10 s opens [10 s, 20 s): on time.
    assert drive(op, [bids([5 * SECOND, 9_999_999, 10 * SECOND])]) == []
    assert op.ctx.metrics["late_rows_dropped"] == 2
    drive(op, [12 * SECOND])
    # The watermark passed 11 s, but window [10 s, 20 s) has not fired: not late.
    drive(op, [bids([11 * SECOND])])
    assert op.ctx.metrics["late_rows_dropped"] == 2
    rows = to_rows(drive_to_end(op, []), count_schema())
    assert [(r["window_start"], r["n"]) for r in rows] == [(at(10 * SECOND), 2)]
    assert op.ctx.metrics["rows_in"] == 5 and op.ctx.metrics["rows_out"] == 2


def test_a_batch_of_only_late_rows_changes_nothing():
    op = make_window_op(count_config(), count_schema())
    drive(op, [bids([SECOND]), 20 * SECOND])
    before = op.snapshot()
    assert drive(op, [bids([SECOND, 2 * SECOND])]) == []
    assert op.ctx.metrics["late_rows_dropped"] == 2
    assert op.snapshot()["tables"].keys() == before["tables"].keys()
    assert drive_to_end(op, []) == []


def test_rows_with_a_null_time_are_dropped_and_counted():
    op = make_window_op(count_config(), count_schema())
    rows = to_rows(drive_to_end(op, [bids([None, SECOND, None]), bids([None])]), count_schema())
    assert [r["n"] for r in rows] == [1]
    assert op.ctx.metrics["null_time_rows_dropped"] == 3
    assert "late_rows_dropped" not in op.ctx.metrics


def test_empty_batches_produce_nothing():
    op = make_window_op(count_config(), count_schema())
    assert drive_to_end(op, [bids([]), bids([None])]) == []


# -- aggregates ----------------------------------------------------------------

AGG_SCHEMA = pa.schema([
    ("auction", pa.int64()), ("window_start", pa.timestamp("us")),
    ("n", pa.int64()), ("cheap", pa.int64()), ("total", pa.int64()), ("low", pa.int64()),
    ("high", pa.int64()), ("mean", pa.float64()), ("bidders", pa.int64()),
    ("spend", pa.float64()),
])


def agg_config(having=None):
    return {
        "window": {"kind": "tumble", "time_column": "date_time", "size": 10 * SECOND, "offset": 0},
        "keys": [["auction", "auction"]],
        "aggregates": [
            {"name": "n", "function": "count", "argument": None},
            {"name": "cheap", "function": "count", "argument": "price", "filter": "price < 0"},
            {"name": "total", "function": "sum", "argument": "price", "filter": "price < 0"},
            {"name": "low", "function": "min", "argument": "price"},
            {"name": "high", "function": "max", "argument": "price", "distinct": True},
            {"name": "mean", "function": "avg", "argument": "price"},
            {"name": "bidders", "function": "count", "argument": "bidder", "distinct": True},
            {"name": "avg_bidder", "function": "avg", "argument": "bidder", "distinct": True},
        ],
        "having": having,
        "projection": [["auction", "auction"], ["window_start", "window_start"], ["n", "n"],
                       ["cheap", "cheap"], ["total", "total"], ["low", "low"], ["high", "high"],
                       ["mean", "mean"], ["bidders", "bidders"], ["spend", "mean * n + avg_bidder"]],
    }


def test_filters_that_match_nothing_give_count_0_and_sum_null():
    op = make_window_op(agg_config(), AGG_SCHEMA)
    batch = bids([SECOND, 2 * SECOND, 3 * SECOND], auction=[1, 1, 2], price=[5, None, None],
                 bidder=[7, 7, None])
    rows = to_rows(drive_to_end(op, [batch]), AGG_SCHEMA)
    assert rows == [
        {"auction": 1, "window_start": at(0), "n": 2, "cheap": 0, "total": None, "low": 5,
         "high": 5, "mean": 5.0, "bidders": 1, "spend": 17.0},
        {"auction": 2, "window_start": at(0), "n": 1, "cheap": 0, "total": None, "low": None,
         "high": None, "mean": None, "bidders": 0, "spend": None},
    ]


def test_distinct_values_are_counted_once_across_batches():
    op = make_window_op(agg_config(), AGG_SCHEMA)
    steps = [bids([SECOND] * 3, bidder=[1, 2, 2]), bids([2 * SECOND] * 2, bidder=[2, 3])]
    rows = to_rows(drive_to_end(op, steps), AGG_SCHEMA)
    assert [(r["n"], r["bidders"], r["spend"]) for r in rows] == [(5, 3, 52.0)]


def test_having_and_expressions_over_aggregates():
    config = agg_config(having="n > 1 AND bidders >= 2")
    op = make_window_op(config, AGG_SCHEMA)
    batch = bids([SECOND, SECOND, SECOND, 12 * SECOND, 13 * SECOND], auction=[1, 1, 2, 3, 3],
                 price=[-4, 10, 3, -1, -2], bidder=[1, 2, 3, 5, 5])
    rows = to_rows(drive_to_end(op, [batch]), AGG_SCHEMA)
    assert [(r["auction"], r["total"], r["cheap"]) for r in rows] == [(1, -4, 1)]
    assert rows == tumble_oracle(pa.Table.from_batches([batch]), config, AGG_SCHEMA)


def test_grouping_by_expressions_and_without_keys():
    schema = pa.schema([("bucket", pa.int64()), ("window_end", pa.timestamp("us")), ("n", pa.int64())])
    config = count_config(keys=(("bucket", "auction % 3"),))
    config["projection"] = [["bucket", "bucket"], ["window_end", "window_end"], ["n", "n"]]
    batch = bids([SECOND] * 5, auction=[1, 4, 7, 2, 3])
    op = make_window_op(config, schema)
    assert [(r["bucket"], r["n"]) for r in to_rows(drive_to_end(op, [batch]), schema)] == [
        (0, 1), (1, 3), (2, 1)]

    config = count_config(keys=())
    config["projection"] = [["window_end", "window_end"], ["n", "n"]]
    schema = pa.schema([("window_end", pa.timestamp("us")), ("n", pa.int64())])
    op = make_window_op(config, schema)
    assert to_rows(drive_to_end(op, [batch, bids([15 * SECOND])]), schema) == [
        {"window_end": at(10 * SECOND), "n": 5}, {"window_end": at(20 * SECOND), "n": 1}]


def test_string_keys_and_output_types_follow_the_output_schema():
    config = count_config(keys=(("name", "upper(kind)"),))
    schema = pa.schema([("name", pa.large_string()), ("window_start", pa.timestamp("us")),
                        ("window_end", pa.timestamp("us")), ("window_time", pa.timestamp("us")),
                        ("n", pa.int32())])
    batch = pa.record_batch({"kind": ["a", "b", None, "a"], "date_time": timestamps([0, 1, 2, 3])})
    op = make_window_op(config, schema)
    rows = to_rows(drive_to_end(op, [batch]), schema)
    assert [(r["name"], r["n"]) for r in rows] == [("A", 2), ("B", 1), (None, 1)]


def test_a_millisecond_time_column_is_read_as_microseconds():
    batch = pa.record_batch({"auction": [1, 1], "date_time": pa.array([999, 10_000], pa.timestamp("ms"))})
    op = make_window_op(count_config(), count_schema())
    rows = to_rows(drive_to_end(op, [batch]), count_schema())
    assert [(r["window_start"], r["n"]) for r in rows] == [(at(0), 1), (at(10 * SECOND), 1)]


def test_compaction_merges_partials_without_changing_results(monkeypatch):
    monkeypatch.setattr(window_state, "COMPACT_MIN_ROWS", 4)
    compactions = []
    original = window_state.WindowState._compact
    monkeypatch.setattr(window_state.WindowState, "_compact",
                        lambda self, table: (compactions.append(table), original(self, table)))
    config = agg_config()
    op = make_window_op(config, AGG_SCHEMA)
    batches = [bids([i * 100_000 + j for j in range(5)], auction=[i % 3, 1, 2, i % 4, 1],
                    price=[i, -i, i % 5, None, -1], bidder=[i % 7, 1, 2, 3, i % 2])
               for i in range(300)]
    rows = to_rows(drive_to_end(op, batches), AGG_SCHEMA)
    assert_same_rows(rows, tumble_oracle(pa.Table.from_batches(batches), config, AGG_SCHEMA))
    assert {"window_accumulators", "distinct_values_0"} <= set(compactions)


def test_a_batch_whose_windows_all_fire_at_the_next_watermark_is_never_appended(monkeypatch):
    """A batch is held in Arrow until the next watermark (a cascaded TUMBLE's input: windows
    that just fired). Where that watermark fires every window of its rows, they are fired with
    the state and never appended (nor deleted); a batch some of whose windows stay open is
    appended then. The windows are the same either way."""
    appended = []
    append = window_state.WindowState.append
    monkeypatch.setattr(window_state.WindowState, "append",
                        lambda self, *args, **kwargs: appended.append(1) or append(self, *args, **kwargs))
    op = make_window_op(count_config(), count_schema())
    op._partials = None  # the rows held in Arrow (``_hold``), not their partials (``window_partials``)
    fired = to_rows(drive(op, [bids([SECOND, 2 * SECOND, 5 * SECOND], auction=[1, 2, 1]), 10 * SECOND - 1000]),
                    count_schema())
    assert [(r["auction"], r["n"]) for r in fired] == [(1, 2), (2, 1)]
    assert appended == [] and op.snapshot()["tables"] == {}
    fired = to_rows(drive(op, [bids([11 * SECOND, 25 * SECOND]), 20 * SECOND - 1000]), count_schema())
    assert [(r["window_start"], r["n"]) for r in fired] == [(at(10 * SECOND), 1)]
    assert appended == [1], "the row at 25 s outlives the watermark: appended"
    rows = to_rows(drive_to_end(op, []), count_schema())
    assert [(r["window_start"], r["n"]) for r in rows] == [(at(20 * SECOND), 1)]


def test_held_batches_never_outgrow_a_small_firing(monkeypatch):
    """Between watermarks, however rare, no more rows wait in Arrow than a small firing holds
    (two output batches): past that the held batches are appended."""
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 2)  # a small firing: 4 rows
    appended = []
    append = window_state.WindowState.append
    monkeypatch.setattr(window_state.WindowState, "append",
                        lambda self, *args, **kwargs: appended.append(1) or append(self, *args, **kwargs))
    op = make_window_op(count_config(), count_schema())
    op._partials = None  # the rows held in Arrow (``_hold``), not their partials (``window_partials``)
    batches = [bids([i * SECOND, i * SECOND + 1], auction=[i, i]) for i in range(3)]
    drive(op, batches[:2])
    assert appended == []
    drive(op, batches[2:])
    assert appended == [1], "6 rows held would outgrow 4: the first two batches are appended"
    rows = to_rows(drive_to_end(op, []), count_schema())
    assert [(r["auction"], r["n"]) for r in rows] == [(0, 2), (1, 2), (2, 2)]


# -- snapshot and restore ----------------------------------------------------

def test_snapshot_restored_into_a_fresh_operator_continues_identically():
    config = agg_config()
    batches = [bids([i * 700_000, i * 700_000 + 5], auction=[i % 4, i % 3], price=[i - 20, i],
                    bidder=[i % 5, i % 2]) for i in range(60)]
    watermarks = {i: i * 700_000 - 3 * SECOND for i in range(0, 60, 7)}
    steps = []
    for i, b in enumerate(batches):
        steps.append(b)
        if i in watermarks:
            steps.append(watermarks[i])
    straight = to_rows(drive_to_end(make_window_op(config, AGG_SCHEMA), steps), AGG_SCHEMA)

    for cut in (0, 1, 13, 31, len(steps)):
        first = make_window_op(config, AGG_SCHEMA)
        before = drive(first, steps[:cut])
        snap = first.snapshot()
        resumed = make_window_op(config, AGG_SCHEMA)
        resumed.restore(snap)
        after = drive_to_end(resumed, steps[cut:])
        assert to_rows(before + after, AGG_SCHEMA) == straight
        # the snapshot is a copy: the original goes on unaffected
        assert to_rows(before + drive_to_end(first, steps[cut:]), AGG_SCHEMA) == straight


def test_restore_brings_back_the_watermark_so_late_rows_stay_late():
    op = make_window_op(count_config(), count_schema())
    drive(op, [bids([SECOND, 11 * SECOND]), 10 * SECOND])
    resumed = make_window_op(count_config(), count_schema())
    resumed.restore(op.snapshot())
    assert drive(resumed, [bids([2 * SECOND])]) == []
    assert resumed.ctx.metrics["late_rows_dropped"] == 1
    rows = to_rows(drive_to_end(resumed, []), count_schema())
    assert [(r["window_start"], r["n"]) for r in rows] == [(at(10 * SECOND), 1)]


def test_snapshot_tables_carry_key_groups_in_order():
    op = make_window_op(agg_config(), AGG_SCHEMA, max_parallelism=16)
    drive(op, [bids([SECOND] * 50, auction=list(range(50)), bidder=list(range(50)))])
    snap = op.snapshot()
    assert snap["watermark"] == op.clock.watermark
    assert set(snap["tables"]) == {"window_accumulators", "distinct_values_0"}
    for table in snap["tables"].values():
        groups = table.column("key_group").to_pylist()
        assert table.schema.field("key_group").type == pa.int64()
        assert groups == sorted(groups) and all(0 <= g < 16 for g in groups)
        assert len(set(groups)) > 1
    # the same key lands in the same group in every table
    pairs = [set(zip(t.column("__k0").to_pylist(), t.column("key_group").to_pylist()))
             for t in snap["tables"].values()]
    assert pairs[0] == pairs[1]


def test_snapshot_before_any_row_restores_to_an_empty_operator():
    op = make_window_op(count_config(), count_schema())
    resumed = make_window_op(count_config(), count_schema())
    resumed.restore(op.snapshot())
    assert to_rows(drive_to_end(resumed, [bids([SECOND])]), count_schema())[0]["n"] == 1


# -- configuration errors ----------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (lambda c: c["window"].update(kind="session"), "not supported"),
    (lambda c: c["window"].update(size=0), "must be positive"),
    (lambda c: c["aggregates"].append({"name": "x", "function": "median", "argument": "price"}),
     "unknown function"),
    (lambda c: c["aggregates"].append({"name": "x", "function": "sum", "argument": None}),
     "needs an argument"),
])
def test_bad_configs_are_reported(change, message):
    config = count_config()
    change(config)
    with pytest.raises(EngineError, match=message) as info:
        make_window_op(config, count_schema())
    assert info.value.operator_id == "window"


def test_a_failing_expression_names_the_operator():
    config = count_config(keys=(("auction", "no_such_column"),))
    op = make_window_op(config, count_schema())
    with pytest.raises(EngineError, match="no_such_column") as info:
        op.process_batch(bids([SECOND]))
    assert info.value.operator_id == "window"
