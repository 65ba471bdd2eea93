"""UDFs for the tests, in a module of their own so that worker processes import them by name."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import weir

TWO = pa.scalar(2, pa.int64())


@weir.udf(result_type="BIGINT", func_type="arrow")
def twice(v: pa.Array) -> pa.Array:
    """v * 2, over arrays."""
    return pc.multiply(v, TWO)


@weir.udf(result_type="STRING")
def shout(s):
    """A row at a time: upper case and '!', NULL stays NULL."""
    return None if s is None else s.upper() + "!"


@weir.udf(result_type="BIGINT", input_types=["BIGINT"])
def bucket(v):
    """A row at a time, with a declared parameter type: v // 10."""
    return None if v is None else v // 10


@weir.udf(result_type="BOOLEAN", func_type="arrow")
def is_even(v: pa.Array) -> pa.Array:
    return pc.equal(pc.bit_wise_and(v, pa.scalar(1, v.type)), pa.scalar(0, v.type))


@weir.udf(result_type="BIGINT")
def inverse_scaled(v):
    """100 // v: fails on 0, to test the error naming the row."""
    return 100 // v


def plain(v):
    """Not a UDF: a plain function."""
    return v


NOT_A_FUNCTION = 42
