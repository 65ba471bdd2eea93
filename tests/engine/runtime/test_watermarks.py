"""Watermarks per split, combined by minimum, only ever moving forward."""
from __future__ import annotations

import pyarrow as pa

from engine.messages import MAX_WATERMARK
from engine.watermarks import SplitWatermarks, WatermarkGenerator

SECOND = 1_000_000


def test_combined_watermark_is_the_minimum_of_unfinished_splits():
    marks = SplitWatermarks(["a", "b"])
    assert marks.observe("a", 10 * SECOND) is None  # b has seen nothing yet
    assert marks.observe("b", 4 * SECOND) == 4 * SECOND
    assert marks.observe("b", 12 * SECOND) == 10 * SECOND
    assert marks.finish("a") == 12 * SECOND  # a finished: only b holds it back
    assert marks.finish("b") == MAX_WATERMARK


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

