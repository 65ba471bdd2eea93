"""TopN (no window) driven directly: its changelog, applied to an empty multiset after any
batch, equals DuckDB's ranking of what the input changelog leaves — through restores."""
from __future__ import annotations

from collections import Counter

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.top_n import TopN

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def make(function="row_number", high=2, append_only=True, with_rank=True) -> TopN:
    projection = [["k", '"k"'], ["v", '"v"']] + ([["rn", '"rn"']] if with_rank else [])
    config = {"columns": ["k", "v"], "partition_keys": ["k"], "order_by": ['"v" DESC NULLS LAST'],
              "function": function, "rank_column": "rn", "rank_range": [1, high], "filter": None,
              "projection": projection, "append_only_input": append_only}
    out = pa.schema([("k", pa.int64()), ("v", pa.int64())] + ([("rn", pa.int64())] if with_rank else [])
                    + [(ROW_KIND, pa.int8())])
    op = TopN(config, OperatorContext("top", out, max_parallelism=8))
    op.open()
    return op


def apply(result: Counter, batches) -> None:
    for b in batches:
        for row in b.to_pylist():
            kind = row.pop(ROW_KIND)
            key = tuple(row.values())
            if kind in (INSERT, UPDATE_AFTER):
                result[key] += 1
            else:
                assert result[key] > 0, f"retraction of a row never emitted: {key}"
                result[key] -= 1
                if not result[key]:
                    del result[key]


def oracle(rows, function, high, with_rank):
    con = duckdb.connect()
    con.register("t", pa.table({"k": pa.array([r[0] for r in rows], pa.int64()),
                                "v": pa.array([r[1] for r in rows], pa.int64())}))
    order = "v DESC NULLS LAST" + (", k ASC NULLS FIRST, v ASC NULLS FIRST" if function == "row_number" else "")
    cols = "k, v, rn" if with_rank else "k, v"
    return Counter(con.sql(f"SELECT {cols} FROM (SELECT *, {function}() OVER (PARTITION BY k ORDER BY {order}) rn "
                           f"FROM t) WHERE rn <= {high}").fetchall())


def assert_net(batches) -> None:
    """A batch's changes are net: retractions first, and no row both retracted and inserted (a row
    that only moved to another rank, when the rank is not projected, is no change)."""
    kinds = [k for b in batches for k in b.column(ROW_KIND).to_pylist()]
    assert kinds == sorted(kinds, key=lambda k: k not in (DELETE, UPDATE_BEFORE))
    rows = [(r.pop(ROW_KIND), tuple(r.values())) for b in batches for r in b.to_pylist()]
    retracted = Counter(row for kind, row in rows if kind in (DELETE, UPDATE_BEFORE))
    inserted = Counter(row for kind, row in rows if kind in (INSERT, UPDATE_AFTER))
    assert not retracted & inserted, f"changes that cancel out: {retracted & inserted}"


@st.composite
def changelogs(draw, retractions: bool):
    live, out = [], []
    for _ in range(draw(st.integers(1, 30))):
        if retractions and live and draw(st.booleans()):
            row = live.pop(draw(st.integers(0, len(live) - 1)))
            out.append((row, draw(st.sampled_from([DELETE, UPDATE_BEFORE]))))
        else:
            row = (draw(st.sampled_from([1, 2, None])), draw(st.one_of(st.none(), st.integers(0, 5))))
            live.append(row)
            out.append((row, draw(st.sampled_from([INSERT, UPDATE_AFTER]))))
    return out, live


@settings(max_examples=35, deadline=None)
@given(st.booleans(), st.sampled_from(["row_number", "rank", "dense_rank"]), st.integers(1, 3), st.booleans(),
       st.data())
def test_top_n_changelog_equals_the_batch_ranking(retractions, function, high, with_rank, data):
    changes, live = data.draw(changelogs(retractions))
    chunk = data.draw(st.integers(1, 7))
    restore_at = data.draw(st.integers(0, 10))
    op = make(function, high, append_only=not retractions, with_rank=with_rank)
    result = Counter()
    for step, start in enumerate(range(0, len(changes), chunk)):
        part = changes[start:start + chunk]
        batch = pa.record_batch([pa.array([r[0] for r, _ in part], pa.int64()), pa.array([r[1] for r, _ in part], pa.int64()),
                                 pa.array([k for _, k in part], pa.int8())], names=["k", "v", ROW_KIND])
        out = op.process_batch(batch)
        assert_net(out)
        apply(result, out)
        if step == restore_at:
            snap = op.snapshot()
            op = make(function, high, append_only=not retractions, with_rank=with_rank)
            op.restore(TopN.merge_snapshots([snap]))
    assert result == oracle(live, function, high, with_rank)


def test_append_only_input_keeps_only_the_top_rows():
    op = make(high=2)
    op.process_batch(pa.record_batch([pa.array([1] * 10, pa.int64()), pa.array(range(10), pa.int64())],
                                     names=["k", "v"]))
    assert op.state_rows() == 2


