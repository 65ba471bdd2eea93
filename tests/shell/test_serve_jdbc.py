"""The Postgres endpoint with a JDBC client: pgjdbc (Debian's libpostgresql-jdbc-java) runs
tests/support/jdbc/WeirJdbc.java, compiled here: DatabaseMetaData's tables, columns, schemas,
primary keys and types, a query, and PreparedStatements (the extended protocol, binary once
pgjdbc prepares on the server)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from weir.shell.api import Connection
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import ServeOptions, Server

JAR = os.environ.get("WEIR_PGJDBC_JAR", "/usr/share/java/postgresql.jar")
SOURCE = Path(__file__).resolve().parents[1] / "support" / "jdbc" / "WeirJdbc.java"

pytestmark = [
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                       reason="needs a JDK (java and javac)"),
    pytest.mark.skipif(not os.path.exists(JAR), reason=f"needs the PostgreSQL JDBC driver at {JAR} "
                       "(Debian: apt-get install libpostgresql-jdbc-java; or set WEIR_PGJDBC_JAR)"),
]

ROWS = [f"row {i}\t{i * 10}\t{i * 1.5}\t{i / 4:.2f}\t{'t' if i % 2 == 0 else 'f'}\tname{i}\t"
        f"2024-01-01 00:0{i}:00.25\t2024-01-0{i + 1}" for i in range(3)]
ROW_1 = ROWS[1].split(" ", 1)[1]
EXPECTED = [
    "product PostgreSQL 15",
    "table minutes TABLE",
    "column minutes id int8 -5", "column minutes n int4 4", "column minutes x float8 8",
    "column minutes d numeric 2", "column minutes even bool -7", "column minutes name varchar 12",
    "column minutes ts timestamp 93", "column minutes day date 91",
    "schema main",
    "primary keys 0",
    # (the types line is checked apart)
    *ROWS,
    *[f"prepared {ROW_1}"] * 5, f"prepared-again {ROW_1}",
    "typed 1 2024-01-01 00:01:00.25 0.25",
    "described id:int8 id:int8 name:text",  # repeated columns keep their names, as when answered
]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("jdbc")
    subprocess.run(["javac", "-d", str(folder), str(SOURCE)], check=True, capture_output=True, timeout=300)
    return folder


def test_jdbc_lists_tables_and_columns_queries_and_prepares(program, tmp_path):
    path = str(tmp_path / "results.duckdb")
    with duckdb.connect(path) as con:
        con.execute("""CREATE TABLE minutes AS SELECT range::BIGINT AS id, (range * 10)::INTEGER AS n,
            (range * 1.5)::DOUBLE AS x, (range / 4)::DECIMAL(10, 2) AS d, range % 2 = 0 AS even,
            'name' || range AS name, TIMESTAMP '2024-01-01 00:00:00.25' + range * INTERVAL 1 MINUTE AS ts,
            DATE '2024-01-01' + range::INTEGER AS day FROM range(3)""")
        con.execute("CREATE TABLE _weir_sink_commits (table_name VARCHAR)")  # bookkeeping, never listed
    server = Server(Connection(path, state_dir=tmp_path / "jobs"), ResultReader(path, beside_jobs=False),
                    ServeOptions(port=0))
    server.start_in_thread()
    try:
        ran = subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{program}", "WeirJdbc",
                              f"jdbc:postgresql://127.0.0.1:{server.port}/weir", "minutes", "id", "1"],
                             capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    types = [line for line in lines if line.startswith("type info")]
    assert len(types) == 1 and {"int8", "varchar", "timestamp", "numeric"} <= set(types[0].split()[2:])
    assert [line for line in lines if not line.startswith("type info")] == EXPECTED
    # pgjdbc's `WHERE id = ?`, text at first and binary once prepared, came from the snapshot's index.
    assert server.lookups.answered == 6
