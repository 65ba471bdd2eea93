"""Benchmark: a job at a high 'parallelism.default' (64 by default), end to end.

    python bench/parallelism.py [--parallelism 64] [--files 16] [--rows 4000]

The job reads ``--files`` csv files (one split each: workers beyond them read
nothing but still own key groups) and counts rows per key and 10-second window
into an append-only DuckDB table (committed once per checkpoint by the
coordinator, as Flink's global committer does: the case that failed on a lock
conflict at parallelism 64 when every worker committed its share) and into a
materialized view, with a checkpoint every second. It runs `weir run` in a
subprocess and prints the whole-process wall time, the peak memory of the
process tree (the sum of every process's RSS, and of its PSS, which counts a
page shared by n processes as 1/n), the checkpoints completed, and whether both
outputs equal a DuckDB batch query over the same files.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent

JOB = """
SET 'parallelism.default' = '{parallelism}';
SET 'execution.checkpointing.interval' = '1s';
SET 'weir.source.batch-size' = '500';
CREATE TABLE events (ts TIMESTAMP(3), k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data', 'format' = 'csv');
CREATE TABLE key_windows (k BIGINT, window_start TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'duckdb', 'path' = 'weir.duckdb', 'table-name' = 'key_windows');
INSERT INTO key_windows SELECT k, window_start, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW key_totals AS SELECT k, COUNT(*) AS cnt, SUM(v) AS total FROM events GROUP BY k;
"""
WINDOWS = ("SELECT k, time_bucket(INTERVAL '10 seconds', ts) AS window_start, COUNT(*), SUM(v) "
           "FROM read_csv('{data}/*.csv', header = true) GROUP BY ALL ORDER BY ALL")
TOTALS = "SELECT k, COUNT(*), SUM(v) FROM read_csv('{data}/*.csv', header = true) GROUP BY ALL ORDER BY ALL"


def tree_memory(root: int) -> tuple[int, int]:
    """(sum of RSS, sum of PSS) in bytes over ``root`` and every process below it."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    rss = pss = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
        except OSError:
            continue  # it ended between the listing and the read
    return rss, pss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parallelism", type=int, default=64)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--rows", type=int, default=4000, help="rows per file")
    parser.add_argument("--workdir", type=Path, default=HERE / ".data" / "parallelism")
    args = parser.parse_args()
    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    for f in range(args.files):
        duckdb.sql(f"COPY (SELECT TIMESTAMP '2024-01-01' + to_milliseconds(i * 250) AS ts, (i * 7 + {f}) % 1000 AS k, "
                   f"i AS v FROM range({args.rows}) t(i)) TO '{work / 'data' / f'part-{f:03d}.csv'}' (HEADER)")
    (work / "job.sql").write_text(JOB.format(parallelism=args.parallelism))

    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress"],
                               cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = 0
    while process.poll() is None:
        rss, pss = tree_memory(process.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.2)  # a sampling interval (a bench, not a test)
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        print(f"weir run failed (exit {process.returncode}):\n{stdout}{stderr}")
        return 1
    with duckdb.connect(str(work / "weir.duckdb"), read_only=True) as con:
        windows = con.sql("SELECT * FROM key_windows ORDER BY ALL").fetchall()
        totals = con.sql("SELECT * FROM key_totals ORDER BY ALL").fetchall()
    exact_windows = windows == duckdb.sql(WINDOWS.format(data=work / "data")).fetchall()
    exact_totals = totals == duckdb.sql(TOTALS.format(data=work / "data")).fetchall()
    checkpoints = next((line.strip() for line in stdout.splitlines() if "checkpoints:" in line), "checkpoints: ?")
    print(f"parallelism {args.parallelism}: {args.files * args.rows:,} rows in {args.files} files")
    print(f"  whole process: {wall:.1f} s wall; peak memory of the process tree: "
          f"RSS {peak_rss / 2**20:,.0f} MB (sum), PSS {peak_pss / 2**20:,.0f} MB")
    print(f"  {checkpoints}")
    print(f"  key_windows {len(windows):,} rows, {'exact' if exact_windows else 'WRONG'}; "
          f"key_totals {len(totals):,} rows, {'exact' if exact_totals else 'WRONG'}")
    return 0 if exact_windows and exact_totals else 1


if __name__ == "__main__":
    sys.exit(main())
