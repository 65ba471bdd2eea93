"""Every window spelling normalises to one WindowTVF in FROM."""
import pytest
from sqlglot import exp

from weir.sql import WindowTVF, interval_micros, parse

SECOND = 1_000_000
MINUTE = 60 * SECOND


def query(text: str) -> exp.Query:
    (statement,) = parse(text)
    return statement.query


def tvf(text: str) -> WindowTVF:
    relation = query(text).args["from_"].this
    assert isinstance(relation, WindowTVF)
    return relation


def micros(window: WindowTVF, name: str) -> int | None:
    value = window.args.get(name)
    return interval_micros(value) if value is not None else None


def fields(window: WindowTVF) -> dict:
    return {
        "kind": window.kind,
        "table": window.this.sql(dialect="weir"),
        "time_col": window.args["time_col"].sql(),
        **{name: micros(window, name) for name in ("size", "slide", "step", "gap", "offset") if window.args.get(name)},
    }


@pytest.mark.parametrize(
    "relation",
    [
        "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))",
        "TABLE(TUMBLE(DATA => TABLE bids, TIMECOL => DESCRIPTOR(date_time), SIZE => INTERVAL '10' SECOND))",
        "TABLE(TUMBLE(SIZE => INTERVAL '10' SECOND, TIMECOL => DESCRIPTOR(date_time), DATA => TABLE bids))",
        "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), size => INTERVAL '10' SECOND))",
        "TUMBLE(bids, date_time, INTERVAL '10' SECOND)",
        "TUMBLE(bids, date_time, INTERVAL '10 seconds')",
    ],
)
def test_tumble_spellings(relation):
    window = tvf(f"SELECT * FROM {relation}")
    assert fields(window) == {"kind": "TUMBLE", "table": "bids", "time_col": "date_time", "size": 10 * SECOND}
    assert isinstance(window.this, exp.Table) and isinstance(window.args["time_col"], exp.Column)


def test_tumble_offset_positional_and_named():
    positional = tvf("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '15' MINUTE))")
    named = tvf("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), OFFSET => INTERVAL '15' MINUTE, SIZE => INTERVAL '1' HOUR))")
    short = tvf("SELECT * FROM TUMBLE(t, ts, INTERVAL '1' HOUR, INTERVAL '15' MINUTE)")
    for window in (positional, named, short):
        assert (micros(window, "size"), micros(window, "offset")) == (60 * MINUTE, 15 * MINUTE)


def test_hop_flink_named_and_risingwave():
    expected = {"kind": "HOP", "table": "bids", "time_col": "ts", "slide": 10 * SECOND, "size": MINUTE}
    assert fields(tvf("SELECT * FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '1' MINUTE))")) == expected
    assert fields(tvf("SELECT * FROM TABLE(HOP(DATA => TABLE bids, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1' MINUTE, SLIDE => INTERVAL '10' SECOND))")) == expected
    assert fields(tvf("SELECT * FROM HOP(bids, ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)")) == expected


def test_cumulate_positional_and_named():
    expected = {"kind": "CUMULATE", "table": "bids", "time_col": "ts", "step": MINUTE, "size": 60 * MINUTE}
    assert fields(tvf("SELECT * FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '1' HOUR))")) == expected
    assert fields(tvf("SELECT * FROM TABLE(CUMULATE(DATA => TABLE bids, TIMECOL => DESCRIPTOR(ts), STEP => INTERVAL '1' MINUTE, SIZE => INTERVAL '1' HOUR))")) == expected


def test_session_with_and_without_partition_by():
    plain = tvf("SELECT * FROM TABLE(SESSION(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' MINUTE))")
    assert fields(plain) == {"kind": "SESSION", "table": "bids", "time_col": "ts", "gap": 5 * MINUTE}
    assert not plain.args.get("partition_by")
    for keys in ("bidder, auction", "(bidder, auction)"):
        window = tvf(f"SELECT * FROM TABLE(SESSION(TABLE bids PARTITION BY {keys}, DESCRIPTOR(ts), INTERVAL '5' MINUTE))")
        assert [k.sql() for k in window.args["partition_by"]] == ["bidder", "auction"]
        assert micros(window, "gap") == 5 * MINUTE
    named = tvf("SELECT * FROM TABLE(SESSION(DATA => TABLE bids PARTITION BY bidder, TIMECOL => DESCRIPTOR(ts), GAP => INTERVAL '5' MINUTE))")
    assert [k.sql() for k in named.args["partition_by"]] == ["bidder"] and micros(named, "gap") == 5 * MINUTE


@pytest.mark.parametrize("alias", ["AS w", "w"])
def test_window_alias_is_kept(alias):
    flink = tvf(f"SELECT w.window_start FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) {alias}")
    short = tvf(f"SELECT w.window_start FROM TUMBLE(bids, ts, INTERVAL '1' MINUTE) {alias}")
    assert flink.args["alias"].name == "w" and short.args["alias"].name == "w"


def test_subquery_and_view_as_input():
    window = tvf(
        "SELECT * FROM TABLE(TUMBLE(TABLE (SELECT * FROM bids WHERE price > 10), DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
    )
    assert isinstance(window.this, exp.Subquery)
    assert window.this.this.sql() == "SELECT * FROM bids WHERE price > 10"
    assert tvf("SELECT * FROM TABLE(TUMBLE(TABLE expensive_bids, DESCRIPTOR(ts), INTERVAL '1' MINUTE))").this.name == "expensive_bids"


