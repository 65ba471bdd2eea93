"""GroupAggregate against DuckDB's batch GROUP BY.

The operator's changelog, applied in order to an empty multiset of rows (+I/+U
add a row, -U/-D remove one that must be there), must leave exactly DuckDB's
batch query over the input's net rows — whatever the batch sizes, wherever the
operator is snapshotted and restored, and whether the input is append-only or
itself a changelog with retractions.
"""
from __future__ import annotations

import random
from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.group_aggregate import GroupAggregate

INPUT = pa.schema([("k", pa.int64()), ("g", pa.string()), ("v", pa.int64()), ("x", pa.float64())])

CONFIG = {
    "keys": [["k", '"k"'], ["g", '"g"']],
    "aggregates": [
        {"name": "_agg0", "function": "count", "argument": None},
        {"name": "_agg1", "function": "sum", "argument": '"v"'},
        {"name": "_agg2", "function": "min", "argument": '"v"'},
        {"name": "_agg3", "function": "max", "argument": '"v"'},
        {"name": "_agg4", "function": "avg", "argument": '"x"'},
        {"name": "_agg5", "function": "count", "argument": '"v"', "distinct": True},
        {"name": "_agg6", "function": "count", "argument": None, "filter": '"v" > 2'},
        {"name": "_agg7", "function": "sum", "argument": '"v"', "distinct": True, "filter": '"x" < 0.5'},
    ],
    "having": None,
    "projection": [["k", '"k"'], ["g", '"g"'], ["n", '"_agg0"'], ["total", '"_agg1"'], ["low", '"_agg2"'],
                   ["high", '"_agg3"'], ["mean", '"_agg4"'], ["kinds", '"_agg5"'], ["big", '"_agg6"'],
                   ["dsum", '"_agg7"']],
}
OUTPUT = pa.schema([("k", pa.int64()), ("g", pa.string()), ("n", pa.int64()), ("total", pa.int64()),
                    ("low", pa.int64()), ("high", pa.int64()), ("mean", pa.float64()), ("kinds", pa.int64()),
                    ("big", pa.int64()), ("dsum", pa.int64()), (ROW_KIND, pa.int8())])
ORACLE = """SELECT k, g, COUNT(*), SUM(v), MIN(v), MAX(v), AVG(x), COUNT(DISTINCT v),
    COUNT(*) FILTER (WHERE v > 2), SUM(DISTINCT v) FILTER (WHERE x < 0.5) FROM rows GROUP BY k, g {having}"""

HAVING_CONFIG = dict(CONFIG, having='"_agg0" >= 2 AND "_agg3" < 8')


def make_op(config=CONFIG, **ctx) -> GroupAggregate:
    return GroupAggregate(config, OperatorContext("group", OUTPUT, **ctx))


def random_changelog(seed: int, n: int, retract: bool) -> list[dict]:
    """Rows with a row kind: inserts, and (if ``retract``) retractions of live rows
    as -U/+U pairs or -D, the way an upstream updating stream sends them."""
    rng = random.Random(seed)
    live: list[dict] = []
    out: list[dict] = []
    while len(out) < n:
        if retract and live and rng.random() < 0.35:
            old = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                out.append({**old, ROW_KIND: DELETE})
            else:
                new = dict(old, v=rng.choice([None, *range(10)]))
                live.append(new)
                out += [{**old, ROW_KIND: UPDATE_BEFORE}, {**new, ROW_KIND: UPDATE_AFTER}]
        else:
            row = {"k": rng.choice([1, 2, 3, None]), "g": rng.choice(["a", "b", None]),
                   "v": rng.choice([None, *range(10)]), "x": rng.choice([None, 0.25, 0.75, 1.5])}
            live.append(row)
            out.append({**row, ROW_KIND: INSERT})
    return out


def batches(rows: list[dict], sizes: list[int], changelog: bool) -> list[pa.RecordBatch]:
    schema = pa.schema([*INPUT, (ROW_KIND, pa.int8())]) if changelog else INPUT
    out, i = [], 0
    for size in sizes:
        chunk = rows[i:i + size]
        i += size
        if chunk:
            out.append(pa.RecordBatch.from_pylist([{f: r[f] for f in schema.names} for r in chunk], schema))
        if i >= len(rows):
            break
    if i < len(rows):
        out.append(pa.RecordBatch.from_pylist([{f: r[f] for f in schema.names} for r in rows[i:]], schema))
    return out


def apply_changelog(result: Counter, emitted: list[pa.RecordBatch]) -> None:
    """Apply emitted changes in order to a multiset of rows."""
    for batch in emitted:
        assert batch.schema == OUTPUT
        for row in batch.to_pylist():
            kind = row.pop(ROW_KIND)
            key = tuple(round(v, 9) if isinstance(v, float) else v for v in row.values())
            if kind in (INSERT, UPDATE_AFTER):
                result[key] += 1
            else:
                assert result[key] > 0, f"retracted {row}, which is not in the result"
                result[key] -= 1
                if not result[key]:
                    del result[key]


