"""What `weir run` of a small job loads: not pandas (pyarrow would import it for nothing,
engine/pandas_import.py), and of the connectors only the job's. Import lines come from
PYTHONPROFILEIMPORTTIME, which the workers of a parallel job inherit, so they are checked too.
How long start-up takes is measured by bench/startup.py, not here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

JOB = """
CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
                   WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'events' = '100');
CREATE TABLE out (auction BIGINT, bids BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT auction, COUNT(*) FROM bids GROUP BY auction;
"""


def _imports(stderr: str) -> list[str]:
    """The modules imported, one entry per process that imported each."""
    return [m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M)]


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_small_job_imports_no_pandas_and_only_its_connectors(tmp_path, parallelism):
    (tmp_path / "job.sql").write_text(JOB)
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress",
                           "--parallelism", str(parallelism)], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"job job finished in .*: 92 events read", done.stdout)
    imported = _imports(done.stderr)
    # The coordinator imports the engine's subtask runner, and so does the fork server the workers
    # are forked from (engine/runtime/workers.py), once for all of them: every process is seen,
    # the workers' own later imports too (they inherit the server's -X importtime).
    assert imported.count("weir.engine.runtime.subtask") == 1 + (1 if parallelism > 1 else 0)
    # pyarrow's one refused attempt (engine/pandas_import.py) shows as a line for "pandas" alone.
    assert [m for m in imported if m.startswith("pandas.")] == []
    # nor numpy.ma, which pa.array of an ndarray imports (the generator uses arrow_array)
    assert [m for m in imported if m == "numpy.ma" or m.startswith("numpy.ma.")] == []
    connectors = {m.rsplit(".", 1)[1] for m in imported if m.startswith("weir.engine.connectors.")}
    assert {"nexmark", "blackhole"} <= connectors
    assert connectors.isdisjoint({"kafka", "kafka_formats", "filesystem", "file_readers", "datagen", "print_sink"})



def test_a_small_job_run_from_python_imports_no_pandas(tmp_path):
    """``weir.run`` from a script that has not imported pandas: the API defers it as `weir run` does."""
    (tmp_path / "job.sql").write_text(JOB)
    code = ("import sys, weir\n"
            "result = weir.run('job.sql', db='job.duckdb')\n"
            "print(result.rows_read, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["92", "False"]
    assert [m for m in _imports(done.stderr) if m.startswith("pandas.")] == []



#: A Python aggregate (GROUP BY over an updating count, so it retracts, and OVER a bounded frame)
#: and a Python table function: each hands its rows to Python through numpy offsets and masks.
PYTHON_FUNCTIONS = """
import weir

@weir.udaf(result_type="BIGINT", accumulator_type="ARRAY<BIGINT>")
class PySum:
    def create_accumulator(self):
        return [0]
    def accumulate(self, acc, v):
        acc[0] += v or 0
    def retract(self, acc, v):
        acc[0] -= v or 0
    def merge(self, acc, others):
        acc[0] += sum(o[0] for o in others)
    def get_value(self, acc):
        return acc[0]

@weir.udtf(result_types="BIGINT")
def count_to(n):
    for i in range(n):
        yield (i,)
"""
PYTHON_JOB = """
CREATE FUNCTION py_sum AS 'my_functions.PySum' LANGUAGE PYTHON;
CREATE FUNCTION count_to AS 'my_functions.count_to' LANGUAGE PYTHON;
CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
                   WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'events' = '300');
