"""What plan_script hands the engine: operators, edges, output schemas, settings,
and a JobGraph that survives JSON with a stable fingerprint."""
from __future__ import annotations

import json

import pyarrow as pa

from weir.engine.operators.windows import SlicedWindowConfig
from weir.engine.graph import Edge, JobGraph
from weir.engine.runtime.exchange import needed_columns
from weir.planner.planner import plan_script
from weir.planner.queries import bounded_delay
from weir.sql import parse

from jobs import bids_over_nexmark, issue_job_over_nexmark

TS = pa.timestamp("us")
# bidder is INT here, so that SUM over an INT column is covered too.
BIDS = bids_over_nexmark(100).replace("bidder BIGINT", "bidder INT")
ISSUE_JOB = issue_job_over_nexmark(100)


def plan(text: str, **kwargs) -> JobGraph:
    return plan_script(parse(text), **kwargs).graph


def view(select: str) -> JobGraph:
    return plan(BIDS + f"CREATE MATERIALIZED VIEW v AS {select};")


def test_issue_job_reads_one_source_for_both_pipelines():
    graph = plan(ISSUE_JOB, db_path="results.duckdb")
    assert [(n.id, n.kind) for n in graph.nodes] == [
        ("bids.source", "source"),
        ("auction_counts.window_aggregate", "window_aggregate"),
        ("auction_counts.sink", "sink"),
        ("channel_minutes.window_aggregate", "window_aggregate"),
        ("channel_minutes.sink", "sink"),
    ]
    assert [c.id for c, _ in graph.consumers("bids.source")] == [
        "auction_counts.window_aggregate", "channel_minutes.window_aggregate"]
    assert graph.node("auction_counts.window_aggregate").inputs == [Edge("bids.source", "hash", ("auction",))]
    assert graph.node("channel_minutes.window_aggregate").inputs == [Edge("bids.source", "hash", ("channel",))]
    assert graph.node("auction_counts.sink").inputs == [Edge("auction_counts.window_aggregate")]


def test_sinks_carry_their_connector_options():
    graph = plan(ISSUE_JOB, db_path="results.duckdb")
    assert graph.node("auction_counts.sink").config.options == {
        "connector": "filesystem", "path": "out/auction_counts", "format": "csv"}
    assert graph.node("channel_minutes.sink").config.options == {
        "connector": "duckdb", "path": "results.duckdb", "table-name": "channel_minutes", "sink.mode": "replace"}


def test_source_config_has_watermark_sql_and_batch_size():
    source = plan("SET 'weir.source.batch-size' = '500';\n" + ISSUE_JOB).node("bids.source")
    assert source.config.watermark == "\"date_time\" - INTERVAL '2' SECOND"
    assert source.config.batch_size == 500
    assert source.inputs == []


def test_command_line_settings_win_over_set_while_planning():
    text = "SET 'weir.source.batch-size' = '500';\n" + ISSUE_JOB
    source = plan(text, settings={"weir.source.batch-size": "64"}).node("bids.source")
    assert source.config.batch_size == 64


def test_window_aggregate_config():
    aggregate = plan(ISSUE_JOB).node("auction_counts.window_aggregate")
    assert aggregate.config.window == SlicedWindowConfig(kind="tumble", time_column="date_time", size=10_000_000, offset=0)
    assert aggregate.config.keys == (("auction", '"auction"'),)
    assert [(a.name, a.function, a.argument) for a in aggregate.config.aggregates] == [
        ("_agg0", "count", None), ("_agg1", "sum", '"price"'), ("_agg2", "max", '"price"')]


def test_aggregate_output_types_follow_flink():
    graph = view("SELECT window_start, window_end, window_time, SUM(price) AS s, SUM(bidder) AS si, "
                 "AVG(price) AS a, COUNT(*) AS c, COUNT(DISTINCT bidder) AS cd, MIN(channel) AS m "
                 "FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE) GROUP BY window_start, window_end")
    schema = graph.node("v.window_aggregate").output_schema
    assert dict(zip(schema.names, schema.types)) == {
        "window_start": TS, "window_end": TS, "window_time": TS, "s": pa.int64(), "si": pa.int32(),
        "a": pa.int64(), "c": pa.int64(), "cd": pa.int64(), "m": pa.string()}


