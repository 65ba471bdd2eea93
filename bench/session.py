"""Benchmark: a SESSION window (gap 10 s) COUNT per bidder through the session_window
operator alone, as in Nexmark q11.

    python bench/session.py [--events 1000000] [--bidders 10000] [--batch 65536]

Generates N Nexmark-like bids in memory (10,000 events/s of event time, times
out of order by up to 1.5 s, bidders uniform over ``--bidders``), feeds them to
the operator in batches with the watermark (largest time so far - 2 s) after each
batch, then the final watermark, and prints events/s. The target for q11 is
200,000 events/s per core.
"""
from __future__ import annotations

import argparse
import time

import duckdb
import pyarrow as pa

from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.session_window import SessionWindow

CONFIG = {
    "window": {"kind": "session", "time_column": "date_time", "gap": 10_000_000},
    "keys": [["bidder", '"bidder"']],
    "aggregates": [{"name": "_agg0", "function": "count", "argument": None}],
    "having": None,
    "projection": [["bidder", '"bidder"'], ["window_start", "window_start"], ["window_end", "window_end"],
                   ["bids", '"_agg0"']],
}
SCHEMA = pa.schema([("bidder", pa.int64()), ("window_start", pa.timestamp("us")),
                    ("window_end", pa.timestamp("us")), ("bids", pa.int64())])


def bids(events: int, bidders: int, rate: int = 10_000) -> pa.Table:
    return duckdb.sql(f"""
        SELECT 1000 + (hash(i, 3) % {bidders})::BIGINT AS bidder,
               (1000 + (i // 50 * 3 // 100) * 100)::BIGINT AS auction,
               TIMESTAMP '2024-01-01 00:00:00' + to_microseconds((i * 1000000 // {rate})
                   - (hash(i, 8) % 1500000)::BIGINT) AS date_time
        FROM range({events}) t(i) ORDER BY i""").to_arrow_table()


def run(table: pa.Table, batch_size: int, threads: int) -> tuple[float, int, dict]:
    op = SessionWindow(CONFIG, OperatorContext("q11.session_window", SCHEMA))
    op.open()
    op.con.execute(f"SET threads = {threads}")
    batches = table.to_batches(max_chunksize=batch_size)
    start = time.perf_counter()
    out, max_ts = 0, None
    for batch in batches:
        op.process_batch(batch)
        top = pa.compute.max(batch.column("date_time")).cast(pa.int64()).as_py()
        max_ts = top if max_ts is None else max(max_ts, top)
        out += sum(b.num_rows for b in op.process_watermark(max_ts - 2_000_000))
    out += sum(b.num_rows for b in op.process_watermark(MAX_WATERMARK))
    elapsed = time.perf_counter() - start
    op.close()
    return elapsed, out, op.ctx.metrics


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--bidders", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--threads", type=int, default=1, help="DuckDB threads (1: one core)")
    args = parser.parse_args()
    table = bids(args.events, args.bidders)
    elapsed, sessions, metrics = run(table, args.batch, args.threads)
    print(f"SESSION 10 s COUNT per bidder: {args.events:,} bids, {args.bidders:,} bidders, batch {args.batch}, "
          f"{args.threads} DuckDB thread(s): {elapsed:.2f} s, {args.events / elapsed:,.0f} events/s, "
          f"{sessions:,} sessions, late {metrics.get('late_rows_dropped', 0)}")


if __name__ == "__main__":
    main()
