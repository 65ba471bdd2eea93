"""Running SQL text in a session, one statement at a time, and showing the
replies: used for what is typed at the prompt, `-i init.sql` and `-f file.sql`.

Nothing here ends the shell: every error is rendered and the runner goes on
(or, for a file, stops at the first failing statement and reports status 1).
"""
from __future__ import annotations

import sys
from typing import TextIO

from weir.engine.errors import EngineError
from weir.shell import live_view, render
from weir.shell.api import Connection
from weir.shell.database import DatabaseError
from weir.shell.jobs import FAILED, FINISHED, Job
from weir.shell.session import LiveQuery, Message, ResultTable, Session
from weir.shell.splitter import split
from weir.sql import parse
from weir.sql.errors import WeirSqlError

HELP = """\
Statements end with `;` and may span lines. Tab completes, Ctrl-C cancels, Ctrl-D exits.
  CREATE TABLE t (...) WITH ('connector' = ...);   CREATE [MATERIALIZED] VIEW v AS SELECT ...;
  INSERT INTO t SELECT ...;                        starts a job in the background; prints its id
  CREATE MATERIALIZED VIEW v AS SELECT ...;        starts a job filling table v of the database
  SELECT ... FROM <table>;                         a live result (SET 'sql-client.execution.result-mode'
                                                   = 'table' | 'changelog' | 'tableau'); q or Ctrl-C leaves
  SELECT ... FROM <materialized view>;             answered at once by DuckDB
  SHOW TABLES; SHOW VIEWS; SHOW JOBS;  DESCRIBE t;  DROP TABLE t;  DROP VIEW v;  EXPLAIN <statement>;
  STOP JOB 'j1' [WITH SAVEPOINT];  SET 'key' = 'value';  SET;  RESET ['key'];
  HELP  CLEAR  QUIT  EXIT"""


class Runner:
    """Runs text through a Python API ``Connection`` (``shell/api.py``) and shows each
    statement's reply as the shell does."""

    def __init__(self, connection: Connection | Session, *, out: TextIO | None = None, err: TextIO | None = None,
                 interactive: bool = False):
        self.connection = connection if isinstance(connection, Connection) else Connection(session=connection)
        self.session = self.connection.session
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.interactive = interactive
        self.colour = self.err.isatty()
        self.quit = False

    def run_text(self, text: str, source_name: str | None = None) -> int:
        """Run every statement of ``text``; 0 if all ran, 1 at the first that failed
        (a file stops there; at the prompt the remaining statements are skipped too)."""
        for chunk in split(text):
            command = chunk.shell_command
            if command is not None:
                self._command(command)
                if self.quit:
                    return 0
                continue
            try:
                for statement in parse(chunk.padded(), source_name=source_name):
                    self.show(self.connection.reply(statement))
            except WeirSqlError as error:
                self._error(self._sql_error(error, text, source_name))
                return 1
            except (EngineError, DatabaseError) as error:
                self._error(render.message_error(error.message, error.hint, self.colour))
                return 1
            except Exception as error:  # noqa: BLE001 - a bug must not end the shell
                self._error(render.message_error(f"internal error: {type(error).__name__}: {error}",
                                                 "this is a bug in weir; please report it", self.colour))
                return 1
        return 0

    def _sql_error(self, error: WeirSqlError, text: str, source_name: str | None) -> str:
        if source_name is None:
            return render.sql_error_at_prompt(error, text, self.colour)
        return render.sql_error(error, text, source_name, self.colour)

    def _error(self, text: str) -> None:
        self.out.flush()
        print(text, file=self.err, flush=True)

    def _command(self, command: str) -> None:
        if command in ("quit", "exit"):
            self.quit = True
        elif command == "help":
            print(HELP, file=self.out)
        elif command == "clear":
            self.out.write("\x1b[H\x1b[2J")
            self.out.flush()

    def show(self, reply) -> None:
        if isinstance(reply, Message):
            print(reply.text, file=self.out, flush=True)
        elif isinstance(reply, ResultTable):
            print(render.table(reply.table), file=self.out, flush=True)
        elif isinstance(reply, LiveQuery):
            mode = reply.mode if self.interactive and self.out.isatty() else "tableau"
            line = live_view.show(reply.result, reply.job, mode, self.out, self.session.jobs.cancel)
            print(line, file=self.out, flush=True)
            if reply.job.status == FAILED:
                self._error(job_failure(reply.job, self.colour))

    def wait_for_jobs(self) -> int:
        """After a file: wait for its jobs to end, saying how each ended (Ctrl-C
        stops them); 1 if one failed."""
        jobs = [job for job in self.session.jobs.jobs.values() if job.kind != "select"]
        running = [job for job in jobs if job.running]
        if running:
            print(f"waiting for {len(running)} job{'s' if len(running) != 1 else ''} to finish: "
                  f"{', '.join(j.id for j in running)} (Ctrl-C stops them)", file=self.out, flush=True)
        try:
            for job in jobs:
                while job.thread.is_alive():
                    job.thread.join(0.2)
                if job.status == FAILED:
                    self._error(job_failure(job, self.colour))
                else:
                    print(job_done_line(job), file=self.out, flush=True)
        except KeyboardInterrupt:
            stopped = self.session.jobs.cancel_all()
            self.session.jobs.join_all()
            print(f"stopped {', '.join(j.id for j in stopped)}", file=self.out, flush=True)
            return 130
        return 1 if any(j.status == FAILED for j in self.session.jobs.jobs.values()) else 0


def job_done_line(job: Job) -> str:
    if job.status == FINISHED and job.result is not None:
        return (f"job {job.id} ({job.name}) finished in {job.result.elapsed:.2f} s: "
                f"{job.rows_in():,} rows in, {job.rows_out():,} rows out")
    return f"job {job.id} ({job.name}) {job.status}"


def job_failure(job: Job, colour: bool) -> str:
    error = job.error
    text = render.engine_error(error, colour) if error is not None else "error: unknown failure"
    return f"job {job.id} ({job.name}) FAILED\n{text}"
