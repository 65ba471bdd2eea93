"""weir from Python, in the order a notebook would go: run with `python examples/python/quickstart.py`.

1. connect; 2. declare a table on the built-in Nexmark generator and one from a pyarrow table;
3. submit a job maintaining a materialized view and watch it with con.sql; 4. stream the changes
of an updating query; 5. a Python UDF in a query; 6. pandas: a DataFrame as a table, results as
a DataFrame (when pandas is installed: pip install 'weir[pandas]').
"""
import datetime as dt
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import weir

workdir = Path(tempfile.mkdtemp(prefix="weir-quickstart-"))
con = weir.connect(db=str(workdir / "quickstart.duckdb"), state_dir=workdir / "jobs")

# -- 2. Tables ------------------------------------------------------------------------------
# 20,000 Nexmark events (about 18,400 bids) over 20 s of event time, the same on every run.
con.execute("""
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000')
""")

# Python data is a table too: a pyarrow.Table or a pandas DataFrame (bounded, rewindable), or an
# iterator of record batches, as here: trades arriving two at a time.
t0 = dt.datetime(2024, 1, 1)
trades = pa.table({
    "symbol": ["ACME", "INIT", "ACME", "ACME", "INIT"],
    "qty": [10, 5, 7, 3, 8],
    "ts": pa.array([t0 + dt.timedelta(seconds=s) for s in range(5)], pa.timestamp("ms")),
})
con.register("trades", iter(trades.to_batches(max_chunksize=2)), watermark="ts - INTERVAL '1' SECOND")

# -- 3. A job, and its view -------------------------------------------------------------------
job = con.submit("""
CREATE MATERIALIZED VIEW channel_windows AS
SELECT channel, window_start, COUNT(*) AS bids, MAX(price) AS top_price
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY channel, window_start, window_end
""", name="channel_windows")
print(f"submitted job {job.id} ({job.name})")  # it runs in the background; job.status says how it is
print(f"job {job.id}: {job.wait(timeout=120)}")
metrics = job.metrics()
print(f"rows in: {metrics.rows_in:,}; rows out: {metrics.rows_out:,}; late rows: {metrics.late_rows}")
for operator in metrics.operators:
    print(f"  {operator.id:32} in {operator.rows_in:>7,}  out {operator.rows_out:>7,}")

# The view's committed rows (of a running job: as of its last completed checkpoint).
total = con.sql("SELECT CAST(SUM(bids) AS BIGINT) FROM channel_windows").fetchall()[0][0]
print(f"bids in the view: {total:,}")
view = con.sql("SELECT channel, CAST(SUM(bids) AS BIGINT) AS bids FROM channel_windows "
               "GROUP BY channel ORDER BY bids DESC, channel LIMIT 4")
print("busiest channels:", view.fetchall())
table = view.arrow()  # a pyarrow.Table; view.df() gives pandas (step 6)

# -- 4. A live stream of changes ---------------------------------------------------------------
# Each batch is Arrow, led by `op`: +I, -U, +U, -D. Leaving the loop (or stream.close()) stops the job.
for batch in con.stream("SELECT symbol, SUM(qty) AS qty FROM trades GROUP BY symbol"):
    for change in batch.to_pylist():
        print(change["op"], change["symbol"], change["qty"])

# -- 5. A Python UDF -------------------------------------------------------------------------------
# A function of pyarrow arrays (vectorised: one call per batch) becomes a SQL function. Defined here,
# in __main__, it runs at parallelism 1; in a module of its own, worker processes import it too
# (CREATE FUNCTION price_band AS 'my_module.price_band' from SQL).
@weir.udf(result_type="STRING", func_type="arrow")
def price_band(price: pa.Array) -> pa.Array:
    bands = pa.array(["low", "middle", "high"])
    return bands.take(pc.add(pc.greater_equal(price, pa.scalar(1_000, pa.int64())).cast(pa.int8()),
                             pc.greater_equal(price, pa.scalar(10_000, pa.int64())).cast(pa.int8())))


con.create_function("price_band", price_band)
bands = con.submit("""
CREATE MATERIALIZED VIEW price_bands AS
SELECT price_band(price) AS band, COUNT(*) AS bids FROM bids GROUP BY price_band(price)
""", name="price_bands")
bands.wait(timeout=120)
print("bids per price band:", con.sql("SELECT band, bids FROM price_bands ORDER BY band").fetchall())

# -- 6. pandas ----------------------------------------------------------------------------------
# A DataFrame is a bounded, rewindable table like a pyarrow.Table; .df() answers with DuckDB's dtypes.
try:
    import pandas as pd
except ImportError:
    pd = None
if pd is not None:
    orders = pd.DataFrame({"symbol": ["ACME", "INIT", "ACME", "INIT"], "qty": [4, 2, 6, 1],
                           "ts": pd.to_datetime(["2024-01-01 00:00:01", "2024-01-01 00:00:03",
                                                 "2024-01-01 00:00:12", "2024-01-01 00:00:14"])})
    con.register("orders", orders, watermark="ts - INTERVAL '1' SECOND")
    con.submit("""
    CREATE MATERIALIZED VIEW order_windows AS
    SELECT symbol, window_start, SUM(qty) AS qty
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY symbol, window_start, window_end
    """, name="order_windows").wait(timeout=120)
    frame = con.sql("SELECT * FROM order_windows ORDER BY window_start, symbol").df()
    print("order windows (pandas):", ", ".join(f"{name} {dtype}" for name, dtype in frame.dtypes.items()))
    for row in frame.itertuples(index=False):
        print(f"  {row.symbol} {row.window_start:%H:%M:%S} {row.qty}")

con.close()
print("done")
