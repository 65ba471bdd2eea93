"""'python.udf.bad-rows.table' beyond projections and filters: a Python function raising in a table
function (LATERAL TABLE), in an aggregate's argument or FILTER, and in an outer join's condition.

Each is driven with hypothesis-drawn values, batch sizes and (for a join) interleavings of its two
inputs: the good output equals the output over the input without the bad rows (DuckDB or Python as
the oracle), and the bad rows handed to the bad-rows table are exactly the rows (for a join, the
pairs) the function raises on, each once. A job then runs all three at parallelism 2 with a worker
killed and restarted: results and the bad-rows table are exact, each bad row kept once.
"""
from __future__ import annotations

import functools
import json
from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobs import outcome_within
from udf_bad_row_functions import spread, spread_arrow, tenth_of

from weir.engine import udtfs
from weir.engine.changelog import INSERT, ROW_KIND, UPDATE_AFTER
from weir.engine.graph import schema_to_json
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.registry import operator_class
from weir.engine.operators.stream_join import StreamJoin
from weir.engine.operators.table_function import TableFunctionConfig, TableFunctionOperator
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.udfs import install, uninstall
from weir.planner.planner import plan_script
from weir.sql import parse

values = st.lists(st.integers(0, 40), max_size=30)


def bad_rows_of(ctx: OperatorContext) -> list[tuple[str, dict]]:
    """(function, row) of each bad row the operator handed on, in order."""
    rows = [r for b in ctx.late_output for r in b.to_pylist()]
    assert ctx.metrics.get("udf_bad_rows", 0) == len(rows)
    return [(r["weir_function"], json.loads(r["weir_row"])) for r in rows]


def changes(result: Counter, batches: list[pa.RecordBatch]) -> Counter:
    """``result`` with an output changelog applied."""
    for row in (r for b in batches for r in b.to_pylist()):
        kind = row.pop(ROW_KIND, INSERT)
        key = tuple(row.values())
        result[key] += 1 if kind in (INSERT, UPDATE_AFTER) else -1
        assert result[key] >= 0, f"a retraction of {key}, never emitted"
        if not result[key]:
            del result[key]
    return result


# -- table functions ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(vs=values, batch=st.integers(1, 12), outer=st.booleans(), form=st.sampled_from(["general", "arrow"]))
def test_a_table_function_raising_on_a_row_gives_no_output_for_it_and_keeps_it_whatever_the_batches(
        vs, batch, outer, form):
    """spread yields v % 3 rows of v, raising on a v ending in 5 (the arrow form: for its whole
    chunk). Its bad rows give nothing, not even LEFT JOIN's NULLs, and are kept whole, in order."""
    function = spread if form == "general" else spread_arrow
    udtfs.install(function)
    config = TableFunctionConfig(function=function.spec(), arguments=("v",), passed=("k", "v"), columns=("a", "i"),
                                 outer=outer, bad_rows=True)
    ctx = OperatorContext("t.table_function", pa.schema([("k", pa.int64()), ("v", pa.int64()), ("a", pa.int64()),
                                                         ("i", pa.int64())]))
    op = TableFunctionOperator(config, ctx)
    table = pa.table({"k": pa.array(range(len(vs)), pa.int64()), "v": pa.array(vs, pa.int64())})
    out = [row for part in table.to_batches(max_chunksize=batch) for b in op.process_batch(part) for row in b.to_pylist()]
    op.close()
    good = [(k, v) for k, v in enumerate(vs) if v % 10 != 5]
    expected = [{"k": k, "v": v, "a": v, "i": i} for k, v in good for i in range(v % 3)]
    if outer:
        expected = sorted(expected + [{"k": k, "v": v, "a": None, "i": None} for k, v in good if v % 3 == 0],
                          key=lambda r: r["k"])
    assert out == expected
    assert bad_rows_of(ctx) == [(function.name, {"k": k, "v": v}) for k, v in enumerate(vs) if v % 10 == 5]


def test_without_the_setting_a_raising_table_function_still_fails_naming_the_row():
    udtfs.install(spread)
    config = TableFunctionConfig(function=spread.spec(), arguments=("v",), passed=("v",), columns=("a", "i"))
    op = TableFunctionOperator(config, OperatorContext("t", pa.schema([("v", pa.int64()), ("a", pa.int64()),
                                                                       ("i", pa.int64())])))
    with pytest.raises(Exception, match=r"spread failed on the row \(15\)"):
        op.process_batch(pa.record_batch({"v": pa.array([1, 15, 2], pa.int64())}))


# -- aggregate arguments -----------------------------------------------------------------------------

