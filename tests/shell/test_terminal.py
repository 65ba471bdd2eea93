"""The installed `weir` script, run as a process: the progress line and colours
appear only when stderr is a terminal (a pseudo-terminal here)."""
from __future__ import annotations

import os
import pty
import shutil
import subprocess
from pathlib import Path

from cli_jobs import BIDS, ISSUE_JOB

WEIR = shutil.which("weir")
PROGRESS = "rows/s  watermark "


def run_on_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run weir with stderr on a pseudo-terminal and stdout on a pipe; read both to the end."""
    master, slave = pty.openpty()
    process = subprocess.Popen([WEIR, *args], cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(), out, b"".join(chunks).decode()


def run_on_pipes(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([WEIR, *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def test_the_console_script_is_installed():
    assert WEIR is not None, "the `weir` console script is not on PATH: pip install -e ."
    result = subprocess.run([WEIR, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: weir")
    for command in ("run", "explain", "query"):
        assert command in result.stdout


def test_progress_line_on_a_terminal(tmp_path):
    (tmp_path / "job.sql").write_text(ISSUE_JOB)
    code, out, err = run_on_terminal(["run", "job.sql", "--progress-interval", "0"], tmp_path)
    assert code == 0, err
    assert "read 18,400 rows  " in err and PROGRESS in err
    assert err.endswith("\r\x1b[2K")  # the line is cleared before the summary
    assert PROGRESS not in out and out.startswith("job job finished in ")


def test_no_progress_line_when_stderr_is_not_a_terminal(tmp_path):
    (tmp_path / "job.sql").write_text(ISSUE_JOB)
    result = run_on_pipes(["run", "job.sql", "--progress-interval", "0"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("job job finished in ")


def test_no_progress_line_when_asked(tmp_path):
    (tmp_path / "job.sql").write_text(ISSUE_JOB)
    code, out, err = run_on_terminal(["run", "job.sql", "--progress-interval", "0", "--no-progress"], tmp_path)
    assert code == 0
    assert err == ""
    assert out.startswith("job job finished in ")


BAD_JOB = BIDS + "CREATE MATERIALIZED VIEW v AS SELECT prise FROM bids;\n"


def test_errors_are_coloured_on_a_terminal(tmp_path):
    (tmp_path / "bad.sql").write_text(BAD_JOB)
    code, out, err = run_on_terminal(["run", "bad.sql"], tmp_path)
    assert code == 1 and out == ""
    assert "bad.sql:5:38: \x1b[1;31merror\x1b[0m: unknown column `prise` in `bids`" in err
    assert "\x1b[1;32m^\x1b[0m" in err and "\x1b[1;36mhint\x1b[0m: did you mean `price`?" in err


def test_errors_are_plain_on_a_pipe(tmp_path):
    (tmp_path / "bad.sql").write_text(BAD_JOB)
    result = run_on_pipes(["run", "bad.sql"], tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("bad.sql:5:38: error: unknown column `prise` in `bids`\n")
    assert "\x1b[" not in result.stderr


def test_a_reader_that_goes_away_stops_weir_quietly(tmp_path):
    (tmp_path / "job.sql").write_text(ISSUE_JOB)
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `weir run job.sql | head -0`
    try:
        result = subprocess.run([WEIR, "run", "job.sql"], cwd=tmp_path, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141
