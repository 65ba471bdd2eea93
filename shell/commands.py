"""What each `weir` command does; `shell/cli.py` parses the command line and imports this
module only once it knows a command will run (so `weir --help` loads no planner nor DuckDB)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import duckdb
import pyarrow as pa

from weir.engine.errors import EngineError
from weir.planner.planner import Script, default_job_name, explain_text, plan_script
from weir.shell import job_commands, render
from weir.shell.database import open_results
from weir.sql import parse
from weir.sql.errors import WeirSqlError


def _settings(args) -> dict[str, str]:
    settings = {}
    if getattr(args, "checkpoint_interval", None):
        settings["execution.checkpointing.interval"] = args.checkpoint_interval
    if getattr(args, "parallelism", None):
        settings["parallelism.default"] = args.parallelism
    if getattr(args, "executor", None):
        settings["execution.target"] = args.executor
    if getattr(args, "ray_address", None):
        settings["ray.address"] = args.ray_address
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"weir: --set wants KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


def _plan(args) -> tuple[Script | None, int]:
    path = Path(args.file)
    colour = sys.stderr.isatty()
    try:
        text = path.read_text()
    except OSError as error:
        print(f"weir: cannot read {path}: {error.strerror}", file=sys.stderr)
        return None, 1
    try:
        statements = parse(text, source_name=str(path))
        script = plan_script(statements, job_name=default_job_name(path), db_path=args.db,
                             settings=_settings(args))
    except WeirSqlError as error:
        print(render.sql_error(error, text, str(path), colour), file=sys.stderr)
        return None, 1
    except EngineError as error:
        print(render.engine_error(error, colour), file=sys.stderr)
        return None, 1
    return script, 0


def cmd_explain(args) -> int:
    script, status = _plan(args)
    if script is None:
        return status
    print(explain_text(script), end="")
    return 0


def cmd_run(args) -> int:
    script, status = _plan(args)
    if script is None:
        return status
    for text in script.explains:
        print(text)
    if not script.graph.nodes:
        print("nothing to run: the file has no INSERT INTO or CREATE MATERIALIZED VIEW")
        return 0
    return job_commands.run(args, script)


def cmd_savepoint(args) -> int:
    return job_commands.savepoint(args)


def cmd_stop(args) -> int:
    return job_commands.stop(args)


def cmd_shell(args) -> int:
    from weir.shell.start import run_shell  # prompt-toolkit is loaded only for the shell

    return run_shell(args.file, args.init, db_path=args.db, settings=_settings(args), command=args.sql_command)


def cmd_serve(args) -> int:
    from weir.shell.pgwire import launch  # asyncio and the protocol load only for the endpoint

    if not args.flight:
        return launch.serve(args)
    from weir.shell.flightsql import launch as flight_launch  # pyarrow.flight (gRPC) loads only for --flight

    try:
        flight = flight_launch.start(args)
    except launch.ServeError as error:
        return launch.report(error)
    try:
        return launch.serve(args)
    finally:
        flight.stop()


def cmd_query(args) -> int:
    """One query over the latest committed snapshot of the results database (never waits for a
    job, never delays one); printed as text, or written as Arrow IPC or Parquet columns."""
    if not Path(args.db).exists():
        print(f"weir: no database at {args.db}", file=sys.stderr)
        print("  hint: run a job with a CREATE MATERIALIZED VIEW first, or pass --db PATH", file=sys.stderr)
        return 1
    binary = args.format in ("arrow", "parquet")
    if args.format == "parquet" and not args.output:
        print("weir: --format parquet writes a file: pass --output FILE", file=sys.stderr)
        return 2
    if args.format == "arrow" and not args.output and sys.stdout.isatty():
        print("weir: --format arrow writes a binary Arrow IPC stream: pass --output FILE or pipe it "
              "(e.g. into `python -c 'import pyarrow as pa, sys; print(pa.ipc.open_stream(sys.stdin.buffer)"
              ".read_all())'`)", file=sys.stderr)
        return 2
    if args.output and not binary:
        print(f"weir: --output is for --format arrow or parquet, not {args.format}", file=sys.stderr)
        return 2
    con = open_results(args.db)
    answer = None
    try:
        if binary:
            relation = con.sql(args.sql)
            if relation is None:
                print("weir: the statement returns no rows: weir query answers queries", file=sys.stderr)
                return 1
            _write_columns(relation, args.format, args.output)
            return 0
        answer = render.query_answer(con, args.sql)
        if answer is None:
            print("weir: the statement returns no rows: weir query answers queries", file=sys.stderr)
            return 1
        # On a terminal a table shows its first and last rows (--max-rows, default 40); into a
        # pipe or a file every row streams, as csv and json always do.
        cap = args.max_rows if args.max_rows is not None else (
            render.DEFAULT_MAX_ROWS if sys.stdout.isatty() else 0)
        for piece in render.write(answer, args.format, max_rows=cap):
            sys.stdout.write(piece)
        sys.stdout.flush()
    except duckdb.Error as error:
        print(f"weir: query failed: {str(error).splitlines()[0]}", file=sys.stderr)
        if isinstance(error, duckdb.CatalogException):
            print(f"  hint: the tables in {args.db}: {', '.join(_tables(con)) or 'none'}", file=sys.stderr)
        return 1
    finally:
        con.close()
    return 0


#: Rows per Arrow record batch that `weir query --format arrow` streams.
ARROW_BATCH_ROWS = 65_536


def _write_columns(relation: duckdb.DuckDBPyRelation, fmt: str, output: str | None) -> None:
    """The answer as columns: an Arrow IPC stream (to ``output`` or stdout), batch by batch so
    that memory stays bounded, or a Parquet file written by DuckDB; a file is written beside
    its place and renamed there when complete."""
    target = f"{output}.weir-partial" if output else None
    try:
        if fmt == "parquet":
            relation.to_parquet(target)
        else:
            reader = relation.to_arrow_reader(ARROW_BATCH_ROWS)
            stream = open(target, "wb") if target else sys.stdout.buffer
            try:
                with pa.ipc.new_stream(stream, reader.schema) as writer:
                    for batch in reader:
                        writer.write_batch(batch)
            finally:
                if target:
                    stream.close()
                else:
                    stream.flush()
        if target:
            os.replace(target, output)
    finally:
        if target and os.path.exists(target):
            os.remove(target)


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The result tables of a job database (weir's own bookkeeping tables left out)."""
    names = [row[0] for row in con.sql("SELECT table_name FROM information_schema.tables "
                                       "WHERE table_catalog = current_database()").fetchall()]
    return sorted(name for name in names if not name.startswith("_weir"))
