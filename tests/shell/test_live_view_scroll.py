"""The full-screen live view's scrolling and status line, without a terminal."""
from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa

from weir.engine.changelog import INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.shell.live import LiveResult
from weir.shell.live_view import _Screen

HEIGHT = 5
JOB = SimpleNamespace(id="j1", running=True, status="RUNNING")


def screen(result: LiveResult, mode: str) -> _Screen:
    s = _Screen(result, JOB, mode)
    s.page_rows = lambda: HEIGHT
    return s


def shown(s: _Screen) -> list[str]:
    return [line.split("|")[-1].strip() for line in s.body().splitlines()[2:]]


def updating(changes: int, keys: int) -> LiveResult:
    """An updating result: ``keys`` rows, each key updated until ``changes`` changes were made."""
    result = LiveResult(pa.schema([("k", pa.string()), ("n", pa.int64()), (ROW_KIND, pa.int8())]), max_rows=50)
    counts = {}
    kinds, ks, ns = [], [], []
    for i in range(changes):
        key = f"k{i % keys}"
        if key in counts:
            kinds += [UPDATE_BEFORE, UPDATE_AFTER]
            ks += [key, key]
            ns += [counts[key], counts[key] + 1]
            counts[key] += 1
        else:
            kinds.append(INSERT)
            ks.append(key)
            ns.append(0)
            counts[key] = 0
    for at in range(0, len(ks), 20):  # in batches: the oldest are let go past max_rows
        result.add(pa.record_batch({"k": ks[at:at + 20], "n": pa.array(ns[at:at + 20], pa.int64()),
                                    ROW_KIND: pa.array(kinds[at:at + 20], pa.int8())}))
    return result


def test_table_mode_of_an_updating_result_scrolls_over_its_rows_with_a_full_page():
    result = updating(changes=400, keys=12)
    assert result.first > 0  # changes were dropped: the bug showed one row after Home
    s = screen(result, "table")
    rows = [row[0] for row in result.current_rows(0, 12)]
    assert len(rows) == 12
    for key in ("home", "page_up", "up"):
        if key == "home":
            s.home()
        elif key == "page_up":
            s.scroll(-HEIGHT)
        else:
            s.scroll(-1)
        assert len(s.body().splitlines()) - 2 == HEIGHT, key
        assert [line.split("|")[0].strip() for line in s.body().splitlines()[2:]] == rows[:HEIGHT], key
    s.scroll(100)  # down past the end: the last full page
    assert [line.split("|")[0].strip() for line in s.body().splitlines()[2:]] == rows[7:]
    s.scroll(-1)
    assert [line.split("|")[0].strip() for line in s.body().splitlines()[2:]] == rows[6:11]
    assert " 12 rows (from 788 changes) " in s.status()


def test_numbers_are_right_aligned_and_changelog_counts_its_rows():
    body = screen(updating(changes=31, keys=3), "table").body().splitlines()
    assert body[0] == "k  |  n" and sorted(body[2:5]) == ["k0 | 10", "k1 |  9", "k2 |  9"]
    assert " 45 rows " in screen(updating(changes=30, keys=15), "changelog").status()  # 15 +I, 15 -U/+U


def test_show_jobs_counts_have_thousands_separators_and_stay_integers():
    from weir.shell import render
    from weir.engine.messages import MIN_WATERMARK
    from weir.shell.session import jobs_table

    job = SimpleNamespace(id="j1", name="per_channel", status="RUNNING", rows_in=lambda: 1_234_567,
                          rows_out=lambda: 89, watermark=lambda: MIN_WATERMARK, last_checkpoint=lambda: "-")
    table = jobs_table([job])
    assert table.column("rows in").to_pylist() == [1_234_567]  # the API's value is a number
    lines = render.render(table).splitlines()
    assert lines[0].split("|")[3:5] == ["   rows in ", " rows out "]
    assert lines[2].split("|")[3:5] == [" 1,234,567 ", "       89 "]
