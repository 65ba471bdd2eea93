"""The cost of the bad-rows setting ('python.udf.bad-rows.table') on one batch of 65,536 rows with
0, 1, 10 and 66 rows a row-at-a-time Python UDF raises on: a Calc driven directly, best of 5.

    .venv/bin/python bench/udf_bad_rows.py
"""
from __future__ import annotations

import time

import pyarrow as pa

import weir
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.calc import Calc, CalcConfig
from weir.engine.udfs import install, uninstall

ROWS = 65_536
BAD: set[int] = set()


@weir.udf(result_type="BIGINT")
def tenth_or_raise(v):
    if v in BAD:
        raise ValueError(f"bad {v}")
    return v // 10


def main() -> None:
    install(tenth_or_raise, "tenth_or_raise")
    batch = pa.record_batch({"v": pa.array(range(ROWS), pa.int64())})
    try:
        for k in (0, 1, 10, 66):
            BAD.clear()
            BAD.update(7 + i * (ROWS // k) for i in range(k))
            best = None
            for _ in range(5):
                ctx = OperatorContext("c", pa.schema([("v", pa.int64()), ("tv", pa.int64())]))
                calc = Calc(CalcConfig((("v", '"v"'), ("tv", 'tenth_or_raise("v")')), bad_rows=True), ctx)
                calc.open()
                start = time.perf_counter()
                out = calc.process_batch(batch)
                seconds = time.perf_counter() - start
                calc.close()
                assert sum(b.num_rows for b in out) == ROWS - len(BAD) and len(ctx.late_output) == len(BAD)
                best = seconds if best is None else min(best, seconds)
            print(f"{len(BAD):3d} raising rows: {best:.3f} s")
    finally:
        uninstall("tenth_or_raise")


if __name__ == "__main__":
    main()