def oracle(rows: list[dict], having: str = "") -> Counter:
    net: Counter = Counter()
    for row in rows:
        key = tuple(row[f] for f in INPUT.names)
        net[key] += -1 if row[ROW_KIND] in (UPDATE_BEFORE, DELETE) else 1
    live = [dict(zip(INPUT.names, key)) for key, count in net.items() for _ in range(count)]
    con = duckdb.connect()
    con.register("rows", pa.Table.from_pylist(live, INPUT))
    return Counter(tuple(round(v, 9) if isinstance(v, float) else v for v in r)
                   for r in con.sql(ORACLE.format(having=having)).fetchall())


def run(rows, sizes, changelog, restore_at=None, config=CONFIG, **ctx):
    """Drive the operator; append-only input (no row kinds) is planned as such: MIN and
    MAX then keep running values instead of value multisets."""
    config = dict(config, append_only_input=not changelog)
    op = make_op(config, **ctx)
    result: Counter = Counter()
    for i, batch in enumerate(batches(rows, sizes, changelog)):
        if i == restore_at:
            snapshot = op.snapshot()
            op.close()
            op = make_op(config, **ctx)
            op.restore(snapshot)
        emitted = op.process_batch(batch)
        for b in emitted:
            kinds = b.column(ROW_KIND).to_pylist()
            assert set(kinds) <= {INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE}
        apply_changelog(result, emitted)
    return result


def test_append_only_input_single_batch_equals_batch_group_by():
    rows = random_changelog(1, 200, retract=False)
    assert run(rows, [200], changelog=False) == oracle(rows)


def test_append_only_input_keeps_no_value_multiset_for_min_and_max():
    op = make_op(dict(CONFIG, append_only_input=True))
    op.process_batch(batches(random_changelog(2, 50, retract=False), [50], False)[0])
    # Only the DISTINCT aggregates' values are kept: COUNT(DISTINCT v) and SUM(DISTINCT v) FILTER.
    assert sorted(op.snapshot()["tables"]) == ["group_accumulators", "group_values_0", "group_values_1"]


def test_updates_are_minus_u_plus_u_pairs_and_no_ops_are_suppressed():
    op = make_op({"keys": [["k", '"k"']], "aggregates": [{"name": "_agg0", "function": "max", "argument": '"v"'}],
                  "having": None, "projection": [["k", '"k"'], ["m", '"_agg0"']]})
    op.ctx.output_schema = pa.schema([("k", pa.int64()), ("m", pa.int64()), (ROW_KIND, pa.int8())])
    first = op.process_batch(pa.record_batch({"k": [1, 2], "v": [5, 1]}))
    assert first[0].to_pylist() == [{"k": 1, "m": 5, ROW_KIND: INSERT}, {"k": 2, "m": 1, ROW_KIND: INSERT}]
    # k=1 gets a smaller value: its MAX stays 5, so nothing is emitted for it.
    second = op.process_batch(pa.record_batch({"k": [1, 2], "v": [3, 4]}))
    assert second[0].to_pylist() == [{"k": 2, "m": 1, ROW_KIND: UPDATE_BEFORE}, {"k": 2, "m": 4, ROW_KIND: UPDATE_AFTER}]
    # Retracting the maximum of k=1 reveals the next value; retracting k=2's rows deletes it.
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64()), (ROW_KIND, pa.int8())])
    third = op.process_batch(pa.RecordBatch.from_pylist(
        [{"k": 1, "v": 5, ROW_KIND: DELETE}, {"k": 2, "v": 1, ROW_KIND: DELETE}, {"k": 2, "v": 4, ROW_KIND: DELETE}],
        schema))
    assert third[0].to_pylist() == [{"k": 1, "m": 5, ROW_KIND: UPDATE_BEFORE}, {"k": 1, "m": 3, ROW_KIND: UPDATE_AFTER},
                                    {"k": 2, "m": 4, ROW_KIND: DELETE}]


def test_a_batch_changes_come_out_as_one_batch():
    """The changes of one input batch are one output batch, whatever DuckDB's chunks: the next
    operator's mini-batch (and its cost per statement) is the batch this one was given."""
    op = make_op({"keys": [["k", '"k"']], "aggregates": [{"name": "_agg0", "function": "max", "argument": '"v"'}],
                  "having": None, "projection": [["k", '"k"'], ["m", '"_agg0"']]})
    op.ctx.output_schema = pa.schema([("k", pa.int64()), ("m", pa.int64()), (ROW_KIND, pa.int8())])
    keys = pa.array(range(20_000), pa.int64())
    assert [b.num_rows for b in op.process_batch(pa.record_batch({"k": keys, "v": keys}))] == [20_000]
    more = pa.array(range(1, 20_001), pa.int64())
    assert [b.num_rows for b in op.process_batch(pa.record_batch({"k": keys, "v": more}))] == [40_000]


