"""Benchmark: a large SELECT over the Arrow Flight SQL endpoint (shell/flightsql) against the
same SELECT over the Postgres endpoint (shell/pgwire).

    python bench/flight.py [--rows 1000000] [--runs 3]

A result table of ``--rows`` rows (id BIGINT, ts TIMESTAMP, x DOUBLE, name VARCHAR)
is written to a fresh database; both servers run in this process (threads), each
client in a process of its own, which times ``SELECT * FROM results`` from the
query's start to the last row in the client's hands:

- Flight SQL: ADBC's driver, ``cursor.fetch_arrow_table()`` (an Arrow table);
- Postgres: psycopg 3, ``cursor.fetchall()`` (Python tuples), text and binary.

Printed per client: the best and median of ``--runs`` runs, in rows/s.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time

import adbc_driver_flightsql.dbapi as flight_sql
import duckdb
import psycopg

from weir.shell.api import Connection
from weir.shell.flightsql.server import FlightOptions, FlightSqlServer
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import ServeOptions, Server

QUERY = "SELECT * FROM results"


def _flight_client(port: int, runs: int, out) -> None:
    times = []
    with flight_sql.connect(f"grpc://127.0.0.1:{port}", autocommit=True) as con, con.cursor() as cur:
        for _ in range(runs):
            start = time.perf_counter()
            cur.execute(QUERY)
            rows = cur.fetch_arrow_table().num_rows
            times.append(time.perf_counter() - start)
    out.put((rows, times))


def _postgres_client(port: int, runs: int, binary: bool, out) -> None:
    times = []
    with psycopg.connect(f"host=127.0.0.1 port={port} user=bench dbname=weir", autocommit=True) as con:
        cur = con.cursor(binary=binary)
        for _ in range(runs):
            start = time.perf_counter()
            cur.execute(QUERY)
            rows = len(cur.fetchall())
            times.append(time.perf_counter() - start)
    out.put((rows, times))


def _measure(target, *args) -> tuple[int, list[float]]:
    out = multiprocessing.Queue()
    process = multiprocessing.Process(target=target, args=(*args, out))
    process.start()
    result = out.get(timeout=3600)
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="weir-bench-flight-")
    db = os.path.join(folder, "weir.duckdb")
    con = duckdb.connect(db)
    con.execute(f"CREATE TABLE results AS SELECT range AS id, TIMESTAMP '2024-01-01' + range * INTERVAL 1 SECOND "
                f"AS ts, (range * 0.5)::DOUBLE AS x, 'name-' || range AS name FROM range({args.rows})")
    con.close()
    flight_server = FlightSqlServer(db, FlightOptions(port=0))
    flight_port = flight_server.start_in_thread()
    with Connection(db, state_dir=os.path.join(folder, "jobs")) as session:
        pg_server = Server(session, ResultReader(db, beside_jobs=False),
                           ServeOptions(port=0, statement_timeout=0, max_rows=args.rows))
        pg_port = pg_server.start_in_thread()
        try:
            print(f"SELECT * of {args.rows:,} rows (BIGINT, TIMESTAMP, DOUBLE, VARCHAR), {args.runs} runs, "
                  f"load average {os.getloadavg()[0]:.1f}:")
            for name, target, client_args in (
                    ("Flight SQL, ADBC fetch_arrow_table", _flight_client, (flight_port, args.runs)),
                    ("Postgres, psycopg text fetchall", _postgres_client, (pg_port, args.runs, False)),
                    ("Postgres, psycopg binary fetchall", _postgres_client, (pg_port, args.runs, True))):
                rows, times = _measure(target, *client_args)
                assert rows == args.rows, (name, rows)
                print(f"  {name:<38} best {rows / min(times):>12,.0f} rows/s   "
                      f"median {rows / statistics.median(times):>12,.0f} rows/s")
        finally:
            pg_server.stop()
            flight_server.stop()


if __name__ == "__main__":
    main()
