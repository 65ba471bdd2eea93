"""csv and json of a whole answer, made by DuckDB a batch at a time: DuckDB's own csv writer is
the oracle for quoting and NULLs, Python's json and csv readers read every value back, and the
batch size never changes the text."""
from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from weir.shell import render

TEXT = st.one_of(st.none(), st.text(alphabet=st.sampled_from(list('ab ,"\n\r\'é|…')), max_size=6))
ROWS = st.lists(st.tuples(TEXT, st.one_of(st.none(), st.integers(-10**12, 10**12))), max_size=12)


def answer(rows: list[tuple]) -> render.DuckAnswer:
    con = duckdb.connect()
    con.register("input_rows", pa.table({"s": pa.array([r[0] for r in rows], pa.string()),
                                         "n": pa.array([r[1] for r in rows], pa.int64())}))
    return render.query_answer(con, "SELECT s, n FROM input_rows")


def text(rows: list[tuple], fmt: str) -> str:
    a = answer(rows)
    try:
        return "".join(render.write(a, fmt))
    finally:
        a.close()


@settings(max_examples=25, deadline=None)
@given(rows=ROWS, batch_rows=st.sampled_from([1, 2, 5, 65_536]))
def test_csv_is_what_duckdbs_csv_writer_writes_for_any_batch_size(rows, batch_rows, tmp_path_factory):
    path = tmp_path_factory.mktemp("csv") / "oracle.csv"
    oracle = answer(rows)
    oracle.connection.sql(f"COPY (SELECT * FROM {oracle.NAME}) TO '{path}' (FORMAT CSV, HEADER)")
    oracle.close()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render, "BATCH_ROWS", batch_rows)
        out = text(rows, "csv")
    assert out == path.read_bytes().decode()
    read = list(csv.reader(io.StringIO(out, newline="")))
    assert read[0] == ["s", "n"]
    assert [(s, n) for s, n in read[1:]] == [("" if s is None else s, "" if n is None else str(n)) for s, n in rows]


@settings(max_examples=25, deadline=None)
@given(rows=ROWS, batch_rows=st.sampled_from([1, 2, 5, 65_536]))
def test_json_reads_back_as_the_rows_for_any_batch_size(rows, batch_rows):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render, "BATCH_ROWS", batch_rows)
        out = text(rows, "json")
    assert json.loads(out) == [{"s": s, "n": n} for s, n in rows]
    assert out.endswith("]\n") and out.count("\n") == max(1, len(rows))  # a row a line, as DuckDB's .mode json


def test_timestamps_keep_the_table_formats_spelling_in_csv_and_json():
    start = datetime(2024, 1, 1)
    table = pa.table({"ts": pa.array([start, start + timedelta(microseconds=1500), None], pa.timestamp("us")),
                      "ms": pa.array([start, start + timedelta(milliseconds=5), None], pa.timestamp("ms"))})
    spelled = ["2024-01-01 00:00:00.000", "2024-01-01 00:00:00.001500"]
    assert render.render(table, "csv").splitlines() == [
        "ts,ms", f"{spelled[0]},{spelled[0]}", f"{spelled[1]},2024-01-01 00:00:00.005", ","]
    assert json.loads(render.render(table, "json")) == [
        {"ts": spelled[0], "ms": spelled[0]}, {"ts": spelled[1], "ms": "2024-01-01 00:00:00.005"},
        {"ts": None, "ms": None}]
    assert render.render(table).splitlines()[2:5] == [
        f"{spelled[0]}    | {spelled[0]}", f"{spelled[1]} | 2024-01-01 00:00:00.005", "NULL                       | NULL"]


def test_show_jobs_counts_are_right_aligned_with_separators_for_people_and_plain_in_csv_and_json():
    from types import SimpleNamespace

    from weir.engine.messages import MIN_WATERMARK
    from weir.shell.session import jobs_table

    job = SimpleNamespace(id="j1", name="per_channel", status="RUNNING", rows_in=lambda: 1_234_567,
                          rows_out=lambda: 89, watermark=lambda: MIN_WATERMARK, last_checkpoint=lambda: "-")
    table = jobs_table([job])
    markdown = render.render(table, "markdown").splitlines()
    assert markdown[1].split("|")[4:6] == ["----------:", "---------:"]  # right-aligned columns
    assert markdown[2].split("|")[4:6] == [" 1,234,567 ", "       89 "]
    assert render.render(table, "line").splitlines()[3:5] == ["        rows in = 1,234,567", "       rows out = 89"]
    assert render.render(table, expanded=True).splitlines()[4:6] == ["rows in         | 1,234,567", "rows out        | 89"]
    assert render.render(table, "csv").splitlines()[1] == "j1,per_channel,RUNNING,1234567,89,-,"  # no checkpoint: NULL
    assert json.loads(render.render(table, "json"))[0]["rows in"] == 1_234_567


def test_show_jobs_last_checkpoint_is_a_number_right_aligned_and_null_before_the_first():
    from types import SimpleNamespace

    from weir.engine.messages import MIN_WATERMARK
    from weir.shell.session import jobs_table

    jobs = [SimpleNamespace(id=f"j{n}", name="v", status="RUNNING", rows_in=lambda: 1, rows_out=lambda: 1,
                            watermark=lambda: MIN_WATERMARK, last_checkpoint=lambda c=c: c)
            for n, c in enumerate(["1042", "7", "-"], 1)]
    table = jobs_table(jobs)
    assert table.column("last checkpoint").to_pylist() == [1042, 7, None]
    assert [line.split("|")[6] for line in render.render(table).splitlines()[2:5]] == [
        "            1042", "               7", "            NULL"]
    assert render.render(table, "markdown").splitlines()[1].split("|")[7] == "----------------:"


def test_an_arrow_answer_with_a_name_twice_shows_both_columns():
    table = pa.table([pa.array([1]), pa.array([2])], names=["x", "x"])
    assert render.render(table).splitlines() == ["x | x_1", "--+----", "1 |   2", "(1 row)"]
    assert json.loads(render.render(table, "json")) == [{"x": 1, "x_1": 2}]


def test_an_answer_still_hands_out_its_typed_rows():
    a = render.query_answer(duckdb.connect(), "SELECT range AS i FROM range(10)")
    try:
        assert a.rows_at(3, 2).column("i").to_pylist() == [3, 4]
        assert sum(batch.num_rows for batch in a.batches()) == 10 and a.fetched == 12
    finally:
        a.close()


@pytest.mark.parametrize("zone, text", [("UTC", "2024-07-01 05:00:00.001+00:00"),
                                        ("Europe/Berlin", "2024-07-01 07:00:00.001+02:00"),
                                        ("America/St_Johns", "2024-07-01 02:30:00.001-02:30")])
def test_a_timestamp_with_a_time_zone_shows_its_zones_clock_and_offset(zone, text):
    con = duckdb.connect()
    con.sql(f"SET TimeZone = '{zone}'")
    a = render.query_answer(con, "SELECT TIMESTAMPTZ '2024-07-01 05:00:00.001+00' AS at")
    try:
        assert render.render(a, "csv").splitlines() == ["at", text]
        assert json.loads(render.render(a, "json")) == [{"at": text}]
    finally:
        a.close()
