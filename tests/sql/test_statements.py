"""sql.parse: each statement kind becomes its dataclass, with the fields the planner reads."""
from sqlglot import exp

from weir.sql import parse
from weir.sql import statements as st


def one(text: str) -> st.Statement:
    statements = parse(text)
    assert len(statements) == 1
    return statements[0]


def test_create_table_columns_types_and_nullability():
    table = one(
        "CREATE TABLE IF NOT EXISTS t (a INT NOT NULL, b BIGINT, c STRING, d DOUBLE, e DECIMAL(10, 2), "
        "f BOOLEAN, g DATE, h VARCHAR, i TIMESTAMP(3), j TIMESTAMP_LTZ(3))"
    )
    assert isinstance(table, st.CreateTable)
    assert table.name == "t" and table.if_not_exists
    types = {c.name: c.type for c in table.columns}
    assert types["a"].this == exp.DType.INT
    assert types["b"].this == exp.DType.BIGINT
    assert types["c"].this == exp.DType.TEXT
    assert types["d"].this == exp.DType.DOUBLE
    assert types["e"].this == exp.DType.DECIMAL and [p.this.name for p in types["e"].expressions] == ["10", "2"]
    assert types["f"].this == exp.DType.BOOLEAN
    assert types["g"].this == exp.DType.DATE
    assert types["h"].this == exp.DType.VARCHAR
    assert types["i"].this == exp.DType.TIMESTAMP and types["i"].expressions[0].this.name == "3"
    assert types["j"].this == exp.DType.TIMESTAMPLTZ
    assert all(isinstance(t, exp.DataType) for t in types.values())
    assert [c.nullable for c in table.columns[:2]] == [False, True]
    assert table.options == {} and table.watermark is None


def test_computed_columns_as_in_flink():
    table = one("CREATE TABLE t (v INT, v2 AS v * 2, s STRING, ts AS TO_TIMESTAMP(s), pt AS PROCTIME(),\n"
                "  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)")
    computed = {c.name: c.computed.sql(dialect="weir") for c in table.columns if c.computed is not None}
    assert computed == {"v2": "v * 2", "ts": "TO_TIMESTAMP(s)", "pt": "PROCTIME()"}
    assert [c.type is None for c in table.columns] == [False, True, False, True, True]
    assert table.watermark.column == "ts"


def test_create_table_watermark_options_and_primary_key():
    table = one(
        "CREATE TABLE bids (auction BIGINT, bidder BIGINT, ts TIMESTAMP(3),\n"
        "  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND,\n"
        "  PRIMARY KEY (auction, bidder) NOT ENFORCED\n"
        ") WITH ('connector' = 'kafka', 'scan.startup.mode' = 'earliest-offset', 'partitions' = 4)"
    )
    assert table.watermark.column == "ts"
    assert table.watermark.expression.sql() == "ts - INTERVAL '2' SECOND"
    assert (table.watermark.line, table.watermark.col) == (2, 3)
    assert table.primary_key == ["auction", "bidder"]
    assert table.options == {"connector": "kafka", "scan.startup.mode": "earliest-offset", "partitions": "4"}


def test_column_primary_key_constraint():
    table = one("CREATE TABLE t (id BIGINT PRIMARY KEY NOT ENFORCED, v STRING)")
    assert table.primary_key == ["id"]
    assert table.columns[0].nullable is False


def test_backquoted_names_as_in_flink():
    table = one("CREATE TABLE `my table` (`from` BIGINT, `select` STRING)")
    assert table.name == "my table"
    assert [c.name for c in table.columns] == ["from", "select"]
    query = one("SELECT `from` FROM `my table`").query
    assert query.expressions[0].name == "from"


def test_create_views():
    view = one("CREATE VIEW v AS SELECT a FROM t")
    assert isinstance(view, st.CreateView) and view.name == "v" and not view.materialized
    assert view.query.sql() == "SELECT a FROM t"
    materialized = one("CREATE MATERIALIZED VIEW IF NOT EXISTS mv AS SELECT a FROM t")
    assert materialized.materialized and materialized.if_not_exists and materialized.name == "mv"


