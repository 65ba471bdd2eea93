"""`weir run job.sql --serve` and `weir serve` from the command line, with psql."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys

import psycopg

from jobs import issue_job_over_nexmark
from weir.shell.cli import main

PSQL = "/usr/bin/psql"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def connect_when_listening(port: int, process: subprocess.Popen) -> psycopg.Connection:
    """Wait for the server's line saying it listens (printed once it does), then connect."""
    while "serving" not in (line := process.stderr.readline()):
        assert line, f"the server ended before listening: {process.stderr.read()}"
    return psycopg.connect(f"host=127.0.0.1 port={port} user=t dbname=weir connect_timeout=10", autocommit=True)


def test_run_serve_answers_psql_while_and_after_the_job_runs(tmp_path):
    (tmp_path / "job.sql").write_text(issue_job_over_nexmark(5000))
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress",
                                "--serve", "--listen", f"127.0.0.1:{port}"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with connect_when_listening(port, process) as con:
            status = None
            while status != "FINISHED":  # each probe is a query answered by the running server
                jobs = con.execute("SHOW JOBS").fetchall()
                assert len(jobs) == 1 and jobs[0][2] in ("RUNNING", "FINISHED")
                status = jobs[0][2]
            expected = con.execute("SELECT count(*), sum(bids) FROM channel_minutes").fetchone()
        assert expected[1] > 0
        answer = subprocess.run([PSQL, "-h", "127.0.0.1", "-p", str(port), "-U", "t", "-d", "weir", "-X", "-w",
                                 "-A", "-t", "-c", "SELECT count(*), sum(bids) FROM channel_minutes", "-c", r"\dt"],
                                capture_output=True, text=True, timeout=60)
        assert answer.returncode == 0, answer.stderr
        lines = answer.stdout.splitlines()
        assert lines[0] == f"{expected[0]}|{expected[1]}"
        assert any(line.startswith("main|channel_minutes|table") for line in lines[1:])
        # SHOW JOBS's counts and checkpoint are numbers on the wire (int8), which psql right-aligns.
        rows_in, rows_out, checkpoint = jobs[0][3], jobs[0][4], jobs[0][6]
        assert all(isinstance(n, int) for n in (rows_in, rows_out, checkpoint)) and checkpoint > 0
        shown = subprocess.run([PSQL, "-h", "127.0.0.1", "-p", str(port), "-U", "t", "-d", "weir", "-X", "-w",
                                "-c", "SHOW JOBS"], capture_output=True, text=True, timeout=60)
        header, _, row = shown.stdout.splitlines()[:3]
        assert header.split("|")[6] == " last checkpoint "
        assert row.split("|")[6] == f" {checkpoint:>15}"
        assert row.split("|")[3] == f" {rows_in:>7} "
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert "still serving" in err
    assert "channel_minutes" in out  # the run's summary


def test_serve_refuses_to_listen_beyond_localhost_without_a_password(capsys, monkeypatch):
    monkeypatch.delenv("WEIR_PASSWORD", raising=False)
    assert main(["serve", "--listen", "0.0.0.0:5433"]) == 1
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 without a password" in err and "--password-file" in err
