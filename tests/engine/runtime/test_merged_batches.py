"""A bounded source's consecutive batches merged (``weir.source.merge-bytes``): the same rows
with the same arrival watermarks, fewer steps, offsets that describe the rows emitted, and no
row that meets another watermark unless its time is after both (so none is late, or in a fired
window, under one and not the other)."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from weir.engine.messages import MIN_WATERMARK
from weir.engine.runtime.source_reader import SourceReader
from weir.engine.watermarks import ARRIVAL_WATERMARK

from tests.engine.runtime.test_arrival_watermarks import SECOND, Rows

DELAY = 2 * SECOND


class FileLikeRows(Rows):
    """Rows whose batch boundaries are arbitrary, as a file's are."""

    arbitrary_batches = True


def steps(splits: dict[str, list[int | None]], batch_size: int, merge_bytes: int,
          source: type[Rows] = FileLikeRows) -> list[tuple]:
    """(rows as (ts, split number, arrival), the watermark in force before them, offsets after
    them) per step with a batch."""
    reader = SourceReader(source(splits, batch_size), "ts - INTERVAL 2 SECOND", bounded=("ts", DELAY),
                          merge_bytes=merge_bytes)
    out, watermark = [], MIN_WATERMARK
    for batch, advanced in reader:
        if batch is not None:
            rows = list(zip(batch.column("ts").cast(pa.int64()).to_pylist(), batch.column("v").to_pylist(),
                            batch.column(ARRIVAL_WATERMARK).to_pylist()))
            out.append((rows, watermark, dict(reader.offsets)))
        if advanced is not None:
            watermark = max(watermark, advanced.timestamp)
    return out


def rows_with_watermarks(found: list[tuple]) -> list[tuple]:
    return [(row, before) for rows, before, _ in found for row in rows]


split_times = st.lists(st.one_of(st.none(), st.integers(0, 40).map(lambda s: s * SECOND // 2)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), split_times, min_size=1), st.integers(1, 4))
def test_merging_changes_no_row_nor_the_watermark_a_row_could_be_late_under(splits, batch_size):
    plain = steps(splits, batch_size, merge_bytes=0)
    merged = steps(splits, batch_size, merge_bytes=1 << 20)
    assert [r for r, _ in rows_with_watermarks(merged)] == [r for r, _ in rows_with_watermarks(plain)]
    for (row, before_merged), (_, before_plain) in zip(rows_with_watermarks(merged), rows_with_watermarks(plain)):
        ts = row[0]
        assert before_merged == before_plain or ts is None or ts > max(before_merged, before_plain)
    # every merged step ends where some step of the plain reading ends: a barrier after it
    # records exactly the rows emitted
    assert [offsets for _, _, offsets in merged] == [
        offsets for _, _, offsets in plain if offsets in [o for _, _, o in merged]]


def test_rows_in_order_merge_into_one_batch_and_a_row_behind_the_watermark_starts_another():
    in_order = {"a": [0, SECOND, 2 * SECOND, 3 * SECOND, 4 * SECOND, 5 * SECOND]}
    assert len(steps(in_order, 2, merge_bytes=0)) == 3
    assert len(steps(in_order, 2, merge_bytes=1 << 20)) == 1
    # the watermark after the first two batches is 3 s - 2 s = 1 s: a row at 1 s starts a new batch
    behind = {"a": [0, SECOND, 2 * SECOND, 3 * SECOND, SECOND, 5 * SECOND]}
    assert [len(rows) for rows, _, _ in steps(behind, 2, merge_bytes=1 << 20)] == [4, 2]
    # and a limit in bytes cuts too
    assert len(steps(in_order, 2, merge_bytes=1)) == 3


def test_a_source_whose_batches_are_its_own_is_never_merged():
    # Rows does not declare arbitrary batches (as a Python source's are the user's)
    in_order = {"a": [0, SECOND, 2 * SECOND, 3 * SECOND, 4 * SECOND, 5 * SECOND]}
    assert [len(rows) for rows, _, _ in steps(in_order, 2, merge_bytes=1 << 20, source=Rows)] == [2, 2, 2]
