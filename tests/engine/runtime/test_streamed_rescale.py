"""Rescaling 2 -> 1 -> 3 through savepoints with restores that stream: the middle run (one
process, so the test can watch it) restores two workers' snapshots in batches of at most
8 rows, straight from the savepoint's files into DuckDB, and the output after the last run
is that of one uninterrupted worker."""
from __future__ import annotations

from weir.engine.state import restored
from restores import record_restore_batches
from tests.engine.runtime.test_parallel import output, run, straight  # noqa: F401 - a fixture


def ask_for_stop(tmp):
    def request(executor) -> None:
        (tmp / "state" / "control").mkdir(parents=True, exist_ok=True)
        (tmp / "state" / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')
    return request


def test_rescaling_2_1_3_with_streamed_restores_is_exact(tmp_path, straight, monkeypatch):  # noqa: F811
    expected, _ = straight
    first = run(tmp_path, 2, events=None, on_executor=ask_for_stop(tmp_path))
    assert first.stopped_with is not None
    monkeypatch.setattr(restored, "RESTORE_BATCH_ROWS", 8)
    sizes = record_restore_batches(monkeypatch)
    second = run(tmp_path, 1, events=None, savepoint=first.stopped_with.path, on_executor=ask_for_stop(tmp_path))
    assert second.stopped_with is not None
    assert sum(sizes) > 8 and max(sizes) <= 8, "the state came in from the files in batches of 8 rows"
    run(tmp_path, 3, savepoint=second.stopped_with.path)
    assert output(tmp_path) == expected
