"""A TIMESTAMP(p) column keeps p fractional digits from where its values enter: the planner
marks the field with its declared precision and the filesystem source truncates to it, as
Flink stores TIMESTAMP(3) (so CAST(ts AS STRING) and MAX(ts) show milliseconds)."""
from __future__ import annotations

import contextlib
import io

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from weir.engine.connectors.registry import create_source
from weir.planner.planner import plan_script
from weir.shell.cli import main
from weir.sql import parse

ROWS = ["2024-01-01 00:00:01.123456", "2024-01-01 00:00:02.999999", "1969-12-31 23:59:59.0005"]


def source_schema(ddl: str) -> pa.Schema:
    graph = plan_script(parse(ddl + "CREATE MATERIALIZED VIEW v AS SELECT * FROM t;")).graph
    [node] = [n for n in graph.nodes if n.kind == "source"]
    return node.output_schema


@pytest.mark.parametrize("declared, expected", [
    ("TIMESTAMP(3)", ["2024-01-01 00:00:01.123", "2024-01-01 00:00:02.999", "1969-12-31 23:59:59"]),
    ("TIMESTAMP(0)", ["2024-01-01 00:00:01", "2024-01-01 00:00:02", "1969-12-31 23:59:59"]),
    ("TIMESTAMP", ROWS), ("TIMESTAMP(6)", ROWS),
])
@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_values_are_truncated_to_the_declared_precision(declared, expected, file_format, tmp_path):
    path = tmp_path / f"t.{file_format}"
    if file_format == "csv":
        path.write_text("ts\n" + "\n".join(ROWS) + "\n")
    else:
        values = pa.array(ROWS).cast(pa.timestamp("us"))
        pq.write_table(pa.table({"ts": values}), path)
    options = {"connector": "filesystem", "path": str(path), "format": file_format}
    schema = source_schema(f"CREATE TABLE t (ts {declared}) WITH ('connector' = 'filesystem', "
                           f"'path' = '{path}', 'format' = '{file_format}');")
    source = create_source(options, schema)
    batches = [batch for split in source.splits() for batch, _ in source.read(split)]
    table = pa.Table.from_batches(batches)
    con = duckdb.connect()
    con.register("tbl", table)
    assert [v for (v,) in con.sql("SELECT CAST(ts AS VARCHAR) FROM tbl").fetchall()] == expected


def test_a_job_shows_milliseconds_in_max_and_cast(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("k,ts\na,2024-01-01 00:00:01.123456\na,2024-01-01 00:00:01.123999\n")
    (tmp_path / "job.sql").write_text(
        "CREATE TABLE t (k VARCHAR, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = 't.csv', "
        "'format' = 'csv');\n"
        "CREATE MATERIALIZED VIEW v AS SELECT k, MAX(ts) AS last_ts, CAST(MAX(ts) AS STRING) AS shown, "
        "COUNT(DISTINCT ts) AS times FROM t GROUP BY k;\n")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "job.sql", "--db", "weir.duckdb", "--no-progress"]) == 0
    with duckdb.connect("weir.duckdb", read_only=True) as con:
        [(last, shown, times)] = con.sql("SELECT CAST(last_ts AS VARCHAR), shown, times FROM v").fetchall()
    assert (last, shown, times) == ("2024-01-01 00:00:01.123", "2024-01-01 00:00:01.123", 1)