def test_rows_older_than_the_retention_are_forgotten(monkeypatch):
    from weir.engine.operators import top_n

    clock = [0]
    monkeypatch.setattr(top_n, "now_ms", lambda: clock[0])
    op = make(high=1)
    op.ttl_ms = 1000
    op.process_batch(pa.record_batch([pa.array([1], pa.int64()), pa.array([9], pa.int64())], names=["k", "v"]))
    clock[0] = 5000
    out = op.process_batch(pa.record_batch([pa.array([2], pa.int64()), pa.array([1], pa.int64())], names=["k", "v"]))
    assert op.ctx.metrics["state_rows_expired"] == 1 and op.state_rows() == 1
    assert [r["k"] for r in out[0].to_pylist()] == [2]


def tied(function="row_number", high=2, ties="earliest_first", order='"v" DESC NULLS LAST') -> TopN:
    """A Top-N of (k, v, tag) where rows tie on v and differ in tag."""
    config = {"columns": ["k", "v", "tag"], "partition_keys": ["k"], "order_by": [order],
              "function": function, "rank_column": "rn", "rank_range": [1, high], "filter": None,
              "projection": [["tag", '"tag"'], ["rn", '"rn"']], "append_only_input": True, "ties": ties}
    out = pa.schema([("tag", pa.string()), ("rn", pa.int64()), (ROW_KIND, pa.int8())])
    op = TopN(config, OperatorContext("top", out, max_parallelism=8))
    op.open()
    return op


def tagged(tags: list[str], values: list[int]) -> pa.RecordBatch:
    return pa.record_batch([pa.array([1] * len(tags), pa.int64()), pa.array(values, pa.int64()), pa.array(tags)],
                           names=["k", "v", "tag"])


def final(result: Counter) -> list[tuple]:
    return sorted(result, key=lambda row: row[-1])


def test_ties_rank_the_earlier_arriving_row_first_across_a_restore():
    """Flink's Top-N (Nexmark q19): of rows tied on ORDER BY, the one that arrived first ranks
    first — not the smaller by other columns — and a restore keeps the arrival order."""
    op = tied(high=3)
    result = Counter()
    apply(result, op.process_batch(tagged(["z", "y"], [5, 5])))
    restored = tied(high=3)
    restored.restore(TopN.merge_snapshots([op.snapshot()]))
    apply(result, restored.process_batch(tagged(["a", "x"], [5, 9])))
    assert final(result) == [("x", 1), ("z", 2), ("y", 3)]


def test_keep_last_deduplication_keeps_the_last_arriving_of_rows_with_the_same_time():
    """Flink's keep-last deduplication (Nexmark q18, ORDER BY time DESC) replaces the kept row by
    a later one with the same time; keep-first keeps the first."""
    last = tied(high=1, ties="latest_first")
    first = tied(high=1, order='"v" ASC NULLS FIRST')
    results = {"last": Counter(), "first": Counter()}
    for batch in (tagged(["b", "z"], [7, 7]), tagged(["a"], [7])):
        apply(results["last"], last.process_batch(batch))
        apply(results["first"], first.process_batch(batch))
    assert final(results["last"]) == [("a", 1)] and final(results["first"]) == [("b", 1)]



def make_unranked(function: str, high: int, keys: list[str], projected: list[str], filter_sql: str | None) -> TopN:
    """An append-only Top-N whose rank is neither projected nor filtered on (``TopN._moves``)."""
    config = {"columns": ["k", "v"], "partition_keys": keys, "order_by": ['"v" DESC NULLS LAST'],
              "function": function, "rank_column": "rn", "rank_range": [1, high], "filter": filter_sql,
              "projection": [[c, f'"{c}"'] for c in projected], "append_only_input": True}
    out = pa.schema([(c, pa.int64()) for c in projected] + [(ROW_KIND, pa.int8())])
    op = TopN(config, OperatorContext("top", out, max_parallelism=8))
    op.open()
    return op


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["row_number", "rank", "dense_rank"]), st.integers(1, 3), st.sampled_from([["k"], []]),
       st.sampled_from([["k", "v"], ["k"], ["v"]]), st.sampled_from([None, '"v" > 1']),
       st.lists(st.tuples(st.sampled_from([1, 2, None]), st.one_of(st.none(), st.integers(0, 5))), min_size=1,
                max_size=30),
       st.integers(1, 7), st.integers(0, 10))
