"""UDFs that raise on some rows, for the bad-rows tests (a module: worker processes import it)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import weir


@weir.udf(result_type="BIGINT")
def tenth_of(v):
    """A row at a time: v // 10, raising on a value ending in 5."""
    if v % 10 == 5:
        raise ValueError(f"no tenth of {v}")
    return v // 10


@weir.udf(result_type="BOOLEAN", func_type="arrow")
def small(v: pa.Array) -> pa.Array:
    """Over arrays: v < 1000, raising for the whole array when a multiple of 7 is among the values."""
    if (v.to_numpy(zero_copy_only=False) % 7 == 0).any():
        raise ZeroDivisionError("a multiple of 7 among the values")
    return pc.less(v, pa.scalar(1000, v.type))
