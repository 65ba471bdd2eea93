"""Running SQL text in a session, one statement at a time, and showing the
replies: used for what is typed at the prompt, `-i init.sql` and `-f file.sql`.

Nothing here ends the shell: every error is rendered and the runner goes on
(or, for a file, stops at the first failing statement and reports status 1).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
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
  HELP  CLEAR  QUIT  EXIT
psql's meta-commands (a line each, no `;`):
  \\pset format table|csv|json|markdown|line   \\pset pager on|off   \\pset max_rows N (0: all rows)
  \\x [on|off] expanded rows   \\timing [on|off]   \\d  \\dt  \\d name   \\q   \\?"""


@dataclass
class Display:
    """How answers are shown (psql's `\\pset`, `\\x`, `\\timing`)."""
    format: str = "table"
    expanded: bool = False
    timing: bool = False
    #: None: ``render.DEFAULT_MAX_ROWS`` on a terminal, every row otherwise.
    max_rows: int | None = None
    pager: bool = False


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
        self.display = Display()

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
                    started = time.perf_counter()
                    self.show(self.connection.reply(statement))
                    if self.display.timing:
                        print(f"Time: {(time.perf_counter() - started) * 1000:.3f} ms", file=self.out, flush=True)
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
        if command.startswith("\\"):
            self._meta(command)
        elif command in ("quit", "exit"):
            self.quit = True
        elif command == "help":
            print(HELP, file=self.out)
        elif command == "clear":
            self.out.write("\x1b[H\x1b[2J")
            self.out.flush()

    def _meta(self, command: str) -> None:
        """A psql meta-command: \\pset, \\x, \\timing, \\d, \\dt, \\d name, \\q, \\?."""
        words = command[1:].split()
        name, args = (words[0], words[1:]) if words else ("", [])
        d = self.display
        if name in ("q", "quit"):
            self.quit = True
        elif name in ("?", "h", "help"):
            print(HELP, file=self.out)
        elif name == "x":
            d.expanded = _switch(args, d.expanded)
            print(f"Expanded display is {'on' if d.expanded else 'off'}.", file=self.out)
        elif name == "timing":
            d.timing = _switch(args, d.timing)
            print(f"Timing is {'on' if d.timing else 'off'}.", file=self.out)
        elif name == "pset" and args:
            self._pset(args[0], args[1:])
        elif name == "d" and args:
            self._statement(f"DESCRIBE {args[0]}")
        elif name == "d":
            self._statement("SHOW TABLES")
            self._statement("SHOW VIEWS")
        elif name == "dt":
            self._statement("SHOW TABLES")
        else:
            self._error(render.message_error(f"unknown command {command}", "\\? lists the meta-commands", self.colour))
        self.out.flush()

    def _pset(self, option: str, args: list[str]) -> None:
        d = self.display
        if option == "format":
            if not args:
                print(f"Output format is {d.format}.", file=self.out)
                return
            fmt = render.FORMAT_ALIASES.get(args[0].lower(), args[0].lower())
            if fmt not in render.FORMATS:
                self._error(render.message_error(f"unknown format {args[0]!r}",
                                                 f"use one of {', '.join(render.FORMATS)}", self.colour))
                return
            d.format = fmt
            print(f"Output format is {fmt}.", file=self.out)
        elif option == "pager":
            d.pager = _switch(args, d.pager)
            print(f"Pager usage is {'on' if d.pager else 'off'}.", file=self.out)
        elif option in ("max_rows", "maxrows") and args and args[0].isdigit():
            d.max_rows = int(args[0])
            print(f"At most {d.max_rows or 'all'} rows are shown.", file=self.out)
        elif option == "expanded":
            d.expanded = _switch(args, d.expanded)
            print(f"Expanded display is {'on' if d.expanded else 'off'}.", file=self.out)
        else:
            self._error(render.message_error(f"unknown \\pset {option} {' '.join(args)}".rstrip(),
                                             "use \\pset format|pager|max_rows|expanded VALUE", self.colour))

    def _statement(self, text: str) -> None:
        try:
            for statement in parse(text):
                self.show(self.connection.reply(statement))
        except (WeirSqlError, EngineError, DatabaseError) as error:
            message = getattr(error, "message", None) or str(error)
            self._error(render.message_error(message, getattr(error, "hint", None), self.colour))

    def show_answer(self, answer) -> None:
        """An answer as ``display`` says: capped on a terminal; through $PAGER with \\pset pager on."""
        d = self.display
        terminal = self.out.isatty()
        cap = d.max_rows if d.max_rows is not None else (render.DEFAULT_MAX_ROWS if terminal else 0)
        pieces = render.write(answer, d.format, max_rows=cap, expanded=d.expanded)
        if d.pager and terminal:
            pager = os.environ.get("PAGER") or "less -FRSX"
            try:
                with subprocess.Popen(shlex.split(pager), stdin=subprocess.PIPE, text=True) as process:
                    try:
                        for piece in pieces:
                            process.stdin.write(piece)
                        process.stdin.close()
                    except BrokenPipeError:  # the pager was left before the end
                        pass
                return
            except OSError:
                pass  # no such pager: print
        for piece in pieces:
            self.out.write(piece)
        self.out.flush()

    def show(self, reply) -> None:
        if isinstance(reply, Message):
            print(reply.text, file=self.out, flush=True)
        elif isinstance(reply, ResultTable):
            try:
                self.show_answer(reply.answer)
            finally:
                reply.close()
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


def _switch(args: list[str], current: bool) -> bool:
    """psql's on/off argument; none toggles."""
    if not args:
        return not current
    return args[0].lower() in ("on", "true", "1", "yes")


def job_done_line(job: Job) -> str:
    if job.status == FINISHED and job.result is not None:
        return (f"job {job.id} ({job.name}) finished in {job.result.elapsed:.2f} s: "
                f"{job.rows_in():,} rows in, {job.rows_out():,} rows out")
    return f"job {job.id} ({job.name}) {job.status}"


def job_failure(job: Job, colour: bool) -> str:
    error = job.error
    text = render.engine_error(error, colour) if error is not None else "error: unknown failure"
    return f"job {job.id} ({job.name}) FAILED\n{text}"
