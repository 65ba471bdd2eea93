"""Benchmark: Python scalar UDFs against the same expression written as a built-in.

    python bench/udf.py [--rows 10000000]

Writes N rows (x BIGINT, ts TIMESTAMP) to Parquet, then runs the job

    INSERT INTO out SELECT x, <e> AS y FROM t WHERE (<e>) % 1000 = 1

three ways: <e> as the built-in ``x * 2 + 1``, as ``plus(x)`` (an arrow UDF: two pyarrow.compute
calls per chunk) and as ``plus_row(x)`` (a row-at-a-time ``general`` UDF), each with `weir run` in
a child process. In the job the calc calls a UDF once per batch, once for both uses of <e>
(``engine.operators.python_calls``). It prints, per variant, the engine's time from the job summary and the whole
process's wall time and CPU time (user + sys), and the UDF variants' ratios to the built-in; then the same three
expressions in a plain DuckDB query over the file (``SELECT sum(<e>)``), which isolates the
cost of DuckDB's calls (one per 2,048-row vector: what a UDF cost inside a calc before), and the row-at-a-time UDF's rows/s there.

The functions are defined in this file, which the job imports as the module ``udf``.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import weir

HERE = Path(__file__).resolve().parent
TWO, ONE = pa.scalar(2, pa.int64()), pa.scalar(1, pa.int64())


@weir.udf(result_type="BIGINT", func_type="arrow")
def plus(x: pa.Array) -> pa.Array:
    # Typed scalars: pyarrow converts a Python int argument anew on every call (~0.1 ms).
    return pc.add(pc.multiply(x, TWO), ONE)


@weir.udf(result_type="BIGINT")
def plus_row(x):
    return None if x is None else x * 2 + 1


EXPRESSIONS = {"built-in": "x * 2 + 1", "arrow UDF": "plus(x)", "row-at-a-time UDF": "plus_row(x)"}

JOB = """
CREATE FUNCTION plus AS 'udf.plus' LANGUAGE PYTHON;
CREATE FUNCTION plus_row AS 'udf.plus_row' LANGUAGE PYTHON;
CREATE TABLE t (x BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'parquet');
CREATE TABLE out (x BIGINT, y BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out SELECT x, {e} AS y FROM t WHERE ({e}) % 1000 = 1;
"""


def write_rows(path: Path, rows: int) -> None:
    duckdb.sql(f"COPY (SELECT range AS x, TIMESTAMP '2024-01-01' + to_microseconds(range) AS ts "
               f"FROM range({rows})) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 65536)")


def run_job(directory: Path, name: str, expression: str, data: Path) -> tuple[float, float]:
    """(engine seconds from the summary, whole-process wall seconds) of `weir run`."""
    return run_weir(directory, name, JOB.format(data=data, out=directory / f"out-{name}", e=expression))


#: The CPU time (user + sys) of each `weir run` by name: on a loaded machine a fairer comparison
#: than wall time.
CPU_SECONDS: dict[str, float] = {}


def run_weir(directory: Path, name: str, sql: str) -> tuple[float, float]:
    """(engine seconds from the summary, whole-process wall seconds) of `weir run` of ``sql``,
    with this folder importable (a worker imports the UDFs' module by name)."""
    job = directory / f"{name}.sql"
    job.write_text(sql)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", str(job), "--db",
                           str(directory / f"{name}.duckdb"), "--no-progress"],
                          cwd=directory, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS[name] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stdout}{done.stderr}")
    found = re.search(r"in ([0-9.]+) ?s", done.stdout + done.stderr)
    return (float(found.group(1)) if found else float("nan")), wall


def duckdb_only(data: Path, rows: int) -> None:
    from weir.engine import udfs
    udfs.install(plus)
    udfs.install(plus_row)
    con = duckdb.connect()
    udfs.register_functions(con)
    seconds = {}
    for name, expression in EXPRESSIONS.items():
        start = time.perf_counter()
        con.sql(f"SELECT sum({expression}) FROM read_parquet('{data}')").fetchall()
        seconds[name] = time.perf_counter() - start
    print("\nDuckDB alone, SELECT sum(<e>) over the file:")
    for name, s in seconds.items():
        ratio = f"  {s / seconds['built-in']:.1f}x the built-in" if name != "built-in" else ""
        print(f"  {name:<18} {s:7.2f} s  {rows / s / 1e6:6.2f} M rows/s{ratio}")


def calc_only(data: Path, rows: int, repeats: int) -> None:
    from weir.engine import udfs
    from weir.engine.operators.base import OperatorContext
    from weir.engine.operators.calc import Calc
    udfs.install(plus)
    udfs.install(plus_row)
    batches = pq.read_table(data, columns=["x"]).to_batches(max_chunksize=65_536)
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    cpu: dict[str, float] = {}
    wall: dict[str, float] = {}
    for _ in range(repeats):
        for name, expression in EXPRESSIONS.items():
            calc = Calc({"projection": [["x", "x"], ["y", expression]], "filter": f"({expression}) % 1000 = 1"},
                        OperatorContext("calc", schema))
            calc.open()
            start, started = time.process_time(), time.perf_counter()
            out = sum(b.num_rows for batch in batches for b in calc.process_batch(batch))
            cpu[name] = min(cpu.get(name, float("inf")), time.process_time() - start)
            wall[name] = min(wall.get(name, float("inf")), time.perf_counter() - started)
            calc.close()
            assert out == (rows + 499) // 500, f"{name}: {out} rows out"  # (x * 2 + 1) % 1000 = 1: x % 500 = 0
    print(f"\nThe calc alone, {len(batches)} batches, best of {repeats} alternated (CPU = user + sys of this process):")
    for name in EXPRESSIONS:
        ratio = (f"  ({cpu[name] / cpu['built-in']:.2f}x CPU, {wall[name] / wall['built-in']:.2f}x wall the built-in)"
                 if name != "built-in" else "")
        print(f"  {name:<18} CPU {cpu[name]:6.2f} s, wall {wall[name]:6.2f} s{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="alternations of the calc-alone figures")
    parser.add_argument("--calc-only", action="store_true", help="only the calc alone, in this process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        data = directory / "t.parquet"
        write_rows(data, args.rows)
        if args.calc_only:
            calc_only(data, args.rows, args.repeats)
            return
        print(f"{args.rows:,} rows; INSERT INTO out SELECT x, <e> FROM t WHERE (<e>) % 1000 = 1 with `weir run`:")
        figures = {}
        for index, (name, expression) in enumerate(EXPRESSIONS.items()):
            figures[name] = run_job(directory, f"v{index}", expression, data)
        engine0, wall0 = figures["built-in"]
        cpu0 = CPU_SECONDS["v0"]
        for index, (name, (engine, wall)) in enumerate(figures.items()):
            cpu = CPU_SECONDS[f"v{index}"]
            ratios = (f"  ({engine / engine0:.2f}x, {wall / wall0:.2f}x, CPU {cpu / cpu0:.2f}x the built-in)"
                      if name != "built-in" else "")
            print(f"  {name:<18} engine {engine:6.2f} s ({args.rows / engine / 1e6:5.2f} M rows/s), "
                  f"process {wall:6.2f} s, CPU {cpu:6.2f} s{ratios}")
        duckdb_only(data, args.rows)
        calc_only(data, args.rows, args.repeats)


if __name__ == "__main__":
    main()
