"""Islands numbered in Arrow equal SQL's gaps and islands (``lag`` then a running ``sum`` over
``PARTITION BY`` keys), NULL and NaN keys grouped as PARTITION BY groups them."""
from __future__ import annotations

import math

import duckdb
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from weir.engine.operators.islands import comparable, island_numbers

KEYS = st.one_of(st.none(), st.integers(0, 3))
NAMES = st.one_of(st.none(), st.sampled_from(["a", "b", "ß"]))
PRICES = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.nan]))


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(KEYS, NAMES, PRICES, st.integers(0, 50)), max_size=60), gap=st.integers(1, 10))
def test_islands_equal_sql_gaps_and_islands(rows, gap):
    table = pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "name": pa.array([r[1] for r in rows], pa.string()),
                      "price": pa.array([r[2] for r in rows], pa.float64()), "ts": pa.array([r[3] for r in rows], pa.int64())})
    con = duckdb.connect()
    con.register("t", table)
    ordered = con.sql("SELECT *, row_number() OVER () AS n FROM (SELECT * FROM t ORDER BY k, name, price, ts)").to_arrow_table()
    con.register("o", ordered)
    expected = con.sql(f"""
        SELECT n, sum(new) OVER (PARTITION BY k, name, price ORDER BY ts, n ROWS UNBOUNDED PRECEDING) AS island,
               k, name, price
        FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k, name, price ORDER BY ts, n) <= {gap}
                             THEN 0 ELSE 1 END AS new FROM o)
        ORDER BY n""").fetchall()
    keys = [ordered.column(c).combine_chunks() for c in ("k", "name", "price")]
    got = island_numbers(keys, ordered.column("ts").combine_chunks(), gap).to_pylist()
    # the same partition of the rows: rows share an island in one exactly when they do in the other
    sql_islands = [(k, name, None if price is None else ("nan" if math.isnan(price) else price), island)
                   for _, island, k, name, price in expected]
    assert len(got) == len(rows)
    for i in range(len(rows)):
        for j in range(i + 1, min(i + 4, len(rows))):
            assert (got[i] == got[j]) == (sql_islands[i] == sql_islands[j])


def test_keys_arrow_cannot_compare_are_left_to_sql():
    assert comparable(pa.int64()) and comparable(pa.string()) and comparable(pa.dictionary(pa.int32(), pa.string()))
    assert not comparable(pa.list_(pa.int64())) and not comparable(pa.struct([("a", pa.int64())]))
