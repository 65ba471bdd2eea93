"""Benchmark: what publishing snapshots costs a job's commits, and that a held reader costs none.

    python bench/readers.py [--sizes 280000,1000000] [--commits 10] [--changed 1000]

For each view size N, a child process (whole-process figures: its wall and CPU time from start
to exit, imports included) creates a DuckDB results table of N rows kept by upsert key, as a
materialized view's sink keeps it, then commits ``--commits`` checkpoints of ``--changed``
changed keys each through the duckdb sink. Each commit publishes a new snapshot
(``engine/connectors/duckdb_snapshot.py``: copy the published file, apply, CHECKPOINT, fsync,
rename). Printed per size: the database file's size, the commit durations (median and max),
the part that is the byte copy of the file, and the same commits once more while another
process holds the file open read-only for the whole run (before this design each of those
commits waited for the reader, 'sink.lock-timeout' = 30 s, then failed the job). For
comparison: one in-place commit of the same change (the file opened read-write, as the sink
did before) and one ``COPY FROM DATABASE`` of the whole file into a new one (the other way to
write a snapshot).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def child(folder: str, size: int, commits: int, changed: int) -> None:
    """Run in the child: build the view, then time the commits."""
    import shutil

    import duckdb
    import pyarrow as pa

    from weir.engine.connectors.duckdb_snapshot import publisher_for
    from weir.engine.connectors.registry import create_sink

    db = os.path.join(folder, "results.duckdb")
    schema = pa.schema([("auction", pa.int64()), ("bids", pa.int64()), ("total", pa.int64()),
                        ("channel", pa.string())])
    options = {"connector": "duckdb", "path": db, "table-name": "per_auction", "sink.upsert-key": '["auction"]'}

    def rows(first: int, n: int, salt: int) -> pa.RecordBatch:
        keys = pa.array(range(first, first + n), pa.int64())
        return pa.record_batch([keys, pa.array([salt] * n, pa.int64()),
                                pa.array([(k * 7919 + salt) % 100_000 for k in range(first, first + n)], pa.int64()),
                                pa.array([f"channel-{k % 11}" for k in range(first, first + n)])], schema=schema)

    sink = create_sink(options, schema)
    sink.job = "bench"
    sink.open()
    for start in range(0, size, 100_000):  # the view's rows, as one job's first checkpoint
        sink.write(rows(start, min(100_000, size - start), 0))
    sink.pre_commit(1)
    sink.commit(1)
    publisher = publisher_for(db)
    waits = publisher.lock_waits
    durations, copies = [], []
    for i in range(commits):
        first = (i * 104_729) % max(size - changed, 1)
        sink.write(rows(first, changed, i + 1))
        sink.pre_commit(i + 2)
        started = time.perf_counter()
        sink.commit(i + 2)
        durations.append(time.perf_counter() - started)
        started = time.perf_counter()
        shutil.copyfile(db, db + ".copy")
        copies.append(time.perf_counter() - started)
        os.remove(db + ".copy")
    # Baseline: the same change applied in place (the file opened read-write, as before).
    sink.write(rows(0, changed, commits + 2))
    files = sink.pre_commit(commits + 2)
    started = time.perf_counter()
    with duckdb.connect(db) as connection:
        connection.execute("BEGIN TRANSACTION")
        sink._upsert(connection, files)
        connection.execute("COMMIT")
    in_place = time.perf_counter() - started
    sink.abort()
    started = time.perf_counter()
    with duckdb.connect(":memory:") as connection:
        connection.execute(f"ATTACH '{db}' AS published (READ_ONLY)")
        connection.execute(f"ATTACH '{db}.snapshot' AS snapshot")
        connection.execute("COPY FROM DATABASE published TO snapshot")
    copy_from_database = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"bytes": os.path.getsize(db), "durations": durations, "copies": copies,
                      "lock_waits": publisher.lock_waits - waits, "in_place": in_place,
                      "copy_from_database": copy_from_database, "cpu": usage.ru_utime + usage.ru_stime}))


HOLDER = """
import duckdb, sys, time
while True:  # until the view exists
    try:
        connection = duckdb.connect(sys.argv[1], read_only=True)
        connection.execute("SELECT count(*) FROM per_auction").fetchall()
        break
    except duckdb.Error:
        time.sleep(0.01)
print("holding", flush=True)
sys.stdin.readline()
"""


def measure(size: int, commits: int, changed: int, held: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="weir-readers-") as folder:
        holder = None
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, __file__, "--child", folder, str(size), str(commits), str(changed)],
                                   stdout=subprocess.PIPE, text=True)
        if held:
            holder = subprocess.Popen([sys.executable, "-c", HOLDER, os.path.join(folder, "results.duckdb")],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "holding"
        out, _ = process.communicate()
        wall = time.perf_counter() - started
        if holder is not None:
            holder.communicate("\n")
        if process.returncode != 0:
            raise SystemExit(f"the child failed (exit {process.returncode})")
        figures = json.loads(out)
        figures["wall"] = wall
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,280000,1000000")
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--changed", type=int, default=1000)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        folder, size, commits, changed = args.child
        child(folder, int(size), int(commits), int(changed))
        return
    print(f"{args.commits} commits of {args.changed:,} changed keys each; load average {os.getloadavg()[0]:.1f}")
    print(f"{'view rows':>10} {'file MB':>8} {'reader':>7} {'commit median':>14} {'max':>7} {'of it copy':>11} "
          f"{'lock waits':>10} {'in place':>9} {'COPY FROM DB':>13} {'process wall':>13} {'cpu':>6}")
    for size in (int(s) for s in args.sizes.split(",")):
        for held in (False, True):
            f = measure(size, args.commits, args.changed, held)
            print(f"{size:>10,} {f['bytes'] / 1e6:>8.1f} {'held' if held else 'none':>7} "
                  f"{statistics.median(f['durations']) * 1e3:>11.0f} ms {max(f['durations']) * 1e3:>4.0f} ms "
                  f"{statistics.median(f['copies']) * 1e3:>8.0f} ms {f['lock_waits']:>10} "
                  f"{f['in_place'] * 1e3:>6.0f} ms {f['copy_from_database'] * 1e3:>10.0f} ms "
                  f"{f['wall']:>11.1f} s {f['cpu']:>5.1f}s")


if __name__ == "__main__":
    main()