FUNCTIONS = """
CREATE FUNCTION tenth_of AS 'udf_bad_row_functions.tenth_of' LANGUAGE PYTHON;
CREATE FUNCTION spread AS 'udf_bad_row_functions.spread' LANGUAGE PYTHON;
CREATE TABLE a (ts TIMESTAMP(3), k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}/a', 'format' = 'csv');
CREATE TABLE b (ts TIMESTAMP(3), k BIGINT, w BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}/b', 'format' = 'csv');
"""
AGGREGATE = ("CREATE MATERIALIZED VIEW sums AS SELECT k, SUM(tenth_of(v)) AS s, COUNT(*) AS n, "
             "COUNT(*) FILTER (WHERE tenth_of(v + 3) > 1) AS f FROM a GROUP BY k;")


@functools.cache
def planned(sql: str):
    return plan_script(parse(FUNCTIONS.format(data="/nowhere") + sql), db_path="/nowhere/r.duckdb",
                       settings={"python.udf.bad-rows.table": "udf_bad_rows"}).graph


def test_an_aggregate_argument_calling_a_udf_is_computed_by_a_calc_keeping_bad_rows_before_the_aggregate():
    graph = planned(AGGREGATE)
    calc, aggregate = graph.node("sums.udf_arguments"), graph.node("sums.group_aggregate")
    assert calc.config.bad_rows and aggregate.inputs[0].source == calc.id and aggregate.inputs[0].keys == ("k",)
    assert [(c.argument, c.filter) for c in aggregate.config.aggregates] == [
        ('"_udf_arg0"', None), (None, None), (None, '"_udf_arg1"')]
    assert dict(calc.config.projection)["_udf_arg1"] == 'TENTH_OF("v" + 3) > 1'
    assert any(e.source == calc.id for e in graph.node("udf_bad_rows.sink").inputs)
    over = planned("CREATE MATERIALIZED VIEW o AS SELECT k, SUM(tenth_of(v)) OVER (PARTITION BY k ORDER BY ts "
                   "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s FROM a;")
    assert over.node("o.calc").config.bad_rows  # OVER computes its arguments before itself already
    without = plan_script(parse(FUNCTIONS.format(data="/nowhere") + AGGREGATE), db_path="/nowhere/r.duckdb").graph
    assert "sums.udf_arguments" not in {n.id for n in without.nodes}  # no setting: planned as before


