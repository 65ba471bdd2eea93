"""Computed columns in CREATE TABLE, as in Flink: computed after the source, never written."""
from __future__ import annotations

import pytest

from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse


def test_computed_columns_are_computed_after_the_source_and_never_written():
    script = plan_script(parse("""
        CREATE TABLE t (v INT, v2 AS v * 2, s VARCHAR, ts AS TO_TIMESTAMP(s),
          WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = 'in.csv', 'format' = 'csv');
        CREATE TABLE out_t (v INT, w AS v + 1) WITH ('connector' = 'blackhole');
        INSERT INTO out_t SELECT v2 FROM t;"""))
    source, computed = script.graph.nodes[:2]
    # the connector reads the physical columns; the watermark is computed from them
    assert source.output_schema.names == ["v", "s"]
    watermark = source.config.watermark  # TO_TIMESTAMP(s) - INTERVAL '1' SECOND, in DuckDB's SQL
    assert '"s"' in watermark and '"ts"' not in watermark and watermark.endswith(" - INTERVAL '1' SECOND")
    assert source.config.watermark_bounded is None
    assert computed.kind == "calc" and computed.output_schema.names == ["v", "v2", "s", "ts"]
    assert str(computed.output_schema.field("ts").type) == "timestamp[us]"
    (sink,) = [n for n in script.graph.nodes if n.kind == "sink"]
    assert sink.output_schema.names == ["v"]
    assert script.catalog.lookup("t").schema.names == ["v", "v2", "s", "ts"]


def test_a_lookup_table_with_computed_columns_is_refused_with_a_hint():
    with pytest.raises(WeirSqlError) as raised:
        plan_script(parse("""
            CREATE TABLE o (id BIGINT, cur VARCHAR) WITH ('connector' = 'filesystem', 'path' = 'o.csv', 'format' = 'csv');
            CREATE TABLE r (cur VARCHAR, rate INT, r2 AS rate * 2)
            WITH ('connector' = 'filesystem', 'path' = 'r.csv', 'format' = 'csv');
            CREATE MATERIALIZED VIEW m AS SELECT o.id, r.r2 FROM (SELECT *, PROCTIME() AS pt FROM o) AS o
            JOIN r FOR SYSTEM_TIME AS OF o.pt AS r ON o.cur = r.cur;"""))
    (problem,) = raised.value.problems
    assert problem.message.startswith("the lookup table `r` has computed columns (r2)")
