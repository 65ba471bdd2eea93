"""Point lookups answered from the snapshot's index (shell/pgwire/lookup.py) give exactly
DuckDB's answers: the same columns, and the same DataRow bytes in text and binary."""
from __future__ import annotations

import datetime

import duckdb
import psycopg
from hypothesis import HealthCheck, given, settings, strategies as s

from weir.engine.connectors.duckdb_snapshot import publisher_for
from weir.shell.api import Connection
from weir.shell.pgwire import lookup
from weir.shell.pgwire.client import encode_rows
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import ServeOptions, Server

KEY_TYPES = {
    "TINYINT": s.integers(-3, 3), "SMALLINT": s.integers(-3, 3), "INTEGER": s.integers(-3, 3),
    "BIGINT": s.integers(-3, 3), "UBIGINT": s.integers(0, 5), "UINTEGER": s.integers(0, 5),
    "VARCHAR": s.sampled_from(["a", "b", "é", "", "A", "a "]),
}
VALUE_TYPES = {
    "BIGINT": s.integers(-2**63, 2**63 - 1), "INTEGER": s.integers(-2**31, 2**31 - 1),
    "DOUBLE": s.floats(allow_nan=True, allow_infinity=True),
    "FLOAT": s.floats(width=32, allow_nan=True, allow_infinity=True),
    "DECIMAL(10,2)": s.decimals(min_value=-10**7, max_value=10**7, places=2, allow_nan=False),
    "VARCHAR": s.text(max_size=8), "BOOLEAN": s.booleans(), "BLOB": s.binary(max_size=6),
    "DATE": s.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31)),
    "TIMESTAMP": s.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1)),
}
#: Keys no index answers (DuckDB casts or refuses them): they must go to DuckDB.
STRANGERS = [True, "1", 1, 2**70, -1, 1.0, None]


@s.composite
def tables(draw):
    key_type = draw(s.sampled_from(sorted(KEY_TYPES)))
    value_types = draw(s.lists(s.sampled_from(sorted(VALUE_TYPES)), min_size=1, max_size=4))
    keys = KEY_TYPES[key_type]
    rows = draw(s.lists(s.tuples(s.none() | keys, *(s.none() | VALUE_TYPES[t] for t in value_types)),
                        max_size=12))
    asked = draw(s.lists(s.none() | keys | s.sampled_from(STRANGERS), min_size=1, max_size=6))
    columns = [f"c{i}" for i in range(len(value_types))]
    projection = draw(s.just("*") | s.lists(s.sampled_from(["k", "K", *columns]), min_size=1, max_size=5)
                      .map(", ".join))
    return key_type, value_types, rows, asked, projection


def duckdb_answer(reader: ResultReader, sql: str, params: list):
    with reader.cursor() as cursor:
        cursor.execute(sql, params)
        return [(d[0], str(d[1])) for d in cursor.description], cursor.fetchall()


def compares_as_is(key_type: str, key) -> bool:
    if key is None:
        return True
    if key_type == "VARCHAR":
        return type(key) is str
    bits = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64}.get(key_type)
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if bits else (0, 1 << {"UBIGINT": 64, "UINTEGER": 32}[key_type])
    return type(key) is int and low <= key < high


def wire(columns, rows, binary: int) -> list[bytes]:
    return sorted(encode_rows(columns, [binary], [row]) for row in rows)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables())
