"""'python.udf.bad-rows.table' over aggregate results: ``f(SUM(v))`` in the SELECT list and in HAVING,
of an updating GROUP BY and of a TUMBLE window aggregate.

The planner moves such a projection and HAVING into a calc after the aggregate
(``planner.udfs.project_after_aggregates``): the bad row is the aggregate's result row (its keys,
window bounds and aggregate values). The planned operators are driven in turn with hypothesis-drawn
values and batch sizes: the result holds exactly the groups whose result does not raise (no
retraction of a row never emitted), and the raising results are the ones listed. Without the split
the aggregate itself evaluates the UDF and the job fails.
"""
from __future__ import annotations

import functools
from collections import Counter
from datetime import datetime

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_udf_bad_rows_places import FUNCTIONS, bad_rows_of, changes
from udf_bad_row_functions import tenth_of

from weir.engine.changelog import INSERT, ROW_KIND, UPDATE_AFTER
from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.registry import operator_class
from weir.engine.udfs import install, uninstall
from weir.planner.planner import plan_script
from weir.sql import parse

GROUPED = {
    "select": "CREATE MATERIALIZED VIEW s AS SELECT k, tenth_of(SUM(v)) AS t FROM a GROUP BY k;",
    "having": "CREATE MATERIALIZED VIEW s AS SELECT k, SUM(v) AS t FROM a GROUP BY k HAVING tenth_of(SUM(v)) > 0;",
}
WINDOWED = ("CREATE MATERIALIZED VIEW s AS SELECT k, window_start, tenth_of(SUM(v)) AS t, COUNT(*) AS n "
            "FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end "
            "HAVING tenth_of(SUM(v) + 2) >= 0;")
SECOND = 1_000_000


@functools.cache
def planned(sql: str, bad_rows: bool = True):
    return plan_script(parse(FUNCTIONS.format(data="/nowhere") + sql), db_path="/nowhere/r.duckdb",
                       settings={"python.udf.bad-rows.table": "udf_bad_rows"} if bad_rows else {}).graph


def run(graph, names: list[str], batches: list[pa.RecordBatch], watermark: int | None = None):
    """The operators ``names`` of ``graph`` driven in a chain over ``batches`` (then ``watermark``
    and the end): the net result (a Counter of rows) and each operator's context."""
    install(tenth_of, "tenth_of")
    try:
        nodes = [graph.node(n) for n in names]
        ctxs = [OperatorContext(n.id, n.output_schema) for n in nodes]
        ops = [operator_class(n.kind)(n.config, ctx) for n, ctx in zip(nodes, ctxs)]

        def through(batches, start=0):
            for op in ops[start:]:
                batches = [b for batch in batches for b in op.process_batch(batch)]
            return batches

        result = Counter()
        for batch in batches:
            changes(result, through([batch]))
        for i, op in enumerate(ops):
            tail = [*(op.process_watermark(watermark) if watermark is not None else []), *op.finish()]
            changes(result, through(list(tail), i + 1))
        for op in ops:
            op.close()
    finally:
        uninstall("tenth_of")
    return result, ctxs


def test_a_udf_over_aggregate_results_is_computed_by_a_calc_after_the_aggregate():
    graph = planned(GROUPED["having"])
    aggregate, calc = graph.node("s.group_aggregate"), graph.node("s.udf_results")
    assert calc.inputs[0].source == aggregate.id and calc.config.bad_rows
    assert calc.config.filter == 'TENTH_OF("_agg0") > 0' and aggregate.config.having is None
    assert graph.node("s.sink").inputs[0].source == calc.id
    assert calc.output_schema.names == ["k", "t", ROW_KIND]
    assert any(e.source == calc.id for e in graph.node("udf_bad_rows.sink").inputs)
    assert "s.udf_results" not in {n.id for n in planned(GROUPED["having"], bad_rows=False).nodes}


def test_without_the_split_a_udf_over_an_aggregate_result_fails_the_job():
    graph = planned(GROUPED["select"], bad_rows=False)
    batch = pa.record_batch({"ts": pa.array([0], pa.timestamp("us")), "k": pa.array([1], pa.int64()),
                             "v": pa.array([15], pa.int64())})
    with pytest.raises(EngineError, match="tenth_of"):
        run(graph, ["s.group_aggregate"], [batch])


@settings(max_examples=25, deadline=None)
@given(vs=st.lists(st.integers(0, 12), max_size=25), batch=st.integers(1, 8), form=st.sampled_from(sorted(GROUPED)))
def test_an_updating_group_keeps_exactly_the_results_that_do_not_raise(vs, batch, form):
    """tenth_of raises on a sum ending in 5. Whatever the batches, the view applied from the
    changelog is the groups whose final sum does not raise; no -U of a row never emitted reaches
    it; every listed bad row is an added (+I/+U) result whose sum raises, and a group whose final
    sum raises has that result listed last."""
    table = pa.table({"ts": pa.array([0] * len(vs), pa.timestamp("us")), "k": pa.array([v % 2 for v in vs], pa.int64()),
                      "v": pa.array(vs, pa.int64())})
    graph = planned(GROUPED[form])
    result, (_, ctx) = run(graph, ["s.group_aggregate", "s.udf_results"], table.to_batches(max_chunksize=batch))
    sums = {k: sum(v for v in vs if v % 2 == k) for k in {v % 2 for v in vs}}
    if form == "select":
        expected = {(k, s // 10) for k, s in sums.items() if s % 10 != 5}
    else:
        expected = {(k, s) for k, s in sums.items() if s % 10 != 5 and s // 10 > 0}
    assert result == Counter(expected)
    listed = [row for _, row in bad_rows_of(ctx)]
    assert all(r["_agg0"] % 10 == 5 and r[ROW_KIND] in (INSERT, UPDATE_AFTER) for r in listed)
    for k, s in sums.items():
        if s % 10 == 5:
            assert [r["_agg0"] for r in listed if r["k"] == k][-1] == s


@settings(max_examples=20, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 1), st.integers(0, 12)), max_size=25),
       batch=st.integers(1, 8))
def test_a_window_result_that_raises_is_kept_once_and_the_others_are_exact(rows, batch):
    """TUMBLE of 10 s: a window whose SUM (SELECT list) or SUM + 2 (HAVING) ends in 5 raises; it is
    left out and listed once, whatever the batches; every other window is exact."""
    rows = sorted(rows)
    table = pa.table({"ts": pa.array([t * SECOND for t, _, _ in rows], pa.timestamp("us")),
                      "k": pa.array([k for _, k, _ in rows], pa.int64()), "v": pa.array([v for *_, v in rows], pa.int64())})
    graph = planned(WINDOWED)
    result, (_, ctx) = run(graph, ["s.window_aggregate", "s.udf_results"], table.to_batches(max_chunksize=batch),
                           watermark=60 * SECOND)
    windows = Counter()
    counts = Counter()
    for t, k, v in rows:
        windows[(k, t // 10)] += v
        counts[(k, t // 10)] += 1
    bad = {w for w, s in windows.items() if s % 10 == 5 or (s + 2) % 10 == 5}
    assert {(k, (w - datetime(1970, 1, 1)).total_seconds(), t, n) for k, w, t, n in result} == {
        (k, 10 * start, s // 10, counts[(k, start)]) for (k, start), s in windows.items() if (k, start) not in bad}
    listed = sorted((r["k"], r["window_start"], r["_agg0"]) for _, r in bad_rows_of(ctx))
    assert listed == sorted((k, f"1970-01-01 00:00:{10 * start:02d}", windows[(k, start)]) for k, start in bad)
