"""The UDFs of bench/udf.py through PyFlink, for the side-by-side figures (not part of weir).

    /path/to/pyflink-venv/bin/python bench/udf_pyflink.py [--rows 1000000]

Writes N rows (x) as CSV and runs, in one local PyFlink TableEnvironment (batch mode,
parallelism 1), ``INSERT INTO blackhole SELECT x, <e> FROM t WHERE <e> % 1000 = 1`` with <e>
the built-in ``x * 2 + 1``, a pandas UDF and a plain (general) Python UDF; prints each one's
seconds and rows/s. Run ``python bench/udf.py --rows N`` with the same N for weir's.

With ``--aggregate`` it runs bench/udaf.py's job instead, on the same rows (k = i % keys,
v = i % 1000, ts = i * 10 µs, as CSV) in streaming mode with a watermark: a 10 s tumble per key
(``GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)``) of the built-in ``SUM(v)``, a pandas UDAF and
a general Python UDAF (``AggregateFunction``), into a blackhole sink. Run
``python bench/udaf.py --rows N`` with the same N for weir's.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pyflink.table import AggregateFunction, DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import udaf, udf


@udf(result_type=DataTypes.BIGINT(), input_types=[DataTypes.BIGINT()], func_type="pandas")
def times2_plus1(x):
    return x * 2 + 1


@udf(result_type=DataTypes.BIGINT(), input_types=[DataTypes.BIGINT()])
def times2_plus1_row(x):
    return None if x is None else x * 2 + 1


@udaf(result_type=DataTypes.BIGINT(), func_type="pandas")
def pandas_sum(v):
    return int(v.sum())


class GeneralSum(AggregateFunction):
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

    def get_accumulator_type(self):
        return DataTypes.ARRAY(DataTypes.BIGINT())

    def get_result_type(self):
        return DataTypes.BIGINT()


def aggregates(rows: int, keys: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "t.csv"
        with data.open("w") as out:
            out.writelines(f"{i % keys},{i % 1000},{_timestamp(i * 10)}\n" for i in range(rows))
        env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
        env.get_config().set("parallelism.default", "1")
        env.create_temporary_function("pandas_sum", pandas_sum)
        env.create_temporary_function("general_sum", udaf(GeneralSum()))
        env.execute_sql(f"CREATE TABLE t (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) "
                        f"WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv')")
        env.execute_sql("CREATE TABLE sink (k BIGINT, w TIMESTAMP(3), total BIGINT) WITH ('connector' = 'blackhole')")
        print(f"{rows:,} rows, {keys:,} keys; a 10 s tumble per key through PyFlink (streaming, parallelism 1):")
        for name, agg in {"built-in SUM": "SUM(v)", "pandas UDAF": "pandas_sum(v)",
                          "general UDAF": "general_sum(v)"}.items():
            start = time.perf_counter()
            env.execute_sql(f"INSERT INTO sink SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND), {agg} FROM t "
                            "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)").wait()
            seconds = time.perf_counter() - start
            print(f"  {name:<13} {seconds:7.2f} s  {rows / seconds / 1e3:8.1f} K rows/s")


def _timestamp(micros: int) -> str:
    seconds, rest = divmod(micros, 1_000_000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2024-01-01 {hours:02d}:{minutes:02d}:{seconds:02d}.{rest // 1000:03d}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--aggregate", action="store_true", help="bench/udaf.py's tumble instead")
    parser.add_argument("--keys", type=int, default=1000)
    args = parser.parse_args()
    if args.aggregate:
        aggregates(args.rows, args.keys)
        return
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "t.csv"
        with data.open("w") as out:
            out.writelines(f"{i}\n" for i in range(args.rows))
        env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
        env.get_config().set("parallelism.default", "1")
        env.create_temporary_function("times2_plus1", times2_plus1)
        env.create_temporary_function("times2_plus1_row", times2_plus1_row)
        env.execute_sql(f"CREATE TABLE t (x BIGINT) WITH ('connector' = 'filesystem', 'path' = '{data}', "
                        "'format' = 'csv')")
        env.execute_sql("CREATE TABLE sink (x BIGINT, y BIGINT) WITH ('connector' = 'blackhole')")
        for name, e in {"built-in": "x * 2 + 1", "pandas UDF": "times2_plus1(x)", "general UDF": "times2_plus1_row(x)"}.items():
            start = time.perf_counter()
            env.execute_sql(f"INSERT INTO sink SELECT x, {e} FROM t WHERE {e} % 1000 = 1").wait()
            seconds = time.perf_counter() - start
            print(f"  {name:<12} {seconds:7.2f} s  {args.rows / seconds / 1e6:6.2f} M rows/s")


if __name__ == "__main__":
    main()
