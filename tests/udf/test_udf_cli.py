"""`weir run` on a job file whose UDFs live in a module beside it, in the working directory."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb

MODULE = '''
import weir

@weir.udf(result_type="BIGINT", input_types=["BIGINT"])
def cubed(v):
    return v * v * v
'''
JOB = """
CREATE FUNCTION cubed AS 'my_udfs.cubed' LANGUAGE PYTHON;
CREATE TABLE events (ts TIMESTAMP(3), v BIGINT, WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = 'events.csv', 'format' = 'csv');
CREATE MATERIALIZED VIEW cubes AS SELECT v, cubed(v) AS c FROM events WHERE cubed(v) > 8;
"""


def test_weir_run_imports_a_udf_module_from_the_working_directory(tmp_path: Path):
    (tmp_path / "my_udfs.py").write_text(MODULE)
    (tmp_path / "job.sql").write_text(JOB)
    (tmp_path / "events.csv").write_text("ts,v\n" + "".join(f"2024-01-01 00:00:0{i},{i}\n" for i in range(6)))
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--db", "w.duckdb",
                           "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        assert con.sql("SELECT * FROM cubes ORDER BY v").fetchall() == [(3, 27), (4, 64), (5, 125)]
