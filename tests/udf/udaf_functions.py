"""Python aggregate functions for the tests, in a module of their own so that worker processes
import them by name."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import weir


@weir.udaf(result_type="BIGINT", accumulator_type="ARRAY<BIGINT>")
class PySum:
    """SUM, a row at a time, with retraction: NULL when no value is left (as SUM)."""

    def create_accumulator(self):
        return [0, 0]  # sum, count of values

    def accumulate(self, acc, v):
        if v is not None:
            acc[0] += v
            acc[1] += 1

    def retract(self, acc, v):
        if v is not None:
            acc[0] -= v
            acc[1] -= 1

    def merge(self, acc, others):
        for other in others:
            acc[0] += other[0]
            acc[1] += other[1]

    def get_value(self, acc):
        return acc[0] if acc[1] else None


@weir.udaf(result_type="BIGINT")
class ArrowSum(PySum):
    """SUM over pyarrow arrays: a call per group and batch."""

    accumulate = retract = None

    def accumulate_batch(self, acc, v: pa.Array):
        acc[0] += pc.sum(v).as_py() or 0
        acc[1] += len(v) - v.null_count

    def retract_batch(self, acc, v: pa.Array):
        acc[0] -= pc.sum(v).as_py() or 0
        acc[1] -= len(v) - v.null_count


@weir.udaf(result_type="DOUBLE")
class WeightedAvg:
    """Flink's documentation example: two arguments, sum(v * w) / sum(w); no retract."""

    def create_accumulator(self):
        return [0, 0]

    def accumulate(self, acc, v, w):
        if v is not None and w is not None:
            acc[0] += v * w
            acc[1] += w

    def merge(self, acc, others):
        for other in others:
            acc[0] += other[0]
            acc[1] += other[1]

    def get_value(self, acc):
        return acc[0] / acc[1] if acc[1] else None


@weir.udaf(result_type="BIGINT")
class NoMerge:
    """Counts rows, without merge: a window aggregate refuses it."""

    def create_accumulator(self):
        return [0]

    def accumulate(self, acc, *args):
        acc[0] += 1

    def retract(self, acc, *args):
        acc[0] -= 1

    def get_value(self, acc):
        return acc[0]


@weir.udaf(result_type="BIGINT")
class Inverse(PySum):
    """Sums 100 // v: fails on v = 0, to test the error naming the row."""

    def accumulate(self, acc, v):
        acc[0] += 100 // v
        acc[1] += 1


class NoAccumulate:
    """Not an aggregate function: no accumulate."""

    def create_accumulator(self):
        return [0]

    def get_value(self, acc):
        return acc[0]


@weir.udaf(result_type="BIGINT")
class Wrong(PySum):
    """get_value returns a string, not its BIGINT."""

    def get_value(self, acc):
        return f"{acc[0]} units"


@weir.udaf(result_type="BIGINT")
class Picky(PySum):
    """PySum that raises in accumulate on a value ending in 5 (a row at a time), and in get_value
    on a sum of 1000 or more: for the bad-rows tests."""

    def accumulate(self, acc, v):
        if v is not None and v % 10 == 5:
            raise ValueError(f"no {v}")
        super().accumulate(acc, v)

    def get_value(self, acc):
        if acc[0] >= 1000:
            raise OverflowError(f"{acc[0]} is too much")
        return super().get_value(acc)


@weir.udaf(result_type="BIGINT")
class PickyArrow(ArrowSum):
    """ArrowSum whose accumulate_batch raises when a value ending in 5 is among its group's values."""

    def accumulate_batch(self, acc, v: pa.Array):
        if any(x is not None and x % 10 == 5 for x in v.to_pylist()):
            raise ValueError("a value ending in 5 among them")
        super().accumulate_batch(acc, v)


@weir.udaf(result_type="BIGINT")
class PickyRetract(Picky):
    """Picky that also raises in retract, on a value ending in 7: for the bad-rows tests of an
    updating input."""

    def retract(self, acc, v):
        if v is not None and v % 10 == 7:
            raise ValueError(f"cannot take back {v}")
        super().retract(acc, v)


@weir.udaf(result_type="BIGINT")
class MergeFails(PySum):
    """PySum whose merge raises: for the test of a failure on accumulators."""

    def merge(self, acc, others):
        raise RuntimeError(f"cannot merge {len(others)} more into {acc}")
