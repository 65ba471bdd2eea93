"""A parquet source reads only the columns its consumers read (``Source.project``, from the
window aggregate's, the session window's, a window assignment's and a calc's ``input_expressions``), with the same results; a consumer that may read
any column gets them all, and a declared column missing from the file is still refused. A csv
source converts only those columns: a bad value in another one is not looked at (as in Flink's
csv format with projection push-down), a line with the wrong number of fields is still malformed."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from weir.engine.connectors.filesystem import FileSystemSource
from weir.engine.errors import SourceError
from weir.engine.runtime.local import LocalExecutor
from weir.planner.planner import plan_script
from weir.sql import parse

SOURCE = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{bids}', 'format' = 'parquet');
CREATE TABLE out ({columns}) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
"""
WINDOW = """INSERT INTO out SELECT auction, window_start, COUNT(*), SUM(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end;"""


@pytest.fixture
def bids(tmp_path):
    path = tmp_path / "bids.parquet"
    duckdb.sql(f"""COPY (SELECT i % 7 AS auction, i % 13 AS bidder, i * 3 % 101 AS price, 'channel-' || (i % 5) AS channel,
                          TIMESTAMP '2024-01-01' + to_milliseconds(i * 100 - (i % 9) * 150) AS date_time
                   FROM range(3000) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 500)""")
    return path


def executor(tmp_path, bids, columns: str, insert: str) -> LocalExecutor:
    text = SOURCE.format(bids=bids, out=tmp_path / "out", columns=columns) + insert
    return LocalExecutor(plan_script(parse(text)).graph)


