"""The interactive shell end to end, in a pseudo-terminal: what a person types and sees."""
from __future__ import annotations

import pexpect
import pytest

from terminal import ShellProcess


def bids(events: int | None, name: str = "bids") -> str:
    bound = f"'events' = '{events}', " if events is not None else ""
    return (f"CREATE TABLE {name} (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, "
            f"date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND) "
            f"WITH ('connector' = 'nexmark', {bound}'first-event.rate' = '1000');")


PER_CHANNEL = ("CREATE MATERIALIZED VIEW per_channel AS SELECT channel, window_start, window_end, COUNT(*) AS n "
               "FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) GROUP BY channel, window_start, window_end;")


@pytest.fixture
def shell(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    processes = []

    def start(*args: str) -> ShellProcess:
        process = ShellProcess(tmp_path, home, *args)
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.child.isalive():
            process.child.terminate(force=True)


def test_a_multi_line_statement_completion_and_history(shell, tmp_path):
    sh = shell()
    sh.run("CREATE TABLE bids (")
    sh.expect(r"->")  # the statement goes on: a continuation prompt, nothing run yet
    sh.line("  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),")
    sh.line("  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND")
    sh.line(") WITH ('connector' = 'nexmark', 'events' = '1000');")
    sh.expect("created table bids")

    sh.prompt()
    sh.send("EXPLAIN SELECT bidd\t")  # a column
    sh.wait_screen(r"weir> EXPLAIN SELECT bidder$")
    sh.send(", pric")
    sh.send("\t")
    sh.wait_screen(r"EXPLAIN SELECT bidder, price\s*$")
    sh.send(" FROM bi\t")  # a table
    sh.wait_screen(r"EXPLAIN SELECT bidder, price FROM bids$")
    sh.line(";")
    sh.expect(r"== EXPLAIN at line 1: SELECT bidder, price FROM bids ==")
    sh.expect(r"bids\.source")
    assert sh.exit() == 0
    history = (tmp_path / "home" / "history").read_text()
    assert "+CREATE TABLE bids (" in history and "+EXPLAIN SELECT bidder, price FROM bids;" in history


def test_live_select_in_each_result_mode(shell):
    sh = shell()
    sh.run(bids(2000))
    sh.expect("created table bids")
    query = "SELECT auction, price FROM bids WHERE price > 90000000;"

    sh.run("SET 'sql-client.execution.result-mode' = 'tableau';")
    sh.run(query)
    sh.expect(r"\| op \| auction \|\s+price \|")
    sh.expect(r"\| \+I \|\s+\d+ \|\s+9\d{7} \|")
    total = sh.expect(r"query j1 finished: received a total of (\d+) rows").group(1)

    sh.run("SET 'sql-client.execution.result-mode' = 'changelog';")
    sh.run(query)
    sh.wait_screen(r"^op\s+\|\s+auction \|\s+price")  # numbers (and their names) right-aligned
    sh.wait_screen(r"^\+I\s+\|\s+\d+ \| 9\d{7}")
    sh.wait_screen(rf"changelog mode \| query j2 finished \| {total} rows")
    sh.send("q")
    sh.expect(rf"query j2 finished: received a total of {total} rows")

    sh.run("SET 'sql-client.execution.result-mode' = 'table';")
    sh.run(query)
    sh.wait_screen(r"^auction \|\s+price")
    sh.wait_screen(r"^\s*\d+ \| 9\d{7}")
    sh.wait_screen(rf"table mode \| query j3 finished \| {total} rows")
    sh.send("q")
    sh.expect(rf"query j3 finished: received a total of {total} rows")
    assert sh.exit() == 0


def test_background_jobs_show_jobs_a_view_queried_while_it_runs_and_stop_with_savepoint(shell):
    sh = shell()
    sh.run(bids(None))  # unbounded
    sh.expect("created table bids")
    sh.run(PER_CHANNEL)
    sh.expect(r"job j1 started: materialized view per_channel in weir\.duckdb")
    sh.run("CREATE TABLE nowhere (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');")
    sh.run("INSERT INTO nowhere SELECT auction, price FROM bids;")
    sh.expect(r"job j2 started: INSERT INTO nowhere")

    sh.run("SHOW JOBS;")
    sh.expect(r"id \| name\s+\| status\s+\| rows in \| rows out \| watermark\s+\| last checkpoint")
    sh.expect(r"j1 \| per_channel \| RUNNING")
    sh.expect(r"j2 \| nowhere\s+\| RUNNING")

    sh.run("SELECT * FROM per_channel ORDER BY window_start LIMIT 3;")  # answered by DuckDB at once
    sh.expect(r"channel \| window_start \| window_end \| n")
    sh.expect(r"\(\d+ rows?\)")
    sh.run("SHOW VIEWS;")
    sh.expect(r"per_channel \| materialized view \| j1 \(RUNNING\)")

    sh.run("STOP JOB 'j1' WITH SAVEPOINT;")
    sh.expect(r"job j1 stopped with a savepoint at \.weir/shell/j1/savepoints/savepoint-\d+; resume it with")
    sh.run("STOP JOB 'j2';")
    sh.expect(r"job j2 stopped \(CANCELED\)")
    sh.run("SHOW JOBS;")
    sh.expect(r"j1 \| per_channel \| STOPPED")
    sh.expect(r"j2 \| nowhere\s+\| CANCELED")
    sh.run("STOP JOB 'j9';")
    sh.expect(r"error\x1b\[0m: no job with id 'j9'")
    assert sh.exit() == 0


def test_a_bad_statement_shows_a_caret_and_the_shell_goes_on(shell):
    sh = shell()
    sh.run(bids(1000))
    sh.expect("created table bids")
    sh.run("SELECT prise")
    sh.line("FROM bids;")
    sh.expect(r"error\x1b\[0m: unknown column `prise` in `bids`\r\n")
    sh.expect(r"LINE 1: SELECT prise\r\n")
    sh.expect(r"^ {15}\x1b\[1;32m\^")  # the caret under `prise`, in colour on a terminal
    sh.expect(r"hint\x1b\[0m: did you mean `price`\?")
    sh.run("SELEC 1;")
    sh.expect(r"error\x1b\[0m: ")
    sh.run("SHOW TABLES;")
    sh.expect(r"bids\s+\| nexmark")
    # A job that fails in the background says so at the prompt.
    sh.run("CREATE TABLE missing (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'nope/', 'format' = 'csv');")
    sh.run("CREATE TABLE out (a BIGINT) WITH ('connector' = 'blackhole');")
    sh.run("INSERT INTO out SELECT a FROM missing;")
    sh.expect("job j1 started: INSERT INTO out")
    sh.expect(r"job j1 \(out\) FAILED")
    sh.expect(r"the source path 'nope/' does not exist")
    assert sh.exit() == 0


def test_ctrl_c_stops_a_live_result_not_the_shell(shell):
    sh = shell()
    sh.run(bids(None))
    sh.expect("created table bids")
    sh.run("SET 'sql-client.execution.result-mode' = 'tableau';")
    sh.run("SELECT auction, price FROM bids WHERE price > 99000000;")
    sh.expect(r"\| \+I \|")
    sh.child.sendintr()
    sh.expect(r"query j1 stopped: received a total of \d+ rows")

    sh.run("SET 'sql-client.execution.result-mode' = 'table';")
    sh.run("SELECT auction, price FROM bids WHERE price > 99000000;")
    sh.wait_screen(r"table mode \| query j2 running \| [1-9][\d,]* rows")
    sh.child.sendcontrol("c")
    sh.expect(r"query j2 stopped: received a total of [\d,]+ rows")
    sh.run("SHOW JOBS;")
    sh.expect(r"j1 \| select \| CANCELED")
    sh.expect(r"j2 \| select \| CANCELED")
    # Ctrl-C at the prompt drops what was typed.
    sh.prompt()
    sh.send("SELECT 'never run'")
    sh.child.sendcontrol("c")
    sh.run("SELECT 41 + 1 AS answer;")
    sh.expect(r"answer\r\n-+\r\n\s*42")
    assert sh.exit() == 0


def test_exit_stops_running_jobs(shell):
    sh = shell()
    sh.run(bids(None))
    sh.run(PER_CHANNEL)
    sh.expect("job j1 started")
    sh.prompt()
    sh.child.sendcontrol("d")
    sh.expect("stopping 1 running job: j1")
    sh.expect("bye")
    sh.child.expect(pexpect.EOF)
    sh.child.close()
    assert sh.child.exitstatus == 0


def test_quit_leaves_the_shell(shell):
    sh = shell()
    sh.run("quit")
    sh.expect("bye")
    sh.child.expect(pexpect.EOF)
    sh.child.close()
    assert sh.child.exitstatus == 0