def test_an_unranked_append_only_top_n_changes_only_the_rows_that_move(function, high, keys, projected, filter_sql,
                                                                        rows, chunk, restore_at):
    """Batch by batch, the changes of rows leaving and entering the top alone (``_moves``) are
    those of ranking the touched partitions before and after (the general path), as multisets,
    net, retractions first; and what they leave is the ranking of all rows, ties by arrival."""
    fast = make_unranked(function, high, keys, projected, filter_sql)
    general = make_unranked(function, high, keys, projected, filter_sql)
    assert fast._moves_only
    general._moves_only = False
    result = Counter()
    for step, start in enumerate(range(0, len(rows), chunk)):
        part = rows[start:start + chunk]
        batch = pa.record_batch([pa.array([r[0] for r in part], pa.int64()), pa.array([r[1] for r in part], pa.int64())],
                                names=["k", "v"])
        out, expected = fast.process_batch(batch), general.process_batch(batch)
        assert_net(out)
        assert Counter(tuple(r.values()) for b in out for r in b.to_pylist()) == \
            Counter(tuple(r.values()) for b in expected for r in b.to_pylist())
        apply(result, out)
        if step == restore_at:
            fast_snap, general_snap = fast.snapshot(), general.snapshot()
            fast = make_unranked(function, high, keys, projected, filter_sql)
            fast.restore(TopN.merge_snapshots([fast_snap]))
            general = make_unranked(function, high, keys, projected, filter_sql)
            general._moves_only = False
            general.restore(TopN.merge_snapshots([general_snap]))
    con = duckdb.connect()
    con.register("t", pa.table({"i": pa.array(range(len(rows)), pa.int64()),
                                "k": pa.array([r[0] for r in rows], pa.int64()),
                                "v": pa.array([r[1] for r in rows], pa.int64())}))
    partition = "PARTITION BY k " if keys else ""
    order = "v DESC NULLS LAST" + (", i" if function == "row_number" else "")
    where = f" AND ({filter_sql})" if filter_sql else ""
    ranked = f"SELECT *, {function}() OVER ({partition}ORDER BY {order}) AS rn FROM t"
    assert result == Counter(con.sql(f"SELECT {', '.join(projected)} FROM ({ranked}) WHERE rn <= {high}{where}").fetchall())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]),
                          st.one_of(st.none(), st.integers(0, 3)), st.sampled_from(["x", "y", "", None])),
                min_size=1, max_size=40),
       st.sampled_from([["s"], ["s", "i"], []]),
       st.lists(st.tuples(st.sampled_from(["v", "w", "i"]), st.booleans(), st.booleans()), min_size=1, max_size=3,
                unique_by=lambda t: t[0]),
       st.integers(1, 3), st.sampled_from(["earliest_first", "latest_first"]))
def test_a_batch_is_cut_to_its_own_top_rows_in_arrow_as_duckdb_cuts_it(rows, keys, order, high, ties):
    """``_arrow_top`` keeps exactly the rows DuckDB's ranking of the batch alone keeps
    (``_batch_top``): NULL keys one partition, NULLs first or last in either direction, ties by
    arrival (or the latest first), strings and integers."""
    order_by = [f'"{c}" {"DESC" if desc else "ASC"} NULLS {"FIRST" if first else "LAST"}' for c, desc, first in order]
    config = {"columns": ["s", "i", "v", "w"], "partition_keys": keys, "order_by": order_by,
              "function": "row_number", "rank_column": "rn", "rank_range": [1, high], "filter": None,
              "projection": [["s", '"s"'], ["v", '"v"']], "append_only_input": True, "ties": ties}
    op = TopN(config, OperatorContext("top", pa.schema([("s", pa.string()), ("v", pa.int64()),
                                                          (ROW_KIND, pa.int8())]), max_parallelism=8))
    op.open()
    types = [pa.string(), pa.int64(), pa.int64(), pa.string()]
    columns = [pa.array([r[j] for r in rows], t) for j, t in enumerate(types)]
    n = len(rows)
    delta = pa.record_batch([pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
                             pa.array([0] * n, pa.int64()), *columns, pa.array([1] * n, pa.int8())],
                            names=["key_group", "_rid", "_t", "s", "i", "v", "w", "_sign"])
    op.con.register("top_n_delta", delta)
    expected = op._batch_top(delta).column("_rid").to_pylist()
    cut = op._arrow_top(delta)
    assert (cut.column("_rid").to_pylist() if cut is not None else list(range(len(rows)))) == expected


def test_a_float_order_is_left_to_duckdb():
    """DuckDB sorts NaN above every number and -0.0 with 0.0: no Arrow cut by a float column."""
    config = {"columns": ["k", "f"], "partition_keys": ["k"], "order_by": ['"f" DESC NULLS LAST'],
              "function": "row_number", "rank_column": "rn", "rank_range": [1, 1], "filter": None,
              "projection": [["k", '"k"'], ["f", '"f"']], "append_only_input": True}
    op = TopN(config, OperatorContext("top", pa.schema([("k", pa.int64()), ("f", pa.float64()),
                                                          (ROW_KIND, pa.int8())]), max_parallelism=8))
    op.open()
    batch = pa.record_batch([pa.array([1, 1, 1], pa.int64()), pa.array([float("nan"), 1.0, -0.0])], names=["k", "f"])
    delta = pa.record_batch([pa.array([0] * 3, pa.int32()), pa.array([0, 1, 2], pa.int64()),
                             pa.array([0] * 3, pa.int64()), *batch.columns, pa.array([1] * 3, pa.int8())],
                            names=["key_group", "_rid", "_t", "k", "f", "_sign"])
    assert op._arrow_top(delta) is None
    out = op.process_batch(batch)
    assert [r["f"] != r["f"] for b in out for r in b.to_pylist()] == [True]  # NaN ranks first, DESC
