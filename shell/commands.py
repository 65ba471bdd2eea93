"""What each `weir` command does; `shell/cli.py` parses the command line and imports this
module only once it knows a command will run (so `weir --help` loads no planner nor DuckDB)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import duckdb

from weir.engine.errors import EngineError
from weir.planner.planner import Script, default_job_name, explain_text, plan_script
from weir.shell import job_commands, render
from weir.sql import parse
from weir.sql.errors import WeirSqlError


def _settings(args) -> dict[str, str]:
    settings = {}
    if getattr(args, "checkpoint_interval", None):
        settings["execution.checkpointing.interval"] = args.checkpoint_interval
    if getattr(args, "parallelism", None):
        settings["parallelism.default"] = args.parallelism
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

    return run_shell(args.file, args.init, db_path=args.db, settings=_settings(args))


def cmd_serve(args) -> int:
    from weir.shell.pgwire import launch  # asyncio and the protocol load only for the endpoint

    return launch.serve(args)


def cmd_query(args) -> int:
    if not Path(args.db).exists():
        print(f"weir: no database at {args.db}", file=sys.stderr)
        print("  hint: run a job with a CREATE MATERIALIZED VIEW first, or pass --db PATH", file=sys.stderr)
        return 1
    try:
        con = _connect_read_only(args.db)
        try:
            result = con.sql(args.sql).to_arrow_table()
        finally:
            con.close()
    except duckdb.Error as error:
        print(f"weir: query failed: {str(error).splitlines()[0]}", file=sys.stderr)
        if isinstance(error, duckdb.CatalogException):
            print(f"  hint: the tables in {args.db}: {', '.join(_tables(args.db)) or 'none'}", file=sys.stderr)
        return 1
    formatter = {"table": render.table, "csv": render.csv_text, "json": render.json_text}[args.format]
    print(formatter(result))
    return 0


def _tables(db: str) -> list[str]:
    """The result tables of a job database (weir's own bookkeeping tables left out)."""
    con = _connect_read_only(db)
    try:
        names = [row[0] for row in con.sql("SELECT table_name FROM information_schema.tables").fetchall()]
    finally:
        con.close()
    return sorted(name for name in names if not name.startswith("_weir"))


def _connect_read_only(path: str, attempts: int = 50) -> duckdb.DuckDBPyConnection:
    """Open the job database read-only, waiting briefly while a job commits to it."""
    for attempt in range(attempts):
        try:
            return duckdb.connect(path, read_only=True)
        except duckdb.IOException:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")

