"""A DuckDB table fed by an updating stream without a key (a join's rows): a multiset,
each commit adding or deleting per distinct row its inserts minus its retractions."""
from __future__ import annotations

from collections import Counter

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.registry import create_sink

SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64()), (ROW_KIND, pa.int8())])


def changes(rows) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"k": k, "n": n, ROW_KIND: kind} for kind, k, n in rows], SCHEMA)


def table(db) -> Counter:
    with duckdb.connect(str(db), read_only=True) as con:
        return Counter(con.execute("SELECT * FROM results").fetchall())


def test_a_retraction_deletes_one_of_two_equal_rows(tmp_path):
    db = tmp_path / "r.duckdb"
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": "results"}, SCHEMA)
    sink.open()
    sink.write(changes([(INSERT, "a", 1), (INSERT, "a", 1), (INSERT, None, 2)]))
    sink.commit(1, sink.pre_commit(1))
    sink.write(changes([(DELETE, "a", 1), (UPDATE_BEFORE, None, 2), (UPDATE_AFTER, None, 3)]))
    sink.commit(2, sink.pre_commit(2))
    assert table(db) == Counter({("a", 1): 1, (None, 3): 1})


@st.composite
def changelogs(draw):
    """Commits of changes that only retract rows emitted before."""
    live: list[tuple] = []
    commits = []
    for _ in range(draw(st.integers(1, 5))):
        batch = []
        for _ in range(draw(st.integers(0, 8))):
            if live and draw(st.booleans()):
                row = live.pop(draw(st.integers(0, len(live) - 1)))
                batch.append((draw(st.sampled_from([DELETE, UPDATE_BEFORE])), *row))
            else:
                row = (draw(st.sampled_from(["a", "b", None])), draw(st.integers(0, 2)))
                live.append(row)
                batch.append((draw(st.sampled_from([INSERT, UPDATE_AFTER])), *row))
        commits.append(batch)
    return commits, Counter(live)


@settings(max_examples=30, deadline=None)
@given(changelogs())
def test_the_table_holds_what_the_changelog_leaves(tmp_path_factory, data):
    commits, expected = data
    db = tmp_path_factory.mktemp("multiset") / "r.duckdb"
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": "results"}, SCHEMA)
    sink.open()
    for i, batch in enumerate(commits, 1):
        if batch:
            sink.write(changes(batch))
        sink.commit(i, sink.pre_commit(i))
    assert table(db) == expected
