"""WindowJoin driven directly, against DuckDB's batch join of the same windowed rows.

The oracle buckets both sides into windows in SQL (``time_bucket``) and joins
them; the operator gets its rows in batches on two inputs, interleaved, with
the minimum of the two inputs' watermarks, and is snapshotted and restored —
also at another parallelism — anywhere in between.
"""
from __future__ import annotations

import random
from unittest import mock

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators import window_join
from weir.engine.operators.arrow_join import ColumnComparison
from weir.engine.operators.duckdb_sql import quote_ident as quote
from weir.engine.operators.window_join import JOIN_TYPES, WindowJoin
from weir.engine.state.key_groups import key_groups, range_for_subtask

SECOND = 1_000_000
SIZE = 5 * SECOND
MAX_P = 16
TS = pa.timestamp("us")
LEFT = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("ts", TS),
                  ("window_start", TS), ("window_end", TS)])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.string()), ("ts", TS),
                   ("window_start", TS), ("window_end", TS)])


def side_config(schema: pa.Schema) -> dict:
    return {"columns": schema.names, "keys": ["k"], "window_start": "window_start", "window_end": "window_end"}


def output_schema(join_type: str) -> pa.Schema:
    if join_type in ("semi", "anti"):
        return LEFT
    return pa.schema([*(f.with_name(f"l_{f.name}") for f in LEFT), *(f.with_name(f"r_{f.name}") for f in RIGHT)])


def make_join(join_type: str, null_aware: bool = False, subtask: int = 0, parallelism: int = 1,
              condition: str | None = None) -> WindowJoin:
    config = {"join_type": join_type, "null_aware": null_aware, "condition": condition,
              "left": side_config(LEFT), "right": side_config(RIGHT)}
    ctx = OperatorContext("join", output_schema(join_type), subtask_index=subtask,
                          parallelism=parallelism, max_parallelism=MAX_P)
    op = WindowJoin(config, ctx)
    op.open()
    return op


def rows(schema: pa.Schema, times: list[int], keys: list[int | None], values: list) -> pa.RecordBatch:
    starts = [t - t % SIZE for t in times]
    return pa.record_batch([
        pa.array(keys, pa.int64()), pa.array(values, schema.field(1).type), pa.array(times, TS),
        pa.array(starts, TS), pa.array([s + SIZE for s in starts], TS),
    ], schema=schema)


def random_side(rng: random.Random, schema: pa.Schema, n: int) -> pa.RecordBatch:
    """Rows in time order over 40 s, keys 0..5 and some NULLs."""
    times = sorted(rng.randrange(0, 40 * SECOND, 1000) for _ in range(n))
    keys = [rng.choice([None, 0, 1, 2, 3, 4, 5]) for _ in range(n)]
    values = [i if schema is LEFT else f"w{i}" for i in range(n)]
    return rows(schema, times, keys, values)


ORACLE_JOINS = {
    "inner": "SELECT l.*, r.* FROM l JOIN r ON {on}",
    "left": "SELECT l.*, r.* FROM l LEFT JOIN r ON {on}",
    "right": "SELECT l.*, r.* FROM l RIGHT JOIN r ON {on}",
    "full": "SELECT l.*, r.* FROM l FULL JOIN r ON {on}",
    "semi": "SELECT * FROM l WHERE (k, window_start, window_end) IN (SELECT k, window_start, window_end FROM r)",
    "anti": "SELECT * FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE {on})",
    "anti_in": "SELECT * FROM l WHERE (k, window_start, window_end) NOT IN "
               "(SELECT k, window_start, window_end FROM r)",
}


def oracle(join_type: str, left: pa.Table, right: pa.Table) -> list[tuple]:
    """DuckDB's batch join, each side's windows recomputed from its time column."""
    con = duckdb.connect()
    for name, table in (("l_in", left), ("r_in", right)):
        con.register(name, table)
        con.execute(f"""CREATE TABLE {name[0]} AS SELECT * REPLACE (
            time_bucket(INTERVAL '5 seconds', ts) AS window_start,
            time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '5 seconds' AS window_end) FROM {name}""")
    on = "l.k = r.k AND l.window_start = r.window_start AND l.window_end = r.window_end"
    return sorted(con.execute(ORACLE_JOINS[join_type].format(on=on)).fetchall(), key=repr)


