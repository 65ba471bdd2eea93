"""`weir -f file.sql` runs a file and exits with its status; `weir -i init.sql` runs one, then stays."""
from __future__ import annotations

import subprocess

from jobs import nexmark_source
from terminal import WEIR, ShellProcess

BIDS = ("CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3), "
        "WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND) " + nexmark_source(2000) + "\n")
VIEW = ("CREATE MATERIALIZED VIEW per_channel AS SELECT channel, window_start, window_end, COUNT(*) AS n\n"
        "FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) GROUP BY channel, window_start, window_end;\n")


def weir(tmp_path, *args):
    return subprocess.run([WEIR, *args], cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120)


def test_a_file_runs_its_jobs_to_the_end_and_exits_0(tmp_path):
    (tmp_path / "job.sql").write_text(BIDS + VIEW + "SELECT SUM(n) AS total FROM per_channel;\n")
    result = weir(tmp_path, "-f", "job.sql")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["created table bids",
                                              "job j1 started: materialized view per_channel in weir.duckdb"]
    assert "waiting for 1 job to finish: j1" in result.stdout or "job j1 (per_channel) finished" in result.stdout
    assert "job j1 (per_channel) finished in " in result.stdout
    check = weir(tmp_path, "query", "SELECT SUM(n) AS total FROM per_channel", "--format", "csv")
    assert check.stdout == "total\n1840\n"


def test_a_live_select_in_a_file_prints_a_tableau(tmp_path):
    (tmp_path / "job.sql").write_text(BIDS + "SELECT auction, price FROM bids WHERE price > 90000000;\n")
    result = weir(tmp_path, "-f", "job.sql")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("+----+") and lines[2].startswith("| op | auction |")
    assert lines[4].startswith("| +I |")
    assert lines[-1].startswith("query j1 finished: received a total of ")


def test_a_file_stops_at_its_first_error_with_status_1(tmp_path):
    (tmp_path / "bad.sql").write_text(BIDS + "SELECT prise FROM bids;\nSHOW TABLES;\n")
    result = weir(tmp_path, "-f", "bad.sql")
    assert result.returncode == 1
    assert result.stderr.startswith("bad.sql:2:8: error: unknown column `prise` in `bids`\n  SELECT prise FROM bids;\n")
    assert "table name" not in result.stdout  # SHOW TABLES never ran


def test_a_failing_job_makes_the_status_1(tmp_path):
    (tmp_path / "job.sql").write_text(
        "CREATE TABLE missing (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'nope/', 'format' = 'csv');\n"
        "CREATE TABLE out (a BIGINT) WITH ('connector' = 'blackhole');\n"
        "INSERT INTO out SELECT a FROM missing;\n")
    result = weir(tmp_path, "-f", "job.sql")
    assert result.returncode == 1
    assert "job j1 (out) FAILED\nerror: in operator missing.source: the source path 'nope/' does not exist" in result.stderr


def test_a_missing_file(tmp_path):
    result = weir(tmp_path, "-f", "nope.sql")
    assert result.returncode == 1 and result.stderr == "weir: cannot read nope.sql: No such file or directory\n"


def test_an_init_file_then_the_prompt(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "init.sql").write_text(BIDS + "SET 'sql-client.execution.result-mode' = 'tableau';\n")
    sh = ShellProcess(tmp_path, home, "-i", "init.sql")
    sh.expect("created table bids")
    sh.run("SET;")
    sh.expect(r"sql-client\.execution\.result-mode \| tableau")
    sh.run("SHOW TABLES;")
    sh.expect(r"bids\s+\| nexmark")
    assert sh.exit() == 0
