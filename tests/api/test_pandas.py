"""pandas from the Python API: Result.df() and its dtypes, a DataFrame registered as a source with
a WATERMARK (bounded, rewound on a restart to exact output), and an arrow UDF that works on
pandas Series (``array.to_pandas()``)."""
from __future__ import annotations


import pandas as pd
import pyarrow as pa
import pytest

import weir
from weir.engine.connectors import python_source

from api_data import BID_ROWS, WINDOWS, at, bids_table, oracle


def bids_frame(rows=BID_ROWS) -> pd.DataFrame:
    """The bids of api_data as pandas has them: datetime64 event times, a default index."""
    return pd.DataFrame({"auction": [r[0] for r in rows], "price": [r[1] for r in rows],
                         "date_time": pd.to_datetime([at(r[2]) for r in rows])})


def test_df_has_pandas_dtypes_timestamps_as_datetime64(con):
    con.register("bids", bids_frame(), watermark="date_time - INTERVAL '2' SECOND")
    assert con.execute(WINDOWS).wait(60) == "FINISHED"
    frame = con.sql("SELECT * FROM per_auction ORDER BY window_start, auction").df()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["auction", "window_start", "bids", "total"]
    assert str(frame.dtypes["auction"]) == "int64" and str(frame.dtypes["bids"]) == "int64"
    assert pd.api.types.is_datetime64_dtype(frame.dtypes["window_start"])
    assert list(frame.itertuples(index=False, name=None)) == [
        (a, pd.Timestamp(w), b, t) for a, w, b, t in oracle(bids_table())]
    odd = con.sql("SELECT * FROM (VALUES (1, DATE '2024-01-02', true, 1.5::DECIMAL(4, 1)), "
                  "(NULL, NULL, NULL, NULL)) AS t(n, d, flag, m)").df()
    assert [str(t) for t in odd.dtypes] == ["Int32", "datetime64[us]", "boolean", "float64"]  # as DuckDB's .df()
    assert odd["n"].isna().tolist() == [False, True]


def test_a_dataframe_with_a_watermark_is_a_bounded_source(con):
    frame = bids_frame()
    con.register("bids", frame, watermark="date_time - INTERVAL '2' SECOND")
    name, declared = con.sql("DESCRIBE bids").fetchall()[2][:2]
    assert name == "date_time" and declared.startswith("TIMESTAMP(") and declared.endswith("*ROWTIME*")
    job = con.submit(WINDOWS)
    assert job.wait(60) == "FINISHED"  # bounded: the final watermark fired every window
    assert con.sql("SELECT * FROM per_auction ORDER BY window_start, auction").fetchall() == oracle(bids_table())


def test_a_dataframe_source_is_rewound_to_its_checkpoint_after_a_failure(con, inject_fault):
    """Checkpointed after every batch of one row, the job fails after its third batch and restarts
    in this process from its latest checkpoint: the DataFrame is read again from that row on, and
    the view is exactly the oracle's (no bid lost or counted twice)."""
    con.register("bids", bids_frame(), watermark="date_time - INTERVAL '2' SECOND")
    object_id = con.session.catalog.lookup("bids").options["object-id"]
    assert python_source.rewindable(object_id)
    for key, value in {"weir.source.batch-size": "1", "weir.checkpointing.interval-batches": "1",
                       "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0s"}.items():
        con.execute(f"SET '{key}' = '{value}'")
    inject_fault(("batch", 3, "raise"))
    warnings: list[str] = []
    job = con.session.start(con.session.plan_job(weir.sql.parse(WINDOWS), "rewound").graph, "script",
                            warn=warnings.append)
    handle = con._handle(job)
    assert handle.wait(60) == "FINISHED"
    assert any("restarting" in w for w in warnings), warnings
    assert con.sql("SELECT * FROM per_auction ORDER BY window_start, auction").fetchall() == oracle(bids_table())


def fired_windows(handle) -> int:
    """The windows of per_auction the job has fired so far (its own thread's figures)."""
    return sum(f.rows_out for f in handle.metrics().operators if f.id == "per_auction.window_aggregate")


def test_a_dataframe_sources_job_stops_with_a_savepoint_and_resumes_from_it_exactly(con):
    """A job over a DataFrame, kept running by an unbounded second pipeline (nexmark), stops with
    a savepoint wherever it was; the same script resumed from it fires the remaining windows, and
    the view, committed by the second stop, is exactly the oracle's: nothing lost or twice."""
    con.register("bids", bids_frame(), watermark="date_time - INTERVAL '2' SECOND")
    con.execute("CREATE TABLE ticks (price BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time) "
                "WITH ('connector' = 'nexmark', 'table' = 'bid')")
    con.execute("SET 'weir.source.batch-size' = '1'")
    script = WINDOWS + ";\nCREATE MATERIALIZED VIEW tick_count AS SELECT COUNT(*) AS n FROM ticks;"
    first = con.submit(script)
    stopped = first.stop(savepoint=True)
    assert first.status == "STOPPED"
    fired_before = sum(m.rows_out for m in first.result.operators if m.id == "per_auction.window_aggregate")
    again = con.submit(script, from_savepoint=stopped)
    job = again._job
    with job.changed:  # the guard is against a hang, not a measure
        assert job.changed.wait_for(lambda: fired_before + fired_windows(again) == 5, 60), again.metrics()
    assert again.stop(savepoint=True) is not None and again.status == "STOPPED"
    assert con.sql("SELECT * FROM per_auction ORDER BY window_start, auction").fetchall() == oracle(bids_table())


@weir.udf(result_type="DOUBLE", func_type="arrow")
def share(price: pa.Array, total: pa.Array) -> pa.Array:
    """Over pandas Series: price / total, as PyFlink's pandas UDFs are written."""
    return pa.array(price.to_pandas() / total.to_pandas(), pa.float64())


def test_an_arrow_udf_works_on_pandas_series(con):
    con.create_function("share", share)
    con.register("bids", bids_frame(), watermark="date_time")
    stream = con.stream("SELECT auction, share(price, price + 10) AS s FROM bids")
    rows = [(r["auction"], r["s"]) for b in stream for r in b.to_pylist()]
    assert rows == [(a, pytest.approx(p / (p + 10))) for a, p, _ in BID_ROWS]