def test_a_point_lookup_answers_as_duckdb_does(tmp_path_factory, case):
    key_type, value_types, rows, asked, projection = case
    path = str(tmp_path_factory.mktemp("lookup") / "results.duckdb")
    with duckdb.connect(path) as con:
        con.execute(f"CREATE TABLE t (k {key_type}, " +
                    ", ".join(f"c{i} {t}" for i, t in enumerate(value_types)) + ")")
        if rows:
            con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * (len(value_types) + 1))})", rows)
    reader = ResultReader(path, beside_jobs=False)
    lookups = lookup.PointLookups(reader)
    sql = f"SELECT {projection} FROM t WHERE k = $1"
    found = lookup.shape(sql)
    assert found is not None
    for key in asked:
        answer = lookups.answer(sql, found, [key])
        if answer is lookup.UNPREPARED:
            lookups.prepare(sql, found, [key])
            answer = lookups.answer(sql, found, [key])
        if not compares_as_is(key_type, key):
            assert answer is None, f"{key!r} for a {key_type} key: DuckDB casts it, so DuckDB must answer"
            continue
        expected = duckdb_answer(reader, sql, [key])
        assert answer[0] == expected[0]
        for binary in (0, 1):
            assert wire(answer[0], answer[1], binary) == wire(expected[0], expected[1], binary), (key, binary)
        if key is not None:  # the key written in the statement: the same answer
            literal = f"SELECT {projection} FROM t WHERE k = " + \
                ("'" + key.replace("'", "''") + "'" if isinstance(key, str) else str(key))
            found_literal = lookup.shape(literal)
            if lookups.answer(literal, found_literal, []) is lookup.UNPREPARED:
                lookups.prepare(literal, found_literal, [])
            assert lookups.answer(literal, found_literal, [])[1] == answer[1]


def test_only_the_point_lookup_shape_is_taken():
    assert lookup.shape('SELECT a, "B c" FROM main.t WHERE "Id" = $2;') == \
        lookup.Shape(("a", "B c"), ("main", "t"), "Id", 2)
    assert lookup.shape("select * from T where K = 'it''s'") == lookup.Shape(None, ("t",), "k", None, "it's")
    for other in ["SELECT * FROM t WHERE k = $1 AND v = 2", "SELECT * FROM t WHERE k > $1",
                  "SELECT count(*) FROM t WHERE k = $1", "SELECT * FROM t, u WHERE k = $1",
                  "SELECT * FROM t WHERE k = $1 LIMIT 1", "SELECT * FROM t WHERE k = 1.5"]:
        assert lookup.shape(other) is None, other


def test_psycopg_lookups_come_from_the_index_and_follow_each_published_snapshot(tmp_path):
    path = str(tmp_path / "results.duckdb")
    with duckdb.connect(path) as con:
        con.execute("CREATE TABLE per_key AS SELECT range AS k, 'v' || range AS v FROM range(100)")
        con.execute(f"CREATE TABLE big AS SELECT range AS k FROM range({5 * lookup.ROWS_PER_LOOKUP})")
    server = Server(Connection(path, state_dir=tmp_path / "jobs"), ResultReader(path, beside_jobs=False),
                    ServeOptions(port=0))
    server.start_in_thread()
    try:
        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True) as con:
            for binary in (False, True):
                cur = con.cursor(binary=binary)
                for k in (7, 8, 1000):
                    cur.execute("SELECT v, k FROM per_key WHERE k = %s", [k])
                    assert cur.fetchall() == ([] if k == 1000 else [(f"v{k}", k)])
            assert server.lookups.answered == 6
            with publisher_for(path).change(10) as writer:
                writer.execute("UPDATE per_key SET v = 'changed' WHERE k = 7")
            cur.execute("SELECT v, k FROM per_key WHERE k = %s", [7])
            assert cur.fetchall() == [("changed", 7)]
            assert server.lookups.answered == 7
            cur.execute("SELECT v FROM per_key WHERE k = %s", ["7"])  # a string: DuckDB casts it
            assert cur.fetchall() == [("changed",)]
            assert server.lookups.answered == 7
            # 10,000 rows are read at the 5th lookup (one per ROWS_PER_LOOKUP rows); DuckDB answers before.
            for k in range(6):
                cur.execute("SELECT k FROM big WHERE k = %s", [k])
                assert cur.fetchall() == [(k,)]
            assert server.lookups.answered == 7 + 2
    finally:
        server.stop()
