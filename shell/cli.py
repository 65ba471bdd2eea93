"""`weir run`, `weir query`, `weir explain`, and `weir` / `weir shell`: the command line."""
from __future__ import annotations

import argparse
import gc
import os
import re
import sys

from weir import __version__

DEFAULT_DB = "weir.duckdb"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["shell", *argv]  # `weir`, `weir -f file.sql`, `weir -i init.sql`: the shell
    args = _parser().parse_args(argv)
    if args.command == "run" and _runs_in_parallel(args):
        from weir.engine.runtime.workers import start_fork_server

        start_fork_server()  # it imports the engine for the workers while this process plans the job
    from weir.engine.pandas_import import defer_pandas  # (pyarrow: not for --help)

    defer_pandas()  # pyarrow imports pandas only once something that uses it does
    gc.disable()  # importing makes a million objects and no garbage: collecting meanwhile only costs
    from weir.shell import commands  # the planner, DuckDB and sqlglot load only for a command that runs

    gc.freeze()  # the modules' objects live as long as the process: out of every later collection
    gc.enable()
    try:
        return getattr(commands, f"cmd_{args.handler}")(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`weir query ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        # The interpreter's teardown collects over every object still alive, 0.1-0.2 s with the
        # planner and pyarrow loaded; frozen, it only frees them (files and databases are closed).
        gc.freeze()


_PARALLELISM = re.compile(r"""SET\s+'parallelism\.default'\s*=\s*'?\s*(\d+)""", re.IGNORECASE)
_RAY = re.compile(r"""SET\s+'execution\.target'\s*=\s*'ray'""", re.IGNORECASE)


def _runs_in_parallel(args) -> bool:
    """Whether `weir run` will start worker processes here, as far as its options and a look at
    the file tell before the planner is loaded (a wrong guess only costs or saves a head start)."""
    settings = {key.strip(): value.strip() for key, _, value in (item.partition("=") for item in args.set or [])}
    if (args.executor or settings.get("execution.target", "")).strip().lower() == "ray":
        return False
    value = args.parallelism or settings.get("parallelism.default")
    if value is None:
        try:
            text = open(args.file, encoding="utf-8", errors="replace").read(1 << 20)
        except OSError:
            return False
        if _RAY.search(text):
            return False
        found = _PARALLELISM.findall(text)
        value = found[-1] if found else None
    try:
        return value is not None and int(str(value).strip()) > 1
    except ValueError:
        return False


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="weir", description="weir: streaming SQL for Python")
    parser.add_argument("--version", action="version", version=f"weir {__version__}")
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
    run.add_argument("--executor", choices=["local", "ray"],
                     help="where the workers run: processes of this machine (local, the default) or actors "
                          "of a Ray cluster (ray: pip install 'weir[ray]'); as SET 'execution.target'")
    run.add_argument("--ray-address", metavar="ADDRESS",
                     help="the Ray cluster for --executor ray: auto, host:port or ray://host:10001 "
                          "(as SET 'ray.address')")
    run.add_argument("--from-savepoint", metavar="PATH",
                     help="start from a savepoint, or a retained checkpoint (.weir/<job>/checkpoints/chk-N); "
                          "a directory or a URI (s3://bucket/prefix/...)")
    run.add_argument("--fresh", action="store_true",
                     help="start the job over: forget its checkpoints and withdraw the output its earlier "
                          "runs published (a finished job is otherwise not run again)")
    run.add_argument("--analyze", action="store_true",
                     help="after the summary, print the plan with what each operator did (EXPLAIN ANALYZE)")
    run.add_argument("--serve", action="store_true",
                     help="answer Postgres clients (psql, psycopg, JDBC) from the job's results while it runs, "
                          "and after it ends until Ctrl-C")
    _serve_options(run)
    _flight_option(run)
    run.set_defaults(handler="run")

    serve = sub.add_parser("serve", help="answer Postgres clients (psql, psycopg, JDBC, BI tools) from the "
                                         "job database: SELECT, SHOW JOBS, SUBSCRIBE")
    serve.add_argument("--db", default=DEFAULT_DB, help=f"the job database (default {DEFAULT_DB})")
    _serve_options(serve)
    _flight_option(serve)
    serve.set_defaults(handler="serve")

    for name, handler, text in (("savepoint", "savepoint", "take a savepoint of a running job"),
                                ("stop", "stop", "stop a running job with a savepoint")):
        p = sub.add_parser(name, help=text)
        p.add_argument("job", help="the job's SQL file or name")
        p.add_argument("--state-dir", metavar="DIR", help="the job's state directory (default .weir/<job name>)")
        p.add_argument("--path", metavar="DIR", help="where to write the savepoint, a directory or a URI (default: "
                                                       "'state.savepoints.dir', else beside the checkpoints)")
        p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS")
        if name == "stop":
            p.add_argument("--savepoint", action="store_true", help="take a savepoint, then stop")
        p.set_defaults(handler=handler)

    exp_ = sub.add_parser("explain", help="print the operator DAG of a SQL file")
    exp_.add_argument("file")
    _job_options(exp_)
    exp_.set_defaults(handler="explain")

    shell = sub.add_parser("shell", help="the interactive shell (also `weir` alone)")
    source = shell.add_mutually_exclusive_group()
    source.add_argument("-f", "--file", metavar="FILE", help="run the statements of FILE and exit with its status")
    source.add_argument("-i", "--init", metavar="FILE", help="run FILE first, then stay interactive")
    source.add_argument("-c", "--command", "-e", dest="sql_command", metavar="SQL",
                        help="run the statements of SQL and exit with their status (psql's -c, the DuckDB "
                             "CLI's -c, Flink's -e); SQL piped on stdin runs the same way")
    _job_options(shell)
    shell.set_defaults(handler="shell")

    query = sub.add_parser("query", help="query the result tables of the job database")
    query.add_argument("sql", help='e.g. "SELECT * FROM channel_minutes LIMIT 10"')
    query.add_argument("--db", default=DEFAULT_DB, help=f"the job database (default {DEFAULT_DB})")
    query.add_argument("--format", choices=["table", "csv", "json", "markdown", "line", "arrow", "parquet"],
                       default="table",
                       help="text (table, csv, json, markdown, line), an Arrow IPC stream (arrow: to stdout or "
                            "--output), or a Parquet file (parquet: --output)")
    query.add_argument("--max-rows", type=int, metavar="N",
                       help="show the first and last N/2 rows of a longer answer and the count (default 40 on "
                            "a terminal; into a pipe every row; 0 for every row); csv and json are always whole")
    query.add_argument("--output", metavar="FILE", help="write the arrow or parquet answer to FILE")
    query.set_defaults(handler="query")
    return parser


def _job_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"where materialized views live (default {DEFAULT_DB})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a job setting, as SET 'key' = 'value' (repeatable)")



def _flight_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flight", metavar="HOST:PORT",
                   help="also answer Arrow Flight SQL clients (ADBC, polars, pandas, DuckDB) with Arrow columns, "
                        "e.g. --flight 127.0.0.1:8815; beyond localhost only with a password")


def _serve_options(p: argparse.ArgumentParser) -> None:
    """The Postgres endpoint's options (`weir serve`, `weir run --serve`)."""
    p.add_argument("--listen", default="127.0.0.1:5433", metavar="HOST:PORT",
                   help="where to listen (default 127.0.0.1:5433); beyond localhost only with a password")
    p.add_argument("--password-file", metavar="FILE",
                   help="require this password (the file's first line; else $WEIR_PASSWORD) with SCRAM-SHA-256")
    p.add_argument("--allow-writes", action="store_true",
                   help="also run statements that change things (CREATE, INSERT INTO, DROP, STOP JOB, SET)")
    p.add_argument("--statement-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="cancel a query after SECONDS (default 30; 0 for none)")
    p.add_argument("--max-rows", type=int, default=1_000_000, metavar="N",
                   help="refuse an answer of more than N rows (default 1,000,000)")


if __name__ == "__main__":
    sys.exit(main())
