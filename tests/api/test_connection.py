"""weir.connect: execute, sql, errors, and Python tables (register, register_sink)."""
from __future__ import annotations

import sys

import pyarrow as pa
import pytest

import weir
from weir.engine.errors import EngineError
from weir.engine.udfs import UdfError
from weir.shell.database import DatabaseError
from weir.shell.runner import Runner
from weir.sql.errors import WeirSqlError

from api_data import WINDOWS, bids_table, oracle


def test_execute_answers_each_kind_of_statement(con):
    con.register("bids", bids_table(), watermark="date_time - INTERVAL '2' SECOND")
    assert con.execute("SET 'pipeline.name' = 'p'") == "set 'pipeline.name' = 'p'"
    tables = con.execute("SHOW TABLES")
    assert isinstance(tables, weir.shell.api.Result)
    assert tables.fetchall() == [("bids", "python")]
    assert con.sql("DESCRIBE bids").fetchall() == [
        ("auction", "BIGINT", "TRUE", "", ""), ("price", "BIGINT", "TRUE", "", ""),
        ("date_time", "TIMESTAMP(3) *ROWTIME*", "TRUE", "", "date_time - INTERVAL '2' SECOND")]
    assert "window_aggregate" in con.execute(f"EXPLAIN {WINDOWS}")

    job = con.execute(WINDOWS)
    assert isinstance(job, weir.JobHandle)
    assert job.wait(60) == "FINISHED"
    result = con.sql("SELECT * FROM per_auction ORDER BY window_start, auction")
    assert result.columns == ["auction", "window_start", "bids", "total"]
    assert result.fetchall() == oracle(bids_table())
    assert result.arrow().num_rows == len(result) == 5


def test_a_script_of_statements_answers_with_the_last(con):
    answer = con.execute("CREATE TABLE t (x BIGINT) WITH ('connector' = 'nexmark'); SHOW TABLES;")
    assert answer.fetchall() == [("t", "nexmark")]


def test_sql_errors_carry_message_line_column_and_hint(con):
    with pytest.raises(WeirSqlError) as caught:
        con.execute("SET 'pipeline.name' = 'p';\nCREATE TABLE t (x BIGINT,\n  WATERMARK FOR nope AS nope)\n"
                    "WITH ('connector' = 'nexmark')")
    error = caught.value
    assert (error.line, error.column) == (3, 17)  # at `nope`
    assert error.message == "WATERMARK FOR nope: the table has no column nope"
    assert error.hint == "name one of the table's TIMESTAMP columns: x"


def test_sql_refuses_a_query_over_a_streaming_source_naming_stream(con):
    con.register("bids", bids_table(), watermark="date_time")
    with pytest.raises(WeirSqlError) as caught:
        con.sql("SELECT * FROM bids")
    assert "streaming source" in caught.value.message
    assert "con.stream" in caught.value.hint


def test_a_query_of_an_unknown_result_table_says_which_there_are(con):
    with pytest.raises(DatabaseError) as caught:
        con.sql("SELECT * FROM nowhere")
    assert "nowhere" in caught.value.message


def test_a_failing_job_raises_its_engine_error_from_wait(con):
    table = bids_table()
    con.register("bids", iter([table.to_batches()[0], table.drop_columns(["price"]).to_batches()[0]]),
                 watermark="date_time")
    job = con.execute(WINDOWS)
    with pytest.raises(EngineError) as caught:
        job.wait(60)
    assert job.status == "FAILED" and job.error is caught.value
    assert caught.value.message.endswith("has no column price")
    assert caught.value.hint == "every batch needs the columns the table was registered with"


