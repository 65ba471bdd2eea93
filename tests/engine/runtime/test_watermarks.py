"""Watermarks per split, combined by minimum, only ever moving forward."""
from __future__ import annotations

import pyarrow as pa

from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.watermarks import SplitWatermarks, WatermarkGenerator

SECOND = 1_000_000


def test_combined_watermark_is_the_minimum_of_unfinished_splits():
    marks = SplitWatermarks(["a", "b"])
    assert marks.observe("a", 10 * SECOND) is None  # b has seen nothing yet
    assert marks.observe("b", 4 * SECOND) == 4 * SECOND
    assert marks.observe("b", 12 * SECOND) == 10 * SECOND
    assert marks.finish("a") == 12 * SECOND  # a finished: only b holds it back
    assert marks.finish("b") == MAX_WATERMARK


def test_only_the_split_a_chain_is_reading_holds_the_watermark_back():
    """The row groups of one parquet file (a chain: rg0, rg1) and another file (c): rg1
    waits behind rg0 and does not hold the watermark back until rg0 is finished."""
    marks = SplitWatermarks(["rg0", "rg1", "c"], [["rg0", "rg1"], ["c"]])
    assert marks.observe("c", 8 * SECOND) is None  # rg0 has seen nothing yet
    assert marks.observe("rg0", 5 * SECOND) == 5 * SECOND
    assert marks.finish("rg0") is None  # rg1 is read now, and has seen nothing
    assert marks.observe("rg1", 9 * SECOND) == 8 * SECOND
    assert marks.finish("c") == 9 * SECOND
    restored = SplitWatermarks(["rg0", "rg1", "c"], [["rg0", "rg1"], ["c"]])
    restored.restore(marks.state())
    assert restored.current == 9 * SECOND
    assert restored.finish("rg1") == MAX_WATERMARK


def test_a_parallel_reader_reads_every_nth_split():
    from weir.engine.runtime.source_reader import SourceReader

    from weir.engine.connectors.base import Source

    class Splits(Source):
        def splits(self):
            return ["0", "1", "2", "3", "4"]  # numbered: split n goes to subtask n % N (Source.owner)

        def read(self, split, offset=None):
            yield pa.record_batch({"ts": pa.array([SECOND], pa.timestamp("us"))}), 1

    schema = pa.schema([("ts", pa.timestamp("us"))])
    readers = [SourceReader(Splits({}, schema), "ts", subtask=i, parallelism=2) for i in range(2)]
    assert [r.splits for r in readers] == [["0", "2", "4"], ["1", "3"]]
    lonely = SourceReader(Splits({}, schema), "ts", subtask=5, parallelism=6)
    assert lonely.splits == [] and list(lonely)[-1][1].timestamp == MAX_WATERMARK  # no split: MAX at once


def test_watermark_never_moves_back():
    marks = SplitWatermarks(["a"])
    assert marks.observe("a", 10 * SECOND) == 10 * SECOND
    assert marks.observe("a", 3 * SECOND) is None
    assert marks.current == 10 * SECOND


def test_generator_evaluates_the_watermark_expression_over_a_batch():
    batch = pa.record_batch({"ts": pa.array([5 * SECOND, 9 * SECOND, None, 7 * SECOND], pa.timestamp("us"))})
    generator = WatermarkGenerator("ts - INTERVAL '2' SECOND")
    assert generator.max_of(batch) == 7 * SECOND
    empty = pa.record_batch({"ts": pa.array([None], pa.timestamp("us"))})
    assert generator.max_of(empty) is None


def test_bounded_delay_gives_the_same_watermark_as_the_sql_expression():
    batch = pa.record_batch({"ts": pa.array([5 * SECOND, 9 * SECOND, None, 7 * SECOND], pa.timestamp("us"))})
    by_sql = WatermarkGenerator("ts - INTERVAL '2' SECOND")
    bounded = WatermarkGenerator("ts - INTERVAL '2' SECOND", bounded=("ts", 2 * SECOND))
    assert bounded.max_of(batch) == by_sql.max_of(batch) == 7 * SECOND
    nulls = pa.record_batch({"ts": pa.array([None], pa.timestamp("us"))})
    assert bounded.max_of(nulls) is None



def test_an_idle_split_stops_holding_the_watermark_back():
    marks = SplitWatermarks(["busy", "quiet"])
    assert marks.observe("busy", 10 * SECOND) is None  # quiet has seen nothing yet
    assert marks.idle("quiet") == 10 * SECOND
    assert marks.observe("busy", 12 * SECOND) == 12 * SECOND
    assert marks.observe("quiet", 11 * SECOND) is None  # active again, but behind: no going back
    assert marks.observe("quiet", 13 * SECOND) is None  # min(12, 13) = 12, no change
    assert marks.observe("busy", 20 * SECOND) == 13 * SECOND


def test_when_every_split_is_idle_the_watermark_waits():
    marks = SplitWatermarks(["a", "b"])
    marks.observe("a", 5 * SECOND)
    assert marks.idle("a") is None
    assert marks.idle("b") is None
    assert marks.current == MIN_WATERMARK


def test_a_reader_marks_a_split_idle_when_it_brings_no_rows():
    from weir.engine.connectors.base import Source
    from weir.engine.runtime.source_reader import SourceReader

    schema = pa.schema([("ts", pa.timestamp("us"))])

    class TwoSplits(Source):
        def splits(self):
            return ["busy", "quiet"]

        def read(self, split, offset=None):
            for i in range(3):
                times = [(i + 1) * 10 * SECOND] if split == "busy" else []
                yield pa.record_batch({"ts": pa.array(times, pa.timestamp("us"))}), i

    def watermarks(idle_timeout):
        reader = SourceReader(TwoSplits({}, schema), "ts", bounded=("ts", 0), idle_timeout=idle_timeout)
        return [w.timestamp for _, w in reader if w is not None]

    assert watermarks(None) == [MAX_WATERMARK]  # the quiet split holds everything back to the end
    assert watermarks(0.0) == [10 * SECOND, 20 * SECOND, 30 * SECOND, MAX_WATERMARK]
