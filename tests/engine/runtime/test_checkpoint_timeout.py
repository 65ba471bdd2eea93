"""'execution.checkpointing.timeout': a checkpoint that does not complete in time is aborted,
and the job goes on.

Worker 1 of a parallel job holds the barrier of its first checkpoint back at its sources
(``WEIR_FAULT=inject:1:stall@1``: a stalled source, which reads nothing until the checkpoint
is aborted), so that checkpoint can never complete. With a small timeout the coordinator
aborts it: every worker releases the channels blocked for its barrier, what was acknowledged
for it is dropped, later checkpoints complete, and the output is exactly an uninterrupted
run's (the sinks' output pre-committed at the aborted checkpoint is committed by the next).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from weir.planner.planner import plan_script
from weir.sql import parse
from weir.sql.errors import WeirSqlError

from test_worker_deaths import assert_exact, run_guarded

ABORTED = re.compile(r"^checkpoint (\d+) was aborted: it did not complete within "
                     r"'execution.checkpointing.timeout' \(2s\); the job goes on and takes the next one$")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """Two splits, one per worker; worker 1's is much longer, so that it still reads
    (and checkpoints are still taken, every source batch) after the aborted checkpoint."""
    (tmp_path / "events").mkdir()
    for part, rows in enumerate((8, 60)):
        lines = "".join(f"2024-01-01 00:{i // 30:02d}:{2 * i % 60:02d},{'abc'[i % 3]},{i}\n" for i in range(rows))
        (tmp_path / "events" / f"part-{part}.csv").write_text("ts,k,v\n" + lines)
    return tmp_path


def test_a_checkpoint_past_its_timeout_is_aborted_and_the_next_one_completes(job, monkeypatch):
    monkeypatch.setenv("WEIR_FAULT", "inject:1:stall@1")
    warnings: list[str] = []
    result = run_guarded(job, warnings, **{"execution.checkpointing.timeout": "2s"})
    assert not isinstance(result, BaseException), result
    aborted = [int(m.group(1)) for m in map(ABORTED.match, warnings) if m]
    assert len(aborted) >= 1, warnings
    completed = [event.checkpoint_id for event in result.checkpoints]
    assert aborted[0] not in completed
    later = [n for n in completed[:-1] if n > aborted[0]]  # the last one is the final checkpoint
    assert later, f"no checkpoint completed after the aborted {aborted[0]}: {completed}"
    assert_exact(job)


def test_a_timeout_of_zero_is_refused_before_the_job_starts(tmp_path):
    sql = "SET 'execution.checkpointing.timeout' = '0s';\nSELECT 1;"
    with pytest.raises(WeirSqlError, match="'execution.checkpointing.timeout' must be a duration greater than 0"):
        plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"))
