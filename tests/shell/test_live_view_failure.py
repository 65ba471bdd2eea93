"""A live SELECT whose job fails: the full-screen view ends at once and the shell shows the error."""
from __future__ import annotations

import pytest

from terminal import ShellProcess

BIDS = ("CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3), "
        "WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND) "
        "WITH ('connector' = 'nexmark', 'first-event.rate' = '1000', 'rate' = '2000', "
        "'base-time' = '2024-01-01 00:00:00');")
#: Rows for the first second of event time (half a second of wall clock), then a cast that fails
#: (the source is unbounded: only the failure ends the job).
FAILING = ("SELECT auction, CAST(CASE WHEN date_time < TIMESTAMP '2024-01-01 00:00:01' THEN '1' ELSE channel END "
           "AS BIGINT) AS n FROM bids;")


@pytest.fixture
def sh(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    process = ShellProcess(tmp_path, home)
    yield process
    if process.child.isalive():
        process.child.terminate(force=True)


def test_a_failed_live_select_shows_its_error_and_the_prompt_without_a_key(sh):
    sh.run(BIDS)
    sh.expect("created table bids")
    sh.run(FAILING)  # the table mode, full-screen
    # No key is sent from here on: the view ends by itself when the job fails.
    sh.expect(r"query j1 failed after [1-9][\d,]* rows")  # the first second's bids came before
    sh.expect(r"job j1 \(select\) FAILED")
    sh.expect(r"error\x1b\[0m: in operator select\.calc: .*Could not convert string '[^']+' to INT64")
    sh.expect(r"hint\x1b\[0m: ")
    sh.prompt()
    sh.line("SHOW JOBS;")
    sh.expect(r"j1 \| select \| FAILED")
    assert sh.exit() == 0
