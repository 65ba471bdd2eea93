"""StreamJoin (a regular join) driven directly, against DuckDB's batch join of the net inputs.

Each side gets a changelog (inserts, and retractions of rows inserted before)
in batches, interleaved; the operator's output changelog, applied to an empty
multiset, must equal DuckDB's join of what is left of each side — after any
batch, through snapshots, restores and a change of parallelism.
"""
from __future__ import annotations

from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.graph import schema_to_json
from weir.engine.operators import stream_join
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.stream_join import JOIN_TYPES, StreamJoin
from weir.engine.state.key_groups import key_groups, range_for_subtask

MAX_P = 16
LEFT = pa.schema([("k", pa.int64()), ("v", pa.int64())])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.string())])
ORACLE_JOINS = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN"}


def output_schema(join_type: str, changelog: bool = True) -> pa.Schema:
    fields = list(LEFT) if join_type in ("semi", "anti") else [*LEFT, RIGHT.field("k").with_name("k0"), RIGHT.field("w")]
    return pa.schema(fields + ([pa.field(ROW_KIND, pa.int8())] if changelog else []))


def make_join(join_type: str, *, residual: str | None = None, changelog: bool = True, subtask: int = 0,
              parallelism: int = 1, ttl_ms: int = 0, null_aware: bool = False) -> StreamJoin:
    config = {
        "join_type": join_type, "null_aware": null_aware, "residual": residual, "changelog": changelog,
        "ttl_ms": ttl_ms,
        "left": {"schema": schema_to_json(LEFT), "keys": ["k"], "names": ["k", "v"]},
        "right": {"schema": schema_to_json(RIGHT), "keys": ["k"], "names": ["k0", "w"]},
    }
    ctx = OperatorContext("join", output_schema(join_type, changelog), subtask_index=subtask,
                          parallelism=parallelism, max_parallelism=MAX_P)
    op = StreamJoin(config, ctx)
    op.open()
    return op


def batch(schema: pa.Schema, rows: list[tuple], kinds: list[int] | None = None) -> pa.RecordBatch:
    columns = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)]
    names = list(schema.names)
    if kinds is not None:
        columns.append(pa.array(kinds, pa.int8()))
        names.append(ROW_KIND)
    return pa.record_batch(columns, names=names)


def apply(result: Counter, batches: list[pa.RecordBatch]) -> None:
    """Apply an output changelog to a multiset of rows."""
    for b in batches:
        data = b.to_pylist()
        for row in data:
            kind = row.pop(ROW_KIND, INSERT)
            key = tuple(row.values())
            if kind in (INSERT, UPDATE_AFTER):
                result[key] += 1
            else:
                assert result[key] > 0, f"retraction of a row never emitted: {key}"
                result[key] -= 1
                if not result[key]:
                    del result[key]


def oracle(join_type: str, left: list[tuple], right: list[tuple], residual: str | None = None) -> Counter:
    con = duckdb.connect()
    con.execute("CREATE TABLE l (k BIGINT, v BIGINT); CREATE TABLE r (k0 BIGINT, w VARCHAR)")
    if left:
        con.executemany("INSERT INTO l VALUES (?, ?)", left)
    if right:
        con.executemany("INSERT INTO r VALUES (?, ?)", right)
    condition = "l.k = r.k0" + (f" AND ({residual})" if residual else "")
    if join_type in ORACLE_JOINS:
        sql = f"SELECT l.k, l.v, r.k0, r.w FROM l {ORACLE_JOINS[join_type]} r ON {condition}"
    else:
        exists = "EXISTS" if join_type == "semi" else "NOT EXISTS"
        sql = f"SELECT l.k, l.v FROM l WHERE {exists} (SELECT 1 FROM r WHERE {condition})"
    return Counter(con.execute(sql).fetchall())


