"""Rows with a NULL event time are dropped by event-time operators, and counted: in the
JobResult and in the summary `weir run` prints."""
from __future__ import annotations

from pathlib import Path

from weir.engine.runtime.local import LocalExecutor
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """\
SET 'weir.source.batch-size' = '{batch}';
CREATE TABLE clicks (user_id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = 'clicks.csv', 'format' = 'csv');
CREATE TABLE per_user (user_id BIGINT, window_start TIMESTAMP(3), clicks BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'csv');
INSERT INTO per_user SELECT user_id, window_start, COUNT(*) AS clicks
FROM TUMBLE(clicks, ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end;
"""
#: Two rows have no time (an empty field is NULL).
CLICKS = """\
user_id,ts
1,2024-01-01 00:00:01
1,
2,2024-01-01 00:00:12
2,
1,2024-01-01 00:00:13
"""


def test_the_summary_counts_rows_with_a_null_event_time(weir):
    Path("job.sql").write_text(JOB.format(batch=2))
    Path("clicks.csv").write_text(CLICKS)
    result = weir("run", "job.sql")
    assert result.code == 0, result.err
    assert "late rows dropped: 0; malformed rows skipped: 0; rows with a NULL event time dropped: 2" in result.out


def test_job_result_counts_them_whatever_the_batch_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("clicks.csv").write_text(CLICKS)
    for batch in (1, 2, 100):
        result = LocalExecutor(plan_script(parse(JOB.format(batch=batch))).graph).run()
        assert result.null_time_rows_dropped == 2
        assert result.rows_read == 5