FLINK = """SELECT auction, window_start, window_end, COUNT(*) AS bids FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end"""
RISINGWAVE = """SELECT auction, window_start, window_end, COUNT(*) AS bids FROM TUMBLE(bids, ts, INTERVAL '10' SECOND)
GROUP BY auction, window_start, window_end"""
LEGACY = """SELECT auction, TUMBLE_START(ts, INTERVAL '10' SECOND), TUMBLE_END(ts, INTERVAL '10' SECOND), COUNT(*) AS bids
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)"""


def test_three_tumble_spellings_normalise_to_the_same_tree():
    flink, risingwave, legacy = (query(text) for text in (FLINK, RISINGWAVE, LEGACY))
    assert flink.sql(dialect="weir") == risingwave.sql(dialect="weir") == legacy.sql(dialect="weir")
    assert flink == risingwave == legacy


def test_normalised_window_prints_as_flink_and_parses_back_to_itself():
    printed = query(RISINGWAVE).sql(dialect="weir")
    assert "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))" in printed
    assert query(printed) == query(RISINGWAVE)


def test_legacy_group_window_rewrites_select_group_by_and_keeps_aliases():
    legacy = query(
        "SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS wstart, TUMBLE_END(ts, INTERVAL '1' MINUTE),\n"
        "  TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS rt, k, COUNT(*) FROM bids b\n"
        "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), k HAVING TUMBLE_END(ts, INTERVAL '60' SECOND) IS NOT NULL"
    )
    window = legacy.args["from_"].this
    assert fields(window) == {"kind": "TUMBLE", "table": "bids", "time_col": "ts", "size": MINUTE}
    assert window.args["alias"].name == "b" and not window.this.args.get("alias")
    assert [e.sql() for e in legacy.expressions] == ["window_start AS wstart", "window_end", "window_time AS rt", "k", "COUNT(*)"]
    assert [e.sql() for e in legacy.args["group"].expressions] == ["window_start", "window_end", "k"]
    assert legacy.args["having"].sql() == "HAVING NOT window_end IS NULL"


def test_legacy_hop_and_session():
    hop = query(
        "SELECT HOP_START(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE), COUNT(*) FROM bids "
        "GROUP BY HOP(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)"
    )
    assert fields(hop.args["from_"].this) == {"kind": "HOP", "table": "bids", "time_col": "ts", "slide": 10 * SECOND, "size": MINUTE}
    assert hop.expressions[0].sql() == "window_start"
    session = query(
        "SELECT bidder, SESSION_END(ts, INTERVAL '5' MINUTE), COUNT(*) FROM bids GROUP BY bidder, SESSION(ts, INTERVAL '5' MINUTE)"
    )
    assert fields(session.args["from_"].this) == {"kind": "SESSION", "table": "bids", "time_col": "ts", "gap": 5 * MINUTE}
    assert [e.sql() for e in session.args["group"].expressions] == ["bidder", "window_start", "window_end"]
    assert session.expressions[1].sql() == "window_end"


def test_every_select_in_the_tree_is_normalised():
    nested = query(
        "WITH per_minute AS (SELECT k, window_start, COUNT(*) AS n FROM TUMBLE(bids, ts, INTERVAL '1' MINUTE) "
        "GROUP BY k, window_start, window_end)\n"
        "SELECT * FROM per_minute WHERE n > (SELECT COUNT(*) FROM bids GROUP BY TUMBLE(ts, INTERVAL '1' HOUR))"
    )
    windows = list(nested.find_all(WindowTVF))
    assert sorted(micros(w, "size") for w in windows) == [MINUTE, 60 * MINUTE]
    # A window over a subquery that is itself windowed (cascaded windows).
    cascaded = tvf(
        "SELECT * FROM TABLE(TUMBLE(TABLE (SELECT window_time AS ts FROM TUMBLE(bids, ts, INTERVAL '1' SECOND)), "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
    )
    inner = cascaded.this.this.args["from_"].this
    assert isinstance(inner, WindowTVF) and micros(inner, "size") == SECOND


def test_insert_and_materialized_view_bodies_are_normalised():
    insert, view = parse(
        "INSERT INTO sink SELECT window_start FROM TUMBLE(bids, ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end;\n"
        "CREATE MATERIALIZED VIEW mv AS SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) FROM bids GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)"
    )
    assert isinstance(insert.query.args["from_"].this, WindowTVF)
    assert isinstance(view.query.args["from_"].this, WindowTVF)
    assert view.query.expressions[0].sql() == "window_start"


def test_window_in_a_join():
    joined = query(
        "SELECT * FROM TUMBLE(bids, ts, INTERVAL '1' MINUTE) AS b JOIN TABLE(TUMBLE(TABLE asks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS a "
        "ON a.window_start = b.window_start"
    )
    assert isinstance(joined.args["joins"][0].this, WindowTVF)
    assert joined.args["joins"][0].this.this.name == "asks"


@pytest.mark.parametrize(
    "relation",
    [
        "TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '1' MINUTE, INTERVAL '5' SECOND)) AS h",
        "TABLE(CUMULATE(TABLE (SELECT * FROM bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '1' HOUR))",
        "TABLE(SESSION(TABLE bids PARTITION BY bidder, auction, DESCRIPTOR(ts), INTERVAL '5' MINUTE))",
    ],
)
def test_printing_a_window_round_trips_and_leaves_the_tree_intact(relation):
    original = query(f"SELECT * FROM {relation}")
    window = original.args["from_"].this
    printed = original.sql(dialect="weir")
    assert query(printed) == original
    assert all(node.parent is window for node in [window.this, window.args["time_col"], *(window.args.get("partition_by") or [])])
