"""UDFs that raise on some rows, for the bad-rows tests (a module: worker processes import it)."""
from __future__ import annotations

import numpy as np
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


@weir.udtf(result_types=["BIGINT", "BIGINT"])
def spread(v):
    """A row at a time: v % 3 rows (v, i), none for a v divisible by 3; raising on a v ending in 5."""
    if v % 10 == 5:
        raise ValueError(f"no spread of {v}")
    for i in range(v % 3):
        yield v, i


@weir.udtf(result_types=["BIGINT", "BIGINT"], func_type="arrow")
def spread_arrow(v: pa.Array) -> pa.Table:
    """spread over arrays, raising for the whole array when a value ending in 5 is among them."""
    values = v.to_numpy(zero_copy_only=False)
    if (values % 10 == 5).any():
        raise ValueError("a value ending in 5 among the values")
    counts = values % 3
    rows = np.repeat(np.arange(len(values)), counts)
    return pa.table({"row": rows, "v": values[rows],
                     "i": np.concatenate([np.arange(c) for c in counts]) if len(values) else np.zeros(0, np.int64)})