CREATE TABLE totals (bids BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO totals SELECT n, py_sum(auction) FROM (SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction) GROUP BY n;
CREATE TABLE running (auction BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO running SELECT auction, py_sum(price) OVER (PARTITION BY auction ORDER BY date_time
  ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM bids;
CREATE TABLE counted (auction BIGINT, i BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO counted SELECT auction, i FROM bids, LATERAL TABLE(count_to(CAST(auction % 3 AS INT))) AS T(i);
"""


def test_a_job_of_python_aggregates_and_table_functions_imports_no_pandas(tmp_path):
    (tmp_path / "my_functions.py").write_text(PYTHON_FUNCTIONS)
    (tmp_path / "job.sql").write_text(PYTHON_JOB)
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    for sink in ("totals", "running", "counted"):  # every function ran on rows
        assert re.search(rf"{sink}\.sink\s+[1-9]", done.stdout), done.stdout
    assert [m for m in _imports(done.stderr) if m.startswith("pandas.")] == []


#: Rows up to 3 ms out of order in batches of 16 through a window, so that the window aggregate
#: judges rows against arrival watermarks and its own (the paths that compare arrays with
#: numbers), finds late rows and fires windows while rows come.
WINDOW_JOB = """
SET 'weir.source.batch-size' = '16';
CREATE TABLE bids (auction BIGINT, date_time TIMESTAMP(3),
                   WATERMARK FOR date_time AS date_time - INTERVAL '1' MILLISECOND)
WITH ('connector' = 'filesystem', 'path' = 'bids.parquet', 'format' = 'parquet');
CREATE TABLE out (auction BIGINT, window_end TIMESTAMP(3), bids BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT auction, window_end, COUNT(*)
FROM TABLE({window}) GROUP BY auction, window_start, window_end;
"""
WINDOWS = {
    "tumble": "TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' MILLISECOND)",
    "hop": "HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '5' MILLISECOND, INTERVAL '10' MILLISECOND)",
    "cumulate": "CUMULATE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '5' MILLISECOND, INTERVAL '10' MILLISECOND)",
    # sorts and merges in numpy (engine/operators/islands.py)
    "session": "SESSION(TABLE bids PARTITION BY auction, DESCRIPTOR(date_time), INTERVAL '2' MILLISECOND)",
}


@pytest.mark.parametrize("window,parallelism", [("tumble", 1), ("hop", 1), ("cumulate", 1), ("session", 1),
                                                ("hop", 2)])
def test_a_windowed_job_with_late_rows_imports_neither_pandas_nor_numpy_ma(tmp_path, window, parallelism):
    """Nor ``numpy.ma``, which ``pa.array`` of an ndarray imports (~20 ms): the window paths
    convert their numpy results with ``arrow_array`` (engine/pandas_import.py)."""
    times = pa.array([i * 1000 - (i * 7 % 4) * 1000 for i in range(400)], pa.int64())
    pq.write_table(pa.table({"auction": pa.array([i % 3 for i in range(400)], pa.int64()),
                             "date_time": times.cast(pa.timestamp("ms"))}), tmp_path / "bids.parquet")
    (tmp_path / "job.sql").write_text(WINDOW_JOB.format(window=WINDOWS[window]))
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress",
                           "--parallelism", str(parallelism)], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    late = re.search(r"late rows dropped: ([\d,]+)", done.stdout)
    assert late and int(late.group(1).replace(",", "")) > 0, done.stdout  # the late-row paths ran
    imported = _imports(done.stderr)
    assert [m for m in imported if m.startswith("pandas.")] == []
    assert [m for m in imported if m == "numpy.ma" or m.startswith("numpy.ma.")] == []


def test_importing_every_module_of_weir_imports_no_pandas():
    """No module converts Python values with pyarrow when it is imported."""
    code = ("import pkgutil, importlib, sys, weir\n"
            "names = [m.name for m in pkgutil.walk_packages(weir.__path__, 'weir.')]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names), 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr
    count, pandas = done.stdout.split()
    assert int(count) > 100 and pandas == "False"


#: Window assignment (HOP: slices, windows fired and rows expired by watermark), a top-N over an
#: updating count and a json file sink: each converts Python ints or strings with pyarrow on its
#: hot path unless it passes them typed.
WINDOWED_JOB = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
                   WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'events' = '200');
CREATE TABLE hops (auction BIGINT, window_end TIMESTAMP(3), bids BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/hops', 'format' = 'json');
INSERT INTO hops SELECT auction, window_end, COUNT(*)
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '2' SECOND))
GROUP BY auction, window_start, window_end;
CREATE MATERIALIZED VIEW busiest AS
SELECT bidder, n, rk FROM (
  SELECT *, RANK() OVER (ORDER BY n DESC) AS rk FROM (SELECT bidder, COUNT(*) AS n FROM bids GROUP BY bidder))
WHERE rk <= 3;
"""


def test_a_windowed_top_n_job_with_a_json_sink_imports_no_pandas(tmp_path):
    (tmp_path / "job.sql").write_text(WINDOWED_JOB)
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress",
                           "--db", "job.duckdb"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"hops\.sink\s+[1-9]", done.stdout) and re.search(r"busiest\.sink\s+[1-9]", done.stdout), done.stdout
    assert list((tmp_path / "out" / "hops").glob("part-*.json"))
    assert [m for m in _imports(done.stderr) if m.startswith("pandas.")] == []


#: An INNER regular join of two append-only inputs (Nexmark q3's shape), then an append-only
#: Top-1 per partition: the join's pairs and both operators' signs are compared with numbers on
#: every batch.
JOIN_JOB = """
CREATE TABLE auction (id BIGINT, seller BIGINT, category BIGINT, date_time TIMESTAMP(3))
WITH ('connector' = 'nexmark', 'table' = 'auction', 'events' = '2000');
CREATE TABLE person (id BIGINT, name VARCHAR, date_time TIMESTAMP(3))
WITH ('connector' = 'nexmark', 'table' = 'person', 'events' = '2000');
CREATE TABLE sellers (name VARCHAR, id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sellers SELECT P.name, A.id FROM auction AS A JOIN person AS P ON A.seller = P.id;
CREATE TABLE latest (seller BIGINT, id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO latest SELECT seller, id FROM (SELECT A.seller, A.id, ROW_NUMBER() OVER (PARTITION BY A.seller
  ORDER BY A.id DESC) AS rn FROM auction AS A JOIN person AS P ON A.seller = P.id) WHERE rn <= 1;
"""


def test_a_regular_join_job_imports_neither_pandas_nor_numpy_ma(tmp_path):
    (tmp_path / "job.sql").write_text(JOIN_JOB)
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    for sink in ("sellers", "latest"):  # pairs were made and ranked
        assert re.search(rf"{sink}\.sink\s+[1-9]", done.stdout), done.stdout
    imported = _imports(done.stderr)
    assert [m for m in imported if m.startswith("pandas.")] == []
    assert [m for m in imported if m == "numpy.ma" or m.startswith("numpy.ma.")] == []
