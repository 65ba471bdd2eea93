"""`weir query`: results of the job database as an aligned table, csv or json."""
from __future__ import annotations

import json
from datetime import datetime

import duckdb
import pytest


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "results.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE channel_minutes (channel VARCHAR, window_start TIMESTAMP, bids BIGINT, share DOUBLE)")
        con.execute("INSERT INTO channel_minutes VALUES "
                    "('Google', TIMESTAMP '2024-01-01 00:00:00', 1234, 0.5), "
                    "('Apple', TIMESTAMP '2024-01-01 00:01:00', 7, NULL), "
                    "('a,b', TIMESTAMP '2024-01-01 00:02:00', NULL, 0.25)")
    return str(path)


QUERY = "SELECT * FROM channel_minutes ORDER BY window_start"


def test_table_format_is_aligned(weir, db):
    result = weir("query", QUERY, "--db", db)
    assert result.code == 0, result.err
    assert result.out == (
        "channel | window_start            | bids | share\n"
        "--------+-------------------------+------+------\n"
        "Google  | 2024-01-01 00:00:00.000 | 1234 |   0.5\n"
        "Apple   | 2024-01-01 00:01:00.000 |    7 |  NULL\n"
        "a,b     | 2024-01-01 00:02:00.000 | NULL |  0.25\n"
        "(3 rows)\n"
    )


def test_table_format_is_the_default_and_counts_one_row(weir, db):
    result = weir("query", "SELECT COUNT(*) AS n FROM channel_minutes", "--db", db)
    assert result.out == "n\n-\n3\n(1 row)\n"


def test_csv_format_has_a_header_row_and_quotes(weir, db):
    result = weir("query", QUERY, "--db", db, "--format", "csv")
    assert result.code == 0, result.err
    assert result.out == (
        "channel,window_start,bids,share\n"
        "Google,2024-01-01 00:00:00.000,1234,0.5\n"
        "Apple,2024-01-01 00:01:00.000,7,\n"
        '"a,b",2024-01-01 00:02:00.000,,0.25\n'
    )


def test_json_format_is_a_list_of_objects(weir, db):
    result = weir("query", QUERY, "--db", db, "--format", "json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    assert rows == [
        {"channel": "Google", "window_start": "2024-01-01 00:00:00.000", "bids": 1234, "share": 0.5},
        {"channel": "Apple", "window_start": "2024-01-01 00:01:00.000", "bids": 7, "share": None},
        {"channel": "a,b", "window_start": "2024-01-01 00:02:00.000", "bids": None, "share": 0.25},
    ]
    assert datetime.fromisoformat(rows[0]["window_start"]) == datetime(2024, 1, 1)


def test_missing_database_is_a_clear_error(weir, tmp_path):
    result = weir("query", "SELECT 1", "--db", "nowhere.duckdb")
    assert result.code == 1
    assert result.out == ""
    assert result.err == (
        "weir: no database at nowhere.duckdb\n"
        "  hint: run a job with a CREATE MATERIALIZED VIEW first, or pass --db PATH\n"
    )
    assert not (tmp_path / "nowhere.duckdb").exists()


def test_bad_sql_is_a_clear_error(weir, db):
    result = weir("query", "SELEC * FROM channel_minutes", "--db", db)
    assert result.code == 1
    assert result.out == ""
    assert result.err.startswith("weir: query failed: Parser Error: syntax error at or near \"SELEC\"")


def test_unknown_table_lists_the_tables(weir, db):
    result = weir("query", "SELECT * FROM channel_minute", "--db", db)
    assert result.code == 1
    first, hint = result.err.splitlines()[:2]
    assert first.startswith("weir: query failed: Catalog Error: Table with name channel_minute does not exist")
    assert hint == f"  hint: the tables in {db}: channel_minutes"


def test_query_opens_the_database_read_only(weir, db):
    result = weir("query", "CREATE TABLE sneaky (a INT)", "--db", db)
    assert result.code == 1
    assert "read-only" in result.err
    with duckdb.connect(db, read_only=True) as con:
        tables = [row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    assert tables == ["channel_minutes"]


def test_arrow_format_streams_columns_to_stdout_with_their_types(db):
    """`weir query --format arrow | consumer`: an Arrow IPC stream, typed columns without text."""
    import subprocess
    import sys

    import pyarrow as pa

    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "query", QUERY, "--db", db, "--format", "arrow"],
                          capture_output=True, check=True)
    table = pa.ipc.open_stream(done.stdout).read_all()
    assert table.schema.field("window_start").type == pa.timestamp("us")
    assert table.schema.field("bids").type == pa.int64()
    assert table.to_pylist() == [
        {"channel": "Google", "window_start": datetime(2024, 1, 1, 0, 0), "bids": 1234, "share": 0.5},
        {"channel": "Apple", "window_start": datetime(2024, 1, 1, 0, 1), "bids": 7, "share": None},
        {"channel": "a,b", "window_start": datetime(2024, 1, 1, 0, 2), "bids": None, "share": 0.25},
    ]


def test_arrow_and_parquet_formats_write_a_file(weir, db, tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr("weir.shell.commands.ARROW_BATCH_ROWS", 1)  # a stream of several batches
    expected = duckdb.connect(db, read_only=True).sql(QUERY).to_arrow_table()
    assert weir("query", QUERY, "--db", db, "--format", "arrow", "--output", "out.arrow").code == 0
    with pa.ipc.open_stream(tmp_path / "out.arrow") as reader:
        batches = list(reader)
    assert len(batches) == 3 and pa.Table.from_batches(batches).equals(expected)
    result = weir("query", QUERY, "--db", db, "--format", "parquet", "--output", "out.parquet")
    assert result.code == 0 and result.out == ""
    written = pq.read_table(tmp_path / "out.parquet")
    assert [f.type for f in written.schema] == [f.type for f in expected.schema]
    assert written.to_pylist() == expected.to_pylist()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out.")) == ["out.arrow", "out.parquet"]


def test_parquet_format_needs_an_output_file_and_a_failed_query_writes_none(weir, db, tmp_path):
    result = weir("query", QUERY, "--db", db, "--format", "parquet")
    assert result.code == 2 and "--output FILE" in result.err
    result = weir("query", "SELECT * FROM nowhere", "--db", db, "--format", "parquet", "--output", "out.parquet")
    assert result.code == 1 and "channel_minutes" in result.err  # the hint lists the tables
    assert not list(tmp_path.glob("out.parquet*"))
