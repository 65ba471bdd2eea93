"""Benchmark: a Python aggregate function (``weir.udaf``) in a 10 s tumble against the built-in SUM.

    python bench/udaf.py [--rows 10000000] [--keys 1000]

Writes N rows (k BIGINT, v BIGINT, ts TIMESTAMP: 100,000 rows per second of event time) to
Parquet, then runs the job

    INSERT INTO out SELECT k, window_start, <agg>(v) AS total
    FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end

three ways: <agg> the built-in ``SUM``, ``arrow_sum`` (a UDAF with ``accumulate_batch``: one call
per key and batch, on a pyarrow array) and ``row_sum`` (a UDAF with ``accumulate``: a call per
row), each with `weir run` in a child process. It prints, per variant, the engine's time from
the job summary and the whole process's wall time, as rows/s, and the UDAF variants' ratios to
the built-in. The issue's target: at least 500K rows/s. With ``--over`` the same functions run
OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 9 PRECEDING AND CURRENT ROW) instead: a row out per
row in, each row accumulated once and retracted once.

With ``--bad-rows`` it measures what 'python.udf.bad-rows.table' costs: the two UDAFs without the
setting and with it (no row raises), alternated ``--repeat`` times, and ``picky_sum`` with it
(``row_sum`` raising on each v = 999, 0.1% of the rows: each batch with one re-runs its failing
groups row by row and is aggregated again without them).

The functions are defined in this file, which the job imports as the module ``udaf``.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

import weir
from udf import CPU_SECONDS, run_weir  # bench/ is on sys.path: the bench scripts run as files

HERE = Path(__file__).resolve().parent


@weir.udaf(result_type="BIGINT")
class RowSum:
    """SUM, a call per row."""

    def create_accumulator(self):
        return [0]

    def accumulate(self, acc, v):
        if v is not None:
            acc[0] += v

    def retract(self, acc, v):
        if v is not None:
            acc[0] -= v

    def merge(self, acc, others):
        for other in others:
            acc[0] += other[0]

    def get_value(self, acc):
        return acc[0]


@weir.udaf(result_type="BIGINT")
class ArrowSum(RowSum):
    """SUM, a call per key and batch on the group's pyarrow array."""

    accumulate = None

    def accumulate_batch(self, acc, v: pa.Array):
        acc[0] += pc.sum(v).as_py() or 0


@weir.udaf(result_type="BIGINT")
class PickySum(RowSum):
    """RowSum raising on v = 999 (one row in 1,000 of ``write_rows``), for ``--bad-rows``."""

    def accumulate(self, acc, v):
        if v == 999:
            raise ValueError("no 999")
        super().accumulate(acc, v)


AGGREGATES = {"built-in SUM": "SUM(v)", "arrow UDAF": "arrow_sum(v)", "row-at-a-time UDAF": "row_sum(v)"}

JOB = """
CREATE FUNCTION arrow_sum AS 'udaf.ArrowSum' LANGUAGE PYTHON;
CREATE FUNCTION row_sum AS 'udaf.RowSum' LANGUAGE PYTHON;
CREATE FUNCTION picky_sum AS 'udaf.PickySum' LANGUAGE PYTHON;
CREATE TABLE t (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'parquet');
CREATE TABLE out (k BIGINT, window_start TIMESTAMP(3), total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out SELECT k, window_start, {agg} AS total
FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
"""


#: --over: the same functions OVER a bounded frame (each row's sum of its key's last 10 rows:
#: accumulate the row entering, retract the one leaving, get_value per row), a row out per row in.
#: The watermark lags a second: 100 rows share each millisecond of TIMESTAMP(3), and OVER drops a
#: row at the watermark as late (with ``AS ts`` 99% of the rows were dropped, and not measured).
OVER_JOB = """
CREATE FUNCTION arrow_sum AS 'udaf.ArrowSum' LANGUAGE PYTHON;
CREATE FUNCTION row_sum AS 'udaf.RowSum' LANGUAGE PYTHON;
CREATE FUNCTION picky_sum AS 'udaf.PickySum' LANGUAGE PYTHON;
CREATE TABLE t (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'parquet');
CREATE TABLE out (k BIGINT, ts TIMESTAMP(3), total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out SELECT k, ts, {agg} OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 9 PRECEDING AND CURRENT ROW)
FROM t;
"""


def write_rows(path: Path, rows: int, keys: int) -> None:
    duckdb.sql(f"COPY (SELECT range % {keys} AS k, range % 1000 AS v, "
               f"TIMESTAMP '2024-01-01' + to_microseconds(range * 10) AS ts "
               f"FROM range({rows})) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 65536)")


