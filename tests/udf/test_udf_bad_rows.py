"""'python.udf.bad-rows.table': the rows a Python UDF raises on are left out of the result and kept,
with the function, its error, its arguments and the row, in a table of the job's database —
exactly once, whatever the batch size or parallelism, and after a worker is killed and the job
restarts. Without the setting such a row fails the job, naming the function and the row.
The oracle is DuckDB over the same csv files, without the rows that raise."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobs import outcome_within
from udf_bad_row_functions import small, tenth_of

import weir
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.calc import Calc, CalcConfig, Expand
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.udfs import UdfError, install, uninstall
from weir.planner.planner import plan_script
from weir.shell import render
from weir.sql import parse

FUNCTIONS = """
CREATE FUNCTION tenth_of AS 'udf_bad_row_functions.tenth_of' LANGUAGE PYTHON;
CREATE FUNCTION small AS 'udf_bad_row_functions.small' LANGUAGE PYTHON;
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
"""
#: tenth_of raises on a v ending in 5; small (over arrays) on a chunk holding a multiple of 7.
VIEW = "CREATE MATERIALIZED VIEW tenths AS SELECT k, v, tenth_of(v) AS tv FROM events WHERE small(v);"
ROWS = 40
BAD = sorted({v for v in range(1, ROWS + 1) if v % 7 == 0 or v % 10 == 5})


def write_events(folder: Path) -> Path:
    folder.mkdir()
    for part in range(2):  # two splits: at parallelism 2 each worker reads one
        rows = "".join(f"2024-01-01 00:00:{i:02d},{'ab'[i % 2]},{i + 1}\n" for i in range(part, ROWS, 2))
        (folder / f"part-{part}.csv").write_text("ts,k,v\n" + rows)
    return folder


def bad_rows(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql("SELECT weir_function, weir_error, weir_arguments, weir_row FROM udf_bad_rows "
                       "ORDER BY (weir_row::JSON->>'v')::BIGINT").fetchall()


def expected_bad_rows(data: Path) -> list[tuple]:
    """What the table holds: small's error for a multiple of 7 (the filter runs first), else tenth_of's."""
    rows = duckdb.sql(f"SELECT ts, k, v FROM read_csv('{data}/*.csv', header = true) WHERE v % 7 = 0 OR v % 10 = 5"
                      " ORDER BY v").fetchall()
    return [("small", "ZeroDivisionError: a multiple of 7 among the values", f"[{v}]") if v % 7 == 0 else
            ("tenth_of", f"ValueError: no tenth of {v}", f"[{v}]") for _, _, v in rows]


@pytest.mark.parametrize("parallelism,batch_size", [("1", "1"), ("1", "7"), ("2", "8")])
def test_rows_a_udf_raises_on_go_to_the_bad_rows_table_and_the_job_goes_on(tmp_path, parallelism, batch_size):
    data = write_events(tmp_path / "events")
    settings = {"python.udf.bad-rows.table": "udf_bad_rows", "parallelism.default": parallelism,
                "weir.source.batch-size": batch_size}
    with weir.connect(db=str(tmp_path / "r.duckdb"), settings=settings, state_dir=tmp_path / "jobs") as con:
        con.execute(FUNCTIONS.format(data=data))
        job = con.submit(VIEW)
        assert job.wait(120) == "FINISHED"
        assert job.result.counter("udf_bad_rows") == job.metrics().udf_bad_rows == len(BAD)
        assert f"rows a Python UDF raised on (kept in the bad-rows table): {len(BAD)}" in \
            render.summary(job.result, db_path=None, views=[])
        assert con.sql("SELECT k, v, tv FROM tenths ORDER BY v").fetchall() == duckdb.sql(
            f"SELECT k, v, v // 10 FROM read_csv('{data}/*.csv', header = true) "
            "WHERE NOT (v % 7 = 0 OR v % 10 = 5) ORDER BY v").fetchall()
        kept = bad_rows(tmp_path / "r.duckdb")
    assert [row[:3] for row in kept] == expected_bad_rows(data)
    assert [json.loads(row[3])["v"] for row in kept] == BAD
    assert json.loads(kept[0][3]) == {"ts": "2024-01-01 00:00:04", "k": "a", "v": 5}  # the whole input row


def test_without_the_setting_a_raising_udf_fails_the_job_naming_the_function_and_row(tmp_path):
    data = write_events(tmp_path / "events")
    with weir.connect(db=str(tmp_path / "r.duckdb"), state_dir=tmp_path / "jobs") as con:
        con.execute(FUNCTIONS.format(data=data))
        job = con.submit(VIEW.replace("WHERE small(v)", ""))
        with pytest.raises(UdfError) as failed:
            job.wait(120)
    assert "tenth_of failed on the row (5)" in failed.value.message and "ValueError: no tenth of 5" in failed.value.message
    assert "python.udf.bad-rows.table" in failed.value.hint


WINDOWED = """
CREATE TABLE tenth_counts (tv BIGINT, window_start TIMESTAMP(3), cnt BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO tenth_counts SELECT tenth_of(v), window_start, COUNT(*)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE small(v)
GROUP BY tenth_of(v), window_start, window_end;
"""
RESTARTS = {"python.udf.bad-rows.table": "udf_bad_rows", "parallelism.default": "2", "weir.source.batch-size": "3",
            "weir.checkpointing.interval-batches": "1", "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1", "restart-strategy.fixed-delay.delay": "0s"}


def test_bad_rows_are_kept_exactly_once_after_a_killed_worker_restarts(tmp_path, monkeypatch):
    data = write_events(tmp_path / "events")
    monkeypatch.setenv("WEIR_FAULT", "batch:4@1")  # worker 1 dies after its 4th source batch
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    sql = FUNCTIONS.format(data=data) + WINDOWED.format(out=tmp_path / "out")
    graph = plan_script(parse(sql), db_path=str(tmp_path / "r.duckdb"), settings=RESTARTS).graph
    warnings: list[str] = []
    outcome = outcome_within(180, lambda: run_job(graph, JobOptions(state_dir=tmp_path / "state", warn=warnings.append)),
                             "the job hung")
    assert not isinstance(outcome, BaseException), outcome
    assert (tmp_path / "fired").exists(), "the fault never fired"
    assert len(warnings) == 1 and "restarting" in warnings[0]
    windows = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path / 'out'}/*.csv') ORDER BY ALL").fetchall()
    assert windows == duckdb.sql(
        f"SELECT v // 10 AS tv, time_bucket(INTERVAL '10 seconds', ts) AS window_start, COUNT(*) AS cnt "
        f"FROM read_csv('{data}/*.csv', header = true) WHERE NOT (v % 7 = 0 OR v % 10 = 5) "
        "GROUP BY ALL ORDER BY ALL").fetchall()
    kept = bad_rows(tmp_path / "r.duckdb")
    assert [row[:3] for row in kept] == expected_bad_rows(data)  # each once: none lost, none twice


def test_a_calc_evaluates_a_batch_once_and_splits_it_only_when_a_udf_raised():
    """The operator itself, driven with batches: one DuckDB evaluation per batch while no row
    raises; a batch with one bad row is split in halves down to it (about 2·log2(n) evaluations)."""
    install(tenth_of, "tenth_of_unit")
    try:
        ctx = OperatorContext("c", pa.schema([("v", pa.int64()), ("tv", pa.int64())]))
        calc = Calc(CalcConfig((("v", '"v"'), ("tv", 'tenth_of_unit("v")')), bad_rows=True), ctx)
        runs = []
        run = calc._run
        calc._run = lambda query, rows: runs.append(rows.num_rows) or run(query, rows)
        good = calc.process_batch(pa.record_batch({"v": [10, 11, 12, 13]}))
        assert runs == [4] and pa.Table.from_batches(good).to_pydict() == {"v": [10, 11, 12, 13], "tv": [1, 1, 1, 1]}
        runs.clear()
        out = calc.process_batch(pa.record_batch({"v": list(range(10, 25))}))  # 15 raises
        assert pa.Table.from_batches(out).column("v").to_pylist() == [v for v in range(10, 25) if v != 15]
        assert runs[0] == 15 and len(runs) <= 2 * 4 + 1  # 15 rows: log2 < 4 levels of halves
        assert [b.column(1)[0].as_py() for b in ctx.late_output] == ["tenth_of_unit"] and ctx.metrics["udf_bad_rows"] == 1
        calc.close()
    finally:
        uninstall("tenth_of_unit")


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.integers(0, 60), max_size=40), batch=st.integers(1, 16))
def test_which_rows_are_bad_does_not_depend_on_the_batch_size(values, batch):
    """Whatever the batches, a calc with a UDF in its projection and one in its filter keeps every
    row that raises nowhere, in order, and hands on exactly the others, in order, each with the
    function that raised first (the filter's, evaluated before the projection)."""
    install(tenth_of, "tenth_of_p")
    install(small, "small_p")
    try:
        ctx = OperatorContext("c", pa.schema([("v", pa.int64()), ("tv", pa.int64())]))
        calc = Calc(CalcConfig((("v", '"v"'), ("tv", 'tenth_of_p("v")')), filter='small_p("v")', bad_rows=True), ctx)
        table = pa.table({"v": pa.array(values, pa.int64())})
        out = [b for part in table.to_batches(max_chunksize=batch) for b in calc.process_batch(part)]
        calc.close()
    finally:
        uninstall("tenth_of_p")
        uninstall("small_p")
    kept = pa.Table.from_batches(out, ctx.output_schema).to_pydict() if out else {"v": [], "tv": []}
    assert kept == {"v": [v for v in values if v % 7 and v % 10 != 5],
                    "tv": [v // 10 for v in values if v % 7 and v % 10 != 5]}
    assert [(b.column(1)[0].as_py(), json.loads(b.column(4)[0].as_py())["v"]) for b in ctx.late_output] == [
        ("small_p" if v % 7 == 0 else "tenth_of_p", v) for v in values if v % 7 == 0 or v % 10 == 5]



@pytest.mark.parametrize("bad", [0, 1, 10, 66])
def test_a_batch_with_k_raising_rows_costs_two_statements_whatever_k(monkeypatch, bad):
    """The batch that raised is evaluated once more with its UDF calls caught row by row
    (``engine.udfs.catching``), not split in halves per bad row: 2 DuckDB statements over it
    for any number of raising rows (their JSON takes one more, on the BadRows' own connection).
    A batch with no raising row takes 2 too: its call is split out of the statement
    (``engine.operators.python_calls``), after one that keeps "v" >= 0 and computes "v" + 0, before
    the projection; with a raising row, the first of these and the caught one."""
    import weir.engine.operators.calc as calc_module
    statements = []
    query = calc_module.query_arrow
    monkeypatch.setattr(calc_module, "query_arrow", lambda con, sql, op: statements.append(sql) or query(con, sql, op))
    install(tenth_of, "tenth_of_k")
    try:
        ctx = OperatorContext("c", pa.schema([("v", pa.int64()), ("tv", pa.int64())]))
        calc = Calc(CalcConfig((("v", '"v"'), ("tv", 'tenth_of_k("v" + 0)')), filter='"v" >= 0', bad_rows=True), ctx)
        raising = {i * 73 % 5000 for i in range(bad)}  # spread over the batch's chunks
        values = [10 * i + 5 if i in raising else 10 * i for i in range(5000)]
        out = calc.process_batch(pa.record_batch({"v": pa.array(values, pa.int64())}))
        calc.close()
    finally:
        uninstall("tenth_of_k")
    assert len(statements) == 2
    assert ("__weir_catch_" in statements[-1]) == (bad > 0)
    assert pa.Table.from_batches(out).to_pydict() == {"v": [v for v in values if v % 10 != 5],
                                                      "tv": [v // 10 for v in values if v % 10 != 5]}
    assert ctx.metrics.get("udf_bad_rows", 0) == bad == len(ctx.late_output)
    assert [json.loads(b.column(3)[0].as_py()) for b in ctx.late_output] == [[10 * i + 5] for i in sorted(raising)]


NESTED = (("v", '"v"'), ("tv", 'tenth_of_n(CASE WHEN small_n("v" + 1) THEN "v" ELSE "v" + 1 END)'),
          ("s", "length('tenth_of_n(' || \"v\")")), 'small_n("v") AND tenth_of_n("v") >= 0'


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.integers(0, 60), max_size=40), batch=st.integers(1, 16))
def test_catching_the_calls_keeps_the_rows_and_errors_that_splitting_in_halves_keeps(values, batch):
    """The oracle is today's way, the batch split in halves down to the raising rows (``catch`` failing):
    with UDFs nested, in a CASE, in the filter's AND, and a UDF's name inside a string literal,
    both keep the same rows, in order, and the same bad rows (function, error, arguments, row), in order."""
    install(tenth_of, "tenth_of_n")
    install(small, "small_n")
    outputs = []
    try:
        for halves in (False, True):
            projection, condition = NESTED
            ctx = OperatorContext("c", pa.schema([("v", pa.int64()), ("tv", pa.int64()), ("s", pa.int64())]))
            calc = Calc(CalcConfig(projection, filter=condition, bad_rows=True), ctx)
            if halves:
                calc._catch = lambda query, rows: (_ for _ in ()).throw(UdfError("catching failed"))
            else:
                calc._bad_rows._split = lambda run, rows: pytest.fail("split in halves: catching failed")
            table = pa.table({"v": pa.array(values, pa.int64())})
            out = [b for part in table.to_batches(max_chunksize=batch) for b in calc.process_batch(part)]
            calc.close()
            outputs.append((pa.Table.from_batches(out, ctx.output_schema).to_pydict(),
                            [b.to_pylist()[0] for b in ctx.late_output], ctx.metrics.get("udf_bad_rows", 0)))
    finally:
        uninstall("tenth_of_n")
        uninstall("small_n")
    assert outputs[0] == outputs[1]
    assert outputs[0][2] == len(outputs[0][1]) == sum(1 for v in values if v % 7 == 0 or v % 10 == 5 or
                                                       (v + 1) % 7 == 0)


@weir.udf(result_type="BIGINT")
def text_on_three(v):
    if v % 10 == 5:
        raise ValueError("five")
    return "three" if v == 3 else v


def test_a_result_of_the_wrong_type_still_fails_the_job_with_bad_rows_kept():
    """weir's own complaint is no bad row: catching the calls fails on it too, and the halves say so."""
    install(text_on_three, "text_on_three")
    try:
        ctx = OperatorContext("c", pa.schema([("v", pa.int64())]))
        calc = Calc(CalcConfig((("v", 'text_on_three("v")'),), bad_rows=True), ctx)
        with pytest.raises(UdfError, match="text_on_three returned 'three', not a BIGINT"):
            calc.process_batch(pa.record_batch({"v": pa.array([1, 5, 3, 4], pa.int64())}))
        calc.close()
    finally:
        uninstall("text_on_three")


@settings(max_examples=15, deadline=None)
@given(values=st.lists(st.integers(0, 60), max_size=30), batch=st.integers(1, 16))
def test_with_expand_a_row_is_bad_when_any_of_its_copies_raises_as_splitting_in_halves_says(values, batch):
    """GROUPING SETS' Expand: each row read twice (e = 0, 1), the UDF's argument depending on e;
    catching and the halves agree on the rows kept and the bad rows."""
    install(tenth_of, "tenth_of_e")
    outputs = []
    try:
        for halves in (False, True):
            ctx = OperatorContext("c", pa.schema([("v", pa.int64()), ("e", pa.int64()), ("tv", pa.int64())]))
            calc = Calc(CalcConfig((("v", '"v"'), ("e", '"e"'), ("tv", 'tenth_of_e("v" + "e" * 5)')),
                                   expand=Expand("e", 2), bad_rows=True), ctx)
            if halves:
                calc._catch = lambda query, rows: (_ for _ in ()).throw(UdfError("catching failed"))
            else:
                calc._bad_rows._split = lambda run, rows: pytest.fail("split in halves: catching failed")
            table = pa.table({"v": pa.array(values, pa.int64())})
            out = [b for part in table.to_batches(max_chunksize=batch) for b in calc.process_batch(part)]
            calc.close()
            kept = pa.Table.from_batches(out, ctx.output_schema).sort_by([("v", "ascending"), ("e", "ascending")])
            outputs.append((kept.to_pydict(), [b.to_pylist()[0] for b in ctx.late_output]))
    finally:
        uninstall("tenth_of_e")
    assert outputs[0] == outputs[1]
    assert sorted(outputs[0][0]["v"]) == sorted([v for v in values if v % 5] * 2)
    assert [json.loads(row["weir_row"])["v"] for row in outputs[0][1]] == [v for v in values if v % 5 == 0]


def test_catching_finds_the_calls_in_duckdbs_parse_tree_quoted_in_a_lambda_or_not_a_call_at_all():
    """A quoted function name, a call inside a lambda, the name in a string literal and as a column:
    DuckDB's own parse tree says which are calls, so one caught statement finds every raising row
    (the batch is never split in halves)."""
    install(tenth_of, "tenth_of_s")
    try:
        ctx = OperatorContext("c", pa.schema([("tenth_of_s", pa.int64()), ("tv", pa.int64()), ("lv", pa.int64()),
                                              ("s", pa.string())]))
        calc = Calc(CalcConfig((("tenth_of_s", '"tenth_of_s"'), ("tv", '"tenth_of_s"("tenth_of_s")'),
                                ("lv", 'list_transform(["tenth_of_s" + 1], lambda x: tenth_of_s(x))[1]'),
                                ("s", "'tenth_of_s(' || \"tenth_of_s\"")), bad_rows=True), ctx)
        calc._bad_rows._split = lambda run, rows: pytest.fail("split in halves: catching failed")
        values = list(range(0, 30))
        out = calc.process_batch(pa.record_batch({"tenth_of_s": pa.array(values, pa.int64())}))
        calc.close()
    finally:
        uninstall("tenth_of_s")
    good = [v for v in values if v % 10 != 5 and (v + 1) % 10 != 5]
    assert pa.Table.from_batches(out).to_pydict() == {"tenth_of_s": good, "tv": [v // 10 for v in good],
                                                      "lv": [(v + 1) // 10 for v in good],
                                                      "s": [f"tenth_of_s({v}" for v in good]}
    assert [json.loads(b.column(3)[0].as_py()) for b in ctx.late_output] == [
        [v] if v % 10 == 5 else [v + 1] for v in values if v not in good]
