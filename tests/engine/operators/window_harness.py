"""Helpers for driving WindowAggregate in tests, and the DuckDB batch query used as its oracle."""
from __future__ import annotations

import math
from typing import Any, Iterable

import duckdb
import pyarrow as pa

from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_aggregate import WindowAggregate

SECOND = 1_000_000


def make_window_op(config: dict[str, Any], schema: pa.Schema, **ctx_args: Any) -> WindowAggregate:
    op = WindowAggregate(config, OperatorContext("window", schema, **ctx_args))
    op.open()
    return op


def drive(op, steps: Iterable[pa.RecordBatch | int]) -> list[pa.RecordBatch]:
    """Feed batches and watermarks (ints) in order; collect every output batch."""
    out: list[pa.RecordBatch] = []
    for step in steps:
        if isinstance(step, int):
            out += op.process_watermark(step)
        else:
            out += op.process_batch(step)
    return out


def drive_to_end(op, steps) -> list[pa.RecordBatch]:
    out = drive(op, [*steps, MAX_WATERMARK])
    out += op.finish()
    return out


def to_rows(batches: list[pa.RecordBatch], schema: pa.Schema) -> list[dict[str, Any]]:
    for b in batches:
        assert b.schema == schema, f"{b.schema} != {schema}"
        assert b.num_rows > 0
    return pa.Table.from_batches(batches, schema=schema).to_pylist()


def tumble_oracle(table: pa.Table, config: dict[str, Any], schema: pa.Schema) -> list[dict[str, Any]]:
    """DuckDB's own batch query over ``table``, windows from ``time_bucket``, cast to ``schema``."""
    window = config["window"]
    ts = f'"{window["time_column"]}"'
    size, offset = window["size"], window.get("offset", 0)
    keys = [f"{sql} AS \"{name}\"" for name, sql in config["keys"]]
    aggs = []
    for a in config["aggregates"]:
        arg = a.get("argument") or "*"
        distinct = "DISTINCT " if a.get("distinct") else ""
        agg = f"{a['function'].upper()}({distinct}{arg})"
        if a.get("filter"):
            agg += f" FILTER (WHERE {a['filter']})"
        aggs.append(f"{agg} AS \"{a['name']}\"")
    projection = ", ".join(f"{sql} AS \"{name}\"" for name, sql in config["projection"])
    order = ", ".join(["windows.window_end"] + [f'windows."{name}"' for name, _ in config["keys"]])
    sql = f"""
        WITH bucketed AS (
            SELECT *, time_bucket(to_microseconds({size}), {ts}, make_timestamp({offset})) AS __ws
            FROM input WHERE {ts} IS NOT NULL),
        windows AS (
            SELECT {''.join(k + ', ' for k in keys)}
                   __ws AS window_start,
                   __ws + to_microseconds({size}) AS window_end,
                   __ws + to_microseconds({size - 1000}) AS window_time,
                   {', '.join(aggs)}
            FROM bucketed GROUP BY ALL)
        SELECT {projection} FROM windows
        {'WHERE ' + config['having'] if config.get('having') else ''}
        ORDER BY {order}"""
    con = duckdb.connect()
    con.register("input", table)
    result = con.sql(sql).to_arrow_table()
    return result.rename_columns(schema.names).cast(schema).to_pylist()


def assert_same_rows(actual: list[dict], expected: list[dict], rel: float = 1e-9) -> None:
    """Equal row for row; floats within ``rel`` (summation order differs between plans)."""
    assert len(actual) == len(expected), f"{len(actual)} rows, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.keys() == e.keys()
        for col in a:
            x, y = a[col], e[col]
            if isinstance(x, float) and isinstance(y, float):
                assert math.isclose(x, y, rel_tol=rel, abs_tol=1e-9), f"row {i} {col}: {x} != {y}"
            else:
                assert x == y, f"row {i} {col}: {x!r} != {y!r}\nactual {a}\nexpected {e}"


def timestamps(values: list[int | None]) -> pa.Array:
    return pa.array(values, pa.timestamp("us"))



def window_bounds_sql(window: dict[str, Any], ts_us: str) -> tuple[int, str, str, str]:
    """Every window a row belongs to, spelled out from the window's definition (not from
    slices): (candidates j in range(n), window_start SQL, window_end SQL, condition), µs."""
    size, offset = window["size"], window.get("offset", 0)

    def floor(x: str, width: int) -> str:
        return f"({x} - ((({x} - {offset}) % {width}) + {width}) % {width})"

    kind = window["kind"]
    if kind == "tumble":
        return 1, floor(ts_us, size), f"{floor(ts_us, size)} + {size}", "true"
    if kind == "hop":
        slide = window["slide"]
        # the starts offset + k * slide with start <= ts < start + size
        start = f"({floor(ts_us, slide)} - j * {slide})"
        return size // slide, start, f"{start} + {size}", "true"
    step = window["step"]
    # [floor(ts, size), floor(ts, size) + (j + 1) * step) when it contains ts
    end = f"({floor(ts_us, size)} + (j + 1) * {step})"
    return size // step, floor(ts_us, size), end, f"{ts_us} < {end}"


def sliced_oracle(table: pa.Table, config: dict[str, Any], schema: pa.Schema) -> list[dict[str, Any]]:
    """DuckDB's batch query over ``table`` for any sliced window: each row is paired with every
    window it belongs to and, if ``table`` has an ``__arrival_watermark`` column, only with
    the windows that had not fired when it arrived (``window_end - 1 ms > watermark``)."""
    window = config["window"]
    ts = f'epoch_us("{window["time_column"]}")'
    n, start, end, condition = window_bounds_sql(window, ts)
    if "__arrival_watermark" in table.column_names:
        condition += f" AND {end} - 1000 > __arrival_watermark"
    keys = [f"{sql} AS \"{name}\"" for name, sql in config["keys"]]
    aggs = []
    for a in config["aggregates"]:
        arg = a.get("argument") or "*"
        distinct = "DISTINCT " if a.get("distinct") else ""
        agg = f"{a['function'].upper()}({distinct}{arg})"
        if a.get("filter"):
            agg += f" FILTER (WHERE {a['filter']})"
        aggs.append(f"{agg} AS \"{a['name']}\"")
    projection = ", ".join(f"{sql} AS \"{name}\"" for name, sql in config["projection"])
    order = ", ".join(["windows.window_end"] + [f'windows."{name}"' for name, _ in config["keys"]])
    sql = f"""
        WITH paired AS (
            SELECT *, {start} AS __ws, {end} AS __we
            FROM input, range({n}) AS w(j)
            WHERE {ts} IS NOT NULL AND {condition}),
        windows AS (
            SELECT {''.join(k + ', ' for k in keys)}
                   make_timestamp(__ws) AS window_start,
                   make_timestamp(__we) AS window_end,
                   make_timestamp(__we - 1000) AS window_time,
                   {', '.join(aggs)}
            FROM paired GROUP BY ALL)
        SELECT {projection} FROM windows
        {'WHERE ' + config['having'] if config.get('having') else ''}
        ORDER BY {order}"""
    con = duckdb.connect()
    con.register("input", table)
    result = con.sql(sql).to_arrow_table()
    return result.rename_columns(schema.names).cast(schema).to_pylist()