def test_closed_and_used_again_the_operator_makes_its_state_tables_again():
    op = make_op({"keys": [["k", '"k"']], "aggregates": [{"name": "_agg0", "function": "max", "argument": '"v"'}],
                  "having": None, "projection": [["k", '"k"'], ["m", '"_agg0"']]})
    op.ctx.output_schema = pa.schema([("k", pa.int64()), ("m", pa.int64()), (ROW_KIND, pa.int8())])
    op.process_batch(pa.record_batch({"k": [1], "v": [2]}))
    op.close()  # its connection, and the state in it, are gone
    assert op.process_batch(pa.record_batch({"k": [1], "v": [3]}))[0].to_pylist() == [{"k": 1, "m": 3, ROW_KIND: INSERT}]


def test_having_entering_and_leaving_become_insert_and_delete():
    op = GroupAggregate({"keys": [["k", '"k"']], "aggregates": [{"name": "_agg0", "function": "count"}],
                         "having": '"_agg0" >= 2', "projection": [["k", '"k"'], ["n", '"_agg0"']]},
                        OperatorContext("g", pa.schema([("k", pa.int64()), ("n", pa.int64()), (ROW_KIND, pa.int8())])))
    assert op.process_batch(pa.record_batch({"k": [1]})) == []
    assert op.process_batch(pa.record_batch({"k": [1]}))[0].to_pylist() == [{"k": 1, "n": 2, ROW_KIND: INSERT}]
    retract = pa.RecordBatch.from_pylist([{"k": 1, ROW_KIND: DELETE}],
                                         pa.schema([("k", pa.int64()), (ROW_KIND, pa.int8())]))
    assert op.process_batch(retract)[0].to_pylist() == [{"k": 1, "n": 2, ROW_KIND: DELETE}]


def test_global_aggregate_is_one_group():
    op = GroupAggregate({"keys": [], "aggregates": [{"name": "_agg0", "function": "sum", "argument": '"v"'}],
                         "having": None, "projection": [["s", '"_agg0"']]},
                        OperatorContext("g", pa.schema([("s", pa.int64()), (ROW_KIND, pa.int8())])))
    assert op.process_batch(pa.record_batch({"v": [1, 2]}))[0].to_pylist() == [{"s": 3, ROW_KIND: INSERT}]
    assert op.process_batch(pa.record_batch({"v": [4]}))[0].to_pylist() == [
        {"s": 3, ROW_KIND: UPDATE_BEFORE}, {"s": 7, ROW_KIND: UPDATE_AFTER}]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8),
       retract=st.booleans(), restore_at=st.one_of(st.none(), st.integers(0, 6)), having=st.booleans())
def test_changelog_applied_equals_batch_group_by(seed, sizes, retract, restore_at, having):
    rows = random_changelog(seed, 120, retract)
    config = HAVING_CONFIG if having else CONFIG
    got = run(rows, sizes, changelog=retract, restore_at=restore_at, config=config)
    assert got == oracle(rows, "HAVING COUNT(*) >= 2 AND MAX(v) < 8" if having else "")


@pytest.mark.parametrize("parallelism", [2, 3])
def test_restore_at_another_parallelism(parallelism):
    """Two subtasks' snapshots merged and cut into ``parallelism`` new subtasks: each
    key's later changes retract exactly what the old subtask emitted."""
    rows = random_changelog(7, 300, retract=True)
    first, later = rows[:150], rows[150:]
    ops = [make_op(subtask_index=i, parallelism=2) for i in range(2)]
    result: Counter = Counter()
    for batch in batches(first, [50] * 3, True):
        for i, op in enumerate(ops):
            mine = _owned(batch, op)
            apply_changelog(result, op.process_batch(mine))
    merged = GroupAggregate.merge_snapshots([op.snapshot() for op in ops])
    new_ops = [make_op(subtask_index=i, parallelism=parallelism) for i in range(parallelism)]
    for op in new_ops:
        op.restore(merged)
    for batch in batches(later, [50] * 3, True):
        for op in new_ops:
            apply_changelog(result, op.process_batch(_owned(batch, op)))
    assert result == oracle(rows)


def _owned(batch: pa.RecordBatch, op: GroupAggregate) -> pa.RecordBatch:
    from weir.engine.state.key_groups import key_groups

    groups = key_groups(batch, ["k", "g"], op.ctx.max_parallelism).to_pylist()
    owned = op.ctx.owned_key_groups()
    return batch.filter(pa.array([g in owned for g in groups]))
