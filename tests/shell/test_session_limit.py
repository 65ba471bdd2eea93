"""A streaming LIMIT in the shell's session (Flink's SQL client accepts it)."""
from __future__ import annotations


from weir.shell.jobs import FINISHED
from sessions import BIDS, run





def test_a_live_select_with_limit_shows_the_first_rows_that_arrive(session, tmp_path):
    """Flink's SQL client accepts a streaming LIMIT: the first n rows, whatever the batch size."""
    csv = tmp_path / "bids.csv"
    csv.write_text("auction,bidder,price,channel,date_time\n" + "".join(
        f"{i},{i},{i * 7 % 11},c{i % 2},2024-01-01 00:00:{i:02d}\n" for i in range(20)))
    run(session, BIDS + f"WITH ('connector' = 'filesystem', 'path' = '{csv}', 'format' = 'csv');")
    run(session, "SET 'weir.source.batch-size' = '3';")
    live = run(session, "SELECT auction, price FROM bids WHERE price > 3 LIMIT 4;")
    live.job.thread.join()
    assert live.job.status == FINISHED, live.job.error
    first = [(str(i), str(i * 7 % 11)) for i in range(20) if i * 7 % 11 > 3][:4]
    assert [tuple(r) for r in live.result.rows(0, live.result.received)] == first