NUMBERS = """CREATE TABLE numbers (k VARCHAR, t TINYINT, i INT, b BIGINT, f FLOAT, d DOUBLE, m DECIMAL(10, 2),
  n DECIMAL(20, 8)) WITH ('connector' = 'filesystem', 'path' = 'numbers.csv', 'format' = 'csv');
"""


def test_sum_and_avg_keep_their_argument_type_as_in_flink():
    """Flink's findSumAggType / findAvgAggType: an integer or floating type stays itself (AVG
    truncates), DECIMAL(p, s) sums to DECIMAL(38, s) and averages to DECIMAL(38, max(6, s))."""
    columns = ["t", "i", "b", "f", "d", "m", "n"]
    select = ", ".join(f"SUM({c}) AS s_{c}, AVG({c}) AS a_{c}, AVG(DISTINCT {c}) AS ad_{c}" for c in columns)
    graph = plan(NUMBERS + f"CREATE MATERIALIZED VIEW v AS SELECT k, {select} FROM numbers GROUP BY k;")
    [node] = [n for n in graph.nodes if n.kind == "group_aggregate"]
    types = dict(zip(node.output_schema.names, node.output_schema.types))
    same = {"t": pa.int8(), "i": pa.int32(), "b": pa.int64(), "f": pa.float32(), "d": pa.float64()}
    for c, kind in same.items():
        assert types[f"s_{c}"] == types[f"a_{c}"] == types[f"ad_{c}"] == kind
    assert (types["s_m"], types["a_m"], types["ad_m"]) == (pa.decimal128(38, 2), pa.decimal128(38, 6),
                                                           pa.decimal128(38, 6))
    assert (types["s_n"], types["a_n"]) == (pa.decimal128(38, 8), pa.decimal128(38, 8))


def test_calc_output_names_and_types():
    graph = view("SELECT auction, price * 2 AS doubled, UPPER(channel), date_time FROM bids WHERE price > 10")
    calc = graph.node("v.calc")
    assert calc.config.filter == '"price" > 10'
    assert calc.output_schema == pa.schema([("auction", pa.int64()), ("doubled", pa.int64()),
                                            ("EXPR$2", pa.string()), ("date_time", TS)])


def test_expression_group_keys_are_computed_before_the_exchange():
    graph = view("SELECT price % 10 AS band, window_start, COUNT(*) AS n "
                 "FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE) GROUP BY price % 10, window_start, window_end")
    calc, aggregate = graph.node("v.calc"), graph.node("v.window_aggregate")
    assert calc.config.projection[-1] == ("_key0", '"price" % 10')
    assert "_key0" in calc.output_schema.names
    assert aggregate.inputs == [Edge("v.calc", "hash", ("_key0",))]
    assert aggregate.config.keys == (("_key0", '"_key0"'),)
    assert aggregate.output_schema.field("band").type == pa.int64()


def test_global_window_aggregate_reads_forward():
    graph = view("SELECT window_start, COUNT(*) AS n FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE) "
                 "GROUP BY window_start, window_end")
    assert graph.node("v.window_aggregate").inputs == [Edge("bids.source")]
    assert graph.node("v.window_aggregate").config.keys == ()


def test_window_assignment_adds_window_columns():
    graph = view("SELECT auction, window_start, window_end, window_time "
                 "FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND)")
    assign = graph.node("v.window_assign")
    assert assign.kind == "window_assign"
    assert assign.output_schema.names[-3:] == ["window_start", "window_end", "window_time"]
    assert graph.node("v.calc").output_schema.types == [pa.int64(), TS, TS, TS]