def test_inner_join_of_append_only_streams_is_append_only():
    op = make_join("inner", changelog=False)
    out = op.process_batch(batch(LEFT, [(1, 10), (2, 20), (None, 30)]), 0)
    assert out == []
    out += op.process_batch(batch(RIGHT, [(1, "a"), (1, "b"), (3, "c"), (None, "n")]), 1)
    out += op.process_batch(batch(LEFT, [(1, 11), (3, 31)]), 0)
    assert all(ROW_KIND not in b.schema.names for b in out)
    result = Counter()
    apply(result, out)
    assert result == oracle("inner", [(1, 10), (2, 20), (None, 30), (1, 11), (3, 31)],
                            [(1, "a"), (1, "b"), (3, "c"), (None, "n")])



def test_inner_join_emits_in_delta_order_whether_the_other_side_is_carried_or_read_again():
    """A right batch reads the left rows (fixed width: carried through the join), a left batch the
    right ones (a string: read again by row id); either way the pairs come in the delta's order,
    then the other side's arrival order, each row with its own columns."""
    op = make_join("inner")
    assert op.sides[0].fixed_width and not op.sides[1].fixed_width
    op.process_batch(batch(LEFT, [(2, 20), (1, 10), (1, 11)]), 0)
    out = op.process_batch(batch(RIGHT, [(1, "a"), (2, "b"), (1, "c")]), 1)
    assert [(r["v"], r["w"]) for b in out for r in b.to_pylist()] == [
        (10, "a"), (11, "a"), (20, "b"), (10, "c"), (11, "c")]
    out = op.process_batch(batch(LEFT, [(1, 12), (2, 20)], [INSERT, DELETE]), 0)
    assert [(r["k"], r["v"], r["k0"], r["w"], r[ROW_KIND]) for b in out for r in b.to_pylist()] == [
        (1, 12, 1, "a", INSERT), (1, 12, 1, "c", INSERT), (2, 20, 2, "b", DELETE)]

def test_left_join_retracts_the_null_padded_row_when_a_match_arrives():
    op = make_join("left")
    first = op.process_batch(batch(LEFT, [(1, 10)]), 0)
    assert [b.to_pylist() for b in first] == [[{"k": 1, "v": 10, "k0": None, "w": None, ROW_KIND: INSERT}]]
    second = op.process_batch(batch(RIGHT, [(1, "a")]), 1)
    assert second[0].to_pylist() == [
        {"k": 1, "v": 10, "k0": None, "w": None, ROW_KIND: DELETE},
        {"k": 1, "v": 10, "k0": 1, "w": "a", ROW_KIND: INSERT},
    ]
    third = op.process_batch(batch(RIGHT, [(1, "a")], [DELETE]), 1)
    assert third[0].to_pylist() == [
        {"k": 1, "v": 10, "k0": 1, "w": "a", ROW_KIND: DELETE},
        {"k": 1, "v": 10, "k0": None, "w": None, ROW_KIND: INSERT},
    ]


def test_retraction_deletes_one_of_two_equal_rows():
    op = make_join("inner")
    out = op.process_batch(batch(LEFT, [(1, 10), (1, 10)]), 0)
    out += op.process_batch(batch(LEFT, [(1, 10)], [UPDATE_BEFORE]), 0)
    out += op.process_batch(batch(RIGHT, [(1, "a")]), 1)
    result = Counter()
    apply(result, out)
    assert result == Counter({(1, 10, 1, "a"): 1})
    assert op.state_rows() == 2


def test_residual_condition_decides_matches_of_an_outer_join():
    residual = 'length("w") > "v"'
    op = make_join("left", residual=residual)
    out = op.process_batch(batch(LEFT, [(1, 1), (1, 5)]), 0)
    out += op.process_batch(batch(RIGHT, [(1, "abc")]), 1)
    result = Counter()
    apply(result, out)
    assert result == oracle("left", [(1, 1), (1, 5)], [(1, "abc")], residual.replace('"w"', "r.w").replace('"v"', "l.v"))


def test_state_older_than_the_retention_is_dropped(monkeypatch):
    clock = [1_000_000]
    monkeypatch.setattr(stream_join, "now_ms", lambda: clock[0])
    op = make_join("inner", ttl_ms=60_000)
    op.process_batch(batch(LEFT, [(1, 10)]), 0)
    clock[0] += 61_000
    out = op.process_batch(batch(RIGHT, [(1, "late")]), 1)
    assert out == []  # the left row expired before the right one arrived
    assert op.ctx.metrics["state_rows_expired"] == 1
    assert op.state_rows() == 1


