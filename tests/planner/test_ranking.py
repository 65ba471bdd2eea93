"""Planning window Top-N and window deduplication (planner/ranking.py): the
window_rank node, its configuration and partitioning, and its errors."""
from __future__ import annotations

import duckdb
import pytest

from weir.planner.expressions import to_duckdb
from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse

CATALOG = """\
CREATE TABLE bids (
  auction BIGINT, bidder VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '100');
"""
WINDOW = "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))"
AGGREGATE = (f"(SELECT window_start, window_end, auction, SUM(price) AS price FROM {WINDOW} "
             "GROUP BY window_start, window_end, auction)")


def rank_node(query: str):
    graph = plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};")).graph
    [node] = [n for n in graph.nodes if n.kind == "window_rank"]
    return node


def problems(query: str):
    with pytest.raises(WeirSqlError) as raised:
        plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};"))
    return raised.value.problems


def at(query: str, needle: str) -> tuple[int, int]:
    text = CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};"
    offset = text.index(needle, len(CATALOG))
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def test_top_n_over_a_window_aggregate():
    node = rank_node("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                     f"ORDER BY price DESC) AS rownum FROM {AGGREGATE}) WHERE rownum <= 3")
    assert node.config.function == "row_number"
    assert node.config.rank_range == (1, 3)
    assert node.config.partition_keys == ()
    assert node.config.order_by == ('"price" DESC NULLS LAST',)
    assert node.output_schema.names == ["window_start", "window_end", "auction", "price", "rownum"]
    [edge] = node.inputs
    assert (edge.partitioning, edge.keys) == ("hash", ("window_start", "window_end"))
    assert node.description.startswith("WindowRank(partitionBy=[window_start, window_end]")


@pytest.mark.parametrize("condition, expected", [
    ("rownum < 4", [1, 3]), ("rownum = 1", [1, 1]), ("3 >= rownum", [1, 3]),
    ("rownum BETWEEN 2 AND 5", [2, 5]), ("rownum > 1 AND rownum <= 4", [2, 4]),
])
def test_rank_bounds(condition, expected):
    node = rank_node("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, auction "
                     f"ORDER BY price DESC) AS rownum FROM {WINDOW}) WHERE {condition}")
    assert node.config.rank_range == tuple(expected)
    assert node.config.partition_keys == ("auction",)
    assert node.inputs[0].keys == ("window_start", "window_end", "auction")


def test_other_conditions_filter_the_ranked_rows_and_the_rank_may_be_left_out():
    node = rank_node("SELECT auction, price FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY window_start, "
                     f"window_end ORDER BY price DESC) AS r FROM {WINDOW}) WHERE r <= 2 AND price > 10")
    assert node.config.function == "dense_rank"
    assert node.config.filter == '"price" > 10'
    assert node.output_schema.names == ["auction", "price"]


@pytest.mark.parametrize("direction, keep, ties", [("ASC", "first row", "earliest_first"),
                                                    ("DESC", "last row", "latest_first")])
def test_deduplication_on_the_time_attribute(direction, keep, ties):
    """Flink's keep-last deduplication keeps the last-arriving of rows with the same time."""
    node = rank_node("SELECT auction, bidder, date_time FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
                     f"window_start, window_end, auction ORDER BY date_time {direction}) AS rownum FROM {WINDOW}) "
                     "WHERE rownum = 1")
    assert node.description.startswith(f"WindowDeduplicate(keep=[{keep}]")
    assert node.config.ties == ties


def top_n_node(query: str):
    graph = plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};")).graph
    (node,) = [n for n in graph.nodes if n.kind == "top_n"]
    return node


@pytest.mark.parametrize("order, expected", [
    ("price", '"price" ASC NULLS FIRST'), ("price ASC", '"price" ASC NULLS FIRST'),
    ("price DESC", '"price" DESC NULLS LAST'), ("price DESC NULLS FIRST", '"price" DESC NULLS FIRST'),
    ("price NULLS LAST", '"price" ASC NULLS LAST'),
])
def test_nulls_are_the_smallest_value_in_every_ranking(order, expected):
    """Flink sorts NULL as the smallest value: first ascending, last descending, unless told."""
    window = rank_node(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                       f"ORDER BY {order}) AS rownum FROM {WINDOW}) WHERE rownum <= 3")
    stream = top_n_node(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY {order}) "
                        "AS rownum FROM bids) WHERE rownum <= 3")
    assert window.config.order_by == stream.config.order_by == (expected,)