@settings(max_examples=20, deadline=None)
@given(vs=values, batch=st.integers(1, 12))
def test_a_row_an_aggregate_argument_raises_on_is_as_if_it_never_arrived(vs, batch):
    """The planned calc and group aggregate driven in turn: the final sums are those of the rows
    without the bad ones (tenth_of raises on v ending in 5, or on v + 3 ending in 5 for FILTER's)."""
    graph = planned(AGGREGATE)
    install(tenth_of, "tenth_of")
    try:
        calc_node, aggregate_node = graph.node("sums.udf_arguments"), graph.node("sums.group_aggregate")
        calc_ctx = OperatorContext(calc_node.id, calc_node.output_schema)
        calc = operator_class("calc")(calc_node.config, calc_ctx)
        aggregate = operator_class("group_aggregate")(aggregate_node.config,
                                                      OperatorContext(aggregate_node.id, aggregate_node.output_schema))
        table = pa.table({"ts": pa.array([0] * len(vs), pa.timestamp("us")),
                          "k": pa.array([v % 3 for v in vs], pa.int64()), "v": pa.array(vs, pa.int64())})
        result = Counter()
        for part in table.to_batches(max_chunksize=batch):
            for b in calc.process_batch(part):
                changes(result, aggregate.process_batch(b))
        changes(result, aggregate.finish())
        calc.close()
        aggregate.close()
    finally:
        uninstall("tenth_of")
    bad = [v for v in vs if v % 10 == 5 or (v + 3) % 10 == 5]
    good = [v for v in vs if v not in bad]
    assert result == Counter({(k, sum(v // 10 for v in good if v % 3 == k), sum(1 for v in good if v % 3 == k),
                               sum(1 for v in good if v % 3 == k and (v + 3) // 10 > 1)): 1
                              for k in {v % 3 for v in good}})
    assert [row["v"] for _, row in bad_rows_of(calc_ctx)] == bad


GROUPING_SETS = ("CREATE MATERIALIZED VIEW g AS SELECT k, window_start, SUM(tenth_of(v)) AS s FROM "
                 "TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                 "GROUP BY window_start, window_end, GROUPING SETS ((k), ());")


def test_with_grouping_sets_the_arguments_are_computed_before_the_copies_so_a_bad_row_is_kept_once():
    graph = planned(GROUPING_SETS)
    calc_node, expand_node = graph.node("g.udf_arguments"), graph.node("g.expand")
    assert expand_node.inputs[0].source == calc_node.id and graph.node("g.window_aggregate").inputs[0].source == \
        expand_node.id
    install(tenth_of, "tenth_of")
    try:
        ctx = OperatorContext(calc_node.id, calc_node.output_schema)
        calc = operator_class("calc")(calc_node.config, ctx)
        expand = operator_class("calc")(expand_node.config, OperatorContext(expand_node.id, expand_node.output_schema))
        vs = [3, 15, 27, 35]
        rows = pa.record_batch({"ts": pa.array([0] * 4, pa.timestamp("us")), "k": pa.array([1, 2, 1, 2], pa.int64()),
                                "v": pa.array(vs, pa.int64())})
        out = [r for b in calc.process_batch(rows) for e in expand.process_batch(b) for r in e.to_pylist()]
    finally:
        uninstall("tenth_of")
    assert sorted((r["v"], r["_e"], r["_udf_arg0"]) for r in out) == [(3, 0, 0), (3, 1, 0), (27, 0, 2), (27, 1, 2)]
    assert [row["v"] for _, row in bad_rows_of(ctx)] == [15, 35]  # once each, not once per grouping set


def test_with_grouping_sets_and_a_where_calling_a_udf_each_bad_row_is_kept_once():
    """WHERE tenth_of(v + 1) >= 0 (raising on v ending in 4) and SUM(tenth_of(v)) (on v ending in 5):
    the WHERE moves from the Expand into the arguments' calc before it, so each bad row is listed
    once, by the function that raised first, not once per grouping set."""
    graph = planned(GROUPING_SETS.replace("GROUP BY", "WHERE tenth_of(v + 1) >= 0 GROUP BY"))
    calc_node, expand_node = graph.node("g.udf_arguments"), graph.node("g.expand")
    assert expand_node.inputs[0].source == calc_node.id and expand_node.config.filter is None
    assert calc_node.config.filter == 'TENTH_OF("v" + 1) >= 0'
    install(tenth_of, "tenth_of")
    try:
        ctx = OperatorContext(calc_node.id, calc_node.output_schema)
        calc = operator_class("calc")(calc_node.config, ctx)
        expand = operator_class("calc")(expand_node.config, OperatorContext(expand_node.id, expand_node.output_schema))
        vs = [3, 14, 15, 27, 35, 44]
        rows = pa.record_batch({"ts": pa.array([0] * 6, pa.timestamp("us")), "k": pa.array([1, 2] * 3, pa.int64()),
                                "v": pa.array(vs, pa.int64())})
        out = [r for b in calc.process_batch(rows) for e in expand.process_batch(b) for r in e.to_pylist()]
    finally:
        uninstall("tenth_of")
    assert sorted((r["v"], r["_e"]) for r in out) == [(3, 0), (3, 1), (27, 0), (27, 1)]
    assert [row["v"] for _, row in bad_rows_of(ctx)] == [14, 15, 35, 44]  # once each


# -- outer join conditions ---------------------------------------------------------------------------

LEFT = pa.schema([("k", pa.int64()), ("v", pa.int64())])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.int64())])
ORACLE = {"left": "LEFT JOIN", "full": "FULL JOIN", "right": "RIGHT JOIN"}


def stream_join(join_type: str) -> StreamJoin:
    names = [*LEFT.names, "k0", "w"]
    schema = pa.schema([*LEFT, RIGHT.field("k").with_name("k0"), RIGHT.field("w")] if join_type not in ("semi", "anti")
                       else list(LEFT)).append(pa.field(ROW_KIND, pa.int8()))
    config = {"join_type": join_type, "residual": 'tenth_of_j("v" + "w") >= 1', "bad_rows": True,
              "left": {"schema": schema_to_json(LEFT), "keys": ["k"], "names": names[:2]},
              "right": {"schema": schema_to_json(RIGHT), "keys": ["k"], "names": names[2:]}}
    op = StreamJoin(config, OperatorContext("j.join", schema))
    op.open()
    return op


def join_oracle(join_type: str, left: list[tuple], right: list[tuple]) -> Counter:
    con = duckdb.connect()
    con.execute("CREATE TABLE l (k BIGINT, v BIGINT); CREATE TABLE r (k0 BIGINT, w BIGINT)")
    for table, rows in (("l", left), ("r", right)):
        if rows:
            con.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
    good = "l.k = r.k0 AND (v + w) % 10 <> 5 AND (v + w) // 10 >= 1"
    if join_type in ("semi", "anti"):
        sql = f"SELECT * FROM l WHERE {'' if join_type == 'semi' else 'NOT '}EXISTS (SELECT 1 FROM r WHERE {good})"
    else:
        sql = f"SELECT l.k, v, k0, w FROM l {ORACLE[join_type]} r ON {good}"
    return Counter(con.execute(sql).fetchall())


@settings(max_examples=25, deadline=None)
@given(left=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30)), max_size=12),
       right=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30)), max_size=12),
       order=st.lists(st.tuples(st.booleans(), st.integers(1, 5)), max_size=12),
       join_type=st.sampled_from(["left", "right", "full", "semi", "anti"]))