def test_insert_with_and_without_columns():
    insert = one("INSERT INTO sink (a, b) SELECT x, y FROM t")
    assert isinstance(insert, st.Insert)
    assert insert.table == "sink" and insert.columns == ["a", "b"]
    assert insert.query.sql() == "SELECT x, y FROM t"
    assert one("INSERT INTO sink SELECT x FROM t").columns is None


def test_select_keeps_count_star_filter():
    select = one("SELECT k, COUNT(*) FILTER (WHERE price > 10) AS expensive FROM t GROUP BY k")
    assert isinstance(select, st.Select)
    assert isinstance(select.query.expressions[1].this, exp.Filter)


def test_set_and_reset():
    assert (one("SET 'parallelism.default' = '4'").key, one("SET 'parallelism.default' = '4'").value) == (
        "parallelism.default",
        "4",
    )
    listing = one("SET")
    assert isinstance(listing, st.SetOption) and listing.key is None and listing.value is None
    reset = one("RESET 'parallelism.default'")
    assert isinstance(reset, st.ResetOption) and reset.key == "parallelism.default"
    assert one("RESET").key is None


def test_show_describe_drop_stop():
    assert [one(f"SHOW {what}").what for what in ("TABLES", "VIEWS", "JOBS")] == ["TABLES", "VIEWS", "JOBS"]
    assert isinstance(one("show tables"), st.Show)
    assert one("DESCRIBE bids").name == "bids"
    assert one("DESC bids").name == "bids"
    drop = one("DROP TABLE IF EXISTS bids")
    assert (drop.kind, drop.name, drop.if_exists) == ("TABLE", "bids", True)
    view = one("DROP VIEW v")
    assert (view.kind, view.name, view.if_exists) == ("VIEW", "v", False)
    stop = one("STOP JOB '3f2a' WITH SAVEPOINT")
    assert isinstance(stop, st.StopJob) and stop.job_id == "3f2a" and stop.with_savepoint
    assert one("STOP JOB '3f2a'").with_savepoint is False


def test_stop_and_reset_remain_column_names():
    query = one("SELECT stop, reset, session FROM t").query
    assert [e.name for e in query.expressions] == ["stop", "reset", "session"]


def test_explain_parses_the_inner_statement():
    explain = one("EXPLAIN\nINSERT INTO sink SELECT a FROM t")
    assert isinstance(explain, st.Explain)
    inner = explain.statement
    assert isinstance(inner, st.Insert) and inner.table == "sink"
    assert (inner.line, inner.col, inner.text) == (2, 1, "INSERT INTO sink SELECT a FROM t")
    assert isinstance(one("EXPLAIN PLAN FOR SELECT 1").statement, st.Select)


def test_explain_normalises_windows_inside():
    explain = one("EXPLAIN SELECT * FROM TUMBLE(bids, ts, INTERVAL '1' MINUTE)")
    assert isinstance(explain.statement.query.args["from_"].this, st.WindowTVF)


def test_statements_positions_and_text_in_a_file_with_comments():
    text = (
        "-- the bids\n"
        "/* a block\n   comment */ SET 'a' = 'b';\n"
        "\n"
        "  SHOW TABLES; ;  -- empty statements are skipped\n"
        "SELECT 1 /* trailing */;\n"
        "   DESCRIBE\n  bids"
    )
    statements = parse(text, "job.sql")
    assert [type(s).__name__ for s in statements] == ["SetOption", "Show", "Select", "Describe"]
    assert [(s.line, s.col) for s in statements] == [(3, 15), (5, 3), (6, 1), (7, 4)]
    assert [s.text for s in statements] == ["SET 'a' = 'b'", "SHOW TABLES", "SELECT 1", "DESCRIBE\n  bids"]
