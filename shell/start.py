"""`weir` / `weir shell`: the interactive shell, `-i init.sql` first, or `-f file.sql`, `-c SQL` or
SQL piped on stdin alone (no terminal: plain text out, errors on stderr, status 1 at the first)."""
from __future__ import annotations

import sys
from pathlib import Path

from weir.shell.api import Connection
from weir.shell.repl import Repl
from weir.shell.runner import Runner
from weir.shell.session import Session


def run_shell(file: str | None, init: str | None, *, db_path: str, settings: dict[str, str],
              command: str | None = None) -> int:
    connection = Connection(session=Session(db_path=db_path, settings=settings))
    session = connection.session
    try:
        if command is not None:
            return _run_text(connection, command, "<command>")
        if file is None and init is None and not sys.stdin.isatty():
            return _run_text(connection, sys.stdin.read(), "<stdin>")
        return _run(connection, file, init)
    finally:
        session.jobs.cancel_all()
        session.jobs.join_all()


def _run(connection: Connection, file: str | None, init: str | None) -> int:
    session = connection.session
    if file is not None:
        runner = Runner(connection)
        text = _read(file)
        if text is None:
            return 1
        status = runner.run_text(text, source_name=file)
        if status != 0:
            return status
        return runner.wait_for_jobs()
    runner = Runner(connection, interactive=True)
    if init is not None:
        text = _read(init)
        if text is None or runner.run_text(text, source_name=init) != 0:
            return 1
    return Repl(session, runner).run()


def _run_text(connection: Connection, text: str, source_name: str) -> int:
    runner = Runner(connection)
    status = runner.run_text(text, source_name=source_name)
    return status if status != 0 else runner.wait_for_jobs()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError as error:
        print(f"weir: cannot read {path}: {error.strerror}", file=sys.stderr)
        return None
