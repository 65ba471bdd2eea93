"""Benchmark: the shell's live table view of a big updating result (shell/current_rows.py).

    python bench/live_view.py [--keys 100000] [--changes 1000000] [--batch 65536]

An updating result of ``--keys`` keys (a GROUP BY's changelog: +I for a new key,
-U/+U for each later change of one) is handed to a ``LiveResult`` in batches, as
the job's sink hands them; then 100 frames of the table view are drawn at pages
spread over the rows. Printed: the time and CPU time of applying them (in the job's thread),
the time of a frame, and whether the rows shown are exactly the expected ones.
"""
from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
from weir.engine.changelog import INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.shell.live import LiveResult
from weir.shell.live_view import _Screen

SCHEMA = pa.schema([("k", pa.int64()), ("name", pa.string()), ("n", pa.int64()), ("x", pa.float64()),
                    (ROW_KIND, pa.int8())])


def changelog(keys: int, changes: int, batch: int) -> tuple[list[pa.RecordBatch], np.ndarray]:
    """The batches of changes, and each key's last count."""
    rng = np.random.default_rng(1)
    counts = np.zeros(keys, np.int64)
    ks, ns, kinds = [], [], []
    for key in np.concatenate([np.arange(keys), rng.integers(0, keys, max(0, changes - keys))]):
        c = counts[key]
        if c:
            ks += [key, key]
            ns += [c, c + 1]
            kinds += [UPDATE_BEFORE, UPDATE_AFTER]
        else:
            ks.append(key)
            ns.append(1)
            kinds.append(INSERT)
        counts[key] = c + 1
    ks, ns, kinds = np.array(ks), np.array(ns), np.array(kinds, np.int8)
    return [pa.record_batch([pa.array(ks[i:i + batch]), pa.array([f"name {k}" for k in ks[i:i + batch]]),
                             pa.array(ns[i:i + batch]), pa.array(ns[i:i + batch] * 0.5),
                             pa.array(kinds[i:i + batch])], schema=SCHEMA)
            for i in range(0, len(ks), batch)], counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000_000, help="key changes (each later one is -U and +U)")
    parser.add_argument("--batch", type=int, default=65_536)
    args = parser.parse_args()
    batches, counts = changelog(args.keys, args.changes, args.batch)
    rows = sum(b.num_rows for b in batches)
    result = LiveResult(SCHEMA)
    start, cpu = time.perf_counter(), time.process_time()
    for b in batches:
        result.add(b)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"apply: {rows:,} changes in {took:.2f} s, CPU {cpu:.2f} s ({rows / cpu:,.0f} changes per CPU second); "
          f"{result.current_count():,} current rows")
    screen = _Screen(result, SimpleNamespace(id="j1", running=True, status="RUNNING"), "table")
    screen.page_rows = lambda: 40
    start = time.perf_counter()
    for frame in range(100):
        screen.top = frame * max(1, args.keys // 100)
        screen.body()
        screen.status()
    print(f"a frame of the table view: {(time.perf_counter() - start) * 10:.1f} ms")
    expected = {(str(k), f"name {k}", str(int(c)), repr(float(c) * 0.5)) for k, c in enumerate(counts)}
    shown = set(map(tuple, result.current_rows(0, result.current_count())))
    print("rows exact" if shown == expected else f"ROWS DIFFER: {len(shown ^ expected)} rows")


if __name__ == "__main__":
    main()