def test_a_pair_an_outer_join_condition_raises_on_does_not_match_and_is_kept_once(left, right, order, join_type):
    """Any interleaving and batch sizes of the two inputs: the result is the join whose condition
    is false on the pairs tenth_of raises on ((v + w) ending in 5), and those pairs, each once."""
    install(tenth_of, "tenth_of_j")
    try:
        op = stream_join(join_type)
        result, pending = Counter(), {0: list(left), 1: list(right)}
        for side, size in [*order, (False, len(left)), (True, len(right))]:
            rows, pending[int(side)] = pending[int(side)][:size], pending[int(side)][size:]
            if rows:
                schema = RIGHT if side else LEFT
                part = pa.record_batch([pa.array([r[i] for r in rows], pa.int64()) for i in range(2)], schema=schema)
                changes(result, op.process_batch(part, int(side)))
        op.close()
    finally:
        uninstall("tenth_of_j")
    assert result == join_oracle(join_type, left, right)
    bad = Counter((k, v, k0, w) for k, v in left for k0, w in right if k == k0 and (v + w) % 10 == 5)
    kept = bad_rows_of(op.ctx)
    assert {f for f, _ in kept} <= {"tenth_of_j"}
    assert Counter(tuple(r.values()) for _, r in kept) == bad


# -- a job: all three, checkpointed, a worker killed -------------------------------------------------

JOB = """
CREATE TABLE spreads (k BIGINT, v BIGINT, i BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}/spreads', 'format' = 'csv');
INSERT INTO spreads SELECT k, v, i FROM a, LATERAL TABLE(spread(v)) AS T(x, i);
CREATE TABLE tenths (k BIGINT, window_start TIMESTAMP(3), s BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}/tenths', 'format' = 'csv');
INSERT INTO tenths SELECT k, window_start, SUM(tenth_of(v + 1)) FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW joined AS SELECT a.k, v, w FROM a LEFT JOIN b ON a.k = b.k AND tenth_of(v + w + 2) >= 0;
"""
ROWS = 30
RESTARTS = {"parallelism.default": "2", "weir.source.batch-size": "3", "weir.checkpointing.interval-batches": "1",
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
            "restart-strategy.fixed-delay.delay": "0s"}


def run_killed(tmp_path, monkeypatch, job: str):
    """``job`` (after ``FUNCTIONS`` over ``tmp_path``'s files) with the bad-rows setting at parallelism 2,
    checkpointed after every batch, worker 1 killed after its 4th source batch and restarted once:
    the path of its results database."""
    monkeypatch.setenv("WEIR_FAULT", "batch:4@1")  # worker 1 dies after its 4th source batch
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    db = tmp_path / "r.duckdb"
    graph = plan_script(parse(FUNCTIONS.format(data=tmp_path) + job), db_path=str(db),
                        settings={"python.udf.bad-rows.table": "udf_bad_rows", **RESTARTS}).graph
    warnings: list[str] = []
    outcome = outcome_within(240, lambda: run_job(graph, JobOptions(state_dir=tmp_path / "state",
                                                                    warn=warnings.append)), "the job hung")
    assert not isinstance(outcome, BaseException), outcome
    assert (tmp_path / "fired").exists() and len(warnings) == 1 and "restarting" in warnings[0]
    return db