def result(batches: list[pa.RecordBatch], schema: pa.Schema) -> list[tuple]:
    for b in batches:
        assert b.schema == schema
    table = pa.Table.from_batches(batches, schema=schema)
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def interleave(rng: random.Random, left: pa.RecordBatch, right: pa.RecordBatch, max_batch: int) -> list:
    """Steps ``(input, batch)`` and ``(input, watermark)``: each side cut into batches of random
    sizes, the sides interleaved at random; after a batch its input's watermark is its last
    row's time (rows are in time order on each side, so none is late)."""
    queues = []
    for index, batch in enumerate((left, right)):
        steps, at = [], 0
        while at < batch.num_rows:
            n = rng.randint(1, max_batch)
            piece = batch.slice(at, n)
            steps += [(index, piece), (index, piece.column(2)[-1].value)]
            at += n
        queues.append(steps)
    out = []
    while queues[0] or queues[1]:
        side = rng.choice([i for i in (0, 1) if queues[i]])
        out.append(queues[side].pop(0))
        # a batch and its watermark stay together
        if out[-1][1].__class__ is not int and queues[side]:
            out.append(queues[side].pop(0))
    return out


class Driver:
    """Delivers steps to one operator (or to subtasks by key group) as the executor does:
    the operator sees the minimum of its inputs' watermarks."""

    def __init__(self, ops: list[WindowJoin]):
        self.ops = ops
        self.watermarks = [-(2**63), -(2**63)]
        self.out: list[pa.RecordBatch] = []

    def step(self, index: int, item) -> None:
        if isinstance(item, int):
            self.watermarks[index] = max(self.watermarks[index], item)
            for op in self.ops:
                self.out += op.process_watermark(min(self.watermarks))
            return
        if len(self.ops) == 1:
            self.out += self.ops[0].process_batch(item, index)
            return
        owners = key_groups(item, ["k"], MAX_P).to_pylist()
        for i, op in enumerate(self.ops):
            owned = range_for_subtask(i, len(self.ops), MAX_P)
            mask = pa.array([g in owned for g in owners])
            self.out += op.process_batch(item.filter(mask), index)

    def finish(self) -> None:
        for index in (0, 1):
            self.step(index, MAX_WATERMARK)


@pytest.mark.parametrize("join_type", JOIN_TYPES)
@pytest.mark.parametrize("in_arrow", [True, False])
def test_every_join_type_equals_duckdb_batch_join(join_type, in_arrow, monkeypatch):
    """Joined in Arrow (``arrow_join``) or, with no pair allowed there, by DuckDB."""
    if not in_arrow:
        monkeypatch.setattr(window_join, "ARROW_JOIN_BATCHES", -1)
    rng = random.Random(join_type)
    left, right = random_side(rng, LEFT, 120), random_side(rng, RIGHT, 90)
    op = make_join(join_type)
    driver = Driver([op])
    for index, item in interleave(rng, left, right, 17):
        driver.step(index, item)
    driver.finish()
    expected = oracle(join_type, pa.Table.from_batches([left]), pa.Table.from_batches([right]))
    assert expected, "the random data should join"
    assert result(driver.out, output_schema(join_type)) == expected


def test_null_aware_anti_join_is_not_in():
    rng = random.Random(7)
    left, right = random_side(rng, LEFT, 80), random_side(rng, RIGHT, 40)
    driver = Driver([make_join("anti", null_aware=True)])
    for index, item in interleave(rng, left, right, 9):
        driver.step(index, item)
    driver.finish()
    expected = oracle("anti_in", pa.Table.from_batches([left]), pa.Table.from_batches([right]))
    assert result(driver.out, LEFT) == expected
    assert expected != oracle("anti", pa.Table.from_batches([left]), pa.Table.from_batches([right]))


def test_window_fires_when_the_slower_input_passes_its_end():
    op = make_join("inner")
    assert op.process_batch(rows(LEFT, [1 * SECOND], [1], [10]), 0) == []
    assert op.process_batch(rows(RIGHT, [2 * SECOND], [1], ["a"]), 1) == []
    # the left input is at 10 s, the right still at 2 s: the combined watermark is 2 s
    assert op.process_watermark(2 * SECOND) == []
    assert op.process_watermark(SIZE - 1001) == []
    out = op.process_watermark(SIZE - 1000)  # window_end - 1 ms
    assert result(out, output_schema("inner")) == [
        (1, 10, pa.scalar(SECOND, TS).as_py(), pa.scalar(0, TS).as_py(), pa.scalar(SIZE, TS).as_py(),
         1, "a", pa.scalar(2 * SECOND, TS).as_py(), pa.scalar(0, TS).as_py(), pa.scalar(SIZE, TS).as_py())
    ]
    assert op.snapshot()["tables"]["left_rows"].num_rows == 0, "a fired window's state is dropped"