def test_df_without_pandas_says_how_to_install_it(con, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'weir\[pandas\]'"):
        con.sql("SELECT 1 AS one").df()


def test_an_iterator_of_batches_is_a_source(con):
    table = bids_table()
    con.register("bids", iter(table.to_batches(max_chunksize=2)), watermark="date_time - INTERVAL '2' SECOND")
    assert con.execute(WINDOWS).wait(60) == "FINISHED"
    assert con.sql("SELECT * FROM per_auction ORDER BY window_start, auction").fetchall() == oracle(table)


def test_an_iterator_cannot_be_read_again(con):
    """A second read (a restart) or a read from an offset (a restore) is refused, naming the fix."""
    from weir.engine.connectors.registry import create_source

    table = bids_table()
    con.register("bids", iter(table.to_batches(max_chunksize=2)), watermark="date_time")
    options = con.session.catalog.lookup("bids").options
    source = create_source(options, con.session.catalog.lookup("bids").schema)
    assert sum(b.num_rows for b, _ in source.read("0")) == table.num_rows
    for offset in (None, 2):
        with pytest.raises(EngineError, match="cannot be read again") as caught:
            next(source.read("0", offset))
        assert "pyarrow.Table" in caught.value.hint


def test_a_table_source_resumes_from_its_offset(con):
    from weir.engine.connectors.registry import create_source

    table = pa.Table.from_batches(bids_table().to_batches(max_chunksize=4))
    con.register("bids", table, watermark="date_time")
    source = create_source(con.session.catalog.lookup("bids").options, con.session.catalog.lookup("bids").schema)
    read = list(source.read("0"))
    assert [offset for _, offset in read] == [4, 6]
    resumed = list(source.read("0", 4))
    assert [b.to_pylist() for b, _ in resumed] == [read[1][0].to_pylist()]


def test_python_tables_refuse_parallelism_above_1(con):
    con.register("bids", bids_table(), watermark="date_time")
    con.execute("SET 'parallelism.default' = '2'")
    with pytest.raises(EngineError) as caught:
        con.execute(WINDOWS)
    assert "bids" in caught.value.message and "'parallelism.default' = '2'" in caught.value.message
    assert caught.value.hint.startswith("SET 'parallelism.default' = '1'")


def test_registering_a_name_again_replaces_the_data(con):
    con.register("bids", bids_table(), watermark="date_time")
    fewer = bids_table()[:2]
    con.register("bids", fewer, watermark="date_time")
    assert con.execute(WINDOWS).wait(60) == "FINISHED"
    assert con.sql("SELECT * FROM per_auction").fetchall() == oracle(fewer)


def test_a_callback_sink_receives_the_rows_with_their_kind(con):
    con.register("bids", bids_table(), watermark="date_time")
    received: list[pa.RecordBatch] = []
    con.register_sink("expensive", received.append, pa.schema([("auction", pa.int64()), ("price", pa.int64())]))
    job = con.execute("INSERT INTO expensive SELECT auction, price FROM bids WHERE price >= 40")
    assert job.wait(60) == "FINISHED"
    rows = pa.Table.from_batches(received).to_pylist()
    assert rows == [{"op": "+I", "auction": 2, "price": 40}, {"op": "+I", "auction": 1, "price": 50},
                    {"op": "+I", "auction": 2, "price": 60}]


def test_unsupported_column_types_are_named(con):
    with pytest.raises(TypeError, match="`tags`"):
        con.register("t", pa.table({"tags": pa.array([[1]], pa.list_(pa.int64()))}))


def test_the_shell_runs_its_statements_through_the_connection(con, capsys):
    runner = Runner(con)
    assert runner.run_text("CREATE TABLE t (x BIGINT) WITH ('connector' = 'nexmark');") == 0
    assert capsys.readouterr().out == "created table t\n"
    assert con.sql("SHOW TABLES").fetchall() == [("t", "nexmark")]


def test_create_function_makes_python_functions_sql_functions(con):
    """A plain function (a row at a time, declared here) and a @weir.udf of arrays, both defined in
    this module, give in a job what the same built-in expressions give in DuckDB."""
    import pyarrow.compute as pc

    @weir.udf(result_type="BIGINT", func_type="arrow")
    def cents(price: pa.Array) -> pa.Array:
        return pc.multiply(price, pa.scalar(100, pa.int64()))

    con.create_function("cents", cents)
    con.create_function("band", lambda price: "high" if price >= 30 else "low", result_type="STRING")
    con.register("bids", bids_table(), watermark="date_time")
    con.execute("""CREATE MATERIALIZED VIEW bands AS
                   SELECT band(price) AS band, SUM(cents(price)) AS cents FROM bids GROUP BY band(price)""").wait(60)
    expected = oracle(bids_table(), "SELECT CASE WHEN price >= 30 THEN 'high' ELSE 'low' END AS band, "
                                    "SUM(price * 100) FROM bids GROUP BY band ORDER BY band")
    assert con.sql("SELECT band, cents FROM bands ORDER BY band").fetchall() == expected
    with pytest.raises(UdfError, match="not a weir UDF and no result_type"):
        con.create_function("plain", lambda x: x)


def test_a_callback_sink_of_an_updating_query_receives_its_changelog(con):
    con.register("bids", pa.Table.from_batches(bids_table().to_batches(max_chunksize=2)), watermark="date_time")
    received: list[pa.RecordBatch] = []
    con.register_sink("counts", received.append, pa.schema([("auction", pa.int64()), ("bids", pa.int64())]))
    assert con.execute("INSERT INTO counts SELECT auction, COUNT(*) FROM bids GROUP BY auction").wait(60) == "FINISHED"
    changes = [tuple(r.values()) for r in pa.Table.from_batches(received).to_pylist()]
    # Batches of 2 bids, of auctions (1, 1), (2, 2), (1, 2): a key's count changes once per batch.
    assert changes == [("+I", 1, 2), ("+I", 2, 2), ("-U", 1, 2), ("+U", 1, 3), ("-U", 2, 2), ("+U", 2, 3)]