@pytest.mark.parametrize("order, ties", [("date_time DESC", "latest_first"), ("date_time", "earliest_first"),
                                         ("price DESC", "earliest_first")])
def test_ties_rank_by_arrival_latest_first_only_for_keep_last_deduplication(order, ties):
    node = top_n_node(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY {order}) "
                      "AS rownum FROM bids) WHERE rownum <= 1")
    assert node.config.ties == ties


def test_without_window_bounds_in_partition_by_it_ranks_the_whole_stream():
    query = (f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rownum "
             f"FROM {WINDOW}) WHERE rownum <= 3")
    graph = plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};")).graph
    (node,) = [n for n in graph.nodes if n.kind == "top_n"]
    assert node.config.partition_keys == ("auction",) and node.config.rank_range == (1, 3)


def test_rank_without_upper_bound_and_without_order_are_reported_together():
    query = (f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end) AS rownum "
             f"FROM {WINDOW}) WHERE rownum > 1")
    found = problems(query)
    assert [p.message for p in found] == [
        "ROW_NUMBER() needs ORDER BY in its OVER clause",
        "the rank `rownum` has no upper bound",
    ]
    assert (found[1].line, found[1].col) == at(query, "rownum > 1")
    assert "WHERE rownum <= 3" in found[1].hint


def test_rank_without_outer_query():
    query = f"SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price) AS rn FROM {WINDOW}"
    [problem] = problems(query)
    assert "needs an outer query that bounds its rank" in problem.message
    assert problem.line is not None and problem.hint


def test_unsupported_window_function():
    query = (f"SELECT * FROM (SELECT *, NTILE(2) OVER (PARTITION BY window_start, window_end ORDER BY price) AS n "
             f"FROM {WINDOW}) WHERE n <= 1")
    [problem] = problems(query)
    assert "is not supported over windows" in problem.message
    assert "ROW_NUMBER()" in problem.hint


@pytest.mark.parametrize("order, expected", [("v", [None, 1, 2]), ("v DESC", [2, 1, None]),
                                             ("v DESC NULLS FIRST", [None, 2, 1])])
def test_a_query_over_result_tables_sorts_nulls_as_the_smallest_value(order, expected):
    """The shell's queries over DuckDB tables go through the same dialect: ORDER BY puts NULLs
    where Flink does (DuckDB alone would put them last both ways)."""
    [statement] = parse(f"SELECT v FROM t ORDER BY {order};")
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1), (NULL), (2)) AS r(v)")
    assert [v for (v,) in con.sql(to_duckdb(statement.query)).fetchall()] == expected


def test_partition_by_a_window_bound_the_inner_query_does_not_select():
    """As Flink: PARTITION BY window_end resolves against the window table function even when the
    inner SELECT lists only window_start; the added column is not part of the outer `*`."""
    node = rank_node("SELECT * FROM (SELECT window_start, auction, price, ROW_NUMBER() OVER (PARTITION BY "
                     f"window_start, window_end ORDER BY price DESC) AS rn FROM {WINDOW}) WHERE rn = 1")
    assert node.config.window_end == "window_end"
    assert node.inputs[0].keys == ("window_start", "window_end")
    assert node.output_schema.names == ["window_start", "auction", "price", "rn"]


def test_the_outer_query_cannot_name_a_column_added_for_the_rank():
    [problem] = problems("SELECT window_end FROM (SELECT window_start, price, ROW_NUMBER() OVER (PARTITION BY "
                         f"window_start, window_end ORDER BY price DESC) AS rn FROM {WINDOW}) WHERE rn = 1")
    assert "window_end" in problem.message


#: Auctions, and bids on them out of time order with ties on price: the winner of each auction
#: is its highest bid, the earliest of equal ones (Nexmark q9's rank).
AUCTIONS = "id,date_time\n1,2024-01-01 00:00:00\n2,2024-01-01 00:00:01\n"
BIDS = ("auction,price,date_time\n1,10,2024-01-01 00:00:05\n1,10,2024-01-01 00:00:02\n"
        "1,7,2024-01-01 00:00:01\n2,30,2024-01-01 00:00:09\n2,30,2024-01-01 00:00:03\n2,31,2024-01-01 00:00:08\n")