def test_late_rows_are_dropped_and_counted_per_side():
    op = make_join("full")
    op.process_batch(rows(LEFT, [1 * SECOND], [1], [10]), 0)
    op.process_watermark(SIZE)
    assert op.process_batch(rows(LEFT, [2 * SECOND, 6 * SECOND], [1, 1], [11, 12]), 0) == []
    assert op.process_batch(rows(RIGHT, [3 * SECOND, 4 * SECOND], [1, 2], ["x", "y"]), 1) == []
    metrics = op.ctx.metrics
    assert (metrics["late_rows_dropped"], metrics["late_rows_dropped_left"],
            metrics["late_rows_dropped_right"]) == (3, 1, 2)
    out = op.process_watermark(MAX_WATERMARK)
    assert [r["l_v"] for r in pa.Table.from_batches(out).to_pylist()] == [12]


def test_outer_join_with_a_silent_side_emits_nulls():
    op = make_join("left")
    op.process_batch(rows(LEFT, [1 * SECOND], [None], [10]), 0)
    out = op.process_watermark(MAX_WATERMARK)
    row = pa.Table.from_batches(out).to_pylist()[0]
    assert (row["l_v"], row["r_k"], row["r_w"], row["r_window_end"]) == (10, None, None, None)


@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 40),
       join_type=st.sampled_from(JOIN_TYPES), restore_at=st.floats(0, 1),
       parallelism=st.sampled_from([1, 2, 3]), held_bytes=st.sampled_from([0, 2000, window_join.HELD_BYTES]),
       in_arrow=st.booleans())
@settings(max_examples=50, deadline=None)
def test_batching_interleaving_and_restore_never_change_the_result(seed, max_batch, join_type,
                                                                     restore_at, parallelism, held_bytes, in_arrow):
    """... nor where the rows wait: held in Arrow, moved into the state tables at once (0) or
    now and then (2000 bytes); nor where held rows are joined: in Arrow or by DuckDB."""
    with mock.patch.object(window_join, "HELD_BYTES", held_bytes), \
            mock.patch.object(window_join, "ARROW_JOIN_BATCHES", window_join.ARROW_JOIN_BATCHES if in_arrow else -1):
        _batching_interleaving_and_restore(seed, max_batch, join_type, restore_at, parallelism)


def _batching_interleaving_and_restore(seed, max_batch, join_type, restore_at, parallelism):
    rng = random.Random(seed)
    left, right = random_side(rng, LEFT, rng.randint(0, 60)), random_side(rng, RIGHT, rng.randint(0, 60))
    steps = interleave(rng, left, right, max_batch)
    cut = int(len(steps) * restore_at)
    first = Driver([make_join(join_type)])
    for index, item in steps[:cut]:
        first.step(index, item)
    snapshot = WindowJoin.merge_snapshots([first.ops[0].snapshot()])
    restored = [make_join(join_type, subtask=i, parallelism=parallelism) for i in range(parallelism)]
    for op in restored:
        op.restore(snapshot)
    second = Driver(restored)
    second.watermarks = first.watermarks
    for index, item in steps[cut:]:
        second.step(index, item)
    second.finish()
    expected = oracle(join_type, pa.Table.from_batches([left]), pa.Table.from_batches([right]))
    assert result(first.out + second.out, output_schema(join_type)) == expected


@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 40), restore_at=st.floats(0, 1))
@settings(max_examples=25, deadline=None)
def test_an_inner_joins_condition_keeps_the_joined_rows_it_holds_for(seed, max_batch, restore_at):
    """Nexmark q5's ``num >= maxn``: the condition is over the output's columns; batching and a
    restore anywhere never change which rows it keeps."""
    condition = "\"l_v\" % 3 = 0 OR \"r_w\" < 'w3'"
    rng = random.Random(seed)
    left, right = random_side(rng, LEFT, rng.randint(0, 60)), random_side(rng, RIGHT, rng.randint(0, 60))
    steps = interleave(rng, left, right, max_batch)
    cut = int(len(steps) * restore_at)
    first = Driver([make_join("inner", condition=condition)])
    for index, item in steps[:cut]:
        first.step(index, item)
    second = Driver([make_join("inner", condition=condition)])
    second.ops[0].restore(first.ops[0].snapshot())
    second.watermarks = first.watermarks
    for index, item in steps[cut:]:
        second.step(index, item)
    second.finish()
    names = output_schema("inner").names
    expected = [row for row in oracle("inner", pa.Table.from_batches([left]), pa.Table.from_batches([right]))
                if (lambda r: r["l_v"] % 3 == 0 or r["r_w"] < "w3")(dict(zip(names, row)))]
    assert result(first.out + second.out, output_schema("inner")) == expected