#: --bad-rows: the setting that keeps the rows a UDAF raises on (``engine.operators.bad_aggregate_rows``).
BAD_ROWS = "SET 'python.udf.bad-rows.table' = 'udf_bad_rows';\n"


def run_job(directory: Path, name: str, aggregate: str, data: Path, over: bool = False,
            bad_rows: bool = False) -> tuple[float, float]:
    """(engine seconds from the summary, whole-process wall seconds) of `weir run`."""
    job = (OVER_JOB if over else JOB).format(data=data, out=directory / f"out-{name}", agg=aggregate)
    return run_weir(directory, name, (BAD_ROWS if bad_rows else "") + job)


def bad_rows_cost(directory: Path, data: Path, rows: int, over: bool, repeat: int) -> None:
    """--bad-rows: each UDAF without and with the setting (no row raising), alternated, and picky_sum
    with it; CPU seconds (user + sys of `weir run`) and engine rows/s per run."""
    variants = [("arrow UDAF", "arrow_sum(v)", False), ("arrow UDAF, setting", "arrow_sum(v)", True),
                ("row UDAF", "row_sum(v)", False), ("row UDAF, setting", "row_sum(v)", True)]
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    engine: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    for round_ in range(repeat):
        for index, (name, aggregate, bad_rows) in enumerate(variants):
            key = f"b{round_}_{index}"
            engine[name].append(run_job(directory, key, aggregate, data, over, bad_rows)[0])
            cpu[name].append(CPU_SECONDS[key])
    picky = run_job(directory, "picky", "picky_sum(v)", data, over, True)[0]
    for name, _, _ in variants:
        best = min(engine[name])
        print(f"  {name:<20} CPU {', '.join(f'{c:6.2f}' for c in cpu[name])} s; engine best {best:6.2f} s "
              f"({rows / best / 1e6:5.2f} M rows/s)")
    with duckdb.connect(str(directory / "picky.duckdb"), read_only=True) as con:
        bad = con.sql("SELECT count(*) FROM udf_bad_rows").fetchall()[0][0]
    print(f"  picky_sum, setting   CPU {CPU_SECONDS['picky']:6.2f} s; engine {picky:6.2f} s "
          f"({rows / picky / 1e6:5.2f} M rows/s); {bad:,} bad rows kept")
    print("  outputs identical with and without the setting:",
          same_output(directory, [f"b0_{i}" for i in range(len(variants))]))


def same_output(directory: Path, names: list[str]) -> bool:
    results = [duckdb.sql(f"SELECT * FROM read_csv('{directory / f'out-{n}'}/*.csv') ORDER BY ALL").fetchall()
               for n in names]
    return all(r == results[0] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--over", action="store_true",
                        help="OVER (PARTITION BY k ORDER BY ts ROWS 9 PRECEDING) instead of the tumble")
    parser.add_argument("--bad-rows", action="store_true",
                        help="the UDAFs without and with 'python.udf.bad-rows.table', and one raising on 0.1%%")
    parser.add_argument("--repeat", type=int, default=2, help="--bad-rows: rounds of the alternated runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        data = directory / "t.parquet"
        write_rows(data, args.rows, args.keys)
        query = ("SELECT k, ts, <agg>(v) OVER (PARTITION BY k ORDER BY ts ROWS 9 PRECEDING)" if args.over
                 else "SELECT k, window_start, <agg>(v) over a 10 s TUMBLE")
        print(f"{args.rows:,} rows, {args.keys:,} keys; {query} with `weir run`:")
        if args.bad_rows:
            bad_rows_cost(directory, data, args.rows, args.over, args.repeat)
            return
        figures = {}
        for index, (name, aggregate) in enumerate(AGGREGATES.items()):
            figures[name] = run_job(directory, f"v{index}", aggregate, data, args.over)
        engine0, wall0 = figures["built-in SUM"]
        cpu0 = CPU_SECONDS["v0"]
        for index, (name, (engine, wall)) in enumerate(figures.items()):
            cpu = CPU_SECONDS[f"v{index}"]
            ratios = (f"  ({engine / engine0:.2f}x, {wall / wall0:.2f}x, CPU {cpu / cpu0:.2f}x the built-in)"
                      if name != "built-in SUM" else "")
            print(f"  {name:<19} engine {engine:6.2f} s ({args.rows / engine / 1e6:5.2f} M rows/s), "
                  f"process {wall:6.2f} s ({args.rows / wall / 1e6:5.2f} M rows/s), CPU {cpu:6.2f} s{ratios}")
        print("  outputs identical:", same_output(directory, [f"v{i}" for i in range(len(AGGREGATES))]))


if __name__ == "__main__":
    main()
