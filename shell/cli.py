"""`weir run`, `weir query`, `weir explain`, and `weir` / `weir shell`: the command line."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import duckdb

from engine.errors import EngineError
from planner.planner import Script, default_job_name, explain_text, plan_script
from shell import job_commands, render
from sql import parse
from sql.errors import WeirSqlError

DEFAULT_DB = "weir.duckdb"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["shell", *argv]  # `weir`, `weir -f file.sql`, `weir -i init.sql`: the shell
    args = _parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`weir query ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="weir", description="weir: streaming SQL for Python")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run a SQL file as a streaming job")
    run.add_argument("file", help="the job's SQL file")
    _job_options(run)
    run.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    run.add_argument("--progress-interval", type=float, default=0.5, metavar="SECONDS",
                     help="seconds between updates of the progress line (default 0.5)")
    run.add_argument("--state-dir", metavar="DIR", help="checkpoints, savepoints and control files "
                     "(default .weir/<job name>)")
    run.add_argument("--checkpoint-interval", metavar="DURATION",
                     help="checkpoint every DURATION, e.g. 5s (as SET 'execution.checkpointing.interval')")
    run.add_argument("--parallelism", metavar="N", help="as SET 'parallelism.default'")
    run.add_argument("--from-savepoint", metavar="PATH",
                     help="start from a savepoint, or a retained checkpoint (.weir/<job>/checkpoints/chk-N)")
    run.add_argument("--fresh", action="store_true",
                     help="start the job over: forget its checkpoints and withdraw the output its earlier "
                          "runs published (a finished job is otherwise not run again)")
    run.add_argument("--analyze", action="store_true",
                     help="after the summary, print the plan with what each operator did (EXPLAIN ANALYZE)")
    run.set_defaults(handler=cmd_run)

    for name, handler, text in (("savepoint", cmd_savepoint, "take a savepoint of a running job"),
                                ("stop", cmd_stop, "stop a running job with a savepoint")):
        p = sub.add_parser(name, help=text)
        p.add_argument("job", help="the job's SQL file or name")
        p.add_argument("--state-dir", metavar="DIR", help="the job's state directory (default .weir/<job name>)")
        p.add_argument("--path", metavar="DIR", help="where to write the savepoint (default in the state directory)")
        p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS")
        if name == "stop":
            p.add_argument("--savepoint", action="store_true", help="take a savepoint, then stop")
        p.set_defaults(handler=handler)

    exp_ = sub.add_parser("explain", help="print the operator DAG of a SQL file")
    exp_.add_argument("file")
    _job_options(exp_)
    exp_.set_defaults(handler=cmd_explain)

    shell = sub.add_parser("shell", help="the interactive shell (also `weir` alone)")
    source = shell.add_mutually_exclusive_group()
    source.add_argument("-f", "--file", metavar="FILE", help="run the statements of FILE and exit with its status")
    source.add_argument("-i", "--init", metavar="FILE", help="run FILE first, then stay interactive")
    _job_options(shell)
    shell.set_defaults(handler=cmd_shell)

    query = sub.add_parser("query", help="query the result tables of the job database")
    query.add_argument("sql", help='e.g. "SELECT * FROM channel_minutes LIMIT 10"')
    query.add_argument("--db", default=DEFAULT_DB, help=f"the job database (default {DEFAULT_DB})")
    query.add_argument("--format", choices=["table", "csv", "json"], default="table")
    query.set_defaults(handler=cmd_query)
    return parser


def _job_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"where materialized views live (default {DEFAULT_DB})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a job setting, as SET 'key' = 'value' (repeatable)")


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
    from shell.start import run_shell  # prompt-toolkit is loaded only for the shell

    return run_shell(args.file, args.init, db_path=args.db, settings=_settings(args))


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


if __name__ == "__main__":
    sys.exit(main())