@pytest.mark.parametrize("condition, in_arrow", [('"l_v" >= "r_k"', True), ('"l_ts" < "r_ts"', True),
                                                 ('"l_v" + 0 >= "r_k"', False), ('"l_v" % 3 = 0', False)])
def test_a_condition_comparing_two_columns_filters_in_arrow(condition, in_arrow, monkeypatch):
    """q5's ``"num" >= "maxn"``: a comparison of two columns of one type is evaluated in Arrow
    after the Arrow join (no SQL join runs); any other condition (here: an
    expression) is left to DuckDB. Either way the rows are the oracle's that satisfy it."""
    if in_arrow:
        monkeypatch.setattr(WindowJoin, "_join_sql", mock.Mock(side_effect=AssertionError("joined in SQL")))
    rng = random.Random(condition)
    left, right = random_side(rng, LEFT, 120), random_side(rng, RIGHT, 90)
    driver = Driver([make_join("inner", condition=condition)])
    for index, item in interleave(rng, left, right, 17):
        driver.step(index, item)
    driver.finish()
    names = output_schema("inner").names
    con = duckdb.connect()
    joined = oracle("inner", pa.Table.from_batches([left]), pa.Table.from_batches([right]))
    keeps = [con.execute(f"SELECT {condition} FROM (SELECT {', '.join(f'$p{i} AS {quote(n)}' for i, n in enumerate(names))})",
                         {f"p{i}": v for i, v in enumerate(row)}).fetchone()[0] for row in joined]
    expected = [row for row, keep in zip(joined, keeps) if keep]
    assert expected and len(expected) < len(joined), "the condition should keep some joined rows, not all"
    assert result(driver.out, output_schema("inner")) == expected


def test_a_column_comparison_keeps_no_row_with_a_null():
    comparison = ColumnComparison.parse('"a" >= "b ""x"""')
    assert comparison == ColumnComparison("a", ">=", 'b "x"')
    table = pa.table({"c0": pa.array([1, None, 3, 4]), "c1": pa.array([1, 2, None, 5])})
    keep = comparison.mask(table, {"a": "c0", 'b "x"': "c1"})
    assert table.filter(keep).to_pylist() == [{"c0": 1, "c1": 1}]
    assert comparison.mask(table.set_column(1, "c1", pa.array([1.0, 2.0, None, 5.0])), {"a": "c0", 'b "x"': "c1"}) \
        is None, "across types DuckDB casts: left to its SQL"
    assert ColumnComparison.parse('"a" >= "b" AND "c" = "d"') is None


def test_only_an_inner_join_takes_a_condition():
    with pytest.raises(EngineError, match="cannot filter its joined rows"):
        make_join("left", condition="true")


def test_snapshots_of_subtasks_merge_into_one():
    rng = random.Random(3)
    left, right = random_side(rng, LEFT, 50), random_side(rng, RIGHT, 50)
    subtasks = Driver([make_join("inner", subtask=i, parallelism=2) for i in range(2)])
    subtasks.step(0, left)
    subtasks.step(1, right)
    merged = WindowJoin.merge_snapshots([op.snapshot() for op in subtasks.ops])
    one = make_join("inner")
    one.restore(merged)
    out = one.process_watermark(MAX_WATERMARK)
    expected = oracle("inner", pa.Table.from_batches([left]), pa.Table.from_batches([right]))
    assert result(out, output_schema("inner")) == expected


def test_restore_refuses_another_max_parallelism_and_version():
    snap = make_join("inner").snapshot()
    op = WindowJoin(make_join("inner").config, OperatorContext("join", output_schema("inner"), max_parallelism=8))
    with pytest.raises(EngineError, match="max parallelism 16"):
        op.restore(snap)
    with pytest.raises(EngineError, match="version"):
        make_join("inner").restore({**snap, "version": 99})


def test_config_errors_name_the_problem():
    ctx = OperatorContext("join", LEFT)
    with pytest.raises(EngineError, match="unknown window join type 'cross'"):
        WindowJoin({"join_type": "cross", "left": side_config(LEFT), "right": side_config(RIGHT)}, ctx)
    bad = {**side_config(RIGHT), "keys": ["nope"]}
    with pytest.raises(EngineError, match="nope"):
        WindowJoin({"join_type": "inner", "left": side_config(LEFT), "right": bad}, ctx)
