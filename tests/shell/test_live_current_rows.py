"""The live table view's current rows (shell/current_rows.py): the rows an updating result's
changes leave, applied a batch at a time in DuckDB, equal those of applying the changes one at
a time, however the changes are split into batches."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.shell.current_rows import CurrentRows
from weir.shell.live import LiveResult

# A user column named as the bookkeeping's words were once (n, birth): they must not collide.
SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64()), ("birth", pa.float64()), (ROW_KIND, pa.int8())])
ROWS = st.tuples(st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(0, 2)),
                 st.sampled_from([0.5, -1.0, None]))


@st.composite
def changelogs(draw):
    """A consistent changelog: a retraction only of a row that is there."""
    there, changes = [], []
    for _ in range(draw(st.integers(0, 40))):
        if there and draw(st.booleans()):
            row = there.pop(draw(st.integers(0, len(there) - 1)))
            changes.append((*row, draw(st.sampled_from([UPDATE_BEFORE, DELETE]))))
        else:
            row = draw(ROWS)
            there.append(row)
            changes.append((*row, draw(st.sampled_from([INSERT, UPDATE_AFTER]))))
    return changes


def one_at_a_time(changes) -> list[tuple]:
    """The reference: a dict of row -> how many, in the order each row came from none."""
    current: dict[tuple, int] = {}
    for *row, kind in changes:
        row = tuple(row)
        if kind in (UPDATE_BEFORE, DELETE):
            if current[row] == 1:
                del current[row]
            else:
                current[row] -= 1
        else:
            current[row] = current.get(row, 0) + 1
    return [row for row, n in current.items() for _ in range(n)]


def batch(changes) -> pa.RecordBatch:
    columns = list(zip(*changes)) if changes else [[]] * 4
    return pa.record_batch([pa.array(c, f.type) for c, f in zip(columns, SCHEMA)], schema=SCHEMA)


@settings(max_examples=30, deadline=None)
@given(changelogs(), st.lists(st.tuples(st.integers(1, 20), st.booleans()), min_size=1, max_size=8))
def test_current_rows_equal_applying_the_changes_one_at_a_time_for_any_batches(changes, splits):
    """Batches of any sizes, the queued ones applied (a reader asking) after any of them."""
    current, at, splits = CurrentRows(SCHEMA), 0, iter(splits * 60)
    while at < len(changes):
        size, read = next(splits)
        part = changes[at:at + size]
        current.apply(batch(part), at)
        at += len(part)
        if read:
            assert current.count == len(one_at_a_time(changes[:at]))
    expected = one_at_a_time(changes)
    assert current.count == len(expected)
    assert [tuple(r.values()) for r in current.page(0, current.count + 5).to_pylist()] == expected
    assert [tuple(r.values()) for r in current.page(2, 5).to_pylist()] == expected[2:5]


def test_the_table_view_shows_a_row_changed_since_the_last_frame():
    result = LiveResult(SCHEMA)
    result.add(batch([("a", 1, 0.5, INSERT), ("b", 1, 0.5, INSERT)]))
    assert result.current_rows(0, 10) == [["a", "1", "0.5"], ["b", "1", "0.5"]]
    result.add(batch([("a", 1, 0.5, UPDATE_BEFORE), ("a", 2, 0.5, UPDATE_AFTER), ("b", 1, 0.5, DELETE)]))
    assert result.current_rows(0, 10) == [["a", "2", "0.5"]] and result.current_count() == 1