def test_a_window_aggregate_over_parquet_reads_only_its_columns_with_the_same_result(tmp_path, bids):
    job = executor(tmp_path, bids, "auction BIGINT, window_start TIMESTAMP(3), bids BIGINT, total BIGINT", WINDOW)
    job.run()
    (source,) = [t.reader.source for t in job.tasks.values() if t.reader]
    assert source.read_columns == ["auction", "price", "date_time"]
    got = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path}/out/*.csv') ORDER BY ALL").fetchall()
    expected = duckdb.sql(f"""SELECT auction, time_bucket(INTERVAL 10 SECOND, date_time), count(*), sum(price)::BIGINT
                              FROM read_parquet('{bids}') GROUP BY ALL ORDER BY ALL""").fetchall()
    assert got == expected and len(got) > 20


def test_a_session_window_over_parquet_reads_only_its_columns_with_the_same_result(tmp_path, bids):
    job = executor(tmp_path, bids, "bidder BIGINT, window_start TIMESTAMP(3), bids BIGINT, total BIGINT",
                   """INSERT INTO out SELECT bidder, window_start, COUNT(*), SUM(price)
                   FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '1500' MILLISECOND))
                   GROUP BY bidder, window_start, window_end;""")
    job.run()
    (source,) = [t.reader.source for t in job.tasks.values() if t.reader]
    assert source.read_columns == ["bidder", "price", "date_time"]
    got = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path}/out/*.csv') ORDER BY ALL").fetchall()
    expected = duckdb.sql(f"""
        SELECT bidder, min(date_time), count(*), sum(price)::BIGINT FROM (
            SELECT *, sum(new) OVER (PARTITION BY bidder ORDER BY date_time ROWS UNBOUNDED PRECEDING) AS session
            FROM (SELECT *, CASE WHEN date_time - lag(date_time) OVER (PARTITION BY bidder ORDER BY date_time)
                                 <= INTERVAL 1500 MILLISECOND THEN 0 ELSE 1 END AS new
                  FROM read_parquet('{bids}')))
        GROUP BY bidder, session ORDER BY ALL""").fetchall()
    assert got == expected and len(got) > 13


def test_a_calc_reads_its_projection_and_filter_and_the_watermark_its_column(tmp_path, bids):
    job = executor(tmp_path, bids, "auction BIGINT, channel VARCHAR",
                   "INSERT INTO out SELECT auction, upper(channel) FROM bids WHERE price > 50;")
    job.run()
    (source,) = [t.reader.source for t in job.tasks.values() if t.reader]
    assert source.read_columns == ["auction", "price", "channel", "date_time"]
    got = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path}/out/*.csv') ORDER BY ALL").fetchall()
    expected = duckdb.sql(f"SELECT auction, upper(channel) FROM read_parquet('{bids}') WHERE price > 50 "
                          "ORDER BY ALL").fetchall()
    assert got == expected and len(got) > 1000


def test_a_window_table_function_without_aggregate_reads_only_the_columns_the_query_names(tmp_path, bids):
    job = executor(tmp_path, bids, "auction BIGINT, window_start TIMESTAMP(3), window_time TIMESTAMP(3)",
                   """INSERT INTO out SELECT auction, window_start, window_time
                   FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
                   WHERE channel <> 'channel-3';""")
    job.run()
    (source,) = [t.reader.source for t in job.tasks.values() if t.reader]
    assert source.read_columns == ["auction", "channel", "date_time"]
    got = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path}/out/*.csv') ORDER BY ALL").fetchall()
    expected = duckdb.sql(f"""SELECT auction, s, s + INTERVAL 6 SECOND - INTERVAL 1 MILLISECOND
                              FROM read_parquet('{bids}'),
                                   unnest(range(time_bucket(INTERVAL 2 SECOND, date_time) - INTERVAL 4 SECOND,
                                                date_time + INTERVAL 1 MICROSECOND, INTERVAL 2 SECOND)) t(s)
                              WHERE channel <> 'channel-3' ORDER BY ALL""").fetchall()
    assert got == expected and len(got) > 6000


def test_a_consumer_that_may_read_any_column_gets_every_column(tmp_path, bids):
    columns = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3)"
    job = executor(tmp_path, bids, columns, "INSERT INTO out SELECT * FROM bids;")
    job.run()
    (source,) = [t.reader.source for t in job.tasks.values() if t.reader]
    assert source.read_columns is None
    assert duckdb.sql(f"SELECT count(*) FROM read_csv('{tmp_path}/out/*.csv')").fetchall() == [(3000,)]


def test_a_projected_parquet_source_yields_those_columns_and_still_refuses_a_missing_one(bids):
    schema = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("date_time", pa.timestamp("us"))])
    source = FileSystemSource({"path": str(bids), "format": "parquet"}, schema)
    source.project(["date_time", "auction"])
    batch, _ = next(iter(source.read(source.splits()[0])))
    assert batch.schema.names == ["auction", "date_time"]
    missing = FileSystemSource({"path": str(bids), "format": "parquet"},
                               pa.schema([*schema, ("nowhere", pa.int64())]))
    missing.project(["auction"])
    with pytest.raises(SourceError, match="no column 'nowhere'"):
        next(iter(missing.read(missing.splits()[0])))


CSV_LINES = """auction,bidder,price,channel,date_time
1,10,5,web,2024-01-01 00:00:01
2,not-a-number,6,web,2024-01-01 00:00:02
3,30,seven,web,2024-01-01 00:00:03
4,40,8,2024-01-01 00:00:04
5,50,9,app,2024-01-01 00:00:05
"""


def csv_source(tmp_path, schema: pa.Schema) -> FileSystemSource:
    path = tmp_path / "bids.csv"
    path.write_text(CSV_LINES)
    return FileSystemSource({"path": str(path), "format": "csv", "csv.ignore-parse-errors": "true"}, schema)


def test_a_projected_csv_source_converts_and_checks_only_the_columns_read(tmp_path):
    schema = pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                        ("channel", pa.string()), ("date_time", pa.timestamp("us"))])
    whole = csv_source(tmp_path, schema)
    rows = pa.Table.from_batches([b for b, _ in whole.read(whole.splits()[0])])
    assert rows.column("auction").to_pylist() == [1, 5] and whole.skipped_rows == 3

    projected = csv_source(tmp_path, schema)
    projected.project(["auction", "price", "date_time"])
    rows = pa.Table.from_batches([b for b, _ in projected.read(projected.splits()[0])])
    assert rows.schema.names == ["auction", "price", "date_time"]
    # line 3's bad bidder is not read, line 4's bad price is; line 5 has four fields, whatever is read
    assert rows.column("auction").to_pylist() == [1, 2, 5] and projected.skipped_rows == 2
    assert rows.column("price").to_pylist() == [5, 6, 9]
