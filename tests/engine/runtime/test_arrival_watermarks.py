"""Every row's arrival watermark: the running maximum of the WATERMARK expression over the
rows before it in its split, computed per batch, carried across batches and checkpoints."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from weir.engine.connectors.base import Source
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.base import Operator, OperatorContext
from weir.engine.operators.batches import conform
from weir.engine.operators.calc import Calc
from weir.engine.runtime.source_reader import SourceReader
from weir.engine.watermarks import (ARRIVAL_WATERMARK, WatermarkGenerator, arrival_watermarks, for_operator,
                               row_watermarks)

SECOND = 1_000_000
SCHEMA = pa.schema([("ts", pa.timestamp("us")), ("v", pa.int64())])


class Rows(Source):
    """One split per list of times, its rows' ``v`` the split's number; batches of ``batch_size``
    rows; offset = rows emitted."""

    def __init__(self, splits: dict[str, list[int | None]], batch_size: int):
        super().__init__({}, SCHEMA)
        self.rows, self.batch_size = splits, batch_size

    def splits(self):
        return list(self.rows)

    def read(self, split, offset=None):
        times, number = self.rows[split], list(self.rows).index(split)
        for start in range(offset or 0, len(times), self.batch_size):
            part = times[start:start + self.batch_size]
            yield pa.record_batch([pa.array(part, pa.timestamp("us")), pa.array([number] * len(part), pa.int64())],
                                  schema=SCHEMA), start + len(part)


def expected_arrivals(times: list[int | None], delay: int) -> list[int]:
    """By hand: the largest ts - delay of the rows before each row."""
    out, largest = [], MIN_WATERMARK
    for t in times:
        out.append(largest)
        if t is not None:
            largest = max(largest, t - delay)
    return out


def arrivals(reader: SourceReader, stop_after: int | None = None) -> dict[int, list[int]]:
    """The arrival watermarks the reader attaches, per split number (after ``stop_after`` batches)."""
    seen: dict[int, list[int]] = {}
    for steps, (batch, _) in enumerate((b, w) for b, w in reader if b is not None):
        seen.setdefault(batch.column("v")[0].as_py(), []).extend(batch.column(ARRIVAL_WATERMARK).to_pylist())
        if stop_after is not None and steps + 1 == stop_after:
            break
    return seen


times_strategy = st.lists(st.one_of(st.none(), st.integers(0, 60).map(lambda s: s * SECOND // 2)),
                          min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(first=times_strategy, second=times_strategy, batch_size=st.integers(1, 8), general=st.booleans())
def test_each_row_gets_the_running_maximum_over_the_rows_before_it_in_its_split(first, second, batch_size, general):
    source = Rows({"a": first, "b": second}, batch_size)
    bounded = None if general else ("ts", 2 * SECOND)
    reader = SourceReader(source, "ts - INTERVAL '2' SECOND", bounded=bounded)
    assert arrivals(reader) == {0: expected_arrivals(first, 2 * SECOND), 1: expected_arrivals(second, 2 * SECOND)}


@settings(max_examples=40, deadline=None)
@given(times=times_strategy, batch_size=st.integers(1, 5), cut=st.integers(1, 6))
def test_a_restored_reader_continues_the_running_watermark(times, batch_size, cut):
    """Checkpoint after ``cut`` batches, restore into a new reader: the rows after the cut get
    the arrival watermarks they get in a run without a restart."""
    source = Rows({"a": times}, batch_size)
    first = SourceReader(source, "ts - INTERVAL '2' SECOND", bounded=("ts", 2 * SECOND))
    before = arrivals(first, stop_after=cut).get(0, [])
    restored = SourceReader(Rows({"a": times}, batch_size), "ts - INTERVAL '2' SECOND", bounded=("ts", 2 * SECOND))
    restored.restore(first.position())
    after = arrivals(restored).get(0, [])
    assert before + after == expected_arrivals(times, 2 * SECOND)


def test_arrival_watermarks_continue_from_the_split_watermark_before_the_batch():
    arrival, after = arrival_watermarks(pa.array([5, None, 3, 9], pa.int64()), 4)
    assert arrival.to_pylist() == [4, 5, 5, 5] and after == 9
    empty, unchanged = arrival_watermarks(pa.array([], pa.int64()), 4)
    assert empty.to_pylist() == [] and unchanged == 4


def test_a_general_watermark_expression_is_evaluated_per_row():
    batch = pa.record_batch([pa.array([10 * SECOND, None, 4 * SECOND], pa.timestamp("us"))], names=["ts"])
    generator = WatermarkGenerator("ts - INTERVAL '1' SECOND + INTERVAL '500' MILLISECOND")
    assert generator.candidates(batch).to_pylist() == [9_500_000, None, 3_500_000]


def test_the_column_reaches_only_operators_that_use_or_pass_it():
    ctx = OperatorContext("op", SCHEMA)
    batch = pa.record_batch([pa.array([SECOND], pa.timestamp("us")), pa.array([1], pa.int64()),
                             pa.array([7], pa.int64())], names=["ts", "v", ARRIVAL_WATERMARK])
    assert for_operator(Operator({}, ctx), batch).schema.names == ["ts", "v"]  # e.g. a sink
    calc = Calc({"projection": [["ts", "ts"], ["v", "v + 1"]], "filter": None}, ctx)
    (out,) = calc.process_batch(for_operator(calc, batch))
    assert out.schema.names == ["ts", "v", ARRIVAL_WATERMARK]
    assert out.column(ARRIVAL_WATERMARK).to_pylist() == [7] and out.column("v").to_pylist() == [2]
    (plain,) = calc.process_batch(for_operator(calc, batch.remove_column(2)))
    assert plain.schema.names == ["ts", "v"]
    assert conform(pa.table(batch), SCHEMA, "op")[0].schema.names == ["ts", "v", ARRIVAL_WATERMARK]


def test_a_row_is_judged_by_the_larger_of_its_arrival_watermark_and_the_operators():
    batch = pa.record_batch([pa.array([1, 2], pa.int64()), pa.array([MIN_WATERMARK, 9], pa.int64())],
                            names=["v", ARRIVAL_WATERMARK])
    assert row_watermarks(batch, 5).to_pylist() == [5, 9]
    assert row_watermarks(batch, MIN_WATERMARK).to_pylist() == [MIN_WATERMARK, 9]
    assert row_watermarks(batch.remove_column(1), 5) == 5
    assert row_watermarks(batch.remove_column(1), MIN_WATERMARK) is None  # nothing can be late yet
