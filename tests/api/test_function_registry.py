"""Each weir.connect() has its own Python UDFs: two connections of one process define the same
name differently and each of their jobs calls its own — even while both run — and DROP FUNCTION
in one leaves the other's function alone. Jobs still carry their functions' specs."""
from __future__ import annotations

import threading

import pytest

import weir
from weir.sql.errors import WeirSqlError

from api_data import bids_table

QUERY = "SELECT auction, label(price) AS label FROM bids"


def labels(stream) -> list[tuple]:
    return [(r["auction"], r["label"]) for b in stream for r in b.to_pylist()]


@pytest.fixture
def two(tmp_path):
    first = weir.connect(db=str(tmp_path / "a.duckdb"), state_dir=tmp_path / "a")
    second = weir.connect(db=str(tmp_path / "b.duckdb"), state_dir=tmp_path / "b")
    yield first, second
    first.close()
    second.close()


def test_two_connections_define_one_name_differently(two):
    first, second = two
    first.create_function("label", lambda price: f"a{price}", result_type="STRING")
    second.create_function("label", lambda price: f"b{price // 10}", result_type="STRING")
    rows = bids_table()[:2]
    gate = threading.Event()

    def held():  # the first connection's job runs until the second's has run to its end
        yield from rows.to_batches()
        gate.wait(60)

    first.register("bids", held(), schema=rows.schema, watermark="date_time")
    second.register("bids", rows, watermark="date_time")
    running = first.stream(QUERY)
    try:
        assert labels(second.stream(QUERY)) == [(1, "b1"), (1, "b2")]
        assert running.job.status == "RUNNING"
    finally:
        gate.set()
    assert labels(running) == [(1, "a10"), (1, "a20")]
    assert [f["name"] for f in running.job._job.graph.functions] == ["label"]  # the job carries its spec


def test_drop_function_in_one_connection_leaves_the_others(two):
    first, second = two
    for con, prefix in ((first, "a"), (second, "b")):
        con.create_function("label", lambda price, prefix=prefix: f"{prefix}{price}", result_type="STRING")
        con.register("bids", bids_table()[:1], watermark="date_time")
    second.execute("DROP FUNCTION label")
    with pytest.raises(WeirSqlError, match="(?i)unknown function label"):
        second.stream(QUERY)
    assert labels(first.stream(QUERY)) == [(1, "a10")]


def test_a_function_of_one_connection_is_unknown_in_another(two):
    first, second = two
    first.create_function("only_here", lambda price: price, result_type="BIGINT")
    second.register("bids", bids_table(), watermark="date_time")
    with pytest.raises(WeirSqlError) as caught:
        second.stream("SELECT only_here(price) FROM bids")
    assert caught.value.message == "unknown function ONLY_HERE"


def test_table_functions_are_per_connection_too(two):
    first, second = two

    def pieces(n: int):
        def pieces_of(price):
            for i in range(n):
                yield price + i
        return weir.udtf(pieces_of, result_types=["BIGINT"])

    first.create_function("pieces", pieces(1))
    second.create_function("pieces", pieces(2))
    query = "SELECT auction, p FROM bids, LATERAL TABLE(pieces(price)) AS T(p)"
    for con in two:
        con.register("bids", bids_table()[:1], watermark="date_time")
    assert [r["p"] for b in second.stream(query) for r in b.to_pylist()] == [10, 11]
    assert [r["p"] for b in first.stream(query) for r in b.to_pylist()] == [10]
    second.execute("DROP FUNCTION pieces")
    assert [r["p"] for b in first.stream(query) for r in b.to_pylist()] == [10]