# -- properties -------------------------------------------------------------------------

def _changelog(draw, schema: pa.Schema, values) -> list[tuple[tuple, int]]:
    """Inserts, and retractions of rows inserted earlier."""
    live: list[tuple] = []
    out = []
    for _ in range(draw(st.integers(0, 14))):
        if live and draw(st.booleans()) and draw(st.booleans()):
            row = live.pop(draw(st.integers(0, len(live) - 1)))
            out.append((row, draw(st.sampled_from([DELETE, UPDATE_BEFORE]))))
        else:
            row = (draw(st.sampled_from([1, 2, 3, None])), draw(values))
            live.append(row)
            out.append((row, draw(st.sampled_from([INSERT, UPDATE_AFTER]))))
    return out


@st.composite
def scenarios(draw):
    left = _changelog(draw, LEFT, st.integers(0, 3))
    right = _changelog(draw, RIGHT, st.sampled_from(["a", "bb", "ccc"]))
    steps = []
    li = ri = 0
    while li < len(left) or ri < len(right):
        side = draw(st.sampled_from([s for s, rest in ((0, li < len(left)), (1, ri < len(right))) if rest]))
        n = draw(st.integers(1, 4))
        if side == 0:
            steps.append((0, left[li:li + n]))
            li += n
        else:
            steps.append((1, right[ri:ri + n]))
            ri += n
    return left, right, steps


def _net(changes: list[tuple[tuple, int]]) -> list[tuple]:
    rows = Counter()
    for row, kind in changes:
        rows[row] += 1 if kind in (INSERT, UPDATE_AFTER) else -1
    return list(rows.elements())


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.sampled_from(JOIN_TYPES), st.booleans(), st.integers(0, 30))
def test_any_changelog_joins_like_the_batch_join(scenario, join_type, residual, cut):
    left, right, steps = scenario
    condition = 'length("w") > "v"' if residual else None
    op = make_join(join_type, residual=condition)
    result = Counter()
    for i, (side, changes) in enumerate(steps):
        if i == cut % (len(steps) + 1):  # snapshot and restore into two subtasks' worth, then merge back
            snap = op.snapshot()
            op = make_join(join_type, residual=condition)
            op.restore(StreamJoin.merge_snapshots([snap]))
        schema = LEFT if side == 0 else RIGHT
        apply(result, op.process_batch(batch(schema, [r for r, _ in changes], [k for _, k in changes]), side))
    oracle_residual = condition.replace('"w"', "r.w").replace('"v"', "l.v") if condition else None
    assert result == oracle(join_type, _net(left), _net(right), oracle_residual)


@pytest.mark.parametrize("join_type", JOIN_TYPES)
def test_restores_at_another_parallelism(join_type):
    left = [(k, v) for k in range(20) for v in range(2)]
    right = [(k, "x" * (k % 3)) for k in range(5, 25)]
    op = make_join(join_type)
    result = Counter()
    apply(result, op.process_batch(batch(LEFT, left[:20]), 0))
    apply(result, op.process_batch(batch(RIGHT, right[:10]), 1))
    snap = op.snapshot()
    subtasks = [make_join(join_type, subtask=i, parallelism=2) for i in range(2)]
    for sub in subtasks:
        sub.restore(snap)
    for side, rows in ((0, left[20:]), (1, right[10:])):
        b = batch(LEFT if side == 0 else RIGHT, rows)
        groups = key_groups(b, ["k"], MAX_P).to_pylist()
        for i, sub in enumerate(subtasks):
            owned = range_for_subtask(i, 2, MAX_P)
            mask = pa.array([g in owned for g in groups])
            apply(result, sub.process_batch(b.filter(mask), side))
    assert result == oracle(join_type, left, right)
    merged = StreamJoin.merge_snapshots([s.snapshot() for s in subtasks])
    single = make_join(join_type)
    single.restore(merged)
    assert single.state_rows() == len(left) + len(right)
