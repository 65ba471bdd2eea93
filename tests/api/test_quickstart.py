"""examples/python/quickstart.py runs to the end and prints what its job and stream gave."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "python" / "quickstart.py"


def test_the_quickstart_runs_and_prints_its_results(tmp_path):
    done = subprocess.run([sys.executable, str(QUICKSTART)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["submitted job j1 (channel_windows)", "job j1: FINISHED", "rows in: 18,400; rows out: 7,314; late rows: 0"]
    assert "bids in the view: 18,400" in lines
    assert "busiest channels: [('Baidu', 2355), ('Google', 2346), ('Apple', 2310), ('Facebook', 2266)]" in lines
    # The stream's changes: trades arrive two at a time, so each symbol's total is updated (-U, +U).
    start = lines.index("+I ACME 10")
    assert lines[start:start + 6] == ["+I ACME 10", "+I INIT 5", "-U ACME 10", "+U ACME 20", "-U INIT 5",
                                      "+U INIT 13"]
    # The UDF's view: every bid in one of the three bands (tests/api/test_connection.py checks a
    # function against the same built-in expression).
    bands = dict(ast.literal_eval(lines[start + 6].removeprefix("bids per price band: ")))
    assert sum(bands.values()) == 18_400 and set(bands) == {"low", "middle", "high"}
    # pandas: a DataFrame source's windows, answered as a DataFrame with datetime64 window starts.
    dtypes = lines[start + 7]  # a string column's dtype is pandas' own ('str' in pandas 3, 'object' before)
    assert dtypes.startswith("order windows (pandas): symbol ") and dtypes.endswith(
        ", window_start datetime64[us], qty int64")
    assert lines[start + 8:] == ["  ACME 00:00:00 4", "  INIT 00:00:00 2", "  ACME 00:00:10 6", "  INIT 00:00:10 1",
                                 "done"]
    assert list(tmp_path.iterdir()) == []  # it wrote nothing where it ran
