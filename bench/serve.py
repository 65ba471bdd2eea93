"""Benchmark: the Postgres endpoint (shell/pgwire) — point SELECTs over the wire from
concurrent psycopg clients, and SUBSCRIBE latency from commit to client.

    python bench/serve.py [--clients 8] [--seconds 5] [--rows 100000] [--subscribe-seconds 10]

1. Point SELECTs: a result table of ``--rows`` rows with a key; ``--clients``
   client processes (psycopg, extended protocol, one connection each) ask
   ``SELECT * FROM results WHERE id = $1`` with random keys for ``--seconds``.
   Printed: queries/s, the server's CPU seconds (this process: the server runs
   in a thread here, the clients elsewhere), queries/s per core of server CPU
   and CPU seconds per 10,000 queries (the clients' own CPU is not counted; on
   a loaded machine the CPU figures vary less than q/s), and the share of
   queries answered from the snapshot's index (``shell/pgwire/lookup.py``;
   ``--no-point-lookups``: DuckDB answers all). The issue's target: 3,000 q/s
   per core.
2. SUBSCRIBE latency: a job (2,000 events/s, a COUNT and SUM per key,
   checkpoint every 0.2 s) maintains a view; a psycopg client streams
   ``SUBSCRIBE TO per_key``. For each checkpoint, the time from the job
   publishing it complete to the client receiving the rows tagged with it.
   Printed: median and 95th percentile. Target: under 50 ms.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import tempfile
import threading
import time

import duckdb
import psycopg
import pyarrow as pa

import weir
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import ServeOptions, Server


def _client(port: int, rows: int, seconds: float, start: float, counts) -> None:
    with psycopg.connect(f"host=127.0.0.1 port={port} user=bench dbname=weir", autocommit=True) as con:
        cur = con.cursor()
        rng = random.Random(os.getpid())
        while time.time() < start:
            time.sleep(0.001)
        done = 0
        while time.time() < start + seconds:
            key = rng.randrange(rows)
            cur.execute("SELECT * FROM results WHERE id = %s", [key])
            assert cur.fetchone()[0] == key
            done += 1
        counts.put(done)


def point_selects(db: str, reader: ResultReader, clients: int, rows: int, seconds: float,
                  point_lookups: bool = True) -> tuple[float, float, int]:
    with weir.connect(db) as con:
        server = Server(con, reader, ServeOptions(port=0, point_lookups=point_lookups))
        port = server.start_in_thread()
        try:
            counts = multiprocessing.Queue()
            start = time.time() + 2.0  # the clients connect, then all begin together
            procs = [multiprocessing.Process(target=_client, args=(port, rows, seconds, start, counts))
                     for _ in range(clients)]
            for p in procs:
                p.start()
            while time.time() < start:
                time.sleep(0.01)
            cpu0 = time.process_time()
            total = sum(counts.get(timeout=seconds + 60) for _ in procs)
            cpu = time.process_time() - cpu0
            for p in procs:
                p.join()
        finally:
            server.stop()
    return total / seconds, cpu, server.lookups.answered


VIEW = "CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS total FROM events GROUP BY k"
EVENTS = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("ts", pa.timestamp("ms"))])


def paced_events(seconds: float, per_second: int = 2000, batches_per_second: int = 20):
    """Events as they would arrive: a batch every 1/``batches_per_second`` s of wall time."""
    size = per_second // batches_per_second
    for b in range(int(seconds * batches_per_second)):
        ids = list(range(b * size, (b + 1) * size))
        yield pa.record_batch([[i % 10 for i in ids], ids, [i for i in ids]], schema=EVENTS)
        time.sleep(1 / batches_per_second)


def subscribe_latency(folder: str, seconds: float) -> list[float]:
    db = os.path.join(folder, "subscribe.duckdb")
    with weir.connect(db, state_dir=os.path.join(folder, "jobs")) as con:
        con.register("events", paced_events(seconds), watermark="ts", schema=EVENTS)
        con.execute("SET 'execution.checkpointing.interval' = '200ms'")
        con.execute(VIEW)
        job = con.session.maintainers["per_key"]
        reader = ResultReader(db, beside_jobs=True)
        server = Server(con, reader, ServeOptions(port=0))
        port = server.start_in_thread()
        published: dict[int, float] = {}
        received: dict[int, float] = {}

        def watch() -> None:
            seen = None
            while not job.done.is_set():
                with job.changed:
                    job.changed.wait_for(lambda: job.done.is_set() or job.metrics.last_checkpoint != seen, 1.0)
                    checkpoint = job.metrics.last_checkpoint
                if checkpoint != seen and checkpoint.isdigit():
                    published.setdefault(int(checkpoint), time.perf_counter())
                seen = checkpoint

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with psycopg.connect(f"host=127.0.0.1 port={port} user=bench dbname=weir", autocommit=True) as client:
                for checkpoint, *_ in client.cursor().stream("SUBSCRIBE TO per_key"):
                    if checkpoint is not None:
                        received.setdefault(checkpoint, time.perf_counter())
        finally:
            watcher.join()
            server.stop()
    return [received[c] - published[c] for c in sorted(received) if c in published]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--subscribe-seconds", type=float, default=10.0,
                        help="how long the SUBSCRIBE job runs (0: no SUBSCRIBE measure)")
    parser.add_argument("--no-point-lookups", action="store_true",
                        help="DuckDB answers every point SELECT (no index: ServeOptions.point_lookups)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="weir-bench-serve-") as folder:
        db = os.path.join(folder, "results.duckdb")
        con = duckdb.connect(db)
        con.execute(f"CREATE TABLE results AS SELECT range AS id, range * 2 AS doubled, 'row ' || range AS label "
                    f"FROM range({args.rows})")
        con.close()
        print(f"point SELECTs, {args.clients} clients, {args.seconds:g} s, {args.rows:,}-row table:")
        rate, cpu, indexed = point_selects(db, ResultReader(db, beside_jobs=False), args.clients, args.rows,
                                           args.seconds, not args.no_point_lookups)
        queries = rate * args.seconds
        print(f"  {rate:,.0f} q/s, server CPU {cpu:.2f} s -> {queries / max(cpu, 1e-9):,.0f} q/s per core, "
              f"{cpu / max(queries, 1) * 10_000:.2f} CPU s per 10,000 queries; "
              f"{indexed / max(queries, 1):.0%} answered from the index")
        if not args.subscribe_seconds:
            return
        print(f"SUBSCRIBE, commit to client, a job of {args.subscribe_seconds:g} s with a checkpoint every 0.2 s:")
        ms = sorted(x * 1000 for x in subscribe_latency(folder, args.subscribe_seconds))
        if not ms:
            print("  no checkpoint reached the client")
        else:
            p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            print(f"  {len(ms)} checkpoints, median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, "
                  f"max {ms[-1]:.1f} ms")


if __name__ == "__main__":
    main()