def test_bad_rows_of_table_functions_aggregates_and_joins_are_kept_exactly_once_after_a_restart(tmp_path, monkeypatch):
    for name, column in (("a", "v"), ("b", "w")):
        (tmp_path / name).mkdir()
        for part in range(2):  # two splits: at parallelism 2 each worker reads one
            rows = "".join(f"2024-01-01 00:00:{i:02d},{i % 3},{i * 7 % 40 if name == 'a' else i}\n"
                           for i in range(part, ROWS, 2))
            (tmp_path / name / f"part-{part}.csv").write_text(f"ts,k,{column}\n" + rows)
    db = run_killed(tmp_path, monkeypatch, JOB.format(out=tmp_path / "out"))
    oracle = duckdb.connect()
    oracle.execute(f"CREATE VIEW a AS SELECT * FROM read_csv('{tmp_path}/a/*.csv', header = true); "
                   f"CREATE VIEW b AS SELECT * FROM read_csv('{tmp_path}/b/*.csv', header = true)")

    def out(name: str) -> list[tuple]:
        return oracle.sql(f"SELECT * FROM read_csv('{tmp_path}/out/{name}/*.csv') ORDER BY ALL").fetchall()

    assert out("spreads") == oracle.sql("SELECT k, v, i FROM a, range(v % 3) r(i) WHERE v % 10 <> 5 "
                                        "ORDER BY ALL").fetchall()
    assert out("tenths") == oracle.sql("SELECT k, time_bucket(INTERVAL '10 seconds', ts), sum((v + 1) // 10) FROM a "
                                       "WHERE (v + 1) % 10 <> 5 GROUP BY ALL ORDER BY ALL").fetchall()
    with duckdb.connect(str(db), read_only=True) as con:
        joined = con.sql("SELECT * FROM joined ORDER BY ALL").fetchall()
        kept = con.sql("SELECT weir_function, weir_row FROM udf_bad_rows").fetchall()
    assert joined == oracle.sql("SELECT a.k, v, w FROM a LEFT JOIN b ON a.k = b.k AND (v + w + 2) % 10 <> 5 "
                                "ORDER BY ALL").fetchall()
    expected = Counter([("spread", v) for v, in oracle.sql("SELECT v FROM a WHERE v % 10 = 5").fetchall()]
                       + [("tenth_of", v) for v, in oracle.sql("SELECT v FROM a WHERE (v + 1) % 10 = 5").fetchall()]
                       + [("tenth_of", (v, w)) for v, w in oracle.sql(
                           "SELECT v, w FROM a JOIN b ON a.k = b.k WHERE (v + w + 2) % 10 = 5").fetchall()])
    assert {f for f, r in expected if isinstance(r, int)} == {"spread", "tenth_of"} and \
        any(isinstance(r, tuple) for _, r in expected)  # each place has bad rows
    listed = Counter((f, (json.loads(r)["v"], json.loads(r)["w"]) if "w" in json.loads(r) else json.loads(r)["v"])
                     for f, r in kept)
    assert listed == expected  # each once: none lost, none twice


@settings(max_examples=15, deadline=None)
@given(stream=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30)), max_size=15),
       dims=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30)), max_size=6), batch=st.integers(1, 8))
def test_a_pair_a_left_lookup_join_condition_raises_on_does_not_match_and_is_kept(tmp_path_factory, stream, dims,
                                                                                 batch):
    """LEFT JOIN dims FOR SYSTEM_TIME AS OF ... ON k = id AND tenth_of(v + n) >= 0: a stream row whose
    every pair raises or fails is padded with NULLs; the raising pairs are the bad rows, in order."""
    path = tmp_path_factory.mktemp("dims") / "dims.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE dims (id BIGINT, n BIGINT)")
        if dims:
            con.executemany("INSERT INTO dims VALUES (?, ?)", dims)
    schema = pa.schema([("id", pa.int64()), ("n", pa.int64())])
    config = {"join_type": "left", "keys": ["k"], "names": ["k", "v"], "residual": 'tenth_of_l("v" + "n") >= 0',
              "bad_rows": True,
              "lookup": {"table": "dims", "options": {"connector": "duckdb", "path": str(path)},
                         "schema": schema_to_json(schema), "keys": ["id"], "names": ["id", "n"]}}
    install(tenth_of, "tenth_of_l")
    try:
        op = operator_class("lookup_join")(config, OperatorContext("lj", pa.schema([*LEFT, *schema])))
        table = pa.table({"k": pa.array([k for k, _ in stream], pa.int64()), "v": pa.array([v for _, v in stream],
                                                                                            pa.int64())})
        out = [tuple(r.values()) for part in table.to_batches(max_chunksize=batch) for b in op.process_batch(part)
               for r in b.to_pylist()]
        op.close()
    finally:
        uninstall("tenth_of_l")
    expected = []
    for k, v in stream:
        matches = [(k, v, i, n) for i, n in dims if i == k and (v + n) % 10 != 5]
        expected.extend(matches or [(k, v, None, None)])
    assert Counter(out) == Counter(expected) and [r[:2] for r in out] == [r[:2] for r in expected]
    assert Counter(tuple(r.values()) for _, r in bad_rows_of(op.ctx)) == Counter(
        (k, v, i, n) for k, v in stream for i, n in dims if i == k and (v + n) % 10 == 5)