WINNERS = """
CREATE TABLE a (id BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time)
WITH ('connector' = 'filesystem', 'path' = '{dir}/a.csv', 'format' = 'csv');
CREATE TABLE b (auction BIGINT, price BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time)
WITH ('connector' = 'filesystem', 'path' = '{dir}/b.csv', 'format' = 'csv');
CREATE MATERIALIZED VIEW winners AS
SELECT id, date_time, price, bid_time FROM (
  SELECT A.*, B.price, B.date_time AS bid_time,
    ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum
  FROM a A, b B WHERE A.id = B.auction)
WHERE rownum <= 1;
"""


def test_an_order_by_column_named_with_its_table_ranks_by_that_tables_column(tmp_path):
    """`B.date_time` orders by the bid's time, not by the `date_time` that `A.*` selects (the
    auction's, the same for every bid of an auction: ties would fall back to arrival order)."""
    import weir

    (tmp_path / "a.csv").write_text(AUCTIONS)
    (tmp_path / "b.csv").write_text(BIDS)
    weir.run(WINNERS.format(dir=tmp_path), db=str(tmp_path / "w.duckdb"), state_dir=tmp_path / "state")
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        rows = con.sql("SELECT id, price, strftime(bid_time, '%S') FROM winners ORDER BY id").fetchall()
    assert rows == [(1, 10, "02"), (2, 31, "08")]
    node = plan_script(parse(WINNERS.format(dir=tmp_path))).graph
    [rank] = [n for n in node.nodes if n.kind == "top_n"]
    assert "B.date_time ASC" in rank.description


def _winners(tmp_path, query: str) -> list[tuple]:
    """``query`` as the view over the auctions and bids above: its rows, ordered."""
    import weir

    (tmp_path / "a.csv").write_text(AUCTIONS)
    (tmp_path / "b.csv").write_text(BIDS)
    script = WINNERS.split("CREATE MATERIALIZED VIEW")[0] + f"CREATE MATERIALIZED VIEW winners AS {query};"
    weir.run(script.format(dir=tmp_path), db=str(tmp_path / "w.duckdb"), state_dir=tmp_path / "state")
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        return con.sql("SELECT * FROM winners ORDER BY ALL").fetchall()


def test_a_partition_column_named_with_its_table_partitions_by_that_tables_column(tmp_path):
    """`PARTITION BY B.date_time` partitions by the bid's time (every bid its own partition),
    not by the `date_time` that `A.*` selects (the auction's: one winner per auction)."""
    rows = _winners(tmp_path, "SELECT id, price, strftime(bid_time, '%S') AS s FROM (SELECT A.*, B.price, "
                              "B.date_time AS bid_time, ROW_NUMBER() OVER (PARTITION BY B.date_time "
                              "ORDER BY B.price DESC) AS rownum FROM a A, b B WHERE A.id = B.auction) "
                              "WHERE rownum <= 1")
    assert rows == [(1, 7, "01"), (1, 10, "02"), (1, 10, "05"), (2, 30, "03"), (2, 30, "09"), (2, 31, "08")]
    script = WINNERS.split("CREATE MATERIALIZED VIEW")[0].format(dir=tmp_path) + (
        "CREATE MATERIALIZED VIEW w AS SELECT id FROM (SELECT A.*, B.price, ROW_NUMBER() OVER "
        "(PARTITION BY B.date_time ORDER BY B.price DESC) AS rownum FROM a A, b B WHERE A.id = B.auction) "
        "WHERE rownum <= 1;")
    [rank] = [n for n in plan_script(parse(script)).graph.nodes if n.kind == "top_n"]
    assert "partitionBy=[B.date_time]" in rank.description


def test_a_partition_column_named_with_its_table_need_not_be_selected(tmp_path):
    """As in Flink, `PARTITION BY B.auction` may name a column the inner SELECT leaves out."""
    rows = _winners(tmp_path, "SELECT id, price FROM (SELECT A.id, B.price, ROW_NUMBER() OVER (PARTITION BY "
                              "B.auction ORDER BY B.price DESC) AS rownum FROM a A, b B WHERE A.id = B.auction) "
                              "WHERE rownum <= 1")
    assert rows == [(1, 10), (2, 31)]


def test_a_selected_partition_column_named_with_its_table_stays_the_results_key(tmp_path):
    """`PARTITION BY A.id` over `SELECT A.*`: the partition key is the selected `id`, so the
    Top-1 keeps its upsert key (q9's shape) rather than partitioning by a hidden copy."""
    [rank] = [n for n in plan_script(parse(WINNERS.format(dir=tmp_path))).graph.nodes if n.kind == "top_n"]
    assert tuple(rank.config.partition_keys) == ("id",)
    assert "partitionBy=[id]" in rank.description
