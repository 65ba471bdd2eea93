"""Python table functions (LATERAL TABLE): input rows per second of the ``table_function`` operator
driven directly over 10 batches of 65,536 rows of three-word lines, for the general form (a
generator, a call per row) and the arrow form (a call per batch), each yielding every word and
its length (three output rows per input row); best of 3, in CPU time (the operator is one
thread: on an idle machine its wall time; on a loaded one, less noisy).

    .venv/bin/python bench/udtf.py [--profile]

``--profile`` prints cProfile's top functions of the general form instead.
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc

import weir
from weir.engine import udtfs
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.table_function import TableFunctionConfig, TableFunctionOperator

ROWS, BATCHES = 65_536, 10


@weir.udtf(result_types=["STRING", "BIGINT"])
def split_words(s):
    for word in s.split(" "):
        yield word, len(word)


@weir.udtf(result_types=["STRING", "BIGINT"], func_type="arrow")
def split_words_arrow(s: pa.Array) -> pa.Table:
    words = pc.split_pattern(s, " ")
    word = pc.list_flatten(words)
    return pa.table({"row": pc.list_parent_indices(words), "word": word,
                     "n": pc.cast(pc.utf8_length(word), pa.int64())})


def operator(function) -> TableFunctionOperator:
    udtfs.install(function)
    config = TableFunctionConfig(function=function.spec(), arguments=("s",), passed=("k", "s"), columns=("word", "n"))
    schema = pa.schema([("k", pa.int64()), ("s", pa.string()), ("word", pa.string()), ("n", pa.int64())])
    return TableFunctionOperator(config, OperatorContext("bench.table_function", schema))


def run(function, batch: pa.RecordBatch) -> float:
    op = operator(function)
    start = time.process_time()
    out = sum(b.num_rows for _ in range(BATCHES) for b in op.process_batch(batch))
    seconds = time.process_time() - start
    assert out == 3 * ROWS * BATCHES
    return seconds


def main() -> None:
    batch = pa.record_batch({"k": pa.array(range(ROWS), pa.int64()),
                             "s": pa.array([f"w{i % 97} x{i % 13} yy{i}" for i in range(ROWS)])})
    if "--profile" in sys.argv:
        profile = cProfile.Profile()
        profile.runcall(run, split_words, batch)
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
        return
    for function in (split_words, split_words_arrow):
        best = min(run(function, batch) for _ in range(3))
        print(f"{function.func_type:8s} {ROWS * BATCHES / best / 1e6:.2f}M input rows/s "
              f"({3 * ROWS * BATCHES / best / 1e6:.2f}M output rows/s)")


if __name__ == "__main__":
    main()
