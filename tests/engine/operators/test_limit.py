"""Limit: the first n rows that arrive, whatever the batches, across a restore at another parallelism."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.operators.base import OperatorContext
from weir.engine.operators.limit import Limit

SCHEMA = pa.schema([("v", pa.int64())])


def limit(n: int, **ctx) -> Limit:
    op = Limit({"limit": n}, OperatorContext("limit", SCHEMA, **ctx))
    op.open()
    return op


def run(op: Limit, values: list[int], sizes: list[int]) -> list[int]:
    out, at = [], 0
    for size in sizes:
        batch = pa.record_batch([pa.array(values[at:at + size], pa.int64())], schema=SCHEMA)
        out += [v for b in op.process_batch(batch) for v in b.column(0).to_pylist()]
        at += size
    return out


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-1000, 1000), max_size=30), st.integers(0, 10), st.data())
def test_the_first_n_rows_whatever_the_batch_sizes(values, n, data):
    sizes, left = [], len(values)
    while left:
        sizes.append(data.draw(st.integers(1, left)))
        left -= sizes[-1]
    assert run(limit(n), values, sizes) == values[:n]


def test_the_count_survives_a_restore_at_another_parallelism():
    first = limit(5)
    assert run(first, [1, 2, 3], [3]) == [1, 2, 3]
    idle = limit(5, subtask_index=1, parallelism=2)  # owns key groups 64..127: saw no row
    merged = Limit.merge_snapshots([first.snapshot(), idle.snapshot()])
    owner, other = limit(5, subtask_index=0, parallelism=2), limit(5, subtask_index=1, parallelism=2)
    owner.restore(merged)
    other.restore(merged)
    assert run(owner, [4, 5, 6, 7], [2, 2]) == [4, 5]  # two more, then none
    assert other.emitted == 0
