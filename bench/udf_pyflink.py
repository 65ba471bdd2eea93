"""The UDFs of bench/udf.py through PyFlink, for the side-by-side figures (not part of weir).

    /path/to/pyflink-venv/bin/python bench/udf_pyflink.py [--rows 1000000]

Writes N rows (x) as CSV and runs, in one local PyFlink TableEnvironment (batch mode,
parallelism 1), ``INSERT INTO blackhole SELECT x, <e> FROM t WHERE <e> % 1000 = 1`` with <e>
the built-in ``x * 2 + 1``, a pandas UDF and a plain (general) Python UDF; prints each one's
seconds and rows/s. Run ``python bench/udf.py --rows N`` with the same N for weir's.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import udf


@udf(result_type=DataTypes.BIGINT(), input_types=[DataTypes.BIGINT()], func_type="pandas")
def times2_plus1(x):
    return x * 2 + 1


@udf(result_type=DataTypes.BIGINT(), input_types=[DataTypes.BIGINT()])
def times2_plus1_row(x):
    return None if x is None else x * 2 + 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
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