def test_window_assignment_passes_on_only_the_columns_the_query_reads():
    """So that the source leaves the others out (Nexmark q7's bids without `channel`, `url`):
    the projection's and the WHERE clause's columns, and the window's time column."""
    graph = view("SELECT auction, window_start FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) "
                 "WHERE channel <> 'x'")
    assign = graph.node("v.window_assign")
    assert assign.config.columns == ("auction", "channel", "date_time")
    assert assign.output_schema.names == ["auction", "channel", "date_time", "window_start", "window_end",
                                          "window_time"]
    assert needed_columns(assign, graph.node("bids.source").output_schema) == ["auction", "channel", "date_time"]


def test_window_assignment_passes_on_every_column_under_a_star():
    graph = view("SELECT *, price * 2 AS twice FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND)")
    assign = graph.node("v.window_assign")
    assert assign.config.columns is None
    assert needed_columns(assign, graph.node("bids.source").output_schema) is None


def test_settings_from_set_and_the_command_line():
    text = ISSUE_JOB + "SET 'pipeline.name' = 'auctions';\nSET 'parallelism.default' = '4';"
    graph = plan(text, settings={"parallelism.default": "2"})
    assert graph.name == "auctions"
    assert graph.settings == {"pipeline.name": "auctions", "parallelism.default": "2"}


def test_explain_statements_do_not_join_the_job():
    script = plan_script(parse(BIDS + "EXPLAIN SELECT auction FROM bids;"))
    assert script.graph.nodes == []
    assert script.explains[0].startswith("== EXPLAIN at line 5: SELECT auction FROM bids ==\nbids.source\n")


def test_job_graph_json_round_trip():
    graph = plan(ISSUE_JOB)
    text = json.dumps(graph.to_json())
    restored = JobGraph.from_json(json.loads(text))
    assert restored.to_json() == graph.to_json()
    assert [n.output_schema for n in restored.nodes] == [n.output_schema for n in graph.nodes]
    assert restored.fingerprint() == graph.fingerprint()


def test_fingerprint_is_stable_and_follows_the_operators():
    first, again = plan(ISSUE_JOB), plan(ISSUE_JOB)
    assert first.fingerprint() == again.fingerprint()
    assert first.fingerprint() == plan(ISSUE_JOB, settings={"parallelism.default": "3"}).fingerprint()
    changed = plan(ISSUE_JOB.replace("INTERVAL '10' SECOND", "INTERVAL '20' SECOND"))
    assert changed.fingerprint() != first.fingerprint()


def test_integer_division_stays_integer_as_in_flink():
    graph = view(
        "SELECT price / 100 AS dollars, price / 2.0 AS half, window_start, SUM(price) / COUNT(*) AS mean "
        "FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) GROUP BY price, window_start, window_end"
    )
    schema = graph.node("v.window_aggregate").output_schema
    assert schema.field("dollars").type == pa.int64()
    assert schema.field("mean").type == pa.int64()
    assert schema.field("half").type != pa.int64()


def test_planner_recognises_bounded_out_of_orderness():
    table = parse("CREATE TABLE t (ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1.5' SECOND) "
                  "WITH ('connector' = 'print')")[0]
    assert bounded_delay(table.watermark.expression, "ts") == ["ts", 1_500_000]
    other = parse("CREATE TABLE t (ts TIMESTAMP(3), WATERMARK FOR ts AS ts + INTERVAL '1' SECOND) "
                  "WITH ('connector' = 'print')")[0]
    assert bounded_delay(other.watermark.expression, "ts") is None


def test_flinks_official_q4_avg_into_a_bigint_sink_passes_the_sink_type_check():
    """Nexmark q4 as Flink writes it: AVG(final) of a BIGINT goes into a BIGINT column without
    a CAST (before, AVG was DOUBLE and the sink refused it)."""
    q4 = BIDS + """
CREATE TABLE category_prices (id BIGINT, final BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'blackhole');
INSERT INTO category_prices
SELECT Q.auction % 5 AS id, AVG(Q.final) AS final
FROM (SELECT MAX(price) AS final, auction FROM bids GROUP BY auction) Q
GROUP BY Q.auction % 5;
"""
    *_, outer = [n for n in plan(q4).nodes if n.kind == "group_aggregate"]
    assert outer.output_schema.field("final").type == pa.int64()
